//! Ownership on etcd (docs/design.md#ownership-on-etcd): a shard whose
//! database forgets (a restore, a new volume) never gives a slot two owners
//! and never lets a move delete the only copy. Real etcd, real K and P
//! processes on SQLite files that the tests replace, a real gateway and
//! SeaweedFS; `ctl reshard --topology` as an operator runs it.

use std::{path::Path, time::Duration};

use pastebin_core::{OwnedSlots, SlotRange};
use pastebin_ctl::reshard::failpoint;
use pastebin_tests::{
    api::new_key,
    cluster::{Cluster, ClusterOptions},
    etcd::Etcd,
    postgres::sqlite_url,
};
use pastebin_topology::{Authority, EtcdAuthority, Kind, Topology};
use reqwest::StatusCode;
use sqlx::Connection;

use crate::reshard::{
    check_each_create_stored_once, check_replays_and_reads, create_until_created, ctl_command, finished, move_args,
    moving_key, range, Created, HIGH,
};

/// One K shard owning every slot and an empty one, one P shard, all under
/// the topology on `etcd`, whose first version the test writes.
async fn cluster_on(etcd: &Etcd, dir: &Path) -> Cluster {
    cluster_moving(etcd, dir, Kind::Key).await
}

/// Two shards of `kind` (one owning every slot, one empty, on SQLite files
/// `k0.db`, `k1.db` or `p0.db`, `p1.db` in `dir`) and one of the other kind,
/// all under the topology on `etcd`, whose first version the test writes.
async fn cluster_moving(etcd: &Etcd, dir: &Path, kind: Kind) -> Cluster {
    let files =
        |prefix: &str| vec![sqlite_url(dir, &format!("{prefix}0.db")), sqlite_url(dir, &format!("{prefix}1.db"))];
    let mut options = ClusterOptions { topology: Some(etcd.topology_url()), ..Default::default() };
    match kind {
        Kind::Key => (options.empty_key_shards, options.key_database_urls) = (1, files("k")),
        Kind::Paste => (options.empty_paste_shards, options.paste_database_urls) = (1, files("p")),
    }
    let cluster = Cluster::start(options).await;
    let authority = authority(etcd);
    let initial = |addresses: &[String]| {
        let mut grants = vec![(addresses[0].clone(), OwnedSlots::Range(SlotRange::ALL))];
        grants.extend(addresses[1..].iter().map(|address| (address.clone(), OwnedSlots::Nothing)));
        Topology::initial(grants).unwrap()
    };
    authority.swap(Kind::Key, None, &initial(&cluster.key_addresses)).await.unwrap();
    authority.swap(Kind::Paste, None, &initial(&cluster.paste_addresses)).await.unwrap();
    // Every shard confirms its marker once it sees the topology.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        if confirmed(&authority, Kind::Key).await && confirmed(&authority, Kind::Paste).await {
            return cluster;
        }
        assert!(tokio::time::Instant::now() < deadline, "every shard confirms its grant");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every shard of `kind` has confirmed its marker.
async fn confirmed(authority: &EtcdAuthority, kind: Kind) -> bool {
    let topology = authority.read(kind).await.unwrap().topology.unwrap();
    topology.shards.values().all(|grant| grant.marker.is_some())
}

fn authority(etcd: &Etcd) -> EtcdAuthority {
    EtcdAuthority::new(etcd.topology_url().parse().unwrap(), None).unwrap()
}

async fn create_some(cluster: &Cluster, count: usize) -> Vec<Created> {
    let mut created = Vec::new();
    for n in 0..count {
        let (key, content) = (new_key(), format!("paste {n}"));
        let (body, errors) = create_until_created(&cluster.http, &key, &content).await;
        created.push(Created { key, content, body, errors, took: Duration::ZERO });
    }
    created
}

/// `ctl reshard --topology …`: whether it exited 0, and what it printed.
async fn reshard(cluster: &Cluster, etcd: &Etcd, args: &[&str], failpoints: &str) -> (bool, String) {
    finished(reshard_command(cluster, etcd, args, failpoints).spawn().expect("run ctl reshard")).await
}

fn reshard_command(cluster: &Cluster, etcd: &Etcd, args: &[&str], failpoints: &str) -> tokio::process::Command {
    let mut command = ctl_command(cluster, failpoints);
    command.arg("reshard").args(args).env("PASTEBIN_TOPOLOGY", etcd.topology_url());
    command
}

async fn sqlite_count(dir: &Path, file: &str, sql: &str) -> i64 {
    let mut conn = sqlx::SqliteConnection::connect(&sqlite_url(dir, file)).await.unwrap();
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned())).fetch_one(&mut conn).await.unwrap()
}

/// The keys whose slot is in 128-255 (those the move carries).
fn moved(created: &[Created]) -> Vec<&Created> {
    let high: SlotRange = HIGH.parse().unwrap();
    created.iter().filter(|c| high.contains(pastebin_core::IdempotencyKey::parse(&c.key).unwrap().slot())).collect()
}

/// The first schedule: the move is cut over and ctl dies; the
/// target's database is replaced by an empty one and the target restarts.
/// It holds the slots (serves none of them) instead of answering "no such
/// key"; a retry of a key it lost never gets a second paste; the source
/// deleted nothing; and the same command copies the rows again, verifies
/// them and finishes: every key replays its 201 byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_target_that_forgot_its_copy_after_the_cut_over_holds_the_slots_until_the_rerun_copies_them_again() {
    let etcd = Etcd::single().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster_on(&etcd, dir.path()).await;
    let created = create_some(&cluster, 30).await;
    let (a, b) = (cluster.key_addresses[0].clone(), cluster.key_addresses[1].clone());
    let on_source = sqlite_count(dir.path(), "k0.db", "SELECT COUNT(*) FROM idempotency_keys").await;

    let (ok, output) = reshard(&cluster, &etcd, &move_args("key", &a, &b, HIGH), failpoint::AFTER_RELEASE).await;
    assert!(!ok && output.contains("the topology records the cut-over"), "{output}");

    // The target's volume is replaced: an empty database, the same flags
    // but --slots (the topology says what it owns).
    cluster.keys[1].kill().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.path().join(format!("k1.db{suffix}")));
    }
    cluster.keys[1].forget_flag("--slots");
    cluster.keys[1].restart(&[], &["key-service"]).await;

    // The target holds the slots: a key it lost is neither "unknown" nor
    // begun again there, but refused as not executed.
    let lost = moved(&created);
    assert!(!lost.is_empty(), "some keys are in the moved slots");
    let key = pastebin_core::IdempotencyKey::parse(&lost[0].key).unwrap();
    let held = cluster.key_client(1).get(&key).await;
    assert!(matches!(&held, Err(error) if error.to_string().contains("held")), "{held:?}");
    // A retry through the gateway is refused, never made again.
    for lost in lost.into_iter().take(2) {
        let retry = pastebin_tests::api::create(&cluster.http, Some(&lost.key), &lost.content).await.unwrap();
        match retry.status {
            StatusCode::CREATED => assert_eq!(retry.body, lost.body, "never a second paste"),
            status => assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{}", retry.body),
        }
    }
    let kept = sqlite_count(dir.path(), "k0.db", "SELECT COUNT(*) FROM idempotency_keys").await;
    assert_eq!(kept, on_source, "the source deleted nothing while the target's copy was gone");

    let (ok, output) = reshard(&cluster, &etcd, &move_args("key", &a, &b, HIGH), "").await;
    assert!(ok, "{output}");
    assert!(output.contains("forgot its copy since the cut-over: copying it again"), "{output}");
    assert!(output.contains("done: slots 128-255 moved"), "{output}");
    check_replays_and_reads(&cluster, &created).await;
    check_each_create_stored_once(&cluster, &created).await;
    let topology = authority(&etcd).read(Kind::Key).await.unwrap().topology.unwrap();
    assert!(topology.moving.is_none() && topology.finished.last().unwrap().phase == pastebin_topology::Phase::Done);
}

/// The second schedule: after a finished move the source's database
/// is restored to a snapshot taken before it began (a move still
/// "exporting", every slot its own). Restarted, it serves only what the
/// topology grants it; a gateway that knew the old map follows the refusal
/// to the target; every key replays its own 201 and none is made twice;
/// `--abandon` of that finished move is refused, not "abandoned".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_source_restored_to_before_its_release_serves_only_its_grant() {
    let etcd = Etcd::single().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster_on(&etcd, dir.path()).await;
    let created = create_some(&cluster, 20).await;
    let (a, b) = (cluster.key_addresses[0].clone(), cluster.key_addresses[1].clone());

    // Stopped right after both shards recorded the move: the snapshot.
    let (ok, output) = reshard(&cluster, &etcd, &move_args("key", &a, &b, HIGH), failpoint::AFTER_PREPARE).await;
    assert!(!ok && output.contains("failpoint reshard_after_prepare"), "{output}");
    let snapshot = dir.path().join("k0-at-step-1.db");
    let mut conn = sqlx::SqliteConnection::connect(&sqlite_url(dir.path(), "k0.db")).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("VACUUM INTO '{}'", snapshot.display()))).execute(&mut conn).await.unwrap();
    drop(conn);
    let (ok, output) = reshard(&cluster, &etcd, &move_args("key", &a, &b, HIGH), "").await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");

    cluster.keys[0].kill().await;
    for suffix in ["-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.path().join(format!("k0.db{suffix}")));
    }
    std::fs::copy(&snapshot, dir.path().join("k0.db")).unwrap();
    cluster.keys[0].forget_flag("--slots");
    cluster.keys[0].restart(&[], &["key-service"]).await;
    assert_eq!(
        cluster.key_client(0).describe().await.unwrap().owned,
        OwnedSlots::Range("0-127".parse().unwrap()),
        "the restored source serves its grant, not what its database says"
    );

    check_replays_and_reads(&cluster, &created).await;
    check_each_create_stored_once(&cluster, &created).await;
    let more = create_some(&cluster, 10).await;
    let on_a = sqlite_count(dir.path(), "k0.db", "SELECT COUNT(*) FROM idempotency_keys").await;
    let restored = sqlite_count(dir.path(), "k0-at-step-1.db", "SELECT COUNT(*) FROM idempotency_keys").await;
    assert_eq!(restored, created.len() as i64, "the snapshot held every key, those of the moved slots too");
    let low = |keys: &[Created]| (keys.len() - moved(keys).len()) as i64;
    assert_eq!(
        on_a,
        low(&created) + low(&more),
        "the restored source keeps only its own slots' keys: its stale copies deleted, no new key of the moved slots"
    );
    let all: Vec<Created> = created.iter().chain(&more).cloned().collect();
    check_each_create_stored_once(&cluster, &all).await;

    let mut abandon = move_args("key", &a, &b, HIGH);
    abandon.push("--abandon");
    let (ok, output) = reshard(&cluster, &etcd, &abandon, "").await;
    assert!(!output.contains("abandoned:") && !output.contains("the target's copies are gone"), "{output}");
    assert!(ok == output.contains("is already done"), "{output}");
    assert_eq!(cluster.key_client(1).describe().await.unwrap().owned, OwnedSlots::Range(HIGH.parse().unwrap()));
}

/// `pastebin ctl …` with the cluster's shard lists and `--topology`, plus `args`.
async fn ctl(cluster: &Cluster, etcd: &Etcd, args: &[&str]) -> (bool, String) {
    let mut command = ctl_command(cluster, "");
    command.env("PASTEBIN_TOPOLOGY", etcd.topology_url()).args(args);
    finished(command.spawn().expect("run ctl")).await
}

/// `ctl topology init` hands the ranges the shards hold over to etcd once:
/// not while a slot would have no owner, not twice, and only as the
/// shards report them; every shard then confirms its grant and keeps
/// serving what it served.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ctl_topology_init_writes_the_shards_ranges_once_and_refuses_a_gap() {
    let etcd = Etcd::single().await;
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        empty_key_shards: 1,
        key_database_urls: vec![sqlite_url(dir.path(), "k0.db"), sqlite_url(dir.path(), "k1.db")],
        topology: Some(etcd.topology_url()),
        ..Default::default()
    };
    let cluster = Cluster::start(options).await;
    // Before `init`, each shard serves the range its database holds.
    let created = create_some(&cluster, 6).await;
    let (a, b) = (cluster.key_addresses[0].clone(), cluster.key_addresses[1].clone());

    let (ok, output) = ctl(&cluster, &etcd, &["--key-shards", &b, "topology", "init"]).await;
    assert!(!ok && output.contains("no shard claims slot 0") && output.contains("nothing was written"), "{output}");
    let (ok, output) = ctl(&cluster, &etcd, &["topology", "show"]).await;
    assert!(ok && output.contains("key: no topology yet") && output.contains("paste: no topology yet"), "{output}");

    let (ok, output) = ctl(&cluster, &etcd, &["topology", "init"]).await;
    assert!(ok && output.contains("key topology written (version 1)"), "{output}");
    assert!(output.contains(&format!("{a} 0-255")) && output.contains(&format!("{b} none")), "{output}");
    assert!(output.contains("every key shard confirmed its grant"), "{output}");
    assert!(output.contains("every paste shard confirmed its grant"), "{output}");
    let (ok, output) = ctl(&cluster, &etcd, &["topology", "init"]).await;
    assert!(ok && output.contains("key topology already written"), "a rerun changes nothing: {output}");

    let (ok, output) = ctl(&cluster, &etcd, &["topology", "show"]).await;
    assert!(ok && output.contains(&format!("{a}  slots 0-255  (confirmed)")), "{output}");
    assert!(!output.contains("not confirmed") && output.contains("no move in progress"), "{output}");
    check_replays_and_reads(&cluster, &created).await;
}

/// Routers watch the topology (docs/design.md#routers-watch-the-topology):
/// a gateway learns of a finished move from etcd, before any call it
/// routes is refused — none is routed between the move and the check.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gateway_follows_a_move_by_the_watch_before_any_call_is_refused() {
    let etcd = Etcd::single().await;
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster_on(&etcd, dir.path()).await;
    let created = create_some(&cluster, 10).await;
    let (a, b) = (cluster.key_addresses[0].clone(), cluster.key_addresses[1].clone());

    let (ok, output) = reshard(&cluster, &etcd, &move_args("key", &a, &b, HIGH), "").await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");
    let followed = format!("{a} 0-127, {b} 128-255");
    assert!(
        cluster.gateway.wait_for_log(&followed, Duration::from_secs(60)).await,
        "the gateway's map follows the move without a call: {}",
        cluster.gateway.logs()
    );
    check_replays_and_reads(&cluster, &created).await;
}

/// A process that may not be ready for a while (it waits for etcd): its
/// output so far, collected as it comes.
struct Waiting {
    child: tokio::process::Child,
    output: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Waiting {
    fn spawn(mut command: tokio::process::Command) -> Waiting {
        use tokio::io::AsyncBufReadExt;
        let mut child = command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("starts");
        let output = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let streams: [Box<dyn tokio::io::AsyncRead + Send + Unpin>; 2] =
            [Box::new(child.stdout.take().unwrap()), Box::new(child.stderr.take().unwrap())];
        for stream in streams {
            let sink = output.clone();
            tokio::spawn(async move {
                let mut lines = tokio::io::BufReader::new(stream).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    let mut output = sink.lock().unwrap();
                    output.push_str(&line);
                    output.push('\n');
                }
            });
        }
        Waiting { child, output }
    }

    fn output(&self) -> String {
        self.output.lock().unwrap().clone()
    }

    /// Waits until its output has `needle` (or it ends); whether it has.
    async fn says(&mut self, needle: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if self.output().contains(needle) {
                return true;
            }
            if self.child.try_wait().unwrap().is_some() {
                tokio::time::sleep(Duration::from_millis(200)).await;
                return self.output().contains(needle);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }
}

/// The "quorum lost" schedule: with two of etcd's three members
/// down, the shards whose grants are confirmed keep serving creates, reads
/// and deletes; a shard that starts and a move both wait, saying what for,
/// and neither guesses; once the quorum is back, the shard serves its grant
/// and the move finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_etcd_s_quorum_confirmed_shards_serve_while_a_start_and_a_move_wait_for_it() {
    let mut etcd = Etcd::three().await;
    let dir = tempfile::tempdir().unwrap();
    let cluster = cluster_on(&etcd, dir.path()).await;
    let before = create_some(&cluster, 6).await;
    let (a, b) = (cluster.key_addresses[0].clone(), cluster.key_addresses[1].clone());

    etcd.lose_quorum();
    // A member that led a moment ago may answer until it steps down: the loss
    // is what the parts see.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while authority(&etcd).read(Kind::Key).await.is_ok() {
        assert!(tokio::time::Instant::now() < deadline, "etcd keeps answering without a quorum");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let during = create_some(&cluster, 10).await;
    let all: Vec<Created> = before.iter().chain(&during).cloned().collect();
    check_replays_and_reads(&cluster, &all).await;
    let deleted = &during[0];
    let body: serde_json::Value = serde_json::from_str(&deleted.body).unwrap();
    let (id, token) = (body["id"].as_str().unwrap(), body["delete_token"].as_str().unwrap());
    let answer = reqwest::Client::new()
        .delete(format!("{}/api/v1/pastes/{id}", cluster.http))
        .header(reqwest::header::AUTHORIZATION, format!("Bearer {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::NO_CONTENT, "a delete is served without etcd");

    // A new K shard waits for etcd before it serves anything.
    let [port] = pastebin_tests::seaweedfs::free_ports();
    let third = format!("http://127.0.0.1:{port}");
    let mut start = tokio::process::Command::new(pastebin_tests::cluster::testbed_binary());
    start.args(["key-service", "--database-url", &sqlite_url(dir.path(), "k2.db")]);
    start.args(["--listen", &format!("127.0.0.1:{port}"), "--topology", &etcd.topology_url(), "--advertise", &third]);
    let mut shard = Waiting::spawn(start);
    assert!(
        shard.says("waiting for the topology store", Duration::from_secs(60)).await,
        "a start waits for etcd, saying so: {}",
        shard.output()
    );
    assert!(!shard.output().contains("listening"), "it serves nothing on a guess: {}", shard.output());

    // A move waits too, and takes no step.
    let mut ctl = Waiting::spawn(reshard_command(&cluster, &etcd, &move_args("key", &a, &b, HIGH), ""));
    assert!(
        ctl.says("waiting for the topology store", Duration::from_secs(60)).await,
        "a move waits for etcd, saying so: {}",
        ctl.output()
    );
    assert!(ctl.child.try_wait().unwrap().is_none(), "it is still waiting: {}", ctl.output());
    assert_eq!(cluster.key_client(0).describe().await.unwrap().owned, OwnedSlots::Range(SlotRange::ALL));

    etcd.restore_quorum().await;
    let ended = tokio::time::timeout(Duration::from_secs(180), ctl.child.wait()).await.expect("the move ends").unwrap();
    assert!(ended.success() && ctl.output().contains("done: slots 128-255 moved"), "{}", ctl.output());
    assert!(shard.says("listening", Duration::from_secs(120)).await, "the new shard starts: {}", shard.output());
    let topology = authority(&etcd).read(Kind::Key).await.unwrap().topology.unwrap();
    assert_eq!(topology.serving(&third).owned, OwnedSlots::Nothing, "it registered itself, owning nothing");
    let survivors: Vec<Created> = all.into_iter().filter(|created| created.key != deleted.key).collect();
    check_replays_and_reads(&cluster, &survivors).await;
}

/// The first schedule on a P move: the paste target's volume is replaced
/// after the cut-over. It holds the slots (a read of a paste it lost is
/// refused, never "gone"), the source deletes nothing meanwhile, and the
/// rerun copies every row again: each paste reads back as it was, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paste_target_that_forgot_its_copy_holds_the_slots_until_the_rerun_copies_them_again() {
    let etcd = Etcd::single().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster_moving(&etcd, dir.path(), Kind::Paste).await;
    let created = create_some(&cluster, 30).await;
    let (a, b) = (cluster.paste_addresses[0].clone(), cluster.paste_addresses[1].clone());
    let on_source = sqlite_count(dir.path(), "p0.db", "SELECT COUNT(*) FROM pastes").await;

    let (ok, output) = reshard(&cluster, &etcd, &move_args("paste", &a, &b, HIGH), failpoint::AFTER_RELEASE).await;
    assert!(!ok && output.contains("the topology records the cut-over"), "{output}");
    cluster.pastes[1].kill().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(dir.path().join(format!("p1.db{suffix}")));
    }
    cluster.pastes[1].forget_flag("--slots");
    cluster.pastes[1].restart(&[], &["paste-service"]).await;

    let lost = moved(&created);
    assert!(!lost.is_empty(), "some pastes are in the moved slots");
    for lost in lost.into_iter().take(3) {
        let id = serde_json::from_str::<serde_json::Value>(&lost.body).unwrap()["id"].as_str().unwrap().to_owned();
        let read = pastebin_tests::api::get(&cluster.http, &id).await;
        assert!(
            ![StatusCode::NOT_FOUND, StatusCode::GONE, StatusCode::OK].contains(&read.status),
            "a paste the target lost is refused, neither served nor gone: {} {}",
            read.status,
            read.body
        );
    }
    let kept = sqlite_count(dir.path(), "p0.db", "SELECT COUNT(*) FROM pastes").await;
    assert_eq!(kept, on_source, "the source deleted nothing while the target's copy was gone");

    let (ok, output) = reshard(&cluster, &etcd, &move_args("paste", &a, &b, HIGH), "").await;
    assert!(ok && output.contains("forgot its copy since the cut-over: copying it again"), "{output}");
    assert!(output.contains("done: slots 128-255 moved"), "{output}");
    check_replays_and_reads(&cluster, &created).await;
    check_each_create_stored_once(&cluster, &created).await;
}

/// Under the topology the target serves the slots as soon as etcd records
/// the take, before its own take call: it takes no write for them until
/// that call held the lost-commits window the slots bring, so a key of the
/// moved slots is never begun there without being searched for first.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_target_takes_no_write_for_the_slots_before_its_own_take_held_their_window() {
    let etcd = Etcd::single().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = cluster_on(&etcd, dir.path()).await;
    let since = (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339();
    cluster.keys[0].forget_flag("--slots");
    cluster.keys[0].set_flag("--may-have-lost-commits-since", &since);
    cluster.keys[0].restart(&[], &["key-service"]).await;
    let (a, b) = (cluster.key_addresses[0].clone(), cluster.key_addresses[1].clone());

    let (ok, output) = reshard(&cluster, &etcd, &move_args("key", &a, &b, HIGH), failpoint::AFTER_RELEASE).await;
    assert!(!ok && output.contains("the topology records the cut-over"), "{output}");
    let early = cluster.key_client(1).begin(&moving_key(range(HIGH))).await;
    assert!(early.is_err(), "a write before the target's own take is refused (retryable): {early:?}");

    let (ok, output) = reshard(&cluster, &etcd, &move_args("key", &a, &b, HIGH), "").await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");
    match cluster.key_client(1).begin(&moving_key(range(HIGH))).await.unwrap() {
        pastebin_keys::Begun::Inserted(record) => assert!(record.search_first, "searched for first on the target"),
        other => panic!("a new key is inserted: {other:?}"),
    }
}

/// A shard database on PostgreSQL copied aside (`CREATE DATABASE … TEMPLATE`)
/// and later put back in its place: a restore from a backup, or a standby
/// promoted without the commits made since, as the shard sees it.
struct Backup {
    admin: &'static str,
    database: String,
    snapshot: String,
}

impl Backup {
    /// Copies the database at `url` aside; no session may be open on it.
    async fn take(url: &str) -> Backup {
        let admin = pastebin_tests::postgres::server_url().await;
        let database = url.rsplit('/').next().unwrap().split('?').next().unwrap().to_owned();
        let snapshot = format!("{database}_backup");
        let backup = Backup { admin, database, snapshot };
        backup.admin_sql(&format!("DROP DATABASE IF EXISTS \"{}\"", backup.snapshot)).await;
        backup.admin_sql(&format!("CREATE DATABASE \"{}\" TEMPLATE \"{}\"", backup.snapshot, backup.database)).await;
        backup
    }

    /// Puts the copy back in the database's place; every later commit is lost.
    async fn restore(&self) {
        self.admin_sql(&format!("DROP DATABASE \"{}\" WITH (FORCE)", self.database)).await;
        self.admin_sql(&format!("CREATE DATABASE \"{}\" TEMPLATE \"{}\"", self.database, self.snapshot)).await;
    }

    async fn admin_sql(&self, sql: &str) {
        let mut admin = sqlx::PgConnection::connect(self.admin).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
            .execute(&mut admin)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
}

/// Which end of a move forgets.
#[derive(Debug, Clone, Copy)]
enum End {
    Source,
    Target,
}

/// One schedule: the forgetting end's database is backed up when the move
/// has reached `backed_up_at` (a ctl failpoint; `None`: before the move),
/// the move is run on to `restored_at` (`""`: to its end), and the backup is
/// restored under the shard. Each is one of the defects the simulation
/// found, on PostgreSQL (docs/design.md#ownership-on-etcd).
struct Forgets {
    end: End,
    backed_up_at: Option<&'static str>,
    restored_at: &'static str,
}

const SCHEDULES: [Forgets; 4] = [
    // The target forgets its record of the move while it is frozen: the rerun records it again.
    Forgets { end: End::Target, backed_up_at: None, restored_at: failpoint::AFTER_FREEZE },
    // The target forgets its copy after the cut-over: held, copied and verified again.
    Forgets { end: End::Target, backed_up_at: Some(failpoint::AFTER_PREPARE), restored_at: failpoint::AFTER_RELEASE },
    // The source forgets the move after its release: it deletes its copies, the target takes on the topology's record.
    Forgets { end: End::Source, backed_up_at: None, restored_at: failpoint::AFTER_RELEASE },
    // The source is restored to mid-move after the move is done: it serves its grant, its stale copies go.
    Forgets { end: End::Source, backed_up_at: Some(failpoint::AFTER_PREPARE), restored_at: "" },
];

/// Two shards of one kind on PostgreSQL (one owning every slot, one empty)
/// and one of the other kind, under a topology on a real etcd whose first
/// version the test writes; every shard has confirmed its grant.
struct OnPostgres {
    etcd: Etcd,
    cluster: Cluster,
    /// The two shards' database URLs.
    urls: Vec<String>,
    /// The two shards' addresses, as the topology names them.
    addresses: Vec<String>,
    authority: EtcdAuthority,
}

impl OnPostgres {
    async fn start(kind: Kind) -> OnPostgres {
        let etcd = Etcd::single().await;
        let urls = vec![
            pastebin_tests::postgres::fresh_database_url().await,
            pastebin_tests::postgres::fresh_database_url().await,
        ];
        let mut options = ClusterOptions { topology: Some(etcd.topology_url()), ..Default::default() };
        match kind {
            Kind::Key => (options.empty_key_shards, options.key_database_urls) = (1, urls.clone()),
            Kind::Paste => (options.empty_paste_shards, options.paste_database_urls) = (1, urls.clone()),
        }
        let cluster = Cluster::start(options).await;
        let (addresses, other) = match kind {
            Kind::Key => (cluster.key_addresses.clone(), (Kind::Paste, cluster.paste_addresses[0].clone())),
            Kind::Paste => (cluster.paste_addresses.clone(), (Kind::Key, cluster.key_addresses[0].clone())),
        };
        let authority = authority(&etcd);
        let initial = Topology::initial([
            (addresses[0].clone(), OwnedSlots::Range(SlotRange::ALL)),
            (addresses[1].clone(), OwnedSlots::Nothing),
        ])
        .unwrap();
        authority.swap(kind, None, &initial).await.unwrap();
        let all_of_it = Topology::initial([(other.1, OwnedSlots::Range(SlotRange::ALL))]).unwrap();
        authority.swap(other.0, None, &all_of_it).await.unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
        while !(confirmed(&authority, Kind::Key).await && confirmed(&authority, Kind::Paste).await) {
            assert!(tokio::time::Instant::now() < deadline, "every shard confirms its grant");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        OnPostgres { etcd, cluster, urls, addresses, authority }
    }
}

/// The kind's name for `ctl reshard --kind`, and its service's name.
fn names(kind: Kind) -> (&'static str, &'static str) {
    match kind {
        Kind::Key => ("key", "key-service"),
        Kind::Paste => ("paste", "paste-service"),
    }
}

/// Every schedule of [`SCHEDULES`] in turn on two shards of `kind` on
/// PostgreSQL, moving slots 128-255 one way, then back: after each, the
/// same `ctl reshard` finishes the move, the topology and both shards agree,
/// every create replays its 201 byte for byte and is stored exactly once.
async fn moves_survive_a_postgresql_shard_that_forgets(kind: Kind) {
    let OnPostgres { etcd, mut cluster, urls, addresses, authority } = OnPostgres::start(kind).await;
    let (name, part) = names(kind);
    let created = create_some(&cluster, 24).await;

    for (n, schedule) in SCHEDULES.iter().enumerate() {
        let (from, to) = if n % 2 == 0 { (0, 1) } else { (1, 0) };
        let forgets = match schedule.end {
            End::Source => from,
            End::Target => to,
        };
        let what = format!("schedule {n}: the {:?} of a {name} move forgets", schedule.end);
        let args = move_args(name, &addresses[from], &addresses[to], HIGH);
        if let Some(at) = schedule.backed_up_at {
            let (ok, output) = reshard(&cluster, &etcd, &args, at).await;
            assert!(!ok, "{what}: stops at {at}: {output}");
        }
        // The backup: taken with the shard down, as TEMPLATE needs.
        shard(&mut cluster, kind, forgets).kill().await;
        let backup = Backup::take(&urls[forgets]).await;
        shard(&mut cluster, kind, forgets).forget_flag("--slots");
        shard(&mut cluster, kind, forgets).restart(&[], &[part]).await;
        let (ok, output) = reshard(&cluster, &etcd, &args, schedule.restored_at).await;
        assert_eq!(ok, schedule.restored_at.is_empty(), "{what}: {output}");

        shard(&mut cluster, kind, forgets).kill().await;
        backup.restore().await;
        shard(&mut cluster, kind, forgets).restart(&[], &[part]).await;

        let (ok, output) = reshard(&cluster, &etcd, &args, "").await;
        assert!(ok, "{what}: the rerun finishes the move: {output}");
        let topology = authority.read(kind).await.unwrap().topology.unwrap();
        assert!(topology.moving.is_none(), "{what}: the topology records the end: {output}");
        // Shard 0 keeps 0-127 throughout; the slots 128-255 go back and forth.
        let target_owns = OwnedSlots::Range(if to == 1 { range(HIGH) } else { SlotRange::ALL });
        assert_eq!(topology.serving(&addresses[to]).owned, target_owns, "{what}");
        let client_owns = match kind {
            Kind::Key => cluster.key_client(to).describe().await.unwrap().owned,
            Kind::Paste => cluster.paste_client(to).describe().await.unwrap().owned,
        };
        assert_eq!(client_owns, target_owns, "{what}: the target serves the slots");
        check_replays_and_reads(&cluster, &created).await;
        // A restored shard deletes its stale copies once it serves (never serving them meanwhile).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        while rows_on_both(kind, &urls).await > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        check_each_create_stored_once(&cluster, &created).await;
    }
}

/// The `n`th shard of `kind`.
fn shard(cluster: &mut Cluster, kind: Kind, n: usize) -> &mut pastebin_tests::cluster::Process {
    match kind {
        Kind::Key => &mut cluster.keys[n],
        Kind::Paste => &mut cluster.pastes[n],
    }
}

/// How many key rows (K) or live pastes (P) are on both databases at once.
async fn rows_on_both(kind: Kind, urls: &[String]) -> usize {
    let mut rows = Vec::new();
    for url in urls {
        match kind {
            Kind::Key => rows.extend(pastebin_tests::cluster::key_table(url).await.into_iter().map(|row| row.0)),
            Kind::Paste => rows.extend(pastebin_tests::cluster::live_ids(url).await),
        }
    }
    let distinct: std::collections::HashSet<&String> = rows.iter().collect();
    rows.len() - distinct.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn key_moves_survive_a_postgresql_shard_restored_at_each_step() {
    moves_survive_a_postgresql_shard_that_forgets(Kind::Key).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn paste_moves_survive_a_postgresql_shard_restored_at_each_step() {
    moves_survive_a_postgresql_shard_that_forgets(Kind::Paste).await;
}

/// The worst case: a target's PostgreSQL database fails over *under
/// the running shard* to one that forgot the move (a restore; a standby
/// promoted without the last commits) after the target took the slots. The
/// shard finds its server again and, before it serves anything, reads its
/// database again and confirms its marker: the topology shows its copy as
/// not trusted, so it holds the slots and a retry of a key it lost is
/// refused, never made a second paste. The same `ctl reshard` then copies the
/// rows again and every create replays its 201 byte for byte.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_target_whose_postgresql_fails_over_to_a_database_that_forgot_the_take_holds_the_slots() {
    let OnPostgres { etcd, mut cluster, urls, addresses, authority } = OnPostgres::start(Kind::Key).await;
    let created = create_some(&cluster, 24).await;
    let args = move_args("key", &addresses[0], &addresses[1], HIGH);

    // The target's backup, before the move: no record of it, the marker of its start.
    cluster.keys[1].kill().await;
    let backup = Backup::take(&urls[1]).await;
    cluster.keys[1].forget_flag("--slots");
    cluster.keys[1].restart(&[], &["key-service"]).await;
    let (ok, output) = reshard(&cluster, &etcd, &args, failpoint::AFTER_TAKE).await;
    assert!(!ok && output.contains("failpoint reshard_after_take"), "{output}");

    // Under the running target, its database becomes the backup.
    backup.restore().await;

    // Retries of keys the database forgot, while the shard finds out: each
    // refused (the call that meets the other database fails, and the shard
    // serves nothing until it has confirmed itself again) or replayed, never
    // made a second paste.
    let lost = moved(&created);
    assert!(lost.len() >= 3, "some keys are in the moved slots");
    for _round in 0..3 {
        for lost in lost.iter().take(3) {
            let retry = pastebin_tests::api::create(&cluster.http, Some(&lost.key), &lost.content).await.unwrap();
            match retry.status {
                StatusCode::CREATED => {
                    assert_eq!(retry.body, lost.body, "a key the database forgot is never made a second paste")
                }
                status => assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{}", retry.body),
            }
        }
    }
    assert!(
        cluster.keys[1]
            .wait_for_log("confirmed this shard again after its database failed over", Duration::from_secs(60))
            .await,
        "the target confirmed itself again without a restart"
    );
    let key = pastebin_core::IdempotencyKey::parse(&lost[0].key).unwrap();
    let held = cluster.key_client(1).get(&key).await;
    assert!(matches!(&held, Err(error) if error.to_string().contains("held")), "{held:?}");

    let (ok, output) = reshard(&cluster, &etcd, &args, "").await;
    assert!(ok && output.contains("forgot its copy since the cut-over: copying it again"), "{output}");
    let topology = authority.read(Kind::Key).await.unwrap().topology.unwrap();
    assert!(topology.moving.is_none(), "{output}");
    check_replays_and_reads(&cluster, &created).await;
    check_each_create_stored_once(&cluster, &created).await;
}
