//! Real contention on PostgreSQL: many connections racing on one key or one paste id.
//! The unique index and the guarded updates must pick exactly one winner, and every
//! loser must learn the winner's outcome.

use std::sync::Arc;

use chrono::Utc;
use pastebin_core::{Clock, PasteId, ResponseBody, SystemClock};
use pastebin_keys::{Begun, KeyStore, NewKey};
use pastebin_pastes::{IdFate, InsertOutcome, PasteStore};
use pastebin_tests::shards::{fresh_pool, new_key, new_paste, Backend};
use tokio::sync::Barrier;

const POOL: u32 = 40;

fn clock() -> Arc<dyn Clock> {
    Arc::new(SystemClock)
}

async fn keys() -> KeyStore {
    KeyStore::new(fresh_pool(Backend::Postgres, &pastebin_keys::MIGRATIONS, POOL).await, clock())
}

async fn pastes() -> PasteStore {
    PasteStore::new(fresh_pool(Backend::Postgres, &pastebin_pastes::MIGRATIONS, POOL).await, clock())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn racing_begins_of_one_key_insert_once_and_all_see_the_winner() {
    let store = keys().await;
    for round in 0..5 {
        let base = new_key("{\"id\":\"base\"}");
        let barrier = Arc::new(Barrier::new(32));
        let mut tasks = Vec::new();
        for i in 0..32 {
            let (store, barrier) = (store.clone(), barrier.clone());
            let mine = NewKey {
                key: base.key,
                request_hash: base.request_hash,
                paste_id: PasteId::mint(base.key.slot()),
                response_body: ResponseBody::new(format!("{{\"id\":\"{i}\"}}")),
            };
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                (mine.paste_id.clone(), mine.response_body.clone(), store.begin(&mine).await.expect("begin"))
            }));
        }
        let mut winners = Vec::new();
        let mut records = Vec::new();
        for task in tasks {
            let (sent_id, sent_body, begun) = task.await.unwrap();
            match begun {
                Begun::Inserted(record) => {
                    assert_eq!((&record.paste_id, &record.response_body), (&sent_id, &sent_body));
                    winners.push(record.clone());
                    records.push(record);
                }
                Begun::Existing(record) => records.push(record),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: exactly one begin inserts");
        let winner = &winners[0];
        for record in &records {
            assert_eq!(record.paste_id, winner.paste_id, "round {round}: every caller sees the winner's id");
            assert_eq!(record.response_body, winner.response_body);
            assert_eq!(record.created_at, winner.created_at);
        }
        assert_eq!(store.get(&base.key).await.unwrap().as_ref(), Some(winner));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn insert_racing_the_fence_has_one_winner_and_both_agree() {
    let store = pastes().await;
    let (mut inserted_wins, mut fence_wins) = (0, 0);
    for round in 0..50 {
        let (paste, _token) = new_paste(Utc::now(), chrono::Duration::hours(1));
        let barrier = Arc::new(Barrier::new(2));
        let insert = {
            let (store, barrier, paste) = (store.clone(), barrier.clone(), paste.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                store.insert(&paste).await.expect("insert")
            })
        };
        let fence = {
            let (store, barrier, id) = (store.clone(), barrier.clone(), paste.id.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                store.tombstone_unless_live(&id).await.expect("fence")
            })
        };
        let (inserted, fate) = (insert.await.unwrap(), fence.await.unwrap());
        match (inserted, fate) {
            (InsertOutcome::Inserted, IdFate::Live) => {
                inserted_wins += 1;
                assert!(store.get_live(&paste.id).await.unwrap().is_some(), "round {round}");
            }
            (InsertOutcome::Tombstoned, IdFate::Tombstoned) => {
                fence_wins += 1;
                assert_eq!(store.get_live(&paste.id).await.unwrap(), None, "round {round}");
            }
            other => panic!("round {round}: insert and fence disagree: {other:?}"),
        }
        // Whatever won stays won.
        let again = store.tombstone_unless_live(&paste.id).await.unwrap();
        assert_eq!(again, fate, "round {round}");
    }
    assert_eq!(inserted_wins + fence_wins, 50);
    eprintln!("insert won {inserted_wins}, fence won {fence_wins}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn racing_guarded_updates_change_a_key_exactly_once() {
    let store = keys().await;
    for round in 0..50 {
        let new = new_key("{\"id\":\"x\"}");
        assert!(matches!(store.begin(&new).await.unwrap(), Begun::Inserted(_)));
        // Even rounds: two mark_done; odd rounds: mark_done against abort.
        let abort_second = round % 2 == 1;
        let barrier = Arc::new(Barrier::new(2));
        let spawn = |abort: bool| {
            let (store, barrier, key, id) = (store.clone(), barrier.clone(), new.key, new.paste_id.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                if abort {
                    store.abort(&key, &id).await.expect("abort")
                } else {
                    store.mark_done(&key, &id).await.expect("mark_done")
                }
            })
        };
        let (first, second) = (spawn(false), spawn(abort_second));
        let (done, other) = (first.await.unwrap(), second.await.unwrap());
        assert!(done ^ other, "round {round}: exactly one update changes the key ({done}, {other})");
        let state = store.get(&new.key).await.unwrap().unwrap().state;
        let expected =
            if abort_second && other { pastebin_core::KeyState::Aborted } else { pastebin_core::KeyState::Done };
        assert_eq!(state, expected, "round {round}");
    }
}
