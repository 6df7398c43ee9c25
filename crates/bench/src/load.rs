//! The load generator: workloads, the HTTP and gRPC clients, and the two drivers.
//!
//! The closed loop runs C workers, each sending its next request when the
//! previous one answered: it finds the maximum throughput, but a stalled
//! server also stalls the load, so its latencies flatter a stall. The open
//! loop sends at fixed intended times whatever the server does and measures
//! every latency from the intended time, so a stall shows as the queue it
//! would build for real users.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use anyhow::Context;
use bytes::Bytes;
use futures::StreamExt;
use pastebin_proto::api::v1::{paste_api_client::PasteApiClient, CreatePasteRequest, GetPasteRequest};
use tokio::{sync::Semaphore, time::Instant};
use tonic::transport::Channel;

use crate::{
    args::{LoadArgs, Protocol},
    replay::{ReplayCheck, Verdict},
    stats::{is_ok, Recorder, Report},
};

#[derive(Debug, Clone)]
pub enum Workload {
    Create,
    RetryStorm {
        repeat: u64,
        prime_keys: usize,
    },
    /// Reads of `pastes` created first, or of the ids listed in `ids_file`.
    Get {
        pastes: usize,
        ids_file: Option<std::path::PathBuf>,
    },
    Mixed {
        pastes: usize,
        create_ratio: f64,
    },
}

impl Workload {
    fn name(&self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::RetryStorm { .. } => "retry-storm",
            Self::Get { .. } => "get",
            Self::Mixed { .. } => "mixed",
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Create { key: String },
    Get { id: String },
}

/// Hands out the operations of a run, in order, to every sender.
struct Ops {
    workload: Workload,
    /// Random per run, so two runs against one deployment never share keys.
    seed: u128,
    next: AtomicU64,
    /// Ids to read (get, mixed).
    ids: Vec<String>,
    /// Keys already created (retry-storm with priming).
    keys: Vec<String>,
}

/// The `n`-th key of a run: a valid random-looking UUID v4, the same for the same `(seed, n)`.
fn nth_key(seed: u128, n: u64) -> String {
    let mut z = (n as u128).wrapping_add(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834);
    z = (z ^ (z >> 61)).wrapping_mul(0x94d0_49bb_1331_11eb_bf58_476d_1ce4_e5b9);
    z ^= z >> 59;
    uuid::Builder::from_random_bytes((seed ^ z).to_be_bytes()).into_uuid().to_string()
}

impl Ops {
    fn next(&self) -> Op {
        let i = self.next.fetch_add(1, Ordering::Relaxed);
        match &self.workload {
            Workload::Create => Op::Create { key: uuid::Uuid::new_v4().to_string() },
            Workload::RetryStorm { repeat, .. } if self.keys.is_empty() => {
                Op::Create { key: nth_key(self.seed, i / repeat) }
            }
            Workload::RetryStorm { repeat, .. } => {
                Op::Create { key: self.keys[((i / repeat) % self.keys.len() as u64) as usize].clone() }
            }
            Workload::Get { .. } => Op::Get { id: self.random_id() },
            Workload::Mixed { create_ratio, .. } => {
                if rand::random::<f64>() < *create_ratio {
                    Op::Create { key: uuid::Uuid::new_v4().to_string() }
                } else {
                    Op::Get { id: self.random_id() }
                }
            }
        }
    }

    fn random_id(&self) -> String {
        self.ids[rand::random_range(0..self.ids.len())].clone()
    }
}

/// One answer as the report counts it.
struct Answer {
    class: &'static str,
    status: String,
}

#[derive(Clone)]
enum Client {
    Http { http: reqwest::Client, base: String, body: Bytes, read_prefix: &'static str },
    Grpc { api: PasteApiClient<Channel>, content: String },
}

/// A paste's content: printable and incompressible-ish, `size` bytes.
fn content_of(size: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789 \n";
    (0..size).map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char).collect()
}

impl Client {
    fn new(args: &LoadArgs, content: &str) -> anyhow::Result<Self> {
        let base = args.target.trim_end_matches('/').to_owned();
        Ok(match args.protocol {
            Protocol::Http => Self::Http {
                http: reqwest::Client::builder()
                    .no_proxy()
                    .tcp_nodelay(true)
                    .pool_max_idle_per_host(args.connections.max(1) * 2)
                    .timeout(args.timeout)
                    .build()
                    .context("cannot build the HTTP client")?,
                base,
                body: Bytes::from(serde_json::to_vec(&serde_json::json!({ "content": content }))?),
                read_prefix: args.read_path.prefix(),
            },
            Protocol::Grpc => {
                let channel = tonic::transport::Endpoint::from_shared(base)?
                    .tcp_nodelay(true)
                    .timeout(args.timeout)
                    .connect_lazy();
                Self::Grpc { api: PasteApiClient::new(channel), content: content.to_owned() }
            }
        })
    }

    /// Sends `op`; checks a 201 against the replay book; `want_id` also returns the created id.
    async fn execute(&self, op: &Op, check: &ReplayCheck, want_id: bool) -> (Answer, Option<String>) {
        match (self, op) {
            (Self::Http { http, base, body, .. }, Op::Create { key }) => {
                let sent = http
                    .post(format!("{base}/api/v1/pastes"))
                    .header("Idempotency-Key", key.as_str())
                    .header("Content-Type", "application/json")
                    .body(body.clone())
                    .send()
                    .await;
                let response = match sent {
                    Ok(r) => r,
                    Err(e) => return (Answer { class: "create", status: transport_error(&e) }, None),
                };
                let code = response.status().as_u16();
                let replayed = response.headers().contains_key("idempotent-replayed");
                let bytes = match response.bytes().await {
                    Ok(b) => b,
                    Err(e) => return (Answer { class: "create", status: transport_error(&e) }, None),
                };
                let mut id = None;
                let mut status = code.to_string();
                if code == 201 {
                    if check.observe(key, &bytes) == Verdict::Mismatch {
                        status.push_str(" MISMATCH");
                    }
                    if want_id {
                        id = serde_json::from_slice::<serde_json::Value>(&bytes)
                            .ok()
                            .and_then(|v| v.get("id")?.as_str().map(str::to_owned));
                    }
                }
                if replayed {
                    status.push_str(" replayed");
                }
                (Answer { class: if replayed { "replay" } else { "create" }, status }, id)
            }
            (Self::Http { http, base, read_prefix, .. }, Op::Get { id }) => {
                let status = match http.get(format!("{base}{read_prefix}{id}")).send().await {
                    Ok(r) => {
                        let code = r.status().as_u16().to_string();
                        match r.bytes().await {
                            Ok(_) => code,
                            Err(e) => transport_error(&e),
                        }
                    }
                    Err(e) => transport_error(&e),
                };
                (Answer { class: "get", status }, None)
            }
            (Self::Grpc { api, content }, Op::Create { key }) => {
                let request =
                    CreatePasteRequest { request_id: key.clone(), content: content.clone(), ..Default::default() };
                match api.clone().create_paste(request).await {
                    Ok(response) => {
                        let r = response.into_inner();
                        // The fields a client sees, in a fixed unambiguous order.
                        let encoded = serde_json::to_vec(&(&r.id, &r.url, &r.raw_url, &r.expires_at, &r.delete_token))
                            .unwrap_or_default();
                        let mut status = "grpc Ok".to_owned();
                        let class = match check.observe(key, &encoded) {
                            Verdict::First => "create",
                            Verdict::Same => "replay",
                            Verdict::Mismatch => {
                                status.push_str(" MISMATCH");
                                "replay"
                            }
                        };
                        (Answer { class, status }, Some(r.id))
                    }
                    Err(s) => (Answer { class: "create", status: format!("grpc {:?}", s.code()) }, None),
                }
            }
            (Self::Grpc { api, .. }, Op::Get { id }) => {
                let status = match api.clone().get_paste(GetPasteRequest { id: id.clone() }).await {
                    Ok(_) => "grpc Ok".to_owned(),
                    Err(s) => format!("grpc {:?}", s.code()),
                };
                (Answer { class: "get", status }, None)
            }
        }
    }
}

fn transport_error(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        "error: timeout".into()
    } else if error.is_connect() {
        "error: connect".into()
    } else {
        "error: transport".into()
    }
}

/// Counters the progress line reads while the run goes on.
#[derive(Default)]
struct Progress {
    done: AtomicU64,
    failed: AtomicU64,
}

impl Progress {
    fn count(&self, status: &str) {
        self.done.fetch_add(1, Ordering::Relaxed);
        if !is_ok(status) {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
    }
}

struct Run {
    clients: Vec<Client>,
    ops: Ops,
    check: ReplayCheck,
    progress: Progress,
    recorder: Mutex<Recorder>,
    /// Samples sent before this are warm-up: not recorded.
    measure_from: Instant,
    end: Instant,
}

impl Run {
    fn client(&self, n: u64) -> &Client {
        &self.clients[(n % self.clients.len() as u64) as usize]
    }

    fn record(&self, sent: Instant, answer: &Answer) {
        self.progress.count(&answer.status);
        if sent >= self.measure_from {
            // A poisoned lock means another sender panicked; its samples are lost, ours are not.
            let mut recorder = self.recorder.lock().unwrap_or_else(|e| e.into_inner());
            recorder.record(answer.class, &answer.status, sent.elapsed());
        }
    }
}

pub async fn run(workload: Workload, args: LoadArgs) -> anyhow::Result<()> {
    let content = content_of(args.size);
    let pool = args.connections.clamp(1, 256);
    let clients = (0..pool).map(|_| Client::new(&args, &content)).collect::<anyhow::Result<Vec<_>>>()?;
    let check = ReplayCheck::default();

    let (ids, keys) = prime(&workload, &clients, &check, args.connections.max(1), args.quiet).await?;
    let ops = Ops { workload: workload.clone(), seed: rand::random(), next: AtomicU64::new(0), ids, keys };
    let started = Instant::now();
    let measure_from = started + args.warmup;
    let run = Arc::new(Run {
        clients,
        ops,
        check,
        progress: Progress::default(),
        recorder: Mutex::new(Recorder::default()),
        measure_from,
        end: measure_from + args.duration,
    });

    let ticker = (!args.quiet).then(|| tokio::spawn(progress_line(run.clone(), started)));
    let mode = match args.rate {
        None => {
            closed_loop(&run, args.connections.max(1)).await;
            format!("closed c={}", args.connections.max(1))
        }
        Some(rate) => {
            open_loop(&run, rate, args.max_in_flight.max(1)).await;
            format!("open rate={rate}/s")
        }
    };
    let elapsed = Instant::now().saturating_duration_since(measure_from);
    if let Some(ticker) = ticker {
        ticker.abort();
        eprintln!();
    }
    let recorder = run.recorder.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let protocol = match args.protocol {
        Protocol::Http => "http",
        Protocol::Grpc => "grpc",
    };
    let report = Report::new(workload.name(), protocol, mode, elapsed, &recorder, run.check.summary());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    let mismatched = run.check.mismatched_keys();
    if !mismatched.is_empty() {
        eprintln!("replay mismatches for keys (first {}): {}", mismatched.len(), mismatched.join(", "));
        anyhow::bail!("{} replay answers differed from the first answer for their key", report.replay_check.mismatches);
    }
    Ok(())
}

/// The unmeasured set-up: pastes to read, or keys to replay.
async fn prime(
    workload: &Workload,
    clients: &[Client],
    check: &ReplayCheck,
    concurrency: usize,
    quiet: bool,
) -> anyhow::Result<(Vec<String>, Vec<String>)> {
    let (count, keep_ids) = match workload {
        Workload::Get { ids_file: Some(path), .. } => return Ok((read_ids(path)?, Vec::new())),
        Workload::Get { pastes, .. } | Workload::Mixed { pastes, .. } => (*pastes, true),
        Workload::RetryStorm { prime_keys, .. } => (*prime_keys, false),
        Workload::Create => (0, false),
    };
    if count == 0 {
        return Ok((Vec::new(), Vec::new()));
    }
    if !quiet {
        eprintln!("priming: creating {count} pastes (not measured)");
    }
    let results: Vec<(String, Option<String>, String)> = futures::stream::iter(0..count)
        .map(|n| async move {
            let key = uuid::Uuid::new_v4().to_string();
            let client = &clients[n % clients.len()];
            let (answer, id) = client.execute(&Op::Create { key: key.clone() }, check, true).await;
            (key, id, answer.status)
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let failed = results.iter().filter(|(_, _, status)| !status.starts_with("201") && status != "grpc Ok").count();
    if failed > 0 {
        anyhow::bail!("priming failed: {failed} of {count} creates did not answer 201");
    }
    let (keys, ids): (Vec<String>, Vec<Option<String>>) = results.into_iter().map(|(k, id, _)| (k, id)).unzip();
    let ids: Vec<String> = ids.into_iter().flatten().collect();
    if keep_ids && ids.len() != count {
        anyhow::bail!("priming: {} of {count} answers had no id", count - ids.len());
    }
    Ok((ids, if keep_ids { Vec::new() } else { keys }))
}

/// The ids listed in `path`, one per line (blank lines skipped).
fn read_ids(path: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let ids: Vec<String> = text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_owned).collect();
    anyhow::ensure!(!ids.is_empty(), "{} lists no ids", path.display());
    Ok(ids)
}

async fn closed_loop(run: &Arc<Run>, connections: usize) {
    let workers: Vec<_> = (0..connections as u64)
        .map(|worker| {
            let run = run.clone();
            tokio::spawn(async move {
                while Instant::now() < run.end {
                    let op = run.ops.next();
                    let sent = Instant::now();
                    let (answer, _) = run.client(worker).execute(&op, &run.check, false).await;
                    run.record(sent, &answer);
                }
            })
        })
        .collect();
    for worker in workers {
        let _ = worker.await;
    }
}

async fn open_loop(run: &Arc<Run>, rate: f64, max_in_flight: usize) {
    let interval = Duration::from_secs_f64(1.0 / rate.max(0.001));
    let slots = Arc::new(Semaphore::new(max_in_flight));
    let start = Instant::now();
    for n in 0u64.. {
        let intended = start + interval.mul_f64(n as f64);
        if intended >= run.end {
            break;
        }
        tokio::time::sleep_until(intended).await;
        // When every slot is taken, waiting here is the stall a user would
        // see: the sample still counts from `intended`.
        let Ok(permit) = slots.clone().acquire_owned().await else { break };
        let run = run.clone();
        tokio::spawn(async move {
            let op = run.ops.next();
            let (answer, _) = run.client(n).execute(&op, &run.check, false).await;
            run.record(intended, &answer);
            drop(permit);
        });
    }
    // All permits back: every request sent has answered.
    let _ = slots.acquire_many(max_in_flight as u32).await;
}

async fn progress_line(run: Arc<Run>, started: Instant) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut last = 0;
    loop {
        tick.tick().await;
        let done = run.progress.done.load(Ordering::Relaxed);
        let failed = run.progress.failed.load(Ordering::Relaxed);
        let phase = if Instant::now() < run.measure_from { "warm-up" } else { "measuring" };
        eprint!(
            "\r[{:>6.1}s {phase}] {done} answered, {} req/s now, {failed} not ok   ",
            started.elapsed().as_secs_f64(),
            done - last
        );
        last = done;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ids_file_lists_one_id_a_line_and_an_empty_one_is_refused() {
        let path = std::env::temp_dir().join(format!("pastebin-bench-ids-{}", std::process::id()));
        std::fs::write(&path, "00000000000001\n\n00000000000002\n").unwrap();
        assert_eq!(read_ids(&path).unwrap(), ["00000000000001", "00000000000002"]);
        std::fs::write(&path, "\n").unwrap();
        assert!(read_ids(&path).is_err());
        std::fs::remove_file(&path).unwrap();
        assert!(read_ids(&path).is_err(), "a missing file is an error, not zero ids");
    }

    #[test]
    fn nth_key_is_a_stable_distinct_uuid() {
        let seed = 42;
        let a = nth_key(seed, 0);
        assert_eq!(a, nth_key(seed, 0));
        assert_ne!(a, nth_key(seed, 1));
        assert_ne!(a, nth_key(seed + 1, 0));
        let parsed = uuid::Uuid::parse_str(&a).unwrap();
        assert_eq!(parsed.get_version_num(), 4);
        let distinct: std::collections::HashSet<_> = (0..10_000).map(|n| nth_key(seed, n)).collect();
        assert_eq!(distinct.len(), 10_000);
    }

    #[test]
    fn retry_storm_sends_each_key_repeat_times_in_a_row() {
        let ops = Ops {
            workload: Workload::RetryStorm { repeat: 3, prime_keys: 0 },
            seed: 7,
            next: AtomicU64::new(0),
            ids: vec![],
            keys: vec![],
        };
        let keys: Vec<String> = (0..9)
            .map(|_| match ops.next() {
                Op::Create { key } => key,
                Op::Get { .. } => panic!("retry-storm only creates"),
            })
            .collect();
        assert!(keys[0] == keys[1] && keys[1] == keys[2]);
        assert_ne!(keys[2], keys[3]);
        assert!(keys[6] == keys[8]);
    }

    #[test]
    fn primed_retry_storm_cycles_through_the_primed_keys() {
        let ops = Ops {
            workload: Workload::RetryStorm { repeat: 2, prime_keys: 2 },
            seed: 7,
            next: AtomicU64::new(0),
            ids: vec![],
            keys: vec!["a".into(), "b".into()],
        };
        let keys: Vec<String> = (0..6)
            .map(|_| match ops.next() {
                Op::Create { key } => key,
                Op::Get { .. } => panic!("retry-storm only creates"),
            })
            .collect();
        assert_eq!(keys, ["a", "a", "b", "b", "a", "a"]);
    }

    #[test]
    fn mixed_respects_its_ratio_roughly() {
        let ops = Ops {
            workload: Workload::Mixed { pastes: 1, create_ratio: 0.2 },
            seed: 0,
            next: AtomicU64::new(0),
            ids: vec!["id".into()],
            keys: vec![],
        };
        let creates = (0..10_000).filter(|_| matches!(ops.next(), Op::Create { .. })).count();
        assert!((1_500..2_500).contains(&creates), "{creates} creates of 10,000");
    }

    #[test]
    fn content_has_the_asked_size() {
        assert_eq!(content_of(1024).len(), 1024);
        assert_eq!(content_of(0).len(), 0);
    }
}
