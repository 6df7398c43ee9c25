//! Property-based fuzzing of the parsers that take outside input
//! (docs/testing.md#fuzzing): whatever the bytes, they answer Ok or Err and
//! never panic, and what they accept round-trips. `cargo test` runs the
//! default 256 cases per property; `PROPTEST_CASES=100000 cargo test -p
//! pastebin-core fuzz` runs a longer campaign.

use proptest::prelude::*;

use crate::{saturating_ago, Expiry, IdempotencyKey, PasteId};

/// Arbitrary bytes as a client could send them, lossily made text (headers and
/// paths reach the parsers as `&str`).
fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(|b| String::from_utf8_lossy(&b).into_owned()),
        "[0-9a-fA-F{}-]{0,40}",
        ".{0,40}",
    ]
}

proptest! {
    #[test]
    fn idempotency_keys_parse_or_refuse_and_accepted_ones_are_canonical(raw in text()) {
        if let Ok(key) = IdempotencyKey::parse(&raw) {
            let canonical = key.canonical();
            prop_assert_eq!(IdempotencyKey::parse(&canonical), Ok(key));
            prop_assert_eq!(canonical.len(), 36);
            prop_assert_eq!(key.short_hash().len(), 8);
        }
    }

    #[test]
    fn paste_ids_parse_or_refuse_and_accepted_ones_round_trip(raw in text()) {
        if let Ok(id) = PasteId::parse(&raw) {
            prop_assert_eq!(id.as_str(), raw.as_str());
            prop_assert!(id.slot().index() <= 255);
        }
    }

    #[test]
    fn any_expiry_is_in_range_or_refused(seconds in any::<Option<u64>>()) {
        match Expiry::from_seconds(seconds) {
            Ok(expiry) => {
                prop_assert!((Expiry::MIN_SECONDS..=Expiry::MAX_SECONDS).contains(&expiry.seconds()));
                let now = chrono::Utc::now();
                prop_assert!(expiry.expires_at(now) > now);
            }
            Err(_) => prop_assert!(seconds.is_some()),
        }
    }

    #[test]
    fn an_age_from_outside_never_overflows(age_secs in any::<u64>(), nanos in 0u32..1_000_000_000) {
        let now = chrono::Utc::now();
        let before = saturating_ago(now, std::time::Duration::new(age_secs, nanos));
        prop_assert!(before <= now);
        // Whatever the age, the shards can store the answer.
        let _ = crate::to_millis(before);
    }
}

#[test]
fn the_oldest_possible_age_is_the_beginning_of_time() {
    let now = chrono::Utc::now();
    assert_eq!(saturating_ago(now, std::time::Duration::MAX), chrono::DateTime::<chrono::Utc>::MIN_UTC);
    assert_eq!(saturating_ago(now, std::time::Duration::from_secs(60)), now - chrono::Duration::seconds(60));
}
