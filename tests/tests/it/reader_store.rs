//! Shard P's side of the reader features: the attributes a paste row keeps,
//! and the burn-after-reading claim that exactly one reader wins. Same bodies
//! on PostgreSQL and SQLite, plus a real race of 32 connections on PostgreSQL.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use pastebin_core::{Clock, FileName, Language, ManualClock, MediaType, PasteAttributes, SystemClock};
use pastebin_pastes::{BurnClaim, IdFate, InsertOutcome, NewPaste, PasteStore};
use pastebin_tests::shards::{fresh_pool, new_paste, paste_store, Backend};
use tokio::sync::Barrier;

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_900_000_000_000).unwrap()
}

async fn store_at_t0(backend: Backend) -> (PasteStore, ManualClock) {
    let clock = ManualClock::starting_at(t0());
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    (paste_store(backend, shared).await, clock)
}

fn burn_paste(now: DateTime<Utc>) -> NewPaste {
    let (mut paste, _token) = new_paste(now, chrono::Duration::hours(1));
    paste.attributes.burn_after_reading = true;
    paste
}

pastebin_tests::both_backends! {
    async fn attributes_round_trip_and_default_to_plain_text(backend: Backend) {
        let (store, _clock) = store_at_t0(backend).await;
        let (mut binary, _) = new_paste(t0(), chrono::Duration::hours(1));
        binary.attributes = PasteAttributes {
            media_type: Some(MediaType::parse("image/png").unwrap()),
            file_name: Some(FileName::parse("cat picture.png").unwrap()),
            language: Some(Language::parse("rust").unwrap()),
            burn_after_reading: true,
            sealed: true,
        };
        let (plain, _) = new_paste(t0(), chrono::Duration::hours(1));
        for paste in [&binary, &plain] {
            assert_eq!(store.insert(paste).await.unwrap(), InsertOutcome::Inserted);
            let row = store.get_live(&paste.id).await.unwrap().expect("live");
            assert_eq!(row.attributes, paste.attributes);
        }
        assert_eq!(store.get_live(&plain.id).await.unwrap().unwrap().attributes, PasteAttributes::default());
    }

    async fn a_burn_paste_is_claimed_once_then_gone(backend: Backend) {
        let (store, _clock) = store_at_t0(backend).await;
        let paste = burn_paste(t0());
        assert_eq!(store.insert(&paste).await.unwrap(), InsertOutcome::Inserted);

        assert_eq!(store.claim_burn(&paste.id).await.unwrap(), BurnClaim::Claimed);
        assert_eq!(store.claim_burn(&paste.id).await.unwrap(), BurnClaim::Gone);
        assert_eq!(store.get_live(&paste.id).await.unwrap(), None);
        // The burned id is dead for good: a late saga step cannot bring it back.
        assert_eq!(store.insert(&paste).await.unwrap(), InsertOutcome::Tombstoned);
        assert_eq!(store.tombstone_unless_live(&paste.id).await.unwrap(), IdFate::Tombstoned);
    }

    async fn only_burn_pastes_can_be_claimed(backend: Backend) {
        let (store, _clock) = store_at_t0(backend).await;
        let (plain, _) = new_paste(t0(), chrono::Duration::hours(1));
        assert_eq!(store.insert(&plain).await.unwrap(), InsertOutcome::Inserted);
        assert_eq!(store.claim_burn(&plain.id).await.unwrap(), BurnClaim::Gone);
        assert!(store.get_live(&plain.id).await.unwrap().is_some(), "a plain paste is never burned");
    }

    async fn an_expired_burn_paste_cannot_be_claimed(backend: Backend) {
        let (store, clock) = store_at_t0(backend).await;
        let paste = burn_paste(t0());
        assert_eq!(store.insert(&paste).await.unwrap(), InsertOutcome::Inserted);
        clock.advance(std::time::Duration::from_secs(3601));
        assert_eq!(store.claim_burn(&paste.id).await.unwrap(), BurnClaim::Gone);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn thirty_two_racing_claims_on_postgres_have_exactly_one_winner() {
    let clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let store = PasteStore::new(fresh_pool(Backend::Postgres, &pastebin_pastes::MIGRATIONS, 40).await, clock);
    for round in 0..5 {
        let paste = burn_paste(Utc::now());
        assert_eq!(store.insert(&paste).await.unwrap(), InsertOutcome::Inserted);
        let barrier = Arc::new(Barrier::new(32));
        let claims: Vec<_> = (0..32)
            .map(|_| {
                let (store, barrier, id) = (store.clone(), barrier.clone(), paste.id.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    store.claim_burn(&id).await.expect("claim")
                })
            })
            .collect();
        let mut winners = 0;
        for claim in claims {
            winners += usize::from(claim.await.unwrap() == BurnClaim::Claimed);
        }
        assert_eq!(winners, 1, "round {round}: exactly one reader gets the content");
    }
}
