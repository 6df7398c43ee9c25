//! Shards that know their slots (docs/design.md#shard-identity): the range is
//! stored in the shard's database, every call outside it is refused and
//! changes nothing, and clients build the slot map from what the shards say,
//! never from the order of an address list. Also: a resolved key is kept
//! 25 h from its resolution, on K's clock.

use std::{collections::HashMap, process::Output, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use pastebin_core::{IdempotencyKey, KeyState, ManualClock, PasteId, ResponseBody, SlotRange};
use pastebin_keys::NewKey;
use pastebin_objects::{LocalDirStore, ObjectStore};
use pastebin_pastes::IdFate;
use pastebin_proto::{keys::v1 as kpb, pastes::v1 as ppb, shard::v1 as spb};
use pastebin_shards::{Shard, SlotMap};
use pastebin_slots::shard_slots::{Resharding, ShardSlots, SlotClaimError};
use pastebin_tests::{
    api::{create, get, new_key},
    cluster::{gateway_args, run_to_exit, start_shard, Process},
    shards::{
        fresh_pool, fresh_url, key_store, new_paste, paste_store, random_hash, spawn_key_service_owning,
        spawn_paste_service_owning, Backend,
    },
};
use reqwest::StatusCode;
use sqlx::AnyPool;
use tonic::Code;

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_900_000_000_000).unwrap()
}

fn range(text: &str) -> SlotRange {
    text.parse().unwrap()
}

const LOW: &str = "0-127";
const HIGH: &str = "128-255";

/// A fresh key whose slot is in `slots`.
fn key_in(slots: SlotRange) -> IdempotencyKey {
    loop {
        let key = IdempotencyKey::new_random();
        if slots.contains(key.slot()) {
            return key;
        }
    }
}

fn new_key_in(slots: SlotRange) -> NewKey {
    let key = key_in(slots);
    NewKey {
        key,
        request_hash: random_hash(),
        paste_id: PasteId::mint(key.slot()),
        response_body: ResponseBody::new("{\"id\":\"x\"}".into()),
    }
}

/// What a shard started with `--slots asked` on `pool` owns.
async fn claim(
    pool: &AnyPool,
    asked: SlotRange,
    resharding: Resharding,
    now: i64,
) -> Result<SlotRange, SlotClaimError> {
    let slots = ShardSlots::claim(pool, spb::ShardKind::Key, Some(asked.into()), resharding, now).await?;
    Ok(slots.ownership().await.owned.range().expect("a range was asked for"))
}

fn expect_refused<T: std::fmt::Debug>(what: &str, result: Result<tonic::Response<T>, tonic::Status>) {
    match result {
        Ok(reply) => panic!("{what}: expected FAILED_PRECONDITION, got {reply:?}"),
        Err(status) => {
            assert_eq!(status.code(), Code::FailedPrecondition, "{what}: {}", status.message());
            assert!(status.message().contains("owns slots 0-127"), "{what}: {}", status.message());
        }
    }
}

pastebin_tests::both_backends! {
    /// A key finished long after it was created keeps its record 25 h from
    /// the finish, so the client's retry still replays its 201.
    async fn retention_counts_from_resolution_not_creation(backend: Backend) {
        let clock = ManualClock::starting_at(t0());
        let store = key_store(backend, Arc::new(clock.clone())).await;
        let (done, aborted, restarted) = (new_key_in(SlotRange::ALL), new_key_in(SlotRange::ALL), new_key_in(SlotRange::ALL));
        for new in [&done, &aborted, &restarted] {
            store.begin(new).await.unwrap();
        }
        // A 30 h outage, then the keys are resolved.
        clock.advance(Duration::from_secs(30 * 3600));
        assert!(store.mark_done(&done.key, &done.paste_id).await.unwrap());
        assert!(store.abort(&aborted.key, &aborted.paste_id).await.unwrap());
        assert!(store.abort(&restarted.key, &restarted.paste_id).await.unwrap());
        clock.advance(Duration::from_secs(3600));
        let fresh_id = PasteId::mint(restarted.key.slot());
        assert!(store.restart(&restarted.key, &restarted.paste_id, &fresh_id, &restarted.response_body).await.unwrap());
        assert!(store.mark_done(&restarted.key, &fresh_id).await.unwrap());

        let record = store.get(&done.key).await.unwrap().unwrap();
        let resolved_at = t0() + chrono::Duration::hours(30);
        assert_eq!(record.retain_until, resolved_at + chrono::Duration::hours(25));
        // 24 h after the resolution: everything is still there.
        clock.advance(Duration::from_secs(23 * 3600));
        assert_eq!(store.purge_retired(100).await.unwrap(), 0);
        assert_eq!(store.get(&done.key).await.unwrap().unwrap().state, KeyState::Done);
        assert_eq!(store.get(&aborted.key).await.unwrap().unwrap().state, KeyState::Aborted);
        // 25 h after: the first two go; the one resolved an hour later stays an hour more.
        clock.advance(Duration::from_secs(3600));
        assert_eq!(store.purge_retired(100).await.unwrap(), 2);
        assert_eq!(store.get(&restarted.key).await.unwrap().unwrap().state, KeyState::Done);
        clock.advance(Duration::from_secs(3600));
        assert_eq!(store.purge_retired(100).await.unwrap(), 1);
    }

    /// The first start stores the range; a later one with another range is
    /// refused unless it is a deliberate resharding step.
    async fn a_shard_database_keeps_the_range_it_was_first_started_with(backend: Backend) {
        let pool = fresh_pool(backend, &pastebin_pastes::MIGRATIONS, 2).await.pool().clone();
        assert_eq!(claim(&pool, range(LOW), Resharding::Refuse, 1).await.unwrap(), range(LOW));
        assert_eq!(claim(&pool, range(LOW), Resharding::Refuse, 2).await.unwrap(), range(LOW));
        let refused = claim(&pool, SlotRange::ALL, Resharding::Refuse, 3).await.unwrap_err();
        assert!(matches!(refused, SlotClaimError::Mismatch { stored, asked } if stored == range(LOW).into() && asked == SlotRange::ALL.into()));
        assert!(refused.to_string().contains("--reshard"), "{refused}");
        assert_eq!(claim(&pool, range(LOW), Resharding::Refuse, 4).await.unwrap(), range(LOW), "refusal changed nothing");
        assert_eq!(claim(&pool, range(HIGH), Resharding::Allow, 5).await.unwrap(), range(HIGH));
        assert!(claim(&pool, range(LOW), Resharding::Refuse, 6).await.is_err(), "the new range is the stored one");

        let keys = fresh_pool(backend, &pastebin_keys::MIGRATIONS, 2).await.pool().clone();
        assert_eq!(claim(&keys, range(HIGH), Resharding::Refuse, 1).await.unwrap(), range(HIGH));
    }

    /// Every K call that names a key outside the range is FAILED_PRECONDITION
    /// and reads or writes nothing; Describe tells the range.
    async fn a_key_shard_refuses_keys_outside_its_slots_and_changes_nothing(backend: Backend) {
        let store = key_store(backend, Arc::new(ManualClock::starting_at(t0()))).await;
        let (address, client) = spawn_key_service_owning(store.clone(), range(LOW), Default::default()).await;
        let mut raw = kpb::key_service_client::KeyServiceClient::connect(address).await.unwrap();

        let described = raw.describe(spb::DescribeRequest {}).await.unwrap().into_inner();
        assert_eq!((described.kind, described.first_slot, described.last_slot), (spb::ShardKind::Key as i32, 0, 127));
        assert_eq!(described.now_ms, t0().timestamp_millis(), "the shard's own clock");
        assert_eq!(client.describe().await.unwrap().owned, range(LOW).into());

        let outside = new_key_in(range(HIGH));
        let begin = kpb::BeginRequest {
            key: outside.key.canonical(),
            request_hash: outside.request_hash.0.to_vec(),
            paste_id: outside.paste_id.to_string(),
            response_body: b"{}".to_vec(),
        };
        expect_refused("begin", raw.begin(begin).await);
        assert_eq!(store.get(&outside.key).await.unwrap(), None, "a refused begin wrote the key");

        // A record for that key that is in the database anyway (a shard's
        // leftovers after a split) is neither read nor changed.
        store.begin(&outside).await.unwrap();
        let stored = store.get(&outside.key).await.unwrap().unwrap();
        let (k, id) = (outside.key.canonical(), outside.paste_id.to_string());
        let guarded = || kpb::GuardedUpdate { key: k.clone(), paste_id: id.clone() };
        expect_refused("get", raw.get(kpb::GetKeyRequest { key: k.clone() }).await);
        expect_refused("mark_done", raw.mark_done(guarded()).await);
        expect_refused("abort", raw.abort(guarded()).await);
        let fresh = PasteId::mint(outside.key.slot()).to_string();
        let restart = kpb::RestartRequest {
            key: k.clone(),
            aborted_paste_id: id.clone(),
            paste_id: fresh,
            response_body: b"{}".to_vec(),
        };
        expect_refused("restart", raw.restart(restart).await);
        assert_eq!(store.get(&outside.key).await.unwrap().unwrap(), stored, "a refused call changed the key");

        // Keys inside the range work as ever.
        let inside = new_key_in(range(LOW));
        client.begin(&inside).await.unwrap();
        assert!(client.mark_done(&inside.key, &inside.paste_id).await.unwrap());
    }

    /// The same on P; one id outside the range refuses a whole batch, so no
    /// fence goes up for any id in it.
    async fn a_paste_shard_refuses_ids_outside_its_slots_and_changes_nothing(backend: Backend) {
        let store = paste_store(backend, Arc::new(ManualClock::starting_at(t0()))).await;
        let (address, client) = spawn_paste_service_owning(store.clone(), range(LOW), Default::default()).await;
        let mut raw = ppb::paste_service_client::PasteServiceClient::connect(address).await.unwrap();
        assert_eq!(client.describe().await.unwrap().owned, range(LOW).into());
        let described = raw.describe(spb::DescribeRequest {}).await.unwrap().into_inner();
        assert_eq!(described.kind, spb::ShardKind::Paste as i32);

        let id_in = |slots: SlotRange| PasteId::mint(key_in(slots).slot());
        let (outside, inside) = (id_in(range(HIGH)), id_in(range(LOW)));
        let (mut paste, _token) = new_paste(t0(), chrono::Duration::days(1));
        paste.id = outside.clone();
        let insert = ppb::InsertRequest {
            id: outside.to_string(),
            delete_token_sha256: paste.delete_token_hash.0.to_vec(),
            created_at_ms: t0().timestamp_millis(),
            expires_at_ms: (t0() + chrono::Duration::days(1)).timestamp_millis(),
            size: 1,
            content_sha256: vec![0; 32],
            attributes: None,
            ..Default::default()
        };
        expect_refused("insert", raw.insert(insert).await);
        let fence = |id: &PasteId| ppb::TombstoneRequest { id: id.to_string() };
        expect_refused("tombstone_unless_live", raw.tombstone_unless_live(fence(&outside)).await);
        expect_refused("fate", raw.fate(fence(&outside)).await);
        expect_refused("get", raw.get(ppb::GetRequest { id: outside.to_string() }).await);
        let batch = ppb::ResolveBatchRequest { ids: vec![inside.to_string(), outside.to_string()] };
        expect_refused("resolve_batch", raw.resolve_batch(batch).await);
        assert_eq!(store.peek_fate(&outside).await.unwrap(), None, "a refused call wrote a row");
        assert_eq!(store.peek_fate(&inside).await.unwrap(), None, "a refused batch fenced an id inside the range");

        // A live row outside the range (leftovers after a split) is not
        // deleted, nor burned by a read.
        let (mut leftover, token) = new_paste(t0(), chrono::Duration::days(1));
        leftover.id = id_in(range(HIGH));
        leftover.attributes.burn_after_reading = true;
        store.insert(&leftover).await.unwrap();
        let delete = ppb::DeleteRequest { id: leftover.id.to_string(), delete_token: token.expose().to_owned() };
        expect_refused("delete", raw.delete(delete).await);
        expect_refused("claim_burn", raw.claim_burn(ppb::GetRequest { id: leftover.id.to_string() }).await);
        assert_eq!(store.peek_fate(&leftover.id).await.unwrap(), Some(IdFate::Live));

        assert_eq!(client.resolve_batch(std::slice::from_ref(&inside)).await.unwrap().fates, vec![(inside, IdFate::Tombstoned)]);
    }
}

/// A sweeper whose slot map is wrong (the two P shards' ranges swapped, as a
/// map built from list positions would be) meets FAILED_PRECONDITION, and
/// treats it like an unreachable shard: it fences nothing, aborts nothing,
/// reaps nothing.
#[tokio::test]
async fn a_sweeper_with_a_wrong_slot_map_is_refused_and_leaves_everything_alone() {
    let k_clock = ManualClock::starting_at(Utc::now());
    let key_store = key_store(Backend::Sqlite, Arc::new(k_clock.clone())).await;
    let (key_address, keys) = spawn_key_service_owning(key_store.clone(), SlotRange::ALL, Default::default()).await;
    let low_store = paste_store(Backend::Sqlite, Arc::new(pastebin_core::SystemClock)).await;
    let high_store = paste_store(Backend::Sqlite, Arc::new(pastebin_core::SystemClock)).await;
    let (low_address, low) = spawn_paste_service_owning(low_store.clone(), range(LOW), Default::default()).await;
    let (high_address, high) = spawn_paste_service_owning(high_store.clone(), range(HIGH), Default::default()).await;

    // Two stale pending keys in the high slots: one whose paste exists, one without.
    let (committed, orphan) = (new_key_in(range(HIGH)), new_key_in(range(HIGH)));
    for new in [&committed, &orphan] {
        keys.begin(new).await.unwrap();
    }
    let (mut paste, _token) = new_paste(Utc::now(), chrono::Duration::days(1));
    paste.id = committed.paste_id.clone();
    high.insert(&paste).await.unwrap();
    k_clock.advance(Duration::from_secs(120));
    let objects_dir = tempfile::tempdir().unwrap();
    let objects = Arc::new(LocalDirStore::open(objects_dir.path()).unwrap());
    for id in [&committed.paste_id, &orphan.paste_id] {
        objects.put(id.as_str(), bytes::Bytes::from_static(b"content")).await.unwrap();
    }

    let every = Some(SlotRange::ALL.into());
    let wrong = SlotMap::new(
        vec![Shard { address: key_address, slots: every, client: keys.clone(), colocated: false }],
        vec![
            Shard { address: low_address, slots: Some(range(HIGH).into()), client: low, colocated: false },
            Shard { address: high_address, slots: Some(range(LOW).into()), client: high, colocated: false },
        ],
    )
    .unwrap();
    let sweeper_clock = ManualClock::starting_at(Utc::now());
    sweeper_clock.advance(Duration::from_secs(2 * 3600));
    let sweeper = pastebin_sweeper::Sweeper::new(
        wrong,
        objects.clone(),
        Arc::new(sweeper_clock),
        pastebin_sweeper::SweeperSettings::default(),
    );

    let report = sweeper.recover_stale().await;
    assert_eq!((report.examined, report.skipped_unreachable), (2, 2), "{report:?}");
    assert_eq!((report.marked_done, report.aborted), (0, 0), "{report:?}");
    let reap = sweeper.reap_orphan_objects().await;
    assert_eq!(reap.reaped_objects, 0, "{reap:?}");
    assert!(reap.errors > 0, "the refusal is counted: {reap:?}");

    for new in [&committed, &orphan] {
        assert_eq!(key_store.get(&new.key).await.unwrap().unwrap().state, KeyState::Pending);
        assert_eq!(low_store.peek_fate(&new.paste_id).await.unwrap(), None, "the wrong shard got a tombstone");
        assert!(objects.get(new.paste_id.as_str()).await.unwrap().is_some(), "an object was reaped");
    }
    assert_eq!(high_store.peek_fate(&committed.paste_id).await.unwrap(), Some(IdFate::Live));
    assert_eq!(high_store.peek_fate(&orphan.paste_id).await.unwrap(), None);
}

/// In a resharding window the old K shard still holds copies of the moved
/// slots' pending keys, oldest first, mixed into its pages. Recovery leaves
/// those copies alone (never fenced on the other shard's behalf) and still
/// recovers the shard's own stale pendings; `ApplyVerdicts` applies the keys
/// a shard owns and reports the foreign ones instead of refusing the batch.
#[tokio::test]
async fn foreign_copies_on_a_key_shard_never_block_its_own_stale_pendings() {
    let k_clock = ManualClock::starting_at(Utc::now());
    let old_store = key_store(Backend::Sqlite, Arc::new(k_clock.clone())).await;
    let new_store = key_store(Backend::Sqlite, Arc::new(k_clock.clone())).await;
    let (old_address, old) = spawn_key_service_owning(old_store.clone(), range(LOW), Default::default()).await;
    let (new_address, new) = spawn_key_service_owning(new_store.clone(), range(HIGH), Default::default()).await;
    let paste_store = paste_store(Backend::Sqlite, Arc::new(pastebin_core::SystemClock)).await;
    let (paste_address, pastes) =
        spawn_paste_service_owning(paste_store.clone(), SlotRange::ALL, Default::default()).await;

    // The moved slots' pendings, copied to the new owner and still on the old
    // shard; older than the old shard's own, so they lead its first page.
    let moved: Vec<NewKey> = (0..4).map(|_| new_key_in(range(HIGH))).collect();
    for new_key in &moved {
        old_store.begin(new_key).await.unwrap();
        new_store.begin(new_key).await.unwrap();
    }
    k_clock.advance(Duration::from_secs(1));
    let own: Vec<NewKey> = (0..4).map(|_| new_key_in(range(LOW))).collect();
    for new_key in &own {
        old.begin(new_key).await.unwrap();
    }
    // Half of each kind has its paste: both verdict kinds meet a foreign key.
    for new_key in moved.iter().step_by(2).chain(own.iter().step_by(2)) {
        let (mut paste, _token) = new_paste(Utc::now(), chrono::Duration::days(1));
        paste.id = new_key.paste_id.clone();
        pastes.insert(&paste).await.unwrap();
    }
    k_clock.advance(Duration::from_secs(120));

    let map = SlotMap::new(
        vec![
            Shard { address: old_address, slots: Some(range(LOW).into()), client: old.clone(), colocated: false },
            Shard { address: new_address, slots: Some(range(HIGH).into()), client: new.clone(), colocated: false },
        ],
        vec![Shard { address: paste_address, slots: Some(SlotRange::ALL.into()), client: pastes, colocated: false }],
    )
    .unwrap();
    let objects_dir = tempfile::tempdir().unwrap();
    let objects = Arc::new(LocalDirStore::open(objects_dir.path()).unwrap());
    let sweeper = pastebin_sweeper::Sweeper::new(
        map,
        objects,
        Arc::new(pastebin_core::SystemClock),
        pastebin_sweeper::SweeperSettings::default(),
    );
    let report = sweeper.recover_stale().await;
    assert_eq!(report.not_owned, 4, "the old shard's copies are set aside: {report:?}");
    assert_eq!((report.marked_done, report.aborted, report.skipped_unreachable), (4, 4, 0), "{report:?}");
    for (i, new_key) in own.iter().enumerate() {
        let expected = if i % 2 == 0 { KeyState::Done } else { KeyState::Aborted };
        assert_eq!(old_store.get(&new_key.key).await.unwrap().unwrap().state, expected, "own key {i}");
    }
    for (i, new_key) in moved.iter().enumerate() {
        let expected = if i % 2 == 0 { KeyState::Done } else { KeyState::Aborted };
        assert_eq!(new_store.get(&new_key.key).await.unwrap().unwrap().state, expected, "its owner decided it");
        assert_eq!(old_store.get(&new_key.key).await.unwrap().unwrap().state, KeyState::Pending, "a copy was changed");
    }

    // ApplyVerdicts itself: the owned key changes, the foreign copy is
    // reported and untouched.
    let (foreign, mine) = (new_key_in(range(HIGH)), new_key_in(range(LOW)));
    old_store.begin(&foreign).await.unwrap();
    old.begin(&mine).await.unwrap();
    let verdicts = [(foreign.key, foreign.paste_id.clone()), (mine.key, mine.paste_id.clone())];
    let applied = old.apply_verdicts(KeyState::Done, &verdicts).await.unwrap();
    assert_eq!((applied.changed, applied.not_owned), (vec![mine.key], vec![foreign.key]));
    assert_eq!(old_store.get(&foreign.key).await.unwrap().unwrap().state, KeyState::Pending);
}

/// Runs the testbed with `args` until it exits by itself.
fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[tokio::test]
async fn a_paste_shard_restarted_with_other_slots_refuses_to_start_unless_resharding() {
    let url = fresh_url(Backend::Sqlite).await;
    let (mut first, _) = start_shard("paste-service", &url, range(LOW), None, &[]).await;
    first.kill().await;

    let base = ["paste-service", "--database-url", &url, "--listen", "127.0.0.1:0", "--slots", "0-255"];
    let refused = run_to_exit(&base).await;
    assert!(!refused.status.success(), "it started: {}", stderr(&refused));
    let message = stderr(&refused);
    assert!(message.contains("owns slots 0-127") && message.contains("--slots 0-255"), "{message}");
    assert!(message.contains("--reshard"), "the message names the way out: {message}");

    let resharded =
        Process::start(base.iter().chain(&["--reshard"]).map(|a| a.to_string()).collect(), vec![], &["paste-service"])
            .await;
    let client =
        pastebin_pastes::PasteClient::new(pastebin_shards::channel(resharded.address("paste-service"), None).unwrap());
    assert_eq!(client.describe().await.unwrap().owned, SlotRange::ALL.into());
}

/// Starts K and P shards on SQLite owning `key_ranges` and `paste_ranges`;
/// returns the processes and their addresses, in that order.
async fn shards(kind: &str, ranges: &[&str]) -> (Vec<Process>, Vec<String>) {
    let mut processes = Vec::new();
    let mut addresses = Vec::new();
    for slots in ranges {
        let (process, address) = start_shard(kind, &fresh_url(Backend::Sqlite).await, range(slots), None, &[]).await;
        processes.push(process);
        addresses.push(address);
    }
    (processes, addresses)
}

#[tokio::test]
async fn processes_refuse_to_start_on_overlapping_or_missing_slots_naming_them() {
    let objects = tempfile::tempdir().unwrap();
    let (_k, keys) = shards("key-service", &["0-255"]).await;
    let (_p, pastes) = shards("paste-service", &["0-127", "100-255", "0-99", "128-255"]).await;

    let overlap = [pastes[0].clone(), pastes[1].clone()];
    let refused =
        run_to_exit(&gateway_args(&keys, &overlap, objects.path()).iter().map(String::as_str).collect::<Vec<_>>())
            .await;
    assert!(!refused.status.success());
    let expected = format!("paste shards {} and {} both claim slots 100-127", pastes[0], pastes[1]);
    assert!(stderr(&refused).contains(&expected), "{}", stderr(&refused));

    // The sweeper and the operator's CLI refuse the same map, with the same words.
    let (keys_flag, overlap_flag) = (keys.join(","), overlap.join(","));
    let lists = ["--key-shards", keys_flag.as_str(), "--paste-shards", overlap_flag.as_str()];
    let objects_dir = objects.path().to_str().unwrap();
    let sweeper = run_to_exit(&[&["sweeper"], &lists[..], &["--objects-dir", objects_dir]].concat()).await;
    assert!(!sweeper.status.success());
    assert!(stderr(&sweeper).contains(&expected), "{}", stderr(&sweeper));
    let ctl = run_to_exit(&[&["ctl"], &lists[..], &["stats"]].concat()).await;
    assert_eq!(ctl.status.code(), Some(2), "a usage error: {}", stderr(&ctl));
    assert!(stderr(&ctl).contains(&expected), "{}", stderr(&ctl));

    let gap = [pastes[3].clone(), pastes[2].clone()];
    let refused =
        run_to_exit(&gateway_args(&keys, &gap, objects.path()).iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("no paste shard claims slots 100-127"), "{}", stderr(&refused));
}

/// A shard that is down when the gateway starts is waited for, by name: the
/// gateway listens but answers 503 "not ready" instead of routing on a guess,
/// and serves once the shard has said which slots it owns.
#[tokio::test]
async fn a_gateway_waits_for_a_shard_that_is_down_at_start_up() {
    let objects = tempfile::tempdir().unwrap();
    let (_k, keys) = shards("key-service", &["0-255"]).await;
    let (mut p, pastes) = shards("paste-service", &["0-255"]).await;
    p[0].kill().await;

    let gateway = Process::start(gateway_args(&keys, &pastes, objects.path()), vec![], &["gateway-http"]).await;
    let http = format!("http://{}", gateway.address("gateway-http"));
    let key = new_key();
    let early = create(&http, Some(&key), "after the wait").await.unwrap();
    assert_eq!(early.status, StatusCode::SERVICE_UNAVAILABLE, "{}", early.body);
    assert!(early.body.contains("not ready"), "{}", early.body);
    let logs = gateway.logs();
    assert!(logs.contains("waiting for the shard") && logs.contains(&pastes[0]), "{logs}");

    p[0].restart(&[], &["paste-service"]).await;
    for _ in 0..300 {
        let answer = create(&http, Some(&key), "after the wait").await.unwrap();
        if answer.status == StatusCode::CREATED {
            assert!(gateway.logs().contains("slot map ready"), "{}", gateway.logs());
            return;
        }
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{}", answer.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the gateway never became ready: {}", gateway.logs());
}

/// The scenario: two K and two P shards, a gateway with the lists in
/// one order, 20 pastes; then a sweeper (object age floor 1 s) and a second
/// gateway with both lists reversed. Nothing is lost: every paste stays
/// readable on both gateways, and a retry of each key replays its 201.
#[tokio::test]
async fn reversed_shard_lists_lose_nothing() {
    let objects = tempfile::tempdir().unwrap();
    let (_k, keys) = shards("key-service", &[LOW, HIGH]).await;
    let (_p, pastes) = shards("paste-service", &[LOW, HIGH]).await;
    let start_gateway = |keys: Vec<String>, pastes: Vec<String>| {
        let args = gateway_args(&keys, &pastes, objects.path());
        async move {
            let gateway = Process::start(args, vec![], &["gateway-http"]).await;
            (format!("http://{}", gateway.address("gateway-http")), gateway)
        }
    };
    let (first, _first) = start_gateway(keys.clone(), pastes.clone()).await;
    let mut created: HashMap<String, (String, String)> = HashMap::new();
    for i in 0..20 {
        let (key, content) = (new_key(), format!("paste #{i}"));
        let answer = create(&first, Some(&key), &content).await.unwrap();
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        created.insert(key, (content, answer.body));
    }

    let reversed = |list: &[String]| list.iter().rev().cloned().collect::<Vec<_>>();
    let (second, _second) = start_gateway(reversed(&keys), reversed(&pastes)).await;
    let objects_dir = objects.path().to_str().unwrap().to_owned();
    let sweeper_args = [
        "sweeper",
        "--key-shards",
        &reversed(&keys).join(","),
        "--paste-shards",
        &reversed(&pastes).join(","),
        "--objects-dir",
        &objects_dir,
        "--object-age-floor-secs",
        "1",
        "--sweep-interval-secs",
        "1",
        "--reap-interval-secs",
        "1",
        "--admin",
        "127.0.0.1:0",
    ];
    let sweeper = Process::start(sweeper_args.iter().map(|a| a.to_string()).collect(), vec![], &["admin"]).await;
    wait_for_reaper_passes(&format!("http://{}", sweeper.address("admin"))).await;

    for (key, (content, body)) in &created {
        let id = serde_json::from_str::<serde_json::Value>(body).unwrap()["id"].as_str().unwrap().to_owned();
        for gateway in [&first, &second] {
            let read = get(gateway, &id).await;
            assert_eq!(read.status, StatusCode::OK, "{id} on {gateway}: {}", read.body);
            assert_eq!(read.json()["content"], content.as_str());
            let retry = create(gateway, Some(key), content).await.unwrap();
            assert_eq!(retry.status, StatusCode::CREATED);
            assert_eq!(&retry.body, body, "a retry on {gateway} made a second paste");
        }
    }
    let logs = sweeper.logs();
    assert!(!logs.contains("FailedPrecondition") && !logs.contains("not on this shard"), "{logs}");
}

/// Waits until the sweeper has finished rounds for a few seconds after every
/// object passed its 1 s age floor, so several reaper passes have judged them.
async fn wait_for_reaper_passes(admin: &str) {
    let after = Utc::now().timestamp() as f64 + 3.0;
    let last_success = || async {
        let metrics = reqwest::get(format!("{admin}/metrics")).await.ok()?.text().await.ok()?;
        metrics
            .lines()
            .find(|l| l.starts_with("pastebin_sweeper_last_success_timestamp_seconds"))?
            .split_whitespace()
            .last()?
            .parse::<f64>()
            .ok()
    };
    for _ in 0..300 {
        if last_success().await.is_some_and(|at| at >= after) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the sweeper finished no round in 30 s");
}
