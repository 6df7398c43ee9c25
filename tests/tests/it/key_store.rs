//! Shard K's storage: every `KeyStore` behaviour, with the same bodies on PostgreSQL
//! and SQLite. Time is a `ManualClock`, never a sleep.

use std::{collections::HashSet, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use pastebin_core::{Clock, IdempotencyKey, KeyState, LostCommits, ManualClock, PasteId, ResponseBody, KEY_RETENTION};
use pastebin_keys::{Adopted, Begun, KeyRecord, KeyStore, NewKey};
use pastebin_proto::keys::v1 as pb;
use pastebin_tests::shards::{key_store, new_key, random_hash, spawn_key_service, Backend};
use prost::Message;

/// A millisecond-aligned instant: the shards store milliseconds.
fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_900_000_000_000).unwrap()
}

fn retention() -> chrono::Duration {
    chrono::Duration::from_std(KEY_RETENTION).unwrap()
}

async fn store_at_t0(backend: Backend) -> (KeyStore, ManualClock) {
    let clock = ManualClock::starting_at(t0());
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    (key_store(backend, shared).await, clock)
}

async fn begin_inserted(store: &KeyStore, new: &NewKey) -> KeyRecord {
    match store.begin(new).await.expect("begin") {
        Begun::Inserted(record) => record,
        Begun::Existing(record) => panic!("expected a new key, found {record:?}"),
    }
}

async fn state_of(store: &KeyStore, key: &IdempotencyKey) -> KeyState {
    store.get(key).await.expect("get").expect("the key exists").state
}

/// Drives a new key to `state` through the store's own transitions.
async fn key_in_state(store: &KeyStore, state: KeyState) -> NewKey {
    let new = new_key("{\"id\":\"x\"}");
    begin_inserted(store, &new).await;
    match state {
        KeyState::Pending => {}
        KeyState::Done => assert!(store.mark_done(&new.key, &new.paste_id).await.unwrap()),
        KeyState::Aborted => assert!(store.abort(&new.key, &new.paste_id).await.unwrap()),
    }
    assert_eq!(state_of(store, &new.key).await, state);
    new
}

pastebin_tests::both_backends! {
    async fn begin_inserts_a_pending_key_kept_for_25_hours(backend: Backend) {
        let (store, _clock) = store_at_t0(backend).await;
        let new = new_key("{\"id\":\"first\"}");

        let record = begin_inserted(&store, &new).await;
        let expected = KeyRecord {
            key: new.key,
            request_hash: new.request_hash,
            paste_id: new.paste_id.clone(),
            state: KeyState::Pending,
            response_body: new.response_body.clone(),
            created_at: t0(),
            retain_until: t0() + chrono::Duration::hours(25),
            search_first: false,
        };
        assert_eq!(record, expected);
        assert_eq!(store.get(&new.key).await.unwrap(), Some(expected), "the stored row is what begin returned");
    }

    async fn begin_again_returns_the_stored_record_unchanged(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let first = new_key("{\"id\":\"first\",\"delete_token\":\"a\"}");
        let stored = begin_inserted(&store, &first).await;

        clock.advance(Duration::from_secs(5));
        // Same key, everything else different: a retry never overwrites, it reads.
        let second = NewKey {
            key: first.key,
            request_hash: random_hash(),
            paste_id: PasteId::mint(first.key.slot()),
            response_body: ResponseBody::new("{\"id\":\"second\"}".into()),
        };
        assert_ne!(second.paste_id, first.paste_id);
        match store.begin(&second).await.unwrap() {
            Begun::Existing(found) => {
                assert_eq!(found, stored);
                assert_eq!(found.request_hash, first.request_hash);
                assert_eq!(found.paste_id, first.paste_id);
                assert_eq!(found.response_body, first.response_body);
                assert_eq!(found.created_at, t0());
            }
            Begun::Inserted(record) => panic!("a second begin inserted again: {record:?}"),
        }
        // The same request again is also Existing.
        assert!(matches!(store.begin(&first).await.unwrap(), Begun::Existing(found) if found == stored));
        assert_eq!(store.get(&first.key).await.unwrap(), Some(stored));

        // A done key is returned as done, still unchanged.
        assert!(store.mark_done(&first.key, &first.paste_id).await.unwrap());
        match store.begin(&second).await.unwrap() {
            Begun::Existing(found) => {
                assert_eq!(found.state, KeyState::Done);
                assert_eq!(found.paste_id, first.paste_id);
                assert_eq!(found.response_body, first.response_body);
            }
            Begun::Inserted(record) => panic!("begin on a done key inserted: {record:?}"),
        }
    }

    async fn get_of_an_absent_key_is_none(backend: Backend) {
        let (store, _clock) = store_at_t0(backend).await;
        assert_eq!(store.get(&IdempotencyKey::new_random()).await.unwrap(), None);
        let present = key_in_state(&store, KeyState::Pending).await;
        assert!(store.get(&present.key).await.unwrap().is_some());
        assert_eq!(store.get(&IdempotencyKey::new_random()).await.unwrap(), None);
    }

    async fn mark_done_changes_a_pending_key_once_and_only_with_its_paste_id(backend: Backend) {
        let (store, _clock) = store_at_t0(backend).await;
        let new = key_in_state(&store, KeyState::Pending).await;
        let other_id = PasteId::mint(new.key.slot());

        assert!(!store.mark_done(&new.key, &other_id).await.unwrap(), "wrong paste id");
        assert_eq!(state_of(&store, &new.key).await, KeyState::Pending);

        assert!(store.mark_done(&new.key, &new.paste_id).await.unwrap());
        assert_eq!(state_of(&store, &new.key).await, KeyState::Done);
        assert!(!store.mark_done(&new.key, &new.paste_id).await.unwrap(), "second mark_done");
        assert!(!store.abort(&new.key, &new.paste_id).await.unwrap(), "abort from done");
        assert_eq!(state_of(&store, &new.key).await, KeyState::Done);

        let aborted = key_in_state(&store, KeyState::Aborted).await;
        assert!(!store.mark_done(&aborted.key, &aborted.paste_id).await.unwrap(), "mark_done from aborted");
        assert_eq!(state_of(&store, &aborted.key).await, KeyState::Aborted);

        assert!(!store.mark_done(&IdempotencyKey::new_random(), &new.paste_id).await.unwrap(), "absent key");
    }

    async fn abort_changes_a_pending_key_once_and_only_with_its_paste_id(backend: Backend) {
        let (store, _clock) = store_at_t0(backend).await;
        let new = key_in_state(&store, KeyState::Pending).await;
        let other_id = PasteId::mint(new.key.slot());

        assert!(!store.abort(&new.key, &other_id).await.unwrap(), "wrong paste id");
        assert_eq!(state_of(&store, &new.key).await, KeyState::Pending);

        assert!(store.abort(&new.key, &new.paste_id).await.unwrap());
        assert_eq!(state_of(&store, &new.key).await, KeyState::Aborted);
        assert!(!store.abort(&new.key, &new.paste_id).await.unwrap(), "second abort");
        assert_eq!(state_of(&store, &new.key).await, KeyState::Aborted);

        let done = key_in_state(&store, KeyState::Done).await;
        assert!(!store.abort(&done.key, &done.paste_id).await.unwrap(), "abort from done");
        assert_eq!(state_of(&store, &done.key).await, KeyState::Done);

        assert!(!store.abort(&IdempotencyKey::new_random(), &new.paste_id).await.unwrap(), "absent key");
    }

    async fn restart_moves_only_an_aborted_key_with_its_old_paste_id_and_restarts_its_clock(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let body = ResponseBody::new("{\"id\":\"restarted\"}".into());

        for state in [KeyState::Pending, KeyState::Done] {
            let new = key_in_state(&store, state).await;
            let fresh = PasteId::mint(new.key.slot());
            assert!(!store.restart(&new.key, &new.paste_id, &fresh, &body).await.unwrap(), "restart from {state}");
            let unchanged = store.get(&new.key).await.unwrap().unwrap();
            assert_eq!((unchanged.state, unchanged.paste_id), (state, new.paste_id.clone()));
        }

        let aborted = key_in_state(&store, KeyState::Aborted).await;
        let before = store.get(&aborted.key).await.unwrap().unwrap();
        let fresh = PasteId::mint(aborted.key.slot());
        let wrong_old = PasteId::mint(aborted.key.slot());
        assert!(!store.restart(&aborted.key, &wrong_old, &fresh, &body).await.unwrap(), "wrong old paste id");
        assert_eq!(store.get(&aborted.key).await.unwrap().unwrap(), before);

        clock.advance(Duration::from_secs(3600));
        let restarted_at = t0() + chrono::Duration::hours(1);
        assert!(store.restart(&aborted.key, &aborted.paste_id, &fresh, &body).await.unwrap());
        let after = store.get(&aborted.key).await.unwrap().unwrap();
        assert_eq!(
            after,
            KeyRecord {
                key: aborted.key,
                request_hash: aborted.request_hash,
                paste_id: fresh.clone(),
                state: KeyState::Pending,
                response_body: body.clone(),
                created_at: restarted_at,
                retain_until: restarted_at + retention(),
                search_first: false,
            }
        );

        // Now pending again: a second restart (even naming the new id) changes nothing.
        let third = PasteId::mint(aborted.key.slot());
        assert!(!store.restart(&aborted.key, &aborted.paste_id, &third, &body).await.unwrap());
        assert!(!store.restart(&aborted.key, &fresh, &third, &body).await.unwrap());
        assert_eq!(store.get(&aborted.key).await.unwrap().unwrap(), after);
        assert!(!store.restart(&IdempotencyKey::new_random(), &aborted.paste_id, &third, &body).await.unwrap());
    }

    async fn list_pending_shows_only_pending_keys_older_than_the_cutoff_oldest_first(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let mut pending = Vec::new();
        for i in 0..4 {
            pending.push((key_in_state(&store, KeyState::Pending).await, t0() + chrono::Duration::seconds(10 * i)));
            key_in_state(&store, KeyState::Done).await;
            key_in_state(&store, KeyState::Aborted).await;
            clock.advance(Duration::from_secs(10));
        }
        // Created at t0 + 40 s: exactly at the cutoff below, so excluded (strictly before).
        let at_cutoff = key_in_state(&store, KeyState::Pending).await;

        let cutoff = t0() + chrono::Duration::seconds(40);
        let listed = store.list_pending(cutoff, None, 100).await.unwrap();
        let got: Vec<_> = listed.iter().map(|p| (p.key, p.paste_id.clone(), p.created_at)).collect();
        let want: Vec<_> = pending.iter().map(|(n, at)| (n.key, n.paste_id.clone(), *at)).collect();
        assert_eq!(got, want);
        assert!(listed.iter().all(|p| p.key != at_cutoff.key));

        let earlier = store.list_pending(t0() + chrono::Duration::seconds(15), None, 100).await.unwrap();
        assert_eq!(earlier.iter().map(|p| p.key).collect::<Vec<_>>(), vec![pending[0].0.key, pending[1].0.key]);
        assert!(store.list_pending(t0(), None, 100).await.unwrap().is_empty());

        // A pending key that finishes leaves the listing.
        assert!(store.mark_done(&pending[0].0.key, &pending[0].0.paste_id).await.unwrap());
        let after_done = store.list_pending(cutoff, None, 100).await.unwrap();
        assert_eq!(after_done.len(), 3);
        assert_eq!(after_done[0].key, pending[1].0.key);
    }

    async fn list_pending_pages_return_every_key_exactly_once(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let mut created = Vec::new();
        for i in 0..25 {
            // Three keys share each millisecond, so the cursor's key tie-break matters.
            if i % 3 == 0 {
                clock.advance(Duration::from_millis(1));
            }
            let new = key_in_state(&store, KeyState::Pending).await;
            created.push((clock.now(), new.key.canonical(), new.key));
        }
        created.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let cutoff = clock.now() + chrono::Duration::seconds(1);

        let mut seen = Vec::new();
        let mut pages = Vec::new();
        let mut after: Option<(DateTime<Utc>, IdempotencyKey)> = None;
        loop {
            let page = store.list_pending(cutoff, after, 7).await.unwrap();
            if page.is_empty() {
                break;
            }
            assert!(pages.len() < 10, "pagination does not end");
            pages.push(page.len());
            let last = page.last().unwrap();
            after = Some((last.created_at, last.key));
            seen.extend(page.into_iter().map(|p| (p.created_at, p.key)));
        }
        assert_eq!(pages, vec![7, 7, 7, 4]);
        let want: Vec<_> = created.iter().map(|(at, _, key)| (*at, *key)).collect();
        assert_eq!(seen, want, "every key once, oldest first, ties by key");
        assert_eq!(seen.iter().map(|(_, k)| *k).collect::<HashSet<_>>().len(), 25);
    }

    async fn list_pending_over_grpc_carries_no_secret(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let secret = "delete_token-SECRET-4c1f2e9b7a";
        let new = new_key(&format!("{{\"id\":\"x\",\"delete_token\":\"{secret}\"}}"));
        begin_inserted(&store, &new).await;
        clock.advance(Duration::from_secs(120));
        let (address, client) = spawn_key_service(store, Default::default()).await;

        let mut raw = pb::key_service_client::KeyServiceClient::connect(address).await.unwrap();
        let reply = raw
            .list_pending(pb::ListPendingRequest {
                older_than_ms: 60_000,
                after_created_at_ms: 0,
                after_key: String::new(),
                limit: 100,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(reply.keys.len(), 1);
        assert_eq!(reply.keys[0].key, new.key.canonical());
        let bytes = reply.encode_to_vec();
        assert!(bytes.windows(new.key.canonical().len()).any(|w| w == new.key.canonical().as_bytes()));
        assert!(!bytes.windows(secret.len()).any(|w| w == secret.as_bytes()), "the listing holds the secret");

        let stats = raw.pending_stats(pb::PendingStatsRequest {}).await.unwrap().into_inner();
        assert_eq!(stats.pending, 1);
        assert!(!stats.encode_to_vec().windows(secret.len()).any(|w| w == secret.as_bytes()));

        let typed = client.list_pending(Duration::from_secs(60), None, 100).await.unwrap();
        assert_eq!(typed.len(), 1);
        assert!(!format!("{typed:?}").contains(secret));
        // Only Get hands the body back: the secret is there, so the check above can fail.
        let record = client.get(&new.key).await.unwrap().unwrap();
        assert!(record.response_body.expose().contains(secret));
        assert!(!format!("{record:?}").contains(secret), "Debug of a record prints the body");
    }

    async fn pending_stats_count_pending_keys_by_age(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let empty = store.pending_stats().await.unwrap();
        assert_eq!((empty.pending, empty.oldest_created_at, empty.older_than_2s, empty.older_than_60s), (0, None, 0, 0));
        assert_eq!(empty.now, t0());

        key_in_state(&store, KeyState::Pending).await; // t0
        key_in_state(&store, KeyState::Done).await; // t0, not pending
        key_in_state(&store, KeyState::Aborted).await; // t0, not pending
        clock.advance(Duration::from_secs(30));
        key_in_state(&store, KeyState::Pending).await; // t0 + 30 s
        clock.advance(Duration::from_secs(29));
        key_in_state(&store, KeyState::Pending).await; // t0 + 59 s
        clock.advance(Duration::from_secs(2));

        // At t0 + 61 s the t0 + 59 s key is exactly 2 s old: "older than" is strict.
        let stats = store.pending_stats().await.unwrap();
        assert_eq!(stats.pending, 3);
        assert_eq!(stats.oldest_created_at, Some(t0()));
        assert_eq!(stats.older_than_60s, 1);
        assert_eq!(stats.older_than_2s, 2);
        assert_eq!(stats.now, t0() + chrono::Duration::seconds(61));

        clock.advance(Duration::from_millis(1));
        let stats = store.pending_stats().await.unwrap();
        assert_eq!((stats.pending, stats.older_than_60s, stats.older_than_2s), (3, 1, 3));
        assert_eq!(stats.oldest_created_at, Some(t0()));

        // At t0 + 90 s the t0 + 30 s key is exactly 60 s old: not yet "older than 60 s".
        clock.advance(Duration::from_secs(29) - Duration::from_millis(1));
        let boundary = store.pending_stats().await.unwrap();
        assert_eq!((boundary.pending, boundary.older_than_60s, boundary.older_than_2s), (3, 1, 3));
        clock.advance(Duration::from_millis(1));
        let later = store.pending_stats().await.unwrap();
        assert_eq!((later.pending, later.older_than_60s, later.older_than_2s), (3, 2, 3));
    }

    async fn purge_retired_deletes_only_finished_keys_past_retention_in_bounded_batches(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let mut retired = Vec::new();
        for _ in 0..3 {
            retired.push(key_in_state(&store, KeyState::Done).await);
            retired.push(key_in_state(&store, KeyState::Aborted).await);
        }
        let pending = key_in_state(&store, KeyState::Pending).await;
        clock.advance(Duration::from_secs(3600));
        let younger = key_in_state(&store, KeyState::Done).await; // retained until t0 + 26 h

        // One millisecond before the window closes nothing goes.
        clock.advance(Duration::from_secs(24 * 3600) - Duration::from_millis(1));
        assert_eq!(store.purge_retired(100).await.unwrap(), 0);

        clock.advance(Duration::from_millis(1)); // t0 + 25 h
        assert_eq!(store.purge_retired(4).await.unwrap(), 4, "the limit bounds a batch");
        let left: Vec<_> = {
            let mut left = Vec::new();
            for new in &retired {
                if store.get(&new.key).await.unwrap().is_some() {
                    left.push(new.key);
                }
            }
            left
        };
        assert_eq!(left.len(), 2);
        assert_eq!(store.purge_retired(4).await.unwrap(), 2);
        assert_eq!(store.purge_retired(4).await.unwrap(), 0);
        for new in &retired {
            assert_eq!(store.get(&new.key).await.unwrap(), None);
        }
        assert_eq!(state_of(&store, &younger.key).await, KeyState::Done);
        assert_eq!(state_of(&store, &pending.key).await, KeyState::Pending);

        // Years later the pending key is still there; the younger done one is gone.
        clock.advance(Duration::from_secs(1000 * 24 * 3600));
        assert_eq!(store.purge_retired(100).await.unwrap(), 1);
        assert_eq!(store.get(&younger.key).await.unwrap(), None);
        assert_eq!(state_of(&store, &pending.key).await, KeyState::Pending);
        assert_eq!(store.purge_retired(100).await.unwrap(), 0);
    }

    async fn a_shard_that_may_have_lost_commits_says_search_first_until_done_and_adopts_once(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let since = t0() - chrono::Duration::hours(1);
        let store = store.with_lost_commits(Some(LostCommits::new(since, t0())));
        let new = new_key("{\"id\":\"minted\"}");
        assert!(begin_inserted(&store, &new).await.search_first, "a key it does not know searches first");
        assert!(store.get(&new.key).await.unwrap().unwrap().search_first, "and so does every read of it until done");

        let found = PasteId::mint(new.key.slot());
        let adopted = Adopted {
            key: new.key,
            pending_paste_id: PasteId::mint(new.key.slot()),
            paste_id: found.clone(),
            request_hash: random_hash(),
            response_body: ResponseBody::new("{\"id\":\"adopted\"}".into()),
        };
        assert!(!store.adopt(&adopted).await.unwrap(), "guarded by the pending record's own id");
        let adopted = Adopted { pending_paste_id: new.paste_id.clone(), ..adopted };
        assert!(store.adopt(&adopted).await.unwrap());
        assert!(!store.adopt(&adopted).await.unwrap(), "only once");
        let record = store.get(&new.key).await.unwrap().unwrap();
        assert_eq!(
            (record.state, &record.paste_id, record.request_hash, record.response_body.expose()),
            (KeyState::Done, &found, adopted.request_hash, "{\"id\":\"adopted\"}"),
        );
        assert!(!record.search_first, "a done key names its paste for good");

        clock.advance(Duration::from_secs(26 * 3600));
        let later = new_key("{\"id\":\"later\"}");
        assert!(!begin_inserted(&store, &later).await.search_first, "the mode ends 26 h after the shard started in it");
        let unflagged = store.with_lost_commits(None);
        assert!(!unflagged.get(&new.key).await.unwrap().unwrap().search_first);
    }
}
