//! Moving slots online (docs/design.md#moving-slots): a shard may start
//! owning nothing, `pastebin ctl reshard` moves a range to it while the
//! gateway and the sweeper keep running, every row of every state arrives,
//! a killed ctl resumes at every step, and the clients never lose or
//! duplicate a create.

use std::{
    collections::HashSet,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};

use pastebin_core::{IdempotencyKey, OwnedSlots, SlotRange};
use pastebin_tests::{
    api::{create, get, new_key},
    cluster::{key_table, live_ids, scalar, testbed_binary, Cluster, ClusterOptions, Process},
};
use reqwest::StatusCode;

pub(crate) const HIGH: &str = "128-255";

pub(crate) fn range(text: &str) -> SlotRange {
    text.parse().unwrap()
}

/// `pastebin ctl reshard ARGS` as a process, with `failpoints` armed; its
/// exit status and everything it printed.
pub(crate) async fn ctl_reshard(cluster: &Cluster, args: &[&str], failpoints: &str) -> (bool, String) {
    finished(ctl_reshard_command(cluster, args, failpoints).spawn().expect("run ctl reshard")).await
}

/// The command given the cluster's shard lists as the gateway is given
/// them (through the environment, so a test's own flags win), moving by the
/// shards' own records (`--without-topology`): the protocol these tests
/// drive. Moves under etcd are tests/tests/it/ownership.rs'.
pub(crate) fn ctl_reshard_command(cluster: &Cluster, args: &[&str], failpoints: &str) -> tokio::process::Command {
    let mut command = ctl_command(cluster, failpoints);
    command.args(["reshard", "--without-topology"]).args(args);
    command
}

/// `pastebin ctl` (its command and flags still to add) over the cluster's
/// shards, with `failpoints` armed.
pub(crate) fn ctl_command(cluster: &Cluster, failpoints: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(testbed_binary());
    command.arg("ctl").env("PASTEBIN_FAILPOINTS", failpoints).kill_on_drop(true);
    command.env("PASTEBIN_KEY_SHARDS", cluster.key_addresses.join(","));
    command.env("PASTEBIN_PASTE_SHARDS", cluster.paste_addresses.join(","));
    command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    if let Some(tls) = &cluster.tls {
        command.args(tls.client.flags());
    }
    command
}

/// A ctl run's exit status and everything it printed.
pub(crate) async fn finished(ctl: tokio::process::Child) -> (bool, String) {
    let output = tokio::time::timeout(Duration::from_secs(120), ctl.wait_with_output())
        .await
        .expect("ctl reshard ends by itself")
        .expect("run ctl reshard");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.success(), text)
}

pub(crate) fn move_args<'a>(kind: &'a str, from: &'a str, to: &'a str, slots: &'a str) -> Vec<&'a str> {
    vec!["--kind", kind, "--from", from, "--to", to, "--slots", slots]
}

pub(crate) async fn described(cluster: &Cluster, kind: &str, shard: usize) -> OwnedSlots {
    match kind {
        "key" => cluster.key_client(shard).describe().await.unwrap().owned,
        _ => cluster.paste_client(shard).describe().await.unwrap().owned,
    }
}

/// A create that the client retries with the same key until it is 201
/// (bounded): the body, and every other status it saw on the way.
pub(crate) async fn create_until_created(http: &str, key: &str, content: &str) -> (String, Vec<String>) {
    let mut seen = Vec::new();
    for _ in 0..100 {
        match create(http, Some(key), content).await {
            Ok(answer) if answer.status == StatusCode::CREATED => return (answer.body, seen),
            Ok(answer) => {
                assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{}", answer.body);
                assert!(answer.headers.contains_key("retry-after"), "a 503 says when to retry");
                seen.push(format!("503 {}", answer.body));
            }
            Err(error) => seen.push(format!("no answer: {error}")),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("key {key} never got its 201: {seen:?}");
}

/// In the 503 for a key whose slot stayed moving for the whole request
/// budget (the message of `ApiError::SlotMoving`, crates/gateway/src/error.rs).
const SLOT_MOVING: &str = "slot is moving to another shard";

/// One finished create, as its client saw it.
#[derive(Debug, Clone)]
pub(crate) struct Created {
    pub(crate) key: String,
    pub(crate) content: String,
    pub(crate) body: String,
    /// Each answer before the 201: `503 {body}` or `no answer: …`.
    pub(crate) errors: Vec<String>,
    /// From the first try to the 201, retries included.
    pub(crate) took: Duration,
}

/// Every create answers its 201 again byte for byte, and reads back.
pub(crate) async fn check_replays_and_reads(cluster: &Cluster, created: &[Created]) {
    let http = &cluster.http;
    for done in created {
        let replay = create(http, Some(&done.key), &done.content).await.unwrap();
        assert_eq!(replay.status, StatusCode::CREATED, "{}", replay.body);
        assert_eq!(replay.body, done.body, "the replay is byte-identical");
        let id = serde_json::from_str::<serde_json::Value>(&done.body).unwrap()["id"].as_str().unwrap().to_owned();
        let read = get(http, &id).await;
        if read.status != StatusCode::OK {
            let parsed = pastebin_core::PasteId::parse(&id).unwrap();
            let direct = (cluster.paste_client(0).get(&parsed).await, cluster.paste_client(1).get(&parsed).await);
            panic!("{id}: {} {direct:?}", read.body);
        }
        assert_eq!(read.json()["content"], done.content.as_str());
    }
}

/// Every key is on exactly one K shard and every paste on exactly one P
/// shard; one done key and one live paste per create: nothing lost, nothing
/// twice. Returns the number of key rows in each state and of tombstones.
pub(crate) async fn check_each_create_stored_once(
    cluster: &Cluster,
    created: &[Created],
) -> (usize, usize, usize, i64) {
    let mut keys = Vec::new();
    for url in &cluster.key_database_urls {
        keys.extend(key_table(url).await);
    }
    let mut ids = Vec::new();
    for url in &cluster.paste_database_urls {
        ids.extend(live_ids(url).await);
    }
    let (distinct_keys, distinct_ids): (HashSet<_>, HashSet<_>) =
        (keys.iter().map(|row| row.0.clone()).collect(), ids.iter().cloned().collect());
    assert_eq!(distinct_keys.len(), keys.len(), "no key row is on two K shards");
    assert_eq!(distinct_ids.len(), ids.len(), "no paste row is on two P shards");
    let in_state = |state: &str| keys.iter().filter(|row| row.1 == state).count();
    assert_eq!(in_state("done"), created.len(), "one done key per create");
    assert_eq!(ids.len(), created.len(), "one live paste per create");
    let mut tombstones = 0;
    for url in &cluster.paste_database_urls {
        tombstones += scalar(url, "SELECT COUNT(*) FROM pastes WHERE state = 'tombstoned'").await;
    }
    (in_state("done"), in_state("pending"), in_state("aborted"), tombstones)
}

/// Keys in the slots that move, left pending or aborted behind a tombstone,
/// as a crashed create and its compensation leave them.
async fn seed_pending_and_aborted(cluster: &Cluster, each: usize) {
    let (keys, pastes) = (cluster.key_client(0), cluster.paste_client(0));
    for n in 0..2 * each {
        let new = moving_key(range(HIGH));
        keys.begin(&new).await.unwrap();
        if n % 2 == 1 {
            assert_eq!(pastes.tombstone_unless_live(&new.paste_id).await.unwrap(), pastebin_pastes::IdFate::Tombstoned);
            assert!(keys.abort(&new.key, &new.paste_id).await.unwrap());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shard_started_owning_nothing_is_listed_and_routed_nothing() {
    let mut cluster =
        Cluster::start(ClusterOptions { empty_key_shards: 1, empty_paste_shards: 1, ..Default::default() }).await;
    assert_eq!(described(&cluster, "key", 1).await, OwnedSlots::Nothing);
    assert_eq!(described(&cluster, "paste", 1).await, OwnedSlots::Nothing);
    for n in 0..10 {
        let answer = create(&cluster.http, Some(&new_key()), &format!("paste {n}")).await.unwrap();
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    }
    let count = "SELECT COUNT(*) FROM idempotency_keys";
    assert_eq!(scalar(&cluster.key_database_urls[1], count).await, 0, "nothing routed to the empty K shard");
    assert_eq!(scalar(&cluster.paste_database_urls[1], "SELECT COUNT(*) FROM pastes").await, 0);

    // Restarted without --slots, it keeps what it stored: nothing.
    cluster.keys[1].forget_flag("--slots");
    cluster.keys[1].restart(&[], &["key-service"]).await;
    assert_eq!(described(&cluster, "key", 1).await, OwnedSlots::Nothing);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ctl_reshard_refuses_a_move_that_leaves_a_slot_with_no_owner_or_two() {
    let cluster = Cluster::start(ClusterOptions { key_shards: 2, empty_key_shards: 1, ..Default::default() }).await;
    let (k0, k1, k2) = (&cluster.key_addresses[0], &cluster.key_addresses[1], &cluster.key_addresses[2]);
    for (args, why) in [
        (move_args("key", k0, k2, "100-255"), "not all owned by the source"),
        (move_args("key", k0, k2, "10-20"), "would split the source's range"),
        (move_args("key", k2, k0, "0-9"), "the source owns nothing"),
        (move_args("key", k0, k0, "0-9"), "one shard"),
        (move_args("paste", k0, k2, "0-9"), "K shards are not P shards"),
    ] {
        let (ok, output) = ctl_reshard(&cluster, &args, "").await;
        assert!(!ok, "{why}: {output}");
        assert!(output.contains("error:"), "{why}: {output}");
    }
    // Into a shard that owns a range not next to the slots: refused too.
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", k1, k0, "250-255"), "").await;
    assert!(!ok && output.contains("no slot may be left with no owner or two"), "{output}");
    for shard in 0..3 {
        assert!(cluster.key_client(shard).describe().await.unwrap().frozen.is_none(), "nothing was frozen");
    }
}

/// Every row of every state moves: done, pending and aborted keys; live
/// pastes and tombstones. Killing ctl at each step and rerunning it ends the
/// same way, with the slots on exactly one shard.
/// Kills shard `shard` of `kind` and starts it again without `--slots`: it
/// comes back owning, and in the step of a move, what its database says.
async fn restart_shard(cluster: &mut Cluster, kind: &str, shard: usize) {
    let (process, name) = match kind {
        "key" => (&mut cluster.keys[shard], "key-service"),
        _ => (&mut cluster.pastes[shard], "paste-service"),
    };
    process.forget_flag("--slots");
    process.restart(&[], &[name]).await;
}

/// A shard started on `database_url` with `--slots slots`, run to its end:
/// whether it refused, and what it said.
async fn start_refused(kind: &str, database_url: &str, slots: &str) -> String {
    let mut command = tokio::process::Command::new(testbed_binary());
    command.args([kind, "--database-url", database_url, "--listen", "127.0.0.1:0", "--slots", slots]);
    let output = tokio::time::timeout(Duration::from_secs(60), command.kill_on_drop(true).output())
        .await
        .expect("a refused start ends by itself")
        .expect("run the shard");
    assert!(!output.status.success(), "a start with --slots {slots} is refused");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_ctl_killed_at_any_step_is_finished_by_a_rerun() {
    let mut cluster =
        Cluster::start(ClusterOptions { empty_key_shards: 1, empty_paste_shards: 1, ..Default::default() }).await;
    seed_pending_and_aborted(&cluster, 3).await;
    let mut created = Vec::new();
    for n in 0..40 {
        let (key, content) = (new_key(), format!("row {n}"));
        let started = std::time::Instant::now();
        let (body, errors) = create_until_created(&cluster.http, &key, &content).await;
        created.push(Created { key, content, body, errors, took: started.elapsed() });
    }
    let (k, p) = (cluster.key_addresses.clone(), cluster.paste_addresses.clone());
    // Move 128-255 back and forth, crashing ctl at another step each time.
    for (round, failpoint) in pastebin_ctl::reshard::failpoint::ALL.iter().enumerate() {
        let (kind, shards) = if round % 2 == 0 { ("key", &k) } else { ("paste", &p) };
        let there = round % 4 >= 2;
        let (from, to) = if there { (&shards[1], &shards[0]) } else { (&shards[0], &shards[1]) };
        let mut args = move_args(kind, from, to, HIGH);
        // Small pages, so the copy and the cleanup each take several.
        args.extend(["--batch", "5"]);
        let (ok, output) = ctl_reshard(&cluster, &args, failpoint).await;
        assert!(!ok && output.contains(&format!("failpoint {failpoint}")), "{failpoint}: {output}");
        // Most rounds, one of the two shards dies at that step as well.
        let (source, target) = if there { (1, 0) } else { (0, 1) };
        match round % 3 {
            0 => restart_shard(&mut cluster, kind, source).await,
            1 => restart_shard(&mut cluster, kind, target).await,
            _ => {}
        }
        let (ok, output) = ctl_reshard(&cluster, &args, "").await;
        assert!(ok, "the rerun after {failpoint} finishes: {output}");
        assert!(output.contains("done: slots 128-255 moved"), "{output}");
        let owned = |slots: &str| if slots == "none" { OwnedSlots::Nothing } else { range(slots).into() };
        let (source_left, target_now) = if there { ("none", "0-255") } else { ("0-127", HIGH) };
        assert_eq!(described(&cluster, kind, source).await, owned(source_left), "{failpoint}");
        assert_eq!(described(&cluster, kind, target).await, owned(target_now), "{failpoint}");
        check_replays_and_reads(&cluster, &created).await;
        let (_, pending, aborted, tombstones) = check_each_create_stored_once(&cluster, &created).await;
        assert_eq!(
            (pending, aborted, tombstones),
            (3, 3, 3),
            "{failpoint}: pending and aborted keys and tombstones move too"
        );
    }
}

/// `count` aborted keys in the moving slots, each behind its tombstone on
/// P, written straight to the shards: the bulk a move copies besides the
/// creates of the test's clients.
async fn seed_aborted(cluster: &Cluster, count: usize) {
    use futures::StreamExt;
    let (keys, pastes) = (cluster.key_client(0), cluster.paste_client(0));
    let seeds = futures::stream::iter(0..count).map(|_| {
        let (keys, pastes) = (keys.clone(), pastes.clone());
        async move {
            let new = moving_key(range(HIGH));
            keys.begin(&new).await.unwrap();
            pastes.tombstone_unless_live(&new.paste_id).await.unwrap();
            assert!(keys.abort(&new.key, &new.paste_id).await.unwrap());
        }
    });
    seeds.buffer_unordered(16).collect::<Vec<()>>().await;
}

/// Quantile `q` of `durations`, in seconds.
fn quantile(durations: &mut [Duration], q: f64) -> f64 {
    durations.sort();
    let at = ((durations.len() as f64 * q).ceil() as usize).clamp(1, durations.len().max(1)) - 1;
    durations.get(at).map_or(0.0, Duration::as_secs_f64)
}

/// The headline: split K, then P, from one shard to two while clients
/// create continuously; a sweeper runs throughout. `PASTEBIN_RESHARD_SEED`
/// rows (default 200) are in the moving slots before the moves, so each
/// copy has some bulk; BENCHMARKS.md runs it with 10,000.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn splitting_k_then_p_while_clients_create_loses_and_duplicates_nothing() {
    const CLIENTS: usize = 16;
    let seeded = std::env::var("PASTEBIN_RESHARD_SEED").ok().and_then(|n| n.parse().ok()).unwrap_or(200);
    let cluster =
        Cluster::start(ClusterOptions { empty_key_shards: 1, empty_paste_shards: 1, ..Default::default() }).await;
    seed_aborted(&cluster, seeded).await;
    let _sweeper: Process = cluster.start_sweeper(&[]).await;
    let (stop, done) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let created = Arc::new(Mutex::new(Vec::<Created>::new()));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (http, stop, done, created) = (cluster.http.clone(), stop.clone(), done.clone(), created.clone());
            tokio::spawn(async move {
                for n in 0.. {
                    if stop.load(Ordering::SeqCst) || n >= 200 {
                        break;
                    }
                    let (key, content) = (new_key(), format!("client {client} paste {n}"));
                    let started = std::time::Instant::now();
                    let (body, errors) = create_until_created(&http, &key, &content).await;
                    let took = started.elapsed();
                    created.lock().unwrap().push(Created { key, content, body, errors, took });
                    done.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    let wait_for = |count: usize| {
        let done = done.clone();
        async move {
            while done.load(Ordering::SeqCst) < count {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    wait_for(40).await;
    let (k, p) = (&cluster.key_addresses, &cluster.paste_addresses);
    let (ok, key_move) = ctl_reshard(&cluster, &move_args("key", &k[0], &k[1], HIGH), "").await;
    assert!(ok, "{key_move}");
    let after_key_move = done.load(Ordering::SeqCst);
    wait_for(after_key_move + 40).await;
    let (ok, paste_move) = ctl_reshard(&cluster, &move_args("paste", &p[0], &p[1], HIGH), "").await;
    assert!(ok, "{paste_move}");
    let after_paste_move = done.load(Ordering::SeqCst);
    wait_for(after_paste_move + 40).await;
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        client.await.unwrap();
    }
    let created = created.lock().unwrap().clone();
    let moving = range(HIGH);
    let slot_of = |key: &str| IdempotencyKey::parse(key).unwrap().slot();
    let mut paused: Vec<Duration> =
        created.iter().filter(|c| moving.contains(slot_of(&c.key))).map(|c| c.took).collect();
    let mut others: Vec<Duration> =
        created.iter().filter(|c| !moving.contains(slot_of(&c.key))).map(|c| c.took).collect();
    eprintln!(
        "{key_move}\n{paste_move}\n{} creates by {CLIENTS} clients, {seeded} seeded rows per kind; moving slots: \
         p50 {:.3} s, p99 {:.3} s, max {:.3} s; other slots: p99 {:.3} s",
        created.len(),
        quantile(&mut paused, 0.5),
        quantile(&mut paused, 0.99),
        quantile(&mut paused, 1.0),
        quantile(&mut others, 0.99)
    );

    assert_eq!(described(&cluster, "key", 0).await, range("0-127").into());
    assert_eq!(described(&cluster, "key", 1).await, range(HIGH).into());
    assert_eq!(described(&cluster, "paste", 1).await, range(HIGH).into());
    // The move refuses nothing outside its slots. (On a saturated machine a
    // create may still run out of its budget or be shed, anywhere: that 503
    // says so, and is not the move's.)
    for other in created.iter().filter(|c| !moving.contains(slot_of(&c.key))) {
        let refused_for_the_move = other.errors.iter().filter(|e| e.contains(SLOT_MOVING)).collect::<Vec<_>>();
        assert!(refused_for_the_move.is_empty(), "a create for an unmoved slot saw {refused_for_the_move:?}");
    }
    assert!(created.iter().any(|c| moving.contains(slot_of(&c.key))), "some creates were for the moving slots");
    check_replays_and_reads(&cluster, &created).await;
    let (_, pending, _, _) = check_each_create_stored_once(&cluster, &created).await;
    assert_eq!(pending, 0, "no key stays pending after the moves");
    for url in [&cluster.key_database_urls[1], &cluster.paste_database_urls[1]] {
        assert!(scalar(url, "SELECT COUNT(*) FROM slot_moves WHERE step <> 'done'").await == 0, "the moves finished");
    }
    // The stored range is the truth now: the old range is refused.
    let refused = start_refused("key-service", &cluster.key_database_urls[0], "0-255").await;
    assert!(refused.contains("says it owns slots 0-127"), "{refused}");
}

/// A move stopped before the source gave its slots up can be undone: the
/// source serves them again and the target keeps nothing. `--status` shows
/// where a move stands and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_move_is_shown_by_status_and_undone_by_abandon() {
    let mut cluster = Cluster::start(ClusterOptions { empty_key_shards: 1, ..Default::default() }).await;
    for n in 0..20 {
        let (body, _) = create_until_created(&cluster.http, &new_key(), &format!("paste {n}")).await;
        assert!(body.contains("\"id\""), "{body}");
    }
    // The source with its admin listener, to read its move metrics.
    cluster.keys[0].set_flag("--admin", "127.0.0.1:0");
    cluster.keys[0].restart(&[], &["key-service", "admin"]).await;
    let k = cluster.key_addresses.clone();
    let args = move_args("key", &k[0], &k[1], HIGH);
    let (ok, output) = ctl_reshard(&cluster, &args, pastebin_ctl::reshard::failpoint::AFTER_FREEZE).await;
    assert!(!ok, "{output}");
    let copied = scalar(&cluster.key_database_urls[1], "SELECT COUNT(*) FROM idempotency_keys").await;
    assert!(copied > 0, "copied");
    let metrics = format!("http://{}/metrics", cluster.keys[0].address("admin"));
    let metrics = reqwest::get(metrics).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("pastebin_shard_frozen_slots 128"), "{metrics}");
    let exported = format!("pastebin_slot_move_rows_total{{direction=\"exported\"}} {copied}");
    assert!(metrics.contains(&exported), "{exported}: {metrics}");

    let status_args = ["--kind", "key", "--from", &k[0], "--to", &k[1], "--status"];
    let (ok, status) = ctl_reshard(&cluster, &status_args, "").await;
    assert!(ok, "{status}");
    assert!(status.contains("owns 0-255, frozen 128-255"), "{status}");
    assert!(status.contains("MOVE_STEP_FROZEN") && status.contains("MOVE_STEP_IMPORTING"), "{status}");
    assert_eq!(cluster.key_client(0).describe().await.unwrap().frozen, Some(range(HIGH)), "--status changed nothing");

    let abandon_args = ["--kind", "key", "--from", &k[0], "--to", &k[1], "--abandon"];
    let (ok, output) = ctl_reshard(&cluster, &abandon_args, "").await;
    assert!(ok && output.contains("abandoned"), "{output}");
    let source = cluster.key_client(0).describe().await.unwrap();
    assert_eq!((source.owned, source.frozen), (SlotRange::ALL.into(), None), "the source serves every slot again");
    assert_eq!(described(&cluster, "key", 1).await, OwnedSlots::Nothing);
    assert_eq!(scalar(&cluster.key_database_urls[1], "SELECT COUNT(*) FROM idempotency_keys").await, 0, "no copy left");
    for n in 0..20 {
        let answer = create(&cluster.http, Some(&new_key()), &format!("after {n}")).await.unwrap();
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    }
    let (ok, output) = ctl_reshard(&cluster, &args, "").await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "a new move after the abandoned one: {output}");
}

/// A key in the moving slots, as a client would send it.
pub(crate) fn moving_key(slots: SlotRange) -> pastebin_keys::NewKey {
    loop {
        let new = pastebin_tests::shards::new_key("{\"id\":\"x\"}");
        if slots.contains(new.key.slot()) {
            return new;
        }
    }
}

/// The bulk of a move is copied while its slots are still served: creates
/// for them succeed at once, and what changes meanwhile (new rows, and rows
/// copied already whose state changed) is copied again after the freeze,
/// so the target ends with the source's rows as they were when frozen.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_during_the_bulk_copy_are_caught_up_after_the_freeze() {
    let cluster =
        Cluster::start(ClusterOptions { empty_key_shards: 1, empty_paste_shards: 1, ..Default::default() }).await;
    seed_pending_and_aborted(&cluster, 2).await;
    let pastes = cluster.paste_client(0);
    let held = tempfile::tempdir().unwrap();
    let mut created = Vec::new();
    // The key shard of the moving slots: K0 while K moves, K1 once it has.
    for (kind, addresses, keys) in [
        ("key", &cluster.key_addresses, cluster.key_client(0)),
        ("paste", &cluster.paste_addresses, cluster.key_client(1)),
    ] {
        // A pending key the bulk copy takes as it is, and that aborts later.
        let late = moving_key(range(HIGH));
        keys.begin(&late).await.unwrap();
        let go = held.path().join(kind);
        let hold = format!("{}=wait:{}", pastebin_ctl::reshard::failpoint::AFTER_COPY, go.display());
        let args = move_args(kind, &addresses[0], &addresses[1], HIGH);
        let ctl = ctl_reshard_command(&cluster, &args, &hold).spawn().unwrap();
        let reached = go.with_extension("reached");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while !reached.exists() {
            assert!(tokio::time::Instant::now() < deadline, "ctl reaches the end of its copy");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let status_args = ["--kind", kind, "--from", &addresses[0], "--to", &addresses[1], "--status"];
        let (_, status) = ctl_reshard(&cluster, &status_args, "").await;
        assert!(status.contains("MOVE_STEP_EXPORTING") && !status.contains("frozen"), "{status}");

        // Meanwhile: creates in every slot answer 201 at the first try …
        let mut in_moving_slots = 0;
        for n in 0..20 {
            let (key, content) = (new_key(), format!("{kind} {n}"));
            let answer = create(&cluster.http, Some(&key), &content).await.unwrap();
            assert_eq!(answer.status, StatusCode::CREATED, "slots being copied are served: {}", answer.body);
            in_moving_slots += usize::from(range(HIGH).contains(IdempotencyKey::parse(&key).unwrap().slot()));
            created.push(Created { key, content, body: answer.body, errors: Vec::new(), took: Duration::ZERO });
        }
        // … and a row copied already changes: the pending key aborts behind a
        // new tombstone (a changed row on K, a new one on P).
        assert_eq!(pastes.tombstone_unless_live(&late.paste_id).await.unwrap(), pastebin_pastes::IdFate::Tombstoned);
        assert!(keys.abort(&late.key, &late.paste_id).await.unwrap());
        std::fs::write(&go, "").unwrap();

        let (ok, output) = finished(ctl).await;
        assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");
        let again: usize = output
            .split("caught up in ")
            .nth(1)
            .and_then(|rest| rest.split(": ").nth(1))
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("the catch-up says what it copied again: {output}"));
        assert_eq!(again, in_moving_slots + 1, "the creates and the aborted key are copied again: {output}");
        assert!(output.contains("0 dropped"), "{output}");
    }
    check_replays_and_reads(&cluster, &created).await;
    let (_, pending, aborted, tombstones) = check_each_create_stored_once(&cluster, &created).await;
    assert_eq!((pending, aborted, tombstones), (2, 4, 4), "the late keys arrive aborted, behind their tombstones");
}

/// While a shard is in a move, its cleanup (key retention, paste expiry,
/// tombstone purges) waits: a sweeper round reports no failure for it, and
/// the move then finishes as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn cleanup_waiting_for_a_move_is_not_a_sweeper_failure() {
    let cluster =
        Cluster::start(ClusterOptions { empty_key_shards: 1, empty_paste_shards: 1, ..Default::default() }).await;
    let held = tempfile::tempdir().unwrap();
    for (kind, addresses) in [("key", &cluster.key_addresses), ("paste", &cluster.paste_addresses)] {
        let go = held.path().join(kind);
        let hold = format!("{}=wait:{}", pastebin_ctl::reshard::failpoint::AFTER_COPY, go.display());
        let ctl =
            ctl_reshard_command(&cluster, &move_args(kind, &addresses[0], &addresses[1], HIGH), &hold).spawn().unwrap();
        let (reached, deadline) =
            (go.with_extension("reached"), tokio::time::Instant::now() + Duration::from_secs(120));
        while !reached.exists() {
            assert!(tokio::time::Instant::now() < deadline, "ctl reaches the end of its copy");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let round =
            cluster.sweeper(pastebin_core::ManualClock::starting_at(chrono::Utc::now())).await.round(false).await;
        assert_eq!(round.reap.errors, 0, "{kind}: {:?}", round.failure());
        assert_eq!(round.failure(), None);
        std::fs::write(&go, "").unwrap();
        let (ok, output) = finished(ctl).await;
        assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");
    }
}
