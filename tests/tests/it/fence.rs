//! The fence as one function (`pastebin_shards::fence`, `recover_batch`),
//! against real K and P services over gRPC: a key is aborted only behind a
//! tombstone of its paste id, a live paste is never fenced off, and a P that
//! cannot be read aborts nothing.

use std::sync::Arc;

use chrono::Utc;
use pastebin_core::{Clock, KeyState, SystemClock};
use pastebin_keys::{KeyClient, NewKey, PendingKey};
use pastebin_pastes::{IdFate, PasteClient};
use pastebin_shards::{fence, recover_batch, Decision, FenceError, Fenced};
use pastebin_tests::shards::{
    key_store, new_key, new_paste, paste_store, spawn_key_service, spawn_paste_service, Backend,
};

fn clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

async fn shards(backend: Backend) -> (KeyClient, PasteClient) {
    let (_, keys) = spawn_key_service(key_store(backend, clock()).await, Default::default()).await;
    let (_, pastes) = spawn_paste_service(paste_store(backend, clock()).await, Default::default()).await;
    (keys, pastes)
}

/// A pending key on K; with `paste`, its paste row committed on P too.
async fn pending_key(keys: &KeyClient, pastes: &PasteClient, paste: bool) -> NewKey {
    let new = new_key("{}");
    keys.begin(&new).await.unwrap();
    if paste {
        let (mut row, _token) = new_paste(Utc::now(), chrono::Duration::hours(1));
        row.id = new.paste_id.clone();
        pastes.insert(&row).await.unwrap();
    }
    new
}

async fn state(keys: &KeyClient, new: &NewKey) -> KeyState {
    keys.get(&new.key).await.unwrap().unwrap().state
}

/// A P shard that is not there: nothing listens on its port.
async fn unreachable_paste_shard() -> PasteClient {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    PasteClient::new(pastebin_shards::channel(&address, None).unwrap())
}

pastebin_tests::both_backends! {
    async fn an_id_p_never_saw_is_tombstoned_then_its_key_aborted(backend: Backend) {
        let (keys, pastes) = shards(backend).await;
        let new = pending_key(&keys, &pastes, false).await;

        let fenced = fence(&keys, &pastes, &new.key, &new.paste_id).await.unwrap();
        assert_eq!(fenced, Fenced::Aborted { changed: true });
        assert_eq!(pastes.peek_fate(&new.paste_id).await.unwrap(), Some(IdFate::Tombstoned));
        assert_eq!(state(&keys, &new).await, KeyState::Aborted);

        // A second executor behind the same fence only finds the work done.
        let again = fence(&keys, &pastes, &new.key, &new.paste_id).await.unwrap();
        assert_eq!(again, Fenced::Aborted { changed: false });
    }

    async fn a_live_paste_is_never_fenced_off_and_its_key_is_not_aborted(backend: Backend) {
        let (keys, pastes) = shards(backend).await;
        let new = pending_key(&keys, &pastes, true).await;

        let fenced = fence(&keys, &pastes, &new.key, &new.paste_id).await.unwrap();
        assert_eq!(fenced, Fenced::Live);
        assert_eq!(pastes.peek_fate(&new.paste_id).await.unwrap(), Some(IdFate::Live));
        assert_eq!(state(&keys, &new).await, KeyState::Pending, "finishing it is the caller's step");
    }

    async fn a_paste_shard_that_cannot_be_read_aborts_nothing(backend: Backend) {
        let (keys, pastes) = shards(backend).await;
        let new = pending_key(&keys, &pastes, false).await;
        let gone = unreachable_paste_shard().await;

        let fenced = fence(&keys, &gone, &new.key, &new.paste_id).await;
        assert!(matches!(fenced, Err(FenceError::PasteShard(_))), "{fenced:?}");
        let batch = [PendingKey { key: new.key, paste_id: new.paste_id.clone(), created_at: Utc::now() }];
        let decisions = recover_batch(&keys, &gone, &batch).await;
        assert!(matches!(decisions.as_slice(), [Decision::LeftPending(_)]), "{decisions:?}");
        assert_eq!(state(&keys, &new).await, KeyState::Pending);
    }

    async fn a_batch_finishes_keys_with_a_paste_and_aborts_the_others(backend: Backend) {
        let (keys, pastes) = shards(backend).await;
        let finished = pending_key(&keys, &pastes, true).await;
        let orphan = pending_key(&keys, &pastes, false).await;
        let batch: Vec<PendingKey> = [&finished, &orphan]
            .iter()
            .map(|new| PendingKey { key: new.key, paste_id: new.paste_id.clone(), created_at: Utc::now() })
            .collect();

        let mut decisions = recover_batch(&keys, &pastes, &batch).await;
        decisions.sort_by_key(|decision| format!("{decision:?}"));
        assert_eq!(decisions, [Decision::Aborted, Decision::MarkedDone]);
        assert_eq!(state(&keys, &finished).await, KeyState::Done);
        assert_eq!(state(&keys, &orphan).await, KeyState::Aborted);
        assert_eq!(pastes.peek_fate(&orphan.paste_id).await.unwrap(), Some(IdFate::Tombstoned));

        // Run again, every key is already settled: nothing moves twice.
        let replay = recover_batch(&keys, &pastes, &batch).await;
        assert_eq!(replay, [Decision::AlreadyResolved, Decision::AlreadyResolved]);
    }
}
