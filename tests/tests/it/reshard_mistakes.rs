//! An operator's mistakes during a slot move are faults like a crash
//! (docs/design.md#moving-slots, docs/operations.md#moving-slots): a wrong
//! `--to` or swapped `--from`/`--to` after a crash (even one between the
//! two shards' records of the move) is refused with what the shards have, an abandon that stopped half-way is finished (never turned
//! into a take), two runs of one move end with one owner and every row as
//! of the freeze, a write whose caller gave up is never lost in a move, and
//! a rerun of a finished move says so and exits 0. Between a release and
//! its take, `ctl stats` exits 2: no shard claims the slots.

use std::{path::Path, time::Duration};

use pastebin_core::{OwnedSlots, SlotRange};
use pastebin_ctl::{reshard::failpoint, Exit};
use pastebin_tests::{
    api::{create, new_key},
    cluster::{key_table, scalar, Cluster, ClusterOptions},
    postgres::sqlite_url,
};
use reqwest::StatusCode;

use crate::reshard::{
    check_each_create_stored_once, check_replays_and_reads, create_until_created, ctl_reshard, ctl_reshard_command,
    described, finished, move_args, moving_key, range, Created, HIGH,
};

const KEYS: &str = "SELECT COUNT(*) FROM idempotency_keys";
const MOVES: &str = "SELECT COUNT(*) FROM slot_moves";

async fn create_some(cluster: &Cluster, count: usize) -> Vec<Created> {
    let mut created = Vec::new();
    for n in 0..count {
        let (key, content) = (new_key(), format!("paste {n}"));
        let (body, errors) = create_until_created(&cluster.http, &key, &content).await;
        created.push(Created { key, content, body, errors, took: Duration::ZERO });
    }
    created
}

/// Waits (bounded) until a ctl run held at a `wait:` failpoint reached it.
pub(crate) async fn reached(go: &Path) {
    let (reached, deadline) = (go.with_extension("reached"), tokio::time::Instant::now() + Duration::from_secs(120));
    while !reached.exists() {
        assert!(tokio::time::Instant::now() < deadline, "ctl reaches {}", go.display());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn signal(pid: u32, name: &str) {
    let sent = std::process::Command::new("kill").args(["-s", name, &pid.to_string()]).status().expect("kill runs");
    assert!(sent.success(), "kill -s {name} {pid}");
}

/// The schedule: a run stopped between the release and the take,
/// then a rerun with a typo in `--to`. Refused, naming what the shards
/// have; nothing changed; the right rerun finishes, and every done key
/// replays its byte-identical 201. A swapped `--from`/`--to` is refused
/// too, and a rerun of the finished move says it is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wrong_to_after_a_crash_between_release_and_take_is_refused_and_the_right_rerun_finishes() {
    let cluster = Cluster::start(ClusterOptions { empty_key_shards: 2, ..Default::default() }).await;
    let created = create_some(&cluster, 40).await;
    let k = cluster.key_addresses.clone();
    let (a, b, c) = (&k[0], &k[1], &k[2]);
    let on_source = scalar(&cluster.key_database_urls[0], KEYS).await;
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", a, b, HIGH), failpoint::AFTER_RELEASE).await;
    assert!(!ok && output.contains("failpoint reshard_after_release"), "{output}");
    // Meanwhile every shard answers and none claims the moving slots: the
    // other ctl commands say so, exit 2 (docs/alerts.md#pastebin-ctl).
    let (exit, _, err) = crate::operators::ctl(&cluster, &["stats"]).await;
    assert_eq!(exit, Exit::Usage, "{err}");
    assert!(err.contains("cannot build the slot map: no key shard claims slots 128-255"), "{err}");

    let (ok, output) = ctl_reshard(&cluster, &move_args("key", a, c, HIGH), "").await;
    assert!(!ok, "a typo in --to is refused: {output}");
    assert!(output.contains(&format!("slots 128-255 are being moved from {a} to {b}")), "{output}");
    assert!(output.contains(&format!("not to {c}: rerun with --to {b}, or add --abandon")), "{output}");
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", b, a, HIGH), "").await;
    assert!(!ok && output.contains(&format!("rerun with --from {a} --to {b}")), "swapped: {output}");
    assert_eq!(described(&cluster, "key", 2).await, OwnedSlots::Nothing, "the shard typed by mistake took nothing");
    assert_eq!(scalar(&cluster.key_database_urls[2], KEYS).await, 0);
    assert_eq!(scalar(&cluster.key_database_urls[0], KEYS).await, on_source, "the source deleted nothing");

    let (ok, output) = ctl_reshard(&cluster, &move_args("key", a, b, HIGH), "").await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");
    assert!(output.contains(&format!("moving key slots 128-255 from {a} to {b} (move ")), "{output}");
    assert_eq!(described(&cluster, "key", 1).await, range(HIGH).into());
    let (exit, _, err) = crate::operators::ctl(&cluster, &["stats"]).await;
    assert_eq!(exit, Exit::Ok, "the map is whole again: {err}");
    check_replays_and_reads(&cluster, &created).await;
    check_each_create_stored_once(&cluster, &created).await;

    let (ok, output) = ctl_reshard(&cluster, &move_args("key", a, b, HIGH), "").await;
    assert!(ok && output.contains("is already done on both shards"), "a rerun of a finished move: {output}");
    let (ok, output) = ctl_reshard(&cluster, &["--kind", "key", "--from", a, "--to", b, "--resume"], "").await;
    let said = format!("no move is in progress between {a} and {b}; the last one, move ");
    assert!(ok && output.contains(&said) && output.contains("of slots 128-255 from"), "a --resume after it: {output}");
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", a, c, HIGH), "").await;
    assert!(!ok && !output.contains("already done"), "another --to is not this move: {output}");

    // After a later move between the same shards the first is still known
    // as done: an operator may rerun any command whose answer they lost.
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", a, b, "64-127"), "").await;
    assert!(ok && output.contains("done: slots 64-127 moved"), "{output}");
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", a, b, HIGH), "").await;
    let said = format!("of slots 128-255 from {a} to {b} is already done on both shards");
    assert!(ok && output.contains(&said), "a rerun of the earlier move: {output}");
    // Moved back since, the same command is a new move, not a rerun.
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", b, a, "64-127"), "").await;
    assert!(ok && output.contains("done: slots 64-127 moved"), "{output}");
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", a, b, "64-127"), "").await;
    assert!(ok && output.contains("done: slots 64-127 moved"), "moved again, not 'already done': {output}");
    assert_eq!(described(&cluster, "key", 1).await, range("64-255").into());
    check_replays_and_reads(&cluster, &created).await;
}

/// A run stopped between the two records of the move (the source records
/// it first, then the target), then a rerun with a typo in `--to`: the
/// source's record refuses it, so the typo neither begins a move to the
/// wrong shard nor leaves the first target importing; the right rerun
/// finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wrong_to_after_a_crash_between_the_two_records_is_refused_and_leaves_no_target_importing() {
    let cluster = Cluster::start(ClusterOptions { empty_key_shards: 2, ..Default::default() }).await;
    let created = create_some(&cluster, 20).await;
    let k = cluster.key_addresses.clone();
    let (a, b, c) = (&k[0], &k[1], &k[2]);
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", a, b, HIGH), failpoint::AFTER_SOURCE_RECORDED).await;
    assert!(!ok && output.contains("failpoint reshard_after_source_recorded"), "{output}");

    let (ok, output) = ctl_reshard(&cluster, &move_args("key", a, c, HIGH), "").await;
    assert!(!ok, "a typo in --to is refused: {output}");
    assert!(output.contains(&format!("not to {c}: rerun with --to {b}, or add --abandon")), "{output}");
    for (shard, name) in [(1, "the target"), (2, "the shard typed by mistake")] {
        assert_eq!(scalar(&cluster.key_database_urls[shard], MOVES).await, 0, "{name} recorded no move");
    }

    let (ok, output) = ctl_reshard(&cluster, &move_args("key", a, b, HIGH), "").await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");
    assert_eq!(described(&cluster, "key", 2).await, OwnedSlots::Nothing);
    check_replays_and_reads(&cluster, &created).await;
    check_each_create_stored_once(&cluster, &created).await;
}

/// An abandon whose call to the target fails (the target is down) leaves
/// the source recorded as abandoning; a `--resume` then finishes the
/// abandon, never a take: the source serves every slot again, the target
/// owns nothing and keeps no copy.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_abandon_whose_target_call_fails_is_finished_never_turned_into_a_take() {
    let mut cluster = Cluster::start(ClusterOptions { empty_key_shards: 1, ..Default::default() }).await;
    let mut created = create_some(&cluster, 20).await;
    let k = cluster.key_addresses.clone();
    let args = move_args("key", &k[0], &k[1], HIGH);
    let (ok, output) = ctl_reshard(&cluster, &args, failpoint::AFTER_FREEZE).await;
    assert!(!ok, "{output}");

    let held = tempfile::tempdir().unwrap();
    let go = held.path().join("abandon");
    let abandon = ["--kind", "key", "--from", &k[0], "--to", &k[1], "--abandon"];
    let wait = format!("{}=wait:{}", failpoint::MID_ABANDON, go.display());
    let ctl = ctl_reshard_command(&cluster, &abandon, &wait).spawn().unwrap();
    reached(&go).await;
    cluster.keys[1].kill().await;
    std::fs::write(&go, "").unwrap();
    let (ok, output) = finished(ctl).await;
    assert!(!ok && output.contains("on the target"), "the target's call fails: {output}");
    assert!(cluster.key_client(0).describe().await.unwrap().frozen.is_some(), "nothing undone yet on the source");

    cluster.keys[1].forget_flag("--slots");
    cluster.keys[1].restart(&[], &["key-service"]).await;
    let resume = ["--kind", "key", "--from", &k[0], "--to", &k[1], "--resume"];
    let (ok, output) = ctl_reshard(&cluster, &resume, "").await;
    assert!(ok && output.contains("abandoned"), "the rerun finishes the abandon: {output}");
    assert!(!output.contains("[6/7]"), "never a take: {output}");
    let source = cluster.key_client(0).describe().await.unwrap();
    assert_eq!((source.owned, source.frozen), (SlotRange::ALL.into(), None), "the source serves every slot again");
    assert_eq!(described(&cluster, "key", 1).await, OwnedSlots::Nothing);
    assert_eq!(scalar(&cluster.key_database_urls[1], KEYS).await, 0, "no copy left on the target");
    created.extend(create_some(&cluster, 20).await);
    check_replays_and_reads(&cluster, &created).await;
    check_each_create_stored_once(&cluster, &created).await;
}

/// Two runs of one move: while the first is alive (its heartbeat renews
/// its lease) a second is refused, naming it. Once the first stops
/// answering (stopped with SIGSTOP while it holds an exported page, past
/// its lease), a second takes the move over with a newer epoch; the first,
/// continued, cannot import its stale page: the target ends with every row
/// as of the freeze, and one owner.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_runs_of_one_move_end_with_one_owner_and_every_row_as_of_the_freeze() {
    let cluster = Cluster::start(ClusterOptions { empty_key_shards: 1, ..Default::default() }).await;
    let created = create_some(&cluster, 20).await;
    let held = tempfile::tempdir().unwrap();
    let k = cluster.key_addresses.clone();
    let mut args = move_args("key", &k[0], &k[1], HIGH);
    args.extend(["--lease-secs", "6"]);

    // A second run while the first is alive is refused, naming it.
    let go = held.path().join("alive");
    let first = ctl_reshard_command(&cluster, &args, &format!("{}=wait:{}", failpoint::AFTER_COPY, go.display()))
        .spawn()
        .unwrap();
    let first_pid = first.id().unwrap();
    reached(&go).await;
    let (ok, output) = ctl_reshard(&cluster, &args, "").await;
    assert!(!ok, "{output}");
    assert!(output.contains(&format!("(pid {first_pid}) is still moving these slots")), "{output}");
    std::fs::write(&go, "").unwrap();
    let (ok, output) = finished(first).await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "the first run was not disturbed: {output}");

    // Back the other way, now with a run that stops while it holds a page.
    let late = moving_key(range(HIGH));
    let (keys, pastes) = (cluster.key_client(1), cluster.paste_client(0));
    keys.begin(&late).await.unwrap();
    let mut back = move_args("key", &k[1], &k[0], HIGH);
    back.extend(["--lease-secs", "2"]);
    let go_stale = held.path().join("stale");
    let stale = format!("{}=wait:{}", failpoint::BEFORE_IMPORT, go_stale.display());
    let stale_run = ctl_reshard_command(&cluster, &back, &stale).spawn().unwrap();
    let stale_pid = stale_run.id().unwrap();
    reached(&go_stale).await;
    signal(stale_pid, "STOP");
    // The row it exported changes: the pending key aborts behind its tombstone.
    assert_eq!(pastes.tombstone_unless_live(&late.paste_id).await.unwrap(), pastebin_pastes::IdFate::Tombstoned);
    assert!(keys.abort(&late.key, &late.paste_id).await.unwrap());
    let status = ["--kind", "key", "--from", &k[1], "--to", &k[0], "--status"];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let (_, output) = ctl_reshard(&cluster, &status, "").await;
        if output.matches("run out").count() == 2 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the stopped run's lease runs out: {output}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let go_newer = held.path().join("newer");
    let newer = format!("{}=wait:{}", failpoint::AFTER_RELEASE, go_newer.display());
    let newer_run = ctl_reshard_command(&cluster, &back, &newer).spawn().unwrap();
    reached(&go_newer).await;
    signal(stale_pid, "CONT");
    std::fs::write(&go_stale, "").unwrap();
    let (ok, output) = finished(stale_run).await;
    assert!(!ok && output.contains("took this move over"), "the older run is fenced: {output}");
    std::fs::write(&go_newer, "").unwrap();
    let (ok, output) = finished(newer_run).await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");

    assert_eq!(described(&cluster, "key", 0).await, SlotRange::ALL.into());
    assert_eq!(described(&cluster, "key", 1).await, OwnedSlots::Nothing);
    let rows = key_table(&cluster.key_database_urls[0]).await;
    let row = rows.iter().find(|row| row.0 == late.key.canonical()).expect("the late key moved");
    assert_eq!(row.1, "aborted", "the row as of the freeze, not the stale page's pending");
    check_replays_and_reads(&cluster, &created).await;
}

/// A write whose caller gave up (its deadline passed) while the write was
/// still queued for the database holds its permit until the write is done:
/// the freeze waits for it and the move copies its row. The source is on
/// SQLite with each group commit held 3 s before it begins.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_cancelled_after_its_permit_is_never_lost_in_a_move() {
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        empty_key_shards: 1,
        key_database_urls: vec![sqlite_url(dir.path(), "k0.db")],
        ..Default::default()
    };
    let mut cluster = Cluster::start(options).await;
    let created = create_some(&cluster, 10).await;
    let hold = format!("{}=sleep:3000", pastebin_runtime::failpoints::BEFORE_GROUP_COMMIT);
    cluster.keys[0].restart(&[("PASTEBIN_FAILPOINTS", hold.as_str())], &["key-service"]).await;
    let k = cluster.key_addresses.clone();
    let go = dir.path().join("copied");
    let wait = format!("{}=wait:{}", failpoint::AFTER_COPY, go.display());
    let ctl = ctl_reshard_command(&cluster, &move_args("key", &k[0], &k[1], HIGH), &wait).spawn().unwrap();
    reached(&go).await;

    let new = moving_key(range(HIGH));
    let impatient = cluster.key_client(0).with_deadline(tokio::time::Instant::now() + Duration::from_millis(500));
    assert!(impatient.begin(&new).await.is_err(), "the caller gives up before the write commits");
    std::fs::write(&go, "").unwrap();
    let (ok, output) = finished(ctl).await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");
    cluster.keys[0].forget_flag("--slots");
    cluster.keys[0].restart(&[("PASTEBIN_FAILPOINTS", "")], &["key-service"]).await;

    let keys = |rows: Vec<(String, String, String, i64)>| rows.into_iter().map(|row| row.0).collect::<Vec<_>>();
    assert!(keys(key_table(&cluster.key_database_urls[1]).await).contains(&new.key.canonical()), "the write moved");
    sqlx::any::install_default_drivers();
    let source = sqlx::AnyPool::connect(&cluster.key_database_urls[0]).await.unwrap();
    let left: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM idempotency_keys WHERE key = $1")
        .bind(new.key.canonical())
        .fetch_one(&source)
        .await
        .unwrap();
    assert_eq!(left, 0, "nothing left behind on the source");
    check_replays_and_reads(&cluster, &created).await;
    let answer = create(&cluster.http, Some(&new_key()), "after").await.unwrap();
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
}

/// The lost-commits window belongs to the slots: a K shard started with
/// `--may-have-lost-commits-since` holds it for the slots it owns, and a
/// move hands it to the target with them, so keys of those slots are
/// searched for first there too, though the target was started without the
/// flag (docs/design.md#adopting-after-a-k-loss).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_lost_commits_window_moves_with_its_slots() {
    let mut cluster = Cluster::start(ClusterOptions { empty_key_shards: 1, ..Default::default() }).await;
    let since = (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339();
    cluster.keys[0].forget_flag("--slots");
    cluster.keys[0].set_flag("--may-have-lost-commits-since", &since);
    cluster.keys[0].restart(&[], &["key-service"]).await;
    // Started again with the same flag, it holds the same window (ending a
    // little later): one stored row, not one per start. (A shard serves
    // once its window is stored: an answer to Describe says it is.)
    cluster.key_client(0).describe().await.unwrap();
    cluster.keys[0].restart(&[], &["key-service"]).await;
    cluster.key_client(0).describe().await.unwrap();
    assert_eq!(scalar(&cluster.key_database_urls[0], "SELECT COUNT(*) FROM slot_search_windows").await, 1);
    let k = cluster.key_addresses.clone();
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", &k[0], &k[1], HIGH), "").await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");

    let moved = moving_key(range(HIGH));
    match cluster.key_client(1).begin(&moved).await.unwrap() {
        pastebin_keys::Begun::Inserted(record) => {
            assert!(record.search_first, "a key of the moved slots is searched for first on the target")
        }
        other => panic!("a new key is inserted: {other:?}"),
    }
    // The target restarted still holds the window: it is stored with the slots.
    cluster.keys[1].forget_flag("--slots");
    cluster.keys[1].restart(&[], &["key-service"]).await;
    let again = moving_key(range(HIGH));
    match cluster.key_client(1).begin(&again).await.unwrap() {
        pastebin_keys::Begun::Inserted(record) => assert!(record.search_first, "after a restart too"),
        other => panic!("a new key is inserted: {other:?}"),
    }
}

/// A take whose answer was lost still leaves the window held: the target
/// crashed right after committing its take, and the rerun, whose take is
/// "already done" there, holds the window all the same; it was held before
/// the target served the slots at all (docs/design.md#adopting-after-a-k-loss).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_target_that_crashed_right_after_its_take_holds_the_window_all_the_same() {
    let mut cluster = Cluster::start(ClusterOptions { empty_key_shards: 1, ..Default::default() }).await;
    let since = (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339();
    cluster.keys[0].forget_flag("--slots");
    cluster.keys[0].set_flag("--may-have-lost-commits-since", &since);
    cluster.keys[0].restart(&[], &["key-service"]).await;
    cluster.keys[1]
        .restart(&[("PASTEBIN_FAILPOINTS", pastebin_slots::slot_moves::AFTER_TAKE_COMMIT)], &["key-service"])
        .await;
    let k = cluster.key_addresses.clone();
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", &k[0], &k[1], HIGH), "").await;
    assert!(!ok && output.contains("Take on the target"), "the target died answering its take: {output}");

    cluster.keys[1].forget_flag("--slots");
    cluster.keys[1].restart(&[("PASTEBIN_FAILPOINTS", "")], &["key-service"]).await;
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", &k[0], &k[1], HIGH), "").await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");
    match cluster.key_client(1).begin(&moving_key(range(HIGH))).await.unwrap() {
        pastebin_keys::Begun::Inserted(record) => {
            assert!(record.search_first, "a key of the moved slots is searched for first on the target")
        }
        other => panic!("a new key is inserted: {other:?}"),
    }
}

const UNFINISHED: &str = "SELECT COUNT(*) FROM slot_moves WHERE step NOT IN ('done', 'abandoned')";

/// The source with its Nth move commit answered as lost (the database kept
/// the step; the caller heard an error, as when a server restarts
/// mid-COMMIT), and a key of the moving slots made before the move.
async fn a_source_that_loses_the_answer_of_its_commit(nth: u32) -> (Cluster, Vec<Created>) {
    let mut cluster = Cluster::start(ClusterOptions { empty_key_shards: 1, ..Default::default() }).await;
    let failpoint = format!("{}=fail:{nth}", pastebin_slots::shard_slots::MOVE_STORED_ANSWER_LOST);
    cluster.keys[0].restart(&[("PASTEBIN_FAILPOINTS", failpoint.as_str())], &["key-service"]).await;
    let created = create_some(&cluster, 12).await;
    (cluster, created)
}

/// A step the source committed whose answer was lost: ctl hears an error
/// for a step that took effect. The shard's memory follows its database at
/// once (docs/design.md#moving-slots), so the rerun resumes that same move:
/// nothing records a second one, and nothing unfinished is left behind for
/// a restart to pick.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_prepare_whose_answer_was_lost_is_resumed_by_the_rerun_not_recorded_twice() {
    let (cluster, created) = a_source_that_loses_the_answer_of_its_commit(1).await;
    let k = cluster.key_addresses.clone();
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", &k[0], &k[1], HIGH), "").await;
    assert!(!ok, "the prepare's answer was lost: {output}");
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", &k[0], &k[1], HIGH), "").await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");
    for url in &cluster.key_database_urls[..2] {
        assert_eq!(scalar(url, MOVES).await, 1, "one move, recorded once, on each shard ({url})");
        assert_eq!(scalar(url, UNFINISHED).await, 0, "nothing left unfinished ({url})");
    }
    check_replays_and_reads(&cluster, &created).await;
}

/// A release the source committed whose answer was lost: the source has
/// given the slots up, whatever ctl heard, so `--abandon` is refused as
/// after any release (an abandon would leave the slots with no owner), and
/// the rerun finishes the move; the source, restarted, owns what it kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_release_whose_answer_was_lost_cannot_be_abandoned_and_the_rerun_finishes_it() {
    let (mut cluster, created) = a_source_that_loses_the_answer_of_its_commit(3).await;
    let k = cluster.key_addresses.clone();
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", &k[0], &k[1], HIGH), "").await;
    assert!(!ok && output.contains("Release"), "the release's answer was lost: {output}");
    let abandon = [&move_args("key", &k[0], &k[1], HIGH)[..], &["--abandon"]].concat();
    let (ok, output) = ctl_reshard(&cluster, &abandon, "").await;
    assert!(!ok && output.contains("can no longer be abandoned"), "{output}");
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", &k[0], &k[1], HIGH), "").await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");
    cluster.keys[0].forget_flag("--slots");
    cluster.keys[0].restart(&[("PASTEBIN_FAILPOINTS", "")], &["key-service"]).await;
    assert_eq!(described(&cluster, "key", 0).await, OwnedSlots::Range("0-127".parse().unwrap()));
    assert_eq!(described(&cluster, "key", 1).await, OwnedSlots::Range(range(HIGH)));
    for url in &cluster.key_database_urls[..2] {
        assert_eq!(scalar(url, UNFINISHED).await, 0, "nothing left unfinished ({url})");
    }
    check_replays_and_reads(&cluster, &created).await;
}
