//! Shard P's storage: every `PasteStore` behaviour, with the same bodies on PostgreSQL
//! and SQLite. Expiry is driven by a `ManualClock`.

use std::{collections::HashSet, sync::Arc, time::Duration};

use chrono::{DateTime, Utc};
use pastebin_core::{Clock, DeleteToken, IdempotencyKey, ManualClock, PasteId, PasteOrigin, RequestHash};
use pastebin_pastes::{DeleteOutcome, IdFate, InsertOutcome, KeyedPaste, NewPaste, PasteRow, PasteStore};
use pastebin_tests::shards::{new_paste, paste_store, Backend};

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_900_000_000_000).unwrap()
}

fn minutes(n: i64) -> chrono::Duration {
    chrono::Duration::minutes(n)
}

async fn store_at_t0(backend: Backend) -> (PasteStore, ManualClock) {
    let clock = ManualClock::starting_at(t0());
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    (paste_store(backend, shared).await, clock)
}

fn row_of(paste: &NewPaste) -> PasteRow {
    PasteRow {
        id: paste.id.clone(),
        created_at: paste.created_at,
        expires_at: paste.expires_at,
        size: paste.size,
        content_sha256: paste.content_sha256,
        attributes: paste.attributes.clone(),
    }
}

fn unknown_id() -> PasteId {
    PasteId::mint(IdempotencyKey::new_random().slot())
}

/// A live paste created at t0 that expires `ttl` later.
async fn live(store: &PasteStore, ttl: chrono::Duration) -> (NewPaste, DeleteToken) {
    let (paste, token) = new_paste(t0(), ttl);
    assert_eq!(store.insert(&paste).await.unwrap(), InsertOutcome::Inserted);
    (paste, token)
}

pastebin_tests::both_backends! {
    async fn insert_is_inserted_then_already_exists(backend: Backend) {
        let (store, _clock) = store_at_t0(backend).await;
        let (paste, _token) = new_paste(t0(), minutes(60));
        assert_eq!(store.get_live(&paste.id).await.unwrap(), None);

        assert_eq!(store.insert(&paste).await.unwrap(), InsertOutcome::Inserted);
        assert_eq!(store.get_live(&paste.id).await.unwrap(), Some(row_of(&paste)));

        assert_eq!(store.insert(&paste).await.unwrap(), InsertOutcome::AlreadyExists);
        // A repeat never rewrites the row, even with other values.
        let (mut other, _) = new_paste(t0() + minutes(1), minutes(5));
        other.id = paste.id.clone();
        assert_eq!(store.insert(&other).await.unwrap(), InsertOutcome::AlreadyExists);
        assert_eq!(store.get_live(&paste.id).await.unwrap(), Some(row_of(&paste)));
    }

    async fn the_fence_leaves_a_live_paste_alone(backend: Backend) {
        let (store, _clock) = store_at_t0(backend).await;
        let (paste, token) = live(&store, minutes(60)).await;

        assert_eq!(store.tombstone_unless_live(&paste.id).await.unwrap(), IdFate::Live);
        assert_eq!(store.tombstone_unless_live(&paste.id).await.unwrap(), IdFate::Live);
        assert_eq!(store.get_live(&paste.id).await.unwrap(), Some(row_of(&paste)));
        assert_eq!(store.insert(&paste).await.unwrap(), InsertOutcome::AlreadyExists);
        // The row kept its token, too.
        assert_eq!(store.delete(&paste.id, &token).await.unwrap(), DeleteOutcome::Deleted);
    }

    async fn the_fence_kills_an_unknown_id_for_good(backend: Backend) {
        let (store, _clock) = store_at_t0(backend).await;
        let (paste, token) = new_paste(t0(), minutes(60));

        assert_eq!(store.tombstone_unless_live(&paste.id).await.unwrap(), IdFate::Tombstoned);
        assert_eq!(store.tombstone_unless_live(&paste.id).await.unwrap(), IdFate::Tombstoned);
        assert_eq!(store.insert(&paste).await.unwrap(), InsertOutcome::Tombstoned);
        assert_eq!(store.insert(&paste).await.unwrap(), InsertOutcome::Tombstoned);
        assert_eq!(store.get_live(&paste.id).await.unwrap(), None);
        assert_eq!(store.delete(&paste.id, &token).await.unwrap(), DeleteOutcome::NotFound);
    }

    async fn resolve_batch_fences_every_id_and_reports_each_fate_in_order(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let (alive, _) = live(&store, minutes(60)).await;
        let (expired, _) = live(&store, minutes(1)).await;
        let (deleted, deleted_token) = live(&store, minutes(60)).await;
        assert_eq!(store.delete(&deleted.id, &deleted_token).await.unwrap(), DeleteOutcome::Deleted);
        let (aborted, _) = new_paste(t0(), minutes(60));
        assert_eq!(store.tombstone_unless_live(&aborted.id).await.unwrap(), IdFate::Tombstoned);
        let (unknown, _) = new_paste(t0(), minutes(60));
        clock.advance(Duration::from_secs(120));

        let ids = vec![unknown.id.clone(), alive.id.clone(), deleted.id.clone(), expired.id.clone(), aborted.id.clone()];
        let fates = store.resolve_batch(&ids).await.unwrap();
        assert_eq!(
            fates,
            vec![
                (unknown.id.clone(), IdFate::Tombstoned),
                (alive.id.clone(), IdFate::Live),
                (deleted.id.clone(), IdFate::Tombstoned),
                // Past its expiry but its row is still there: not an id to abort.
                (expired.id.clone(), IdFate::Live),
                (aborted.id.clone(), IdFate::Tombstoned),
            ]
        );
        assert_eq!(store.insert(&unknown).await.unwrap(), InsertOutcome::Tombstoned, "the batch fenced it");
        assert_eq!(store.get_live(&alive.id).await.unwrap(), Some(row_of(&alive)));
        assert!(store.resolve_batch(&[]).await.unwrap().is_empty());
    }

    async fn get_live_hides_expired_and_tombstoned_pastes(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let (short, _) = live(&store, minutes(1)).await;
        let (long, _) = live(&store, minutes(60)).await;
        let (fenced, _) = new_paste(t0(), minutes(60));
        store.tombstone_unless_live(&fenced.id).await.unwrap();
        assert_eq!(store.get_live(&fenced.id).await.unwrap(), None);
        assert_eq!(store.get_live(&unknown_id()).await.unwrap(), None);

        clock.advance(Duration::from_secs(60) - Duration::from_millis(1));
        assert_eq!(store.get_live(&short.id).await.unwrap(), Some(row_of(&short)));
        clock.advance(Duration::from_millis(1)); // exactly expires_at
        assert_eq!(store.get_live(&short.id).await.unwrap(), None, "expired at expires_at");
        assert_eq!(store.get_live(&long.id).await.unwrap(), Some(row_of(&long)));
        clock.advance(Duration::from_secs(3600));
        assert_eq!(store.get_live(&long.id).await.unwrap(), None);
    }

    async fn delete_needs_the_right_token_and_succeeds_once(backend: Backend) {
        let (store, _clock) = store_at_t0(backend).await;
        let (paste, token) = live(&store, minutes(60)).await;

        assert_eq!(store.delete(&paste.id, &DeleteToken::generate()).await.unwrap(), DeleteOutcome::WrongToken);
        assert_eq!(store.delete(&paste.id, &DeleteToken::presented("")).await.unwrap(), DeleteOutcome::WrongToken);
        assert_eq!(store.get_live(&paste.id).await.unwrap(), Some(row_of(&paste)), "still readable");

        assert_eq!(store.delete(&paste.id, &token).await.unwrap(), DeleteOutcome::Deleted);
        assert_eq!(store.get_live(&paste.id).await.unwrap(), None);
        assert_eq!(store.delete(&paste.id, &token).await.unwrap(), DeleteOutcome::NotFound);
        // A deleted id is a tombstone: a late saga step cannot bring it back.
        assert_eq!(store.insert(&paste).await.unwrap(), InsertOutcome::Tombstoned);
        assert_eq!(store.tombstone_unless_live(&paste.id).await.unwrap(), IdFate::Tombstoned);

        assert_eq!(store.delete(&unknown_id(), &token).await.unwrap(), DeleteOutcome::NotFound);
    }

    async fn delete_of_an_expired_paste_is_not_found(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let (paste, token) = live(&store, minutes(1)).await;
        clock.advance(Duration::from_secs(61));
        assert_eq!(store.delete(&paste.id, &token).await.unwrap(), DeleteOutcome::NotFound);
        assert_eq!(store.delete(&paste.id, &DeleteToken::generate()).await.unwrap(), DeleteOutcome::NotFound);
        // Not deleted by that: the purge still finds it.
        assert_eq!(store.purge_expired(10).await.unwrap(), vec![paste.id.clone()]);
    }

    async fn purge_expired_tombstones_exactly_the_expired_pastes_in_bounded_batches(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let mut expiring = Vec::new();
        for _ in 0..5 {
            expiring.push(live(&store, minutes(1)).await.0);
        }
        let mut lasting = Vec::new();
        for _ in 0..2 {
            lasting.push(live(&store, minutes(60)).await.0);
        }
        let (deleted, deleted_token) = live(&store, minutes(1)).await;
        store.delete(&deleted.id, &deleted_token).await.unwrap();
        let (fenced, _) = new_paste(t0(), minutes(1));
        store.tombstone_unless_live(&fenced.id).await.unwrap();

        assert!(store.purge_expired(100).await.unwrap().is_empty(), "nothing has expired yet");
        clock.advance(Duration::from_secs(60)); // exactly expires_at of the short ones

        let expected: HashSet<PasteId> = expiring.iter().map(|p| p.id.clone()).collect();
        let first = store.purge_expired(3).await.unwrap();
        assert_eq!(first.len(), 3, "the limit bounds a batch");
        let second = store.purge_expired(3).await.unwrap();
        assert_eq!(second.len(), 2);
        assert!(store.purge_expired(3).await.unwrap().is_empty());
        let purged: Vec<PasteId> = first.into_iter().chain(second).collect();
        assert_eq!(purged.iter().cloned().collect::<HashSet<_>>(), expected);
        assert_eq!(purged.len(), expected.len(), "no id twice");

        for paste in &expiring {
            assert_eq!(store.insert(paste).await.unwrap(), InsertOutcome::Tombstoned);
            assert_eq!(store.tombstone_unless_live(&paste.id).await.unwrap(), IdFate::Tombstoned);
        }
        for paste in &lasting {
            assert_eq!(store.get_live(&paste.id).await.unwrap(), Some(row_of(paste)));
        }
        clock.advance(Duration::from_secs(3600));
        let rest: HashSet<PasteId> = store.purge_expired(100).await.unwrap().into_iter().collect();
        assert_eq!(rest, lasting.iter().map(|p| p.id.clone()).collect());
    }
}

pastebin_tests::both_backends! {
    async fn tombstones_are_purged_only_after_their_retention(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let (aborted, deleted) = (unknown_id(), live(&store, minutes(60 * 24 * 30)).await);
        assert_eq!(store.tombstone_unless_live(&aborted).await.unwrap(), IdFate::Tombstoned);
        assert_eq!(store.delete(&deleted.0.id, &deleted.1).await.unwrap(), DeleteOutcome::Deleted);
        let (kept, _) = live(&store, minutes(60 * 24 * 30)).await;
        let week = Duration::from_secs(7 * 24 * 3600);

        // Six days later: younger than the retention, nothing goes.
        clock.advance(Duration::from_secs(6 * 24 * 3600));
        assert_eq!(store.purge_tombstones(week, 100).await.unwrap(), 0);
        // A requested retention below the 26 h floor is raised to it.
        clock.advance(Duration::from_secs(2 * 24 * 3600));
        assert_eq!(store.purge_tombstones(Duration::from_secs(60), 1).await.unwrap(), 1, "bounded by the limit");
        assert_eq!(store.purge_tombstones(week, 100).await.unwrap(), 1);
        assert_eq!(store.purge_tombstones(week, 100).await.unwrap(), 0);
        // Live rows are never purged.
        assert_eq!(store.tombstone_unless_live(&kept.id).await.unwrap(), IdFate::Live);
    }
}

pastebin_tests::both_backends! {
    async fn a_tombstone_younger_than_26_hours_is_never_purged(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        assert_eq!(store.tombstone_unless_live(&unknown_id()).await.unwrap(), IdFate::Tombstoned);
        clock.advance(Duration::from_secs(25 * 3600));
        assert_eq!(store.purge_tombstones(Duration::ZERO, 100).await.unwrap(), 0);
        clock.advance(Duration::from_secs(3600 + 1));
        assert_eq!(store.purge_tombstones(Duration::ZERO, 100).await.unwrap(), 1);
    }

    async fn a_paste_is_found_by_its_key_hash_and_its_token_rotates_only_under_it(backend: Backend) {
        let (store, _clock) = store_at_t0(backend).await;
        let key = IdempotencyKey::new_random();
        let origin = PasteOrigin { key_hash: key.hash(), request_hash: RequestHash([9; 32]) };
        let (mut paste, token) = new_paste(t0(), minutes(60));
        paste.origin = Some(origin);
        assert_eq!(store.insert(&paste).await.unwrap(), InsertOutcome::Inserted);
        let (unlabelled, _) = live(&store, minutes(60)).await;
        assert_ne!(unlabelled.id, paste.id);

        let found = store.find_by_key(&key.hash(), 8).await.unwrap();
        let expected = KeyedPaste {
            id: paste.id.clone(),
            fate: IdFate::Live,
            request_hash: origin.request_hash,
            created_at: paste.created_at,
            expires_at: paste.expires_at,
        };
        assert_eq!(found, vec![expected.clone()]);
        assert!(store.find_by_key(&IdempotencyKey::new_random().hash(), 8).await.unwrap().is_empty());

        let rotated = DeleteToken::generate();
        let other_key = IdempotencyKey::new_random().hash();
        assert!(!store.rotate_delete_token(&paste.id, &other_key, &rotated.hash()).await.unwrap(), "another key's hash");
        assert!(store.rotate_delete_token(&paste.id, &key.hash(), &rotated.hash()).await.unwrap());
        assert!(store.rotate_delete_token(&paste.id, &key.hash(), &rotated.hash()).await.unwrap(), "a repeat");
        assert_eq!(store.delete(&paste.id, &token).await.unwrap(), DeleteOutcome::WrongToken, "the old token");
        assert_eq!(store.delete(&paste.id, &rotated).await.unwrap(), DeleteOutcome::Deleted);

        let dead = store.find_by_key(&key.hash(), 8).await.unwrap();
        assert_eq!(dead, vec![KeyedPaste { fate: IdFate::Tombstoned, ..expected }], "a deleted paste is still found");
        assert!(!store.rotate_delete_token(&paste.id, &key.hash(), &rotated.hash()).await.unwrap(), "not live");
    }
}

pastebin_tests::both_backends! {
    async fn the_stored_count_is_the_live_rows_and_their_bytes(backend: Backend) {
        let (store, _clock) = store_at_t0(backend).await;
        assert_eq!(store.count_stored().await.unwrap(), (0, 0));
        let (first, token) = live(&store, minutes(60)).await;
        let (second, _) = live(&store, minutes(60)).await;
        assert_eq!(store.tombstone_unless_live(&unknown_id()).await.unwrap(), IdFate::Tombstoned);
        assert_eq!(store.count_stored().await.unwrap(), (2, first.size + second.size), "a tombstone holds nothing");
        assert_eq!(store.delete(&first.id, &token).await.unwrap(), DeleteOutcome::Deleted);
        assert_eq!(store.count_stored().await.unwrap(), (1, second.size));
    }
}
