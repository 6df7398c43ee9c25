//! The recovery sweeper and the reapers against real processes (K and P
//! shards on PostgreSQL, the gateway on SeaweedFS S3). The sweeper runs in the
//! test process on a `ManualClock`, so "older than an hour" for objects is a
//! clock move, not a wait; "older than a minute" for pending keys is judged
//! by K on its own clock, so those keys are aged in K's database.

use std::time::Duration;

use chrono::Utc;
use pastebin_core::{IdempotencyKey, KeyState, ManualClock, PasteId, RequestHash, ResponseBody};
use pastebin_keys::{KeyClient, NewKey};
use pastebin_pastes::IdFate;
use pastebin_tests::{
    api::{create, get, new_key},
    cluster::{execute, Cluster, ClusterOptions},
};
use reqwest::StatusCode;

const MINUTE_AND_A_BIT: Duration = Duration::from_secs(61);

/// A clock that reads `ahead` later than now.
fn clock_ahead(ahead: Duration) -> ManualClock {
    let clock = ManualClock::starting_at(Utc::now());
    clock.advance(ahead);
    clock
}

async fn key_state(keys: &KeyClient, key: &str) -> Option<(KeyState, PasteId)> {
    let record = keys.get(&IdempotencyKey::parse(key).unwrap()).await.unwrap()?;
    Some((record.state, record.paste_id))
}

/// A sweeper as it runs `ahead` from now. K judges a pending key's age on
/// its own clock, so the pending keys are aged by `ahead` in K's database;
/// the sweeper's own clock, which dates objects for the reaper, reads
/// `ahead` later.
async fn sweeper_later(cluster: &Cluster, ahead: Duration) -> pastebin_sweeper::Sweeper {
    cluster.age_pending_keys(ahead).await;
    cluster.sweeper(clock_ahead(ahead)).await
}

/// Crashes a create at `failpoint`, restarts the gateway clean, and returns the key.
async fn crash_create(cluster: &mut Cluster, failpoint: &str, content: &str) -> String {
    cluster.restart_gateway(failpoint).await;
    let key = new_key();
    assert!(create(&cluster.http, Some(&key), content).await.is_err(), "the gateway died at {failpoint}");
    cluster.restart_gateway("").await;
    key
}

#[tokio::test]
async fn stale_pending_whose_paste_exists_is_marked_done_and_the_retry_gets_the_original() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let key = crash_create(&mut cluster, "before_done", "committed, never marked").await;
    let keys = cluster.key_client(0);
    let stored = keys.get(&IdempotencyKey::parse(&key).unwrap()).await.unwrap().unwrap();
    assert_eq!(stored.state, KeyState::Pending);

    let report = sweeper_later(&cluster, MINUTE_AND_A_BIT).await.recover_stale().await;
    assert_eq!((report.marked_done, report.aborted), (1, 0), "{report:?}");
    assert_eq!(key_state(&keys, &key).await.unwrap().0, KeyState::Done);

    let retry = create(&cluster.http, Some(&key), "committed, never marked").await.unwrap();
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_eq!(retry.body, stored.response_body.expose(), "same id, same delete token");
    assert_eq!(retry.headers["idempotent-replayed"], "true");
    assert_eq!(cluster.live_pastes().await, 1);
}

#[tokio::test]
async fn stale_pending_without_a_paste_is_fenced_aborted_and_restarted_by_the_retry() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let key = crash_create(&mut cluster, "after_put", "never inserted").await;
    let keys = cluster.key_client(0);
    let (_, first_id) = key_state(&keys, &key).await.unwrap();

    let report = sweeper_later(&cluster, MINUTE_AND_A_BIT).await.recover_stale().await;
    assert_eq!((report.marked_done, report.aborted), (0, 1), "{report:?}");
    assert_eq!(key_state(&keys, &key).await.unwrap().0, KeyState::Aborted);
    // The fence is up: the aborted id can never become a paste.
    assert_eq!(cluster.paste_client(0).tombstone_unless_live(&first_id).await.unwrap(), IdFate::Tombstoned);

    let retry = create(&cluster.http, Some(&key), "never inserted").await.unwrap();
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.body);
    let new_id = retry.json()["id"].as_str().unwrap().to_owned();
    assert_ne!(new_id, first_id.to_string());
    assert_eq!(get(&cluster.http, &new_id).await.status, StatusCode::OK);
    assert_eq!(get(&cluster.http, first_id.as_str()).await.status, StatusCode::NOT_FOUND);
    assert_eq!(cluster.live_pastes().await, 1);
}

/// Begins `count` pending keys directly on K (as if their gateways died
/// after step 2), inserting a paste row for every other one.
async fn seed_pendings(cluster: &Cluster, count: usize) -> Vec<(IdempotencyKey, PasteId, bool)> {
    let (keys, pastes) = (cluster.key_client(0), cluster.paste_client(0));
    let mut seeded = Vec::with_capacity(count);
    for start in (0..count).step_by(64) {
        let batch = (start..count.min(start + 64)).map(|i| seed_one(&keys, &pastes, i % 2 == 0));
        seeded.extend(futures::future::join_all(batch).await);
    }
    seeded
}

async fn seed_one(
    keys: &KeyClient,
    pastes: &pastebin_pastes::PasteClient,
    with_paste: bool,
) -> (IdempotencyKey, PasteId, bool) {
    let key = IdempotencyKey::new_random();
    let paste_id = PasteId::mint(key.slot());
    let new = NewKey {
        key,
        request_hash: RequestHash([7; 32]),
        paste_id: paste_id.clone(),
        response_body: ResponseBody::new("{}".into()),
    };
    keys.begin(&new).await.unwrap();
    if with_paste {
        // A day-long paste row under the key's paste id.
        let (mut paste, _token) = pastebin_tests::shards::new_paste(Utc::now(), chrono::Duration::days(1));
        paste.id = paste_id.clone();
        pastes.insert(&paste).await.unwrap();
    }
    (key, paste_id, with_paste)
}

#[tokio::test]
async fn paste_service_down_means_nothing_is_aborted_and_everything_resolves_when_it_is_back() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let seeded = seed_pendings(&cluster, 40).await;
    cluster.pastes[0].kill().await;

    let sweeper = sweeper_later(&cluster, MINUTE_AND_A_BIT).await;
    let blind = sweeper.recover_stale().await;
    assert_eq!(blind.skipped_unreachable, 40, "{blind:?}");
    assert_eq!((blind.marked_done, blind.aborted), (0, 0), "never abort what cannot be seen");
    let stats = cluster.key_client(0).pending_stats().await.unwrap();
    assert_eq!(stats.pending, 40);

    cluster.pastes[0].restart(&[], &["paste-service"]).await;
    let back = sweeper.recover_stale().await;
    assert_eq!((back.marked_done, back.aborted, back.skipped_unreachable), (20, 20, 0), "{back:?}");
    let keys = cluster.key_client(0);
    for (key, _, with_paste) in &seeded {
        let state = key_state(&keys, &key.canonical()).await.unwrap().0;
        assert_eq!(state, if *with_paste { KeyState::Done } else { KeyState::Aborted });
    }
}

#[tokio::test]
async fn pending_younger_than_the_threshold_is_untouched() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    seed_pendings(&cluster, 6).await;
    let report = sweeper_later(&cluster, Duration::from_secs(30)).await.recover_stale().await;
    assert_eq!(report.examined, 0, "{report:?}");
    assert_eq!(cluster.key_client(0).pending_stats().await.unwrap().pending, 6);
    // The same keys a minute later are recovered: the check above could fail.
    let later = sweeper_later(&cluster, MINUTE_AND_A_BIT).await.recover_stale().await;
    assert_eq!(later.marked_done + later.aborted, 6);
}

#[tokio::test]
async fn two_sweepers_over_two_thousand_stale_pendings_resolve_each_key_once() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let seeded = seed_pendings(&cluster, 2000).await;
    // Each call's deadline is the test's own: on a saturated machine a page
    // of 500 may take longer than a deployment's 5 s, and a timed-out call
    // would count as unreachable, not as what this test is about.
    cluster.age_pending_keys(MINUTE_AND_A_BIT).await;
    let patient = || {
        let settings =
            pastebin_sweeper::SweeperSettings { call_timeout: Duration::from_secs(120), ..Default::default() };
        cluster.sweeper_with(clock_ahead(MINUTE_AND_A_BIT), settings)
    };
    let (one, two) = (patient().await, patient().await);
    let (a, b) = tokio::join!(one.recover_stale(), two.recover_stale());
    assert_eq!(a.marked_done + b.marked_done, 1000, "{a:?} {b:?}");
    assert_eq!(a.aborted + b.aborted, 1000, "{a:?} {b:?}");
    assert_eq!(a.skipped_unreachable + b.skipped_unreachable, 0);
    let keys = cluster.key_client(0);
    let pastes = cluster.paste_client(0);
    for (key, paste_id, with_paste) in seeded.iter().step_by(7) {
        let state = key_state(&keys, &key.canonical()).await.unwrap().0;
        let fate = pastes.tombstone_unless_live(paste_id).await.unwrap();
        if *with_paste {
            assert_eq!((state, fate), (KeyState::Done, IdFate::Live));
        } else {
            assert_eq!((state, fate), (KeyState::Aborted, IdFate::Tombstoned));
        }
    }
    assert_eq!(keys.pending_stats().await.unwrap().pending, 0);
    assert_eq!(cluster.live_pastes().await, 1000);
}

/// The race the tombstone exists for. The gateway is held at `failpoint`
/// while a sweeper (a minute ahead) decides the key; then the gateway goes
/// on. Whatever the order, one key ends with exactly one paste.
async fn gateway_and_sweeper_race(failpoint: &str, expected: KeyState) {
    let cluster =
        Cluster::start(ClusterOptions { failpoints: Some(format!("{failpoint}=sleep:1200")), ..Default::default() })
            .await;
    let key = new_key();
    let http = cluster.http.clone();
    let racing = tokio::spawn({
        let key = key.clone();
        async move { create(&http, Some(&key), "raced").await.unwrap() }
    });
    let keys = cluster.key_client(0);
    // Wait until the gateway is parked at the failpoint: the key is begun,
    // and, when it is held before done, its paste row has landed on P.
    let pastes = cluster.paste_client(0);
    loop {
        if let Some((_, paste_id)) = key_state(&keys, &key).await {
            let landed = pastes.get(&paste_id).await.unwrap().is_some();
            if expected == KeyState::Aborted || landed {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let decided = sweeper_later(&cluster, MINUTE_AND_A_BIT).await.recover_stale().await;
    let (state, paste_id) = key_state(&keys, &key).await.unwrap();
    assert_eq!(state, expected, "{failpoint}: {decided:?}");

    let answer = racing.await.unwrap();
    let fate = cluster.paste_client(0).tombstone_unless_live(&paste_id).await.unwrap();
    let (final_state, _) = key_state(&keys, &key).await.unwrap();
    match final_state {
        KeyState::Done => assert_eq!(fate, IdFate::Live, "never a done key without a paste"),
        KeyState::Aborted => assert_eq!(fate, IdFate::Tombstoned, "never an aborted key with a live paste"),
        KeyState::Pending => panic!("the key was decided"),
    }
    if answer.status == StatusCode::CREATED {
        assert_eq!(answer.json()["id"], paste_id.to_string());
    } else {
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        // The client's retry restarts the aborted key with a new id.
        let retry = create(&cluster.http, Some(&key), "raced").await.unwrap();
        assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.body);
    }
    assert_eq!(cluster.live_pastes().await, 1, "never two pastes");
}

#[tokio::test]
async fn sweeper_aborts_before_the_held_insert_lands() {
    gateway_and_sweeper_race("after_put", KeyState::Aborted).await;
}

#[tokio::test]
async fn sweeper_finishes_after_the_insert_landed_but_before_done() {
    gateway_and_sweeper_race("before_done", KeyState::Done).await;
}

#[tokio::test]
async fn retention_removes_done_and_aborted_keys_after_25_hours_never_pending() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let done_key = new_key();
    let first = create(&cluster.http, Some(&done_key), "kept 25 hours").await.unwrap();
    let aborted_key = crash_create(&mut cluster, "after_put", "aborted").await;
    sweeper_later(&cluster, MINUTE_AND_A_BIT).await.recover_stale().await;
    let keys = cluster.key_client(0);
    assert_eq!(key_state(&keys, &aborted_key).await.unwrap().0, KeyState::Aborted);
    // Two pending keys created after that recovery: one from a crashed
    // gateway, one begun directly.
    let pending_key = crash_create(&mut cluster, "after_k_begin", "pending forever").await;
    seed_pendings(&cluster, 1).await;

    // Not yet: nothing is retired inside the window.
    let sweeper = sweeper_later(&cluster, MINUTE_AND_A_BIT).await;
    assert_eq!(sweeper.retire_keys().await, 0);

    // 26 hours pass for every key on K (K keeps its own clock, so the rows age instead).
    let day = 26 * 3600 * 1000;
    execute(
        &cluster.key_database_urls[0],
        &format!("UPDATE idempotency_keys SET created_at = created_at - {day}, retain_until = retain_until - {day} WHERE key <> $1"),
        "",
    )
    .await;
    assert_eq!(sweeper.retire_keys().await, 2, "the done and the aborted key");
    assert!(key_state(&keys, &done_key).await.is_none());
    assert!(key_state(&keys, &aborted_key).await.is_none());
    assert_eq!(key_state(&keys, &pending_key).await.unwrap().0, KeyState::Pending);
    assert_eq!(keys.pending_stats().await.unwrap().pending, 1 + 1, "pending keys are never retired");

    // After the window a retry with the same key is a new paste, by contract.
    let again = create(&cluster.http, Some(&done_key), "kept 25 hours").await.unwrap();
    assert_eq!(again.status, StatusCode::CREATED);
    assert_ne!(again.json()["id"], first.json()["id"]);
}

#[tokio::test]
async fn orphan_objects_are_reaped_only_after_the_age_floor_and_behind_a_tombstone() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let live = create(&cluster.http, Some(&new_key()), "a live paste").await.unwrap();
    let live_id = live.json()["id"].as_str().unwrap().to_owned();
    let orphan_key = crash_create(&mut cluster, "after_put", "orphaned bytes").await;
    let (_, orphan_id) = key_state(&cluster.key_client(0), &orphan_key).await.unwrap();
    let objects = cluster.object_store().await;
    assert!(objects.get(orphan_id.as_str()).await.unwrap().is_some());

    // Younger than the age floor (1 h): kept, and no tombstone was made for it.
    let young = sweeper_later(&cluster, Duration::from_secs(30 * 60)).await.reap_orphan_objects().await;
    assert_eq!(young.reaped_objects, 0);
    assert!(objects.get(orphan_id.as_str()).await.unwrap().is_some());

    // Past the floor: fenced, then reaped. The live paste's object is untouched.
    let old = sweeper_later(&cluster, Duration::from_secs(2 * 3600)).await.reap_orphan_objects().await;
    assert_eq!(old.reaped_objects, 1, "{old:?}");
    assert!(objects.get(orphan_id.as_str()).await.unwrap().is_none());
    assert_eq!(cluster.paste_client(0).tombstone_unless_live(&orphan_id).await.unwrap(), IdFate::Tombstoned);
    assert_eq!(get(&cluster.http, &live_id).await.json()["content"], "a live paste");

    // The retry of the orphan's key: its id is dead, so it restarts with a new one.
    sweeper_later(&cluster, MINUTE_AND_A_BIT).await.recover_stale().await;
    let retry = create(&cluster.http, Some(&orphan_key), "orphaned bytes").await.unwrap();
    assert_eq!(retry.status, StatusCode::CREATED);
    assert_ne!(retry.json()["id"], orphan_id.to_string());
    assert_eq!(cluster.live_pastes().await, 2);
}

/// An unsafe failover of P loses a paste row whose key is done (the client
/// holds its 201): the object is the only copy left. Neither the object
/// reaper nor recovery may fence that id or reap its object
/// (docs/design.md#never-amplify-a-loss), however old it is.
#[tokio::test]
async fn a_lost_paste_row_whose_key_is_done_is_never_fenced_nor_reaped() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let key = new_key();
    let answer = create(&cluster.http, Some(&key), "the only copy is the object").await.unwrap();
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    let id = PasteId::parse(answer.json()["id"].as_str().unwrap()).unwrap();
    assert_eq!(execute(&cluster.paste_database_urls[0], "DELETE FROM pastes WHERE id = $1", id.as_str()).await, 1);
    let orphan_key = IdempotencyKey::new_random();
    let orphan_id = PasteId::mint(orphan_key.slot());
    let objects = cluster.object_store().await;
    objects.put(orphan_id.as_str(), bytes::Bytes::from_static(b"no key names these bytes")).await.unwrap();
    // A pending key naming the same id (as a stale copy of the key would):
    // recovery meets the lost id too.
    let twin = loop {
        let twin = IdempotencyKey::new_random();
        if twin.slot() == id.slot() {
            break twin;
        }
    };
    let pending = NewKey {
        key: twin,
        request_hash: RequestHash([9; 32]),
        paste_id: id.clone(),
        response_body: ResponseBody::new("{}".into()),
    };
    let keys = cluster.key_client(0);
    keys.begin(&pending).await.unwrap();

    let sweeper = sweeper_later(&cluster, Duration::from_secs(2 * 3600)).await;
    let recovery = sweeper.recover_stale().await;
    assert_eq!((recovery.marked_done, recovery.aborted), (0, 0), "{recovery:?}");
    assert_eq!(key_state(&keys, &twin.canonical()).await.unwrap().0, KeyState::Pending);
    let reap = sweeper.reap_orphan_objects().await;
    assert_eq!((reap.reaped_objects, reap.lost_pastes_spared), (1, 1), "only the true orphan goes: {reap:?}");
    assert!(objects.get(id.as_str()).await.unwrap().is_some(), "the lost paste's object was reaped");
    assert!(objects.get(orphan_id.as_str()).await.unwrap().is_none());
    let pastes = cluster.paste_client(0);
    assert_eq!(pastes.peek_fate(&id).await.unwrap(), None, "a tombstone would fence the repair");
    assert_eq!(pastes.peek_fate(&orphan_id).await.unwrap(), Some(IdFate::Tombstoned));
    assert_eq!(key_state(&keys, &key).await.unwrap().0, KeyState::Done);
}

#[tokio::test]
async fn expired_pastes_are_purged_with_their_objects() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let answer = create(&cluster.http, Some(&new_key()), "short-lived").await.unwrap();
    let id = answer.json()["id"].as_str().unwrap().to_owned();
    let keep = create(&cluster.http, Some(&new_key()), "long-lived").await.unwrap();
    execute(&cluster.paste_database_urls[0], "UPDATE pastes SET expires_at = 0 WHERE id = $1", &id).await;
    let sweeper = sweeper_later(&cluster, Duration::ZERO).await;
    assert_eq!(sweeper.purge_expired_pastes().await, 1);
    let objects = cluster.object_store().await;
    assert!(objects.get(&id).await.unwrap().is_none());
    assert_eq!(get(&cluster.http, &id).await.status, StatusCode::NOT_FOUND);
    assert_eq!(get(&cluster.http, keep.json()["id"].as_str().unwrap()).await.status, StatusCode::OK);
    assert_eq!(cluster.live_pastes().await, 1);
}

#[tokio::test]
async fn the_running_sweeper_recovers_on_its_own_and_stops_on_shutdown() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    seed_pendings(&cluster, 10).await;
    let settings = pastebin_sweeper::SweeperSettings {
        interval: Duration::from_millis(50),
        reap_interval: Duration::from_millis(50),
        ..Default::default()
    };
    cluster.age_pending_keys(MINUTE_AND_A_BIT).await;
    let sweeper = pastebin_sweeper::Sweeper::new(
        cluster.slot_map(),
        cluster.object_store().await,
        std::sync::Arc::new(clock_ahead(MINUTE_AND_A_BIT)),
        settings,
    );
    let mut reports = Vec::new();
    let shutdown = tokio::time::sleep(Duration::from_millis(1500));
    tokio::time::timeout(Duration::from_secs(10), sweeper.run_with(shutdown, |report| reports.push(*report)))
        .await
        .expect("run_with returns once shutdown resolves");
    let resolved: u64 = reports.iter().map(|r| r.recovery.marked_done + r.recovery.aborted).sum();
    assert_eq!(resolved, 10, "every stale pending resolved exactly once across rounds");
    assert!(reports.len() > 2, "rounds and reaper passes both report: {}", reports.len());
    assert_eq!(cluster.key_client(0).pending_stats().await.unwrap().pending, 0);
}

#[tokio::test]
async fn old_tombstones_are_purged_by_the_sweeper_and_p_refuses_a_short_retention() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let orphan_key = crash_create(&mut cluster, "after_put", "aborted, then forgotten").await;
    let sweeper = sweeper_later(&cluster, MINUTE_AND_A_BIT).await;
    sweeper.recover_stale().await;
    let (_, dead_id) = key_state(&cluster.key_client(0), &orphan_key).await.unwrap();
    let live = create(&cluster.http, Some(&new_key()), "stays").await.unwrap();
    let tombstones = "SELECT COUNT(*) FROM pastes WHERE state = 'tombstoned'";
    assert_eq!(pastebin_tests::cluster::scalar(&cluster.paste_database_urls[0], tombstones).await, 1);

    // Fresh tombstones stay: P keeps its own clock and the 7-day default.
    assert_eq!(sweeper.purge_tombstones().await, 0);
    // Eight days pass for the rows on P.
    let days = 8 * 24 * 3600 * 1000;
    execute(
        &cluster.paste_database_urls[0],
        &format!("UPDATE pastes SET tombstoned_at = tombstoned_at - {days} WHERE state = 'tombstoned' AND id = $1"),
        dead_id.as_str(),
    )
    .await;
    assert_eq!(sweeper.purge_tombstones().await, 1);
    assert_eq!(pastebin_tests::cluster::scalar(&cluster.paste_database_urls[0], tombstones).await, 0);
    assert_eq!(get(&cluster.http, live.json()["id"].as_str().unwrap()).await.status, StatusCode::OK);

    // P refuses to purge anything younger than 26 h, whatever a caller asks.
    let refused = cluster.paste_client(0).purge_tombstones(Duration::from_secs(3600), 10).await;
    assert!(matches!(refused, Err(pastebin_runtime::grpc::CallError::Refused(_))), "{refused:?}");
}

#[tokio::test]
async fn a_dry_run_recover_predicts_the_real_one_and_writes_nothing() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let seeded = seed_pendings(&cluster, 2).await;
    let (with_paste, without_paste) = (&seeded[0], &seeded[1]);
    assert!(with_paste.2 && !without_paste.2);
    // The paste has expired but is not purged yet: the fence still sees it live.
    execute(&cluster.paste_database_urls[0], "UPDATE pastes SET expires_at = 0 WHERE id = $1", with_paste.1.as_str())
        .await;
    let sweeper = sweeper_later(&cluster, MINUTE_AND_A_BIT).await;
    let pastes = cluster.paste_client(0);

    assert_eq!(sweeper.recover_key(&with_paste.0, true).await, pastebin_sweeper::Decision::MarkedDone);
    assert_eq!(sweeper.recover_key(&without_paste.0, true).await, pastebin_sweeper::Decision::Aborted);
    assert_eq!(pastes.peek_fate(&without_paste.1).await.unwrap(), None, "a dry run writes no tombstone");
    assert_eq!(cluster.key_client(0).pending_stats().await.unwrap().pending, 2, "and changes no key");

    assert_eq!(sweeper.recover_key(&with_paste.0, false).await, pastebin_sweeper::Decision::MarkedDone);
    assert_eq!(sweeper.recover_key(&without_paste.0, false).await, pastebin_sweeper::Decision::Aborted);
    assert_eq!(pastes.peek_fate(&without_paste.1).await.unwrap(), Some(IdFate::Tombstoned));
}
