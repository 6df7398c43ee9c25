//! How the rest of the deployment lives with slot moves
//! (docs/design.md#moving-slots): recovery goes on for every slot a stopped
//! move has not frozen, and callers follow a move between the shards that
//! answer while an unrelated shard is down, and say once that they did.

use std::time::Duration;

use pastebin_core::{IdempotencyKey, KeyState, ManualClock, SlotRange};
use pastebin_tests::{
    api::{create, new_key},
    cluster::{scalar, Cluster, ClusterOptions},
};

use crate::reshard::{ctl_reshard, move_args};

/// A key whose slot is in `slots`, as a client would send it.
fn key_in(slots: SlotRange) -> pastebin_keys::NewKey {
    loop {
        let new = pastebin_tests::shards::new_key("{\"id\":\"x\"}");
        if slots.contains(new.key.slot()) {
            return new;
        }
    }
}

/// A move stopped right after its freeze holds back the stale pending keys
/// of its own slots only: the sweeper's page holds keys of both, and the
/// others are decided in the same round (K's `ApplyVerdicts` applies them
/// and returns the frozen ones untouched).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_slot_holds_back_only_its_own_stale_keys() {
    a_frozen_slot_holds_back_only_its_own("key").await;
}

/// The same with the move on P: `ResolveBatch` fences the ids of the
/// served slots and leaves the frozen slot's id untouched (no tombstone),
/// where it used to refuse the whole batch and leave both keys pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_frozen_paste_slot_holds_back_only_its_own_stale_keys() {
    a_frozen_slot_holds_back_only_its_own("paste").await;
}

/// Two stale pending keys, one in slots 0-127 and one in 128-255; a move of
/// 128-255 from shard 0 to shard 1 of `kind` stopped after its freeze; one
/// recovery round.
async fn a_frozen_slot_holds_back_only_its_own(kind: &str) {
    let empty = |of: &str| usize::from(kind == of);
    let options =
        ClusterOptions { empty_key_shards: empty("key"), empty_paste_shards: empty("paste"), ..Default::default() };
    let cluster = Cluster::start(options).await;
    let keys = cluster.key_client(0);
    let (served, frozen) = (key_in("0-127".parse().unwrap()), key_in("128-255".parse().unwrap()));
    for new in [&served, &frozen] {
        keys.begin(new).await.unwrap();
    }
    let addresses = if kind == "key" { &cluster.key_addresses } else { &cluster.paste_addresses };
    let failpoint = pastebin_ctl::reshard::failpoint::AFTER_FREEZE;
    let (ok, output) =
        ctl_reshard(&cluster, &move_args(kind, &addresses[0], &addresses[1], "128-255"), failpoint).await;
    assert!(!ok && output.contains(&format!("failpoint {failpoint}")), "{output}");
    assert_eq!(described_frozen(&cluster, kind).await, Some("128-255".parse().unwrap()), "the move stopped frozen");

    cluster.age_pending_keys(Duration::from_secs(120)).await;
    let sweeper = cluster.sweeper(ManualClock::starting_at(chrono::Utc::now())).await;
    let report = sweeper.recover_stale().await;
    // Neither paste was ever written: the fence tombstones the served id,
    // and the verdict for its key is "aborted".
    let state = |new: &pastebin_keys::NewKey| {
        let keys = keys.clone();
        let key = new.key;
        async move { keys.get(&key).await.unwrap().expect("the key is stored").state }
    };
    assert_eq!(state(&served).await, KeyState::Aborted, "the served slot's key is decided: {report:?}");
    assert_eq!(state(&frozen).await, KeyState::Pending, "the frozen slot's key waits for the move: {report:?}");
    if kind == "paste" {
        let fate = cluster.paste_client(0).peek_fate(&frozen.paste_id).await.unwrap();
        assert_eq!(fate, None, "the frozen slot's id is untouched: no tombstone");
    }
}

async fn described_frozen(cluster: &Cluster, kind: &str) -> Option<SlotRange> {
    match kind {
        "key" => cluster.key_client(0).describe().await.unwrap().frozen,
        _ => cluster.paste_client(0).describe().await.unwrap().frozen,
    }
}

/// Each shard is the authority for its own slots: after K0 gave all its
/// slots to K2, the gateway's creates for them reach K2 although K1 (which
/// owns the other half and has nothing to do with the move) is down. Before,
/// a gateway kept its old map while any shard was silent, and every create
/// in the moved slots ended 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn callers_follow_a_move_while_an_unrelated_shard_is_down() {
    let mut cluster = Cluster::start(ClusterOptions { key_shards: 2, empty_key_shards: 1, ..Default::default() }).await;
    cluster.keys[1].kill().await;
    let k = cluster.key_addresses.clone();
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", &k[0], &k[2], "0-127"), "").await;
    assert!(ok && output.contains("done: slots 0-127 moved"), "{output}");

    let moved: SlotRange = "0-127".parse().unwrap();
    let mut created = 0;
    while created < 5 {
        let key = new_key();
        if !moved.contains(IdempotencyKey::parse(&key).unwrap().slot()) {
            continue;
        }
        let answer = create(&cluster.http, Some(&key), "after the move").await.unwrap();
        assert_eq!(answer.status, 201, "a create in a moved slot reaches its new owner: {}", answer.body);
        created += 1;
    }
    let on_k2 =
        scalar(&cluster.key_database_urls[2], "SELECT COUNT(*) FROM idempotency_keys WHERE state = 'done'").await;
    assert_eq!(on_k2, 5, "the creates are on the new owner");
    // The first of them was refused by K0 and followed the move: a create
    // that answered 201 logs no ERROR.
    let logs = cluster.gateway.logs();
    assert!(logs.contains("following it"), "the gateway followed the move: {logs}");
    let errors = cluster.gateway.logged_at("ERROR");
    assert!(errors.is_empty(), "a create that answered 201 logged an error: {errors:#?}");
}

/// A sweeper process says once that its slot map changed after a move, with
/// the shards by address and range, and then stays quiet round after round
/// (docs/operations.md#moving-slots-resharding). Before, it logged the map
/// "discovered again" at INFO every round.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sweeper_logs_a_changed_slot_map_once_not_every_round() {
    let cluster = Cluster::start(ClusterOptions { empty_key_shards: 1, ..Default::default() }).await;
    let sweeper = cluster.start_sweeper(&["--sweep-interval-secs", "1"]).await;
    let admin = format!("http://{}", sweeper.address("admin"));
    let k = cluster.key_addresses.clone();
    rounds_after(&admin, None, 1).await;
    let (ok, output) = ctl_reshard(&cluster, &move_args("key", &k[0], &k[1], "128-255"), "").await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");

    assert!(sweeper.wait_for_log("slot map changed", Duration::from_secs(60)).await, "{}", sweeper.logs());
    let changed =
        || sweeper.logs().lines().filter(|line| line.contains("slot map changed")).map(str::to_owned).collect();
    let lines: Vec<String> = changed();
    assert!(lines[0].contains(&format!("{} 0-127, {} 128-255", k[0], k[1])), "{lines:?}");
    // Three rounds that began after the change was logged.
    rounds_after(&admin, last_round_at(&admin).await, 3).await;
    let lines: Vec<String> = changed();
    assert_eq!(lines.len(), 1, "logged once, not every round: {lines:#?}");
}

/// When the sweeper's latest recorded round ended (its dashboard's status).
async fn last_round_at(admin: &str) -> Option<String> {
    let status: serde_json::Value =
        reqwest::get(format!("{admin}/dashboard/status.json")).await.unwrap().json().await.unwrap();
    status["last_round_at"].as_str().map(str::to_owned)
}

/// Waits until `rounds` more rounds than the one that ended at `after` have
/// ended (the sweeper runs one a second here; polled five times as often).
async fn rounds_after(admin: &str, after: Option<String>, rounds: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    let mut seen = vec![after];
    while seen.len() <= rounds {
        let last = last_round_at(admin).await;
        if !seen.contains(&last) {
            seen.push(last);
        }
        assert!(tokio::time::Instant::now() < deadline, "{rounds} sweeper rounds did not end in time: {seen:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
