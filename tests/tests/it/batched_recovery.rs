//! Recovery in batches decides exactly as the per-key path does: the same
//! seeded state, resolved once with one statement per verdict kind (K) and
//! one fence write per batch (P), and once key by key, ends the same, row for
//! row, with the same "changed" answers.

use std::{collections::HashSet, sync::Arc};

use chrono::Utc;
use pastebin_core::{Clock, IdempotencyKey, KeyState, ManualClock, PasteId};
use pastebin_keys::{KeyStore, NewKey};
use pastebin_pastes::IdFate;
use pastebin_tests::shards::{key_store, new_key, new_paste, paste_store};

fn clock() -> Arc<dyn Clock> {
    Arc::new(ManualClock::starting_at(Utc::now()))
}

/// What a key looks like before recovery's verdict reaches it.
#[derive(Clone, Copy)]
enum Seed {
    /// Pending with the verdict's paste id: the verdict applies.
    Pending,
    /// Pending, but the verdict names another paste id (a restarted key).
    PendingOtherPaste,
    /// Already finished or aborted by another executor.
    Done,
    Aborted,
    /// Deleted by retention, or never there.
    Absent,
}

const SEEDS: [Seed; 5] = [Seed::Pending, Seed::PendingOtherPaste, Seed::Done, Seed::Aborted, Seed::Absent];

async fn seed(stores: [&KeyStore; 2], new: &NewKey, seed: Seed) -> (IdempotencyKey, PasteId) {
    for store in stores {
        if !matches!(seed, Seed::Absent) {
            store.begin(new).await.expect("begin");
        }
        match seed {
            Seed::Done => assert!(store.mark_done(&new.key, &new.paste_id).await.expect("done")),
            Seed::Aborted => assert!(store.abort(&new.key, &new.paste_id).await.expect("abort")),
            _ => {}
        }
    }
    let paste_id = match seed {
        Seed::PendingOtherPaste => PasteId::mint(new.key.slot()),
        _ => new.paste_id.clone(),
    };
    (new.key, paste_id)
}

async fn rows(store: &KeyStore, keys: &[(IdempotencyKey, PasteId)]) -> Vec<Option<(KeyState, PasteId)>> {
    let mut rows = Vec::new();
    for (key, _) in keys {
        rows.push(store.get(key).await.expect("get").map(|record| (record.state, record.paste_id)));
    }
    rows
}

pastebin_tests::both_backends! {
    async fn batched_verdicts_change_exactly_the_keys_the_per_key_updates_change(backend: Backend) {
        let (batched, per_key) = (key_store(backend, clock()).await, key_store(backend, clock()).await);
        let mut done = Vec::new();
        let mut aborted = Vec::new();
        for i in 0..60 {
            let verdict = seed([&batched, &per_key], &new_key("{\"id\":\"x\"}"), SEEDS[i % SEEDS.len()]).await;
            if (i / SEEDS.len()).is_multiple_of(2) { done.push(verdict) } else { aborted.push(verdict) }
        }
        // A verdict repeated in the same batch decides once.
        done.push(done[0].clone());

        let mut changed_batched: HashSet<IdempotencyKey> = HashSet::new();
        changed_batched.extend(batched.apply_verdicts(KeyState::Done, &done).await.expect("batched done"));
        changed_batched.extend(batched.apply_verdicts(KeyState::Aborted, &aborted).await.expect("batched abort"));
        let mut changed_per_key = HashSet::new();
        for (key, paste_id) in &done {
            if per_key.mark_done(key, paste_id).await.expect("done") {
                changed_per_key.insert(*key);
            }
        }
        for (key, paste_id) in &aborted {
            if per_key.abort(key, paste_id).await.expect("abort") {
                changed_per_key.insert(*key);
            }
        }
        assert_eq!(changed_batched, changed_per_key);
        // Only the plain pending keys could change: 6 per kind.
        assert_eq!(changed_batched.len(), 12);
        let all: Vec<_> = done.iter().chain(&aborted).cloned().collect();
        assert_eq!(rows(&batched, &all).await, rows(&per_key, &all).await);
    }

    /// K names exactly the ids of its done keys; P's read-only batch says
    /// each id's fate as the single read does, and writes no tombstone.
    async fn done_keys_name_their_ids_and_a_peek_batch_writes_nothing(backend: Backend) {
        let (keys, pastes) = (key_store(backend, clock()).await, paste_store(backend, clock()).await);
        let mut ids = Vec::new();
        let mut named = HashSet::new();
        for i in 0..9 {
            let new = new_key("{\"id\":\"x\"}");
            keys.begin(&new).await.expect("begin");
            match i % 3 {
                0 => {
                    assert!(keys.mark_done(&new.key, &new.paste_id).await.expect("done"));
                    named.insert(new.paste_id.clone());
                }
                1 => assert!(keys.abort(&new.key, &new.paste_id).await.expect("abort")),
                _ => {}
            }
            ids.push(new.paste_id);
        }
        // An id no key names at all.
        ids.push(PasteId::mint(IdempotencyKey::new_random().slot()));
        let found: HashSet<PasteId> = keys.named_by_done_keys(&ids).await.expect("named").into_iter().collect();
        assert_eq!(found, named);
        assert_eq!(named.len(), 3);

        let (paste, _token) = new_paste(Utc::now(), chrono::Duration::days(1));
        pastes.insert(&paste).await.expect("insert");
        let never_seen = PasteId::mint(IdempotencyKey::new_random().slot());
        let seen = pastes.peek_batch(&[paste.id.clone(), never_seen.clone()]).await.expect("peek");
        assert_eq!(seen, vec![(paste.id.clone(), Some(IdFate::Live)), (never_seen.clone(), None)]);
        assert_eq!(pastes.peek_fate(&never_seen).await.expect("peek"), None, "the peek wrote a tombstone");
    }

    async fn a_batch_fence_gives_every_id_the_fate_the_single_fence_gives(backend: Backend) {
        let (batched, per_id) = (paste_store(backend, clock()).await, paste_store(backend, clock()).await);
        let mut ids = Vec::new();
        for i in 0..30 {
            let (paste, token) = new_paste(Utc::now(), chrono::Duration::days(1));
            for store in [&batched, &per_id] {
                match i % 3 {
                    0 => {}
                    1 => {
                        store.insert(&paste).await.expect("insert");
                    }
                    _ => {
                        store.insert(&paste).await.expect("insert");
                        store.delete(&paste.id, &token).await.expect("delete");
                    }
                }
            }
            ids.push(paste.id);
        }
        ids.push(ids[0].clone());
        ids.push(ids[1].clone());

        let fates_batched = batched.resolve_batch(&ids).await.expect("batch fence");
        let mut fates_per_id = Vec::new();
        for id in &ids {
            fates_per_id.push((id.clone(), per_id.tombstone_unless_live(id).await.expect("fence")));
        }
        assert_eq!(fates_batched, fates_per_id);
        assert_eq!(fates_batched.iter().filter(|(_, fate)| *fate == IdFate::Live).count(), 11);
        for id in &ids {
            assert_eq!(batched.peek_fate(id).await.expect("peek"), per_id.peek_fate(id).await.expect("peek"));
        }
    }
}
