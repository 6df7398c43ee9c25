//! Objects on a distributed store under faults: SeaweedFS as one master, three volume
//! servers (replication `001`: every object on two of them), a filer and an S3 gateway,
//! each its own process. While 16 clients create and read, a volume server is SIGKILLed
//! and later restarted, then the S3 gateway is SIGKILLed and restarted. Afterwards the
//! sweeper's recovery runs past its 60 s threshold (a create left pending by an uncertain
//! PUT is finished if its paste exists, else fenced and aborted), then every create the
//! clients did not see answered is retried with its key, and:
//!
//! - no 201 is lost: every 201'd paste reads back, byte-identical;
//! - no key yields two pastes: a replay names the same id, and P holds one live paste
//!   per key;
//! - the uncertain creates resolve as designed: recovery finishes or aborts each, and the
//!   retry with the same key answers 201 (an aborted key restarts with a new id, which
//!   leaves the old id's object, if its PUT landed, an orphan);
//! - the object reaper, run past its age floor, deletes only orphans: every live paste's
//!   object stays, and what remains is exactly the live pastes' objects.
//!
//! What the clients saw is printed (`--nocapture`) and recorded in BENCHMARKS.md.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use pastebin_core::ManualClock;
use pastebin_objects::{S3Settings, S3Store};
use pastebin_tests::api::{create_within, new_key};
use pastebin_tests::cluster::{Cluster, ClusterOptions};
use pastebin_tests::s3::set_test_credentials;
use pastebin_tests::seaweedfs::WeedCluster;
use reqwest::StatusCode;

const CLIENTS: usize = 16;
/// Each client's own patience for one create: longer than the gateway's 2 s budget.
const CREATE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the retries of unanswered creates may take in all.
const RESOLVE_DEADLINE: Duration = Duration::from_secs(120);

/// One create a client made, and what it saw.
struct Attempt {
    key: String,
    content: String,
    /// The id of a 201, else what it saw instead.
    outcome: Result<String, String>,
    /// When it was sent, from the start of the load.
    sent: Duration,
    took: Duration,
}

#[derive(Default)]
struct Seen {
    attempts: Vec<Attempt>,
    /// Reads of a paste the client had been given a 201 for, and how many did not
    /// answer its bytes (while the faults were on: a read may fail, must not lie).
    reads: usize,
    reads_failed: usize,
    reads_wrong: usize,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_volume_server_and_the_s3_gateway_killed_under_load_lose_no_paste() {
    set_test_credentials();
    let mut weed = WeedCluster::start(3).await;
    let s3 = S3Settings {
        bucket: "pastes-under-faults".into(),
        endpoint: Some(weed.endpoint.clone()),
        region: "us-east-1".into(),
        force_path_style: true,
    };
    S3Store::connect(s3.clone()).await.unwrap().ensure_bucket().await.unwrap();
    let mut cluster = Cluster::start(ClusterOptions { s3: Some(s3), ..ClusterOptions::default() }).await;

    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| tokio::spawn(create_and_read(cluster.http.clone(), client, started, stop.clone(), seen.clone())))
        .collect();

    let mut timeline = Vec::new();
    let mut mark = |what: &str| timeline.push(format!("{:>5.1} s {what}", started.elapsed().as_secs_f64()));
    tokio::time::sleep(Duration::from_secs(3)).await;
    weed.volumes[1].kill();
    mark("SIGKILL volume server 1");
    tokio::time::sleep(Duration::from_secs(8)).await;
    weed.volumes[1].restart().unwrap();
    mark("volume server 1 restarted");
    tokio::time::sleep(Duration::from_secs(3)).await;
    weed.s3.kill();
    mark("SIGKILL the S3 gateway");
    tokio::time::sleep(Duration::from_secs(3)).await;
    weed.s3.restart().unwrap();
    mark("S3 gateway restarted");
    tokio::time::sleep(Duration::from_secs(5)).await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        client.await.unwrap();
    }
    mark("clients stopped");

    let seen = std::mem::take(&mut *seen.lock().unwrap());
    // One orphan for certain, whatever the faults left: a create whose gateway dies right
    // after its PUT, never retried.
    // (A PUT that outlives the budget on a slow machine answers 503 instead: that key is
    // left to recovery like the clients' and never retried, and another is tried.)
    cluster.restart_gateway("after_put").await;
    let mut died = false;
    for _ in 0..10 {
        let orphaned = create_within(&cluster.http, Some(&new_key()), "orphaned bytes", CREATE_TIMEOUT).await;
        if orphaned.is_err() {
            died = true;
            break;
        }
    }
    assert!(died, "the gateway never got past a PUT to die after it");
    cluster.restart_gateway("").await;
    // The sweeper, as it runs a minute later (K judges a pending key's age on its clock),
    // and again two hours later for the reaper's age floor.
    let clock = ManualClock::starting_at(Utc::now());
    cluster.age_pending_keys(Duration::from_secs(61)).await;
    clock.advance(Duration::from_secs(61));
    let sweeper = cluster.sweeper(clock.clone()).await;
    let recovery = sweeper.recover_stale().await;
    mark("the sweeper's recovery ran");
    let unanswered: Vec<&Attempt> = seen.attempts.iter().filter(|a| a.outcome.is_err()).collect();
    let retried = resolve(&cluster.http, &unanswered).await;
    mark("every unanswered create retried to its 201");
    print_report(&seen, &timeline);
    println!("recovery of the creates left pending: {recovery:?}");
    assert_eq!(recovery.skipped_unreachable, 0, "every shard answered: {recovery:?}");

    // Every key has exactly one paste: its 201 (first or retried), and a replay names it.
    let mut pastes: Vec<(String, String, String)> = Vec::new();
    for attempt in &seen.attempts {
        let id = match &attempt.outcome {
            Ok(id) => id.clone(),
            Err(_) => retried[&attempt.key].clone(),
        };
        pastes.push((attempt.key.clone(), attempt.content.clone(), id));
    }
    for (key, content, id) in &pastes {
        let replay = create_within(&cluster.http, Some(key), content, CREATE_TIMEOUT).await.unwrap();
        assert_eq!(replay.status, StatusCode::CREATED, "replay of {key}: {}", replay.body);
        assert_eq!(replay.json()["id"], id.as_str(), "a replay of {key} names another paste");
        assert_eq!(read_raw(&cluster.http, id).await.as_deref(), Ok(content.as_str()), "paste {id} of {key}");
    }
    let distinct: std::collections::HashSet<&str> = pastes.iter().map(|(_, _, id)| id.as_str()).collect();
    assert_eq!(distinct.len(), pastes.len(), "two keys share a paste id");
    assert_eq!(cluster.live_pastes().await, pastes.len() as i64, "P holds one live paste per key, no more");

    // The reaper, past its age floor, deletes only what no live paste names.
    let objects = cluster.object_store().await;
    let before = all_object_ids(&*objects).await;
    clock.advance(Duration::from_secs(2 * 3600));
    let reap = sweeper.reap_orphan_objects().await;
    let after = all_object_ids(&*objects).await;
    let mut live: Vec<String> = distinct.iter().map(|id| id.to_string()).collect();
    live.sort();
    assert_eq!(after, live, "after the reaper exactly the live pastes' objects remain");
    assert_eq!(reap.reaped_objects as usize, before.len() - live.len(), "{reap:?}");
    assert!(reap.reaped_objects >= 1, "the orphan of the crashed create is reaped: {reap:?}");
    println!(
        "objects: {} before the reaper, {} orphans reaped, {} live pastes kept",
        before.len(),
        reap.reaped_objects,
        live.len()
    );
    for (_, content, id) in &pastes {
        assert_eq!(read_raw(&cluster.http, id).await.as_deref(), Ok(content.as_str()), "after the reaper: {id}");
    }
    assert_eq!(seen.reads_wrong, 0, "a read answered other bytes than the paste's");
}

/// One client: creates pastes with fresh keys until told to stop, and after each 201
/// reads one of its earlier pastes back.
async fn create_and_read(http: String, client: usize, started: Instant, stop: Arc<AtomicBool>, seen: Arc<Mutex<Seen>>) {
    let mut mine: Vec<(String, String)> = Vec::new();
    let mut n = 0usize;
    while !stop.load(Ordering::Relaxed) {
        n += 1;
        let key = new_key();
        let content = format!("client {client} paste {n}: {}", "x".repeat((client * 37 + n * 11) % 500));
        let began = Instant::now();
        let sent = began - started;
        let outcome = match create_within(&http, Some(&key), &content, CREATE_TIMEOUT).await {
            Ok(answer) if answer.status == StatusCode::CREATED => {
                Ok(answer.json()["id"].as_str().expect("a 201 names its paste").to_owned())
            }
            Ok(answer) => Err(format!("{}", answer.status.as_u16())),
            Err(error) => Err(if error.is_timeout() { "timeout".into() } else { "connection".into() }),
        };
        let took = began.elapsed();
        let read = match (&outcome, mine.get(n % mine.len().max(1))) {
            (Ok(_), Some((id, bytes))) => Some(read_raw(&http, id).await.map(|read| read == *bytes)),
            _ => None,
        };
        if let Ok(id) = &outcome {
            mine.push((id.clone(), content.clone()));
        }
        let mut seen = seen.lock().unwrap();
        match read {
            Some(Ok(true)) => seen.reads += 1,
            Some(Ok(false)) => {
                seen.reads += 1;
                seen.reads_wrong += 1;
            }
            Some(Err(_)) => {
                seen.reads += 1;
                seen.reads_failed += 1;
            }
            None => {}
        }
        seen.attempts.push(Attempt { key, content, outcome, sent, took });
    }
}

/// `GET /raw/{id}`: the paste's bytes, or what came instead.
async fn read_raw(http: &str, id: &str) -> Result<String, String> {
    let response = reqwest::Client::new()
        .get(format!("{http}/raw/{id}"))
        .timeout(CREATE_TIMEOUT)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    match response.status() {
        StatusCode::OK => response.text().await.map_err(|e| e.to_string()),
        status => Err(status.to_string()),
    }
}

/// Retries each unanswered create with its own key and bytes until it answers 201, as a
/// client following the contract does; returns key → id.
async fn resolve(http: &str, unanswered: &[&Attempt]) -> std::collections::HashMap<String, String> {
    let deadline = Instant::now() + RESOLVE_DEADLINE;
    let mut ids = std::collections::HashMap::new();
    for attempt in unanswered {
        loop {
            let answer = create_within(http, Some(&attempt.key), &attempt.content, CREATE_TIMEOUT).await;
            match answer {
                Ok(answer) if answer.status == StatusCode::CREATED => {
                    ids.insert(attempt.key.clone(), answer.json()["id"].as_str().unwrap().to_owned());
                    break;
                }
                other => {
                    let what = other.map(|a| format!("{} {}", a.status, a.body)).unwrap_or_else(|e| e.to_string());
                    assert!(Instant::now() < deadline, "the create of {} never resolved: {what}", attempt.key);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        }
    }
    ids
}

async fn all_object_ids(objects: &dyn pastebin_objects::ObjectStore) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = objects.list(after.as_deref(), 1000).await.unwrap();
        let Some(last) = page.last() else { break };
        after = Some(last.paste_id.clone());
        ids.extend(page.into_iter().map(|object| object.paste_id));
    }
    ids
}

fn print_report(seen: &Seen, timeline: &[String]) {
    let mut latencies: Vec<Duration> = seen.attempts.iter().map(|a| a.took).collect();
    latencies.sort();
    let at = |q: f64| latencies.get(((latencies.len() as f64 - 1.0) * q) as usize).copied().unwrap_or_default();
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for attempt in &seen.attempts {
        let what = match &attempt.outcome {
            Ok(_) => "201".to_owned(),
            Err(what) => what.clone(),
        };
        *outcomes.entry(what).or_default() += 1;
    }
    println!("--- what {CLIENTS} clients saw while SeaweedFS lost a volume server, then its S3 gateway ---");
    for line in timeline {
        println!("{line}");
    }
    println!("creates: {} in all, by answer: {outcomes:?}", seen.attempts.len());
    // What was answered when, in 3-second windows of the load: the faults show where.
    let mut windows = std::collections::BTreeMap::<u64, (usize, usize)>::new();
    for attempt in &seen.attempts {
        let window = windows.entry(attempt.sent.as_secs() / 3 * 3).or_default();
        if attempt.outcome.is_ok() {
            window.0 += 1;
        } else {
            window.1 += 1;
        }
    }
    for (from, (created, failed)) in windows {
        println!("  sent {from:>2}-{:>2} s: {created:>3} × 201, {failed:>3} failed", from + 3);
    }
    println!(
        "create latency: p50 {:?}, p99 {:?}, max {:?}",
        at(0.5),
        at(0.99),
        latencies.last().copied().unwrap_or_default()
    );
    println!(
        "reads of earlier pastes: {} ({} failed, {} with other bytes)",
        seen.reads, seen.reads_failed, seen.reads_wrong
    );
}
