//! The replay check: every 201 for a key must be byte-identical to the first
//! 201 seen for that key (docs/design.md#saga, step 6). Only a SHA-256 of each body is
//! kept, so a long run holds 32 bytes per key and never a delete token.

use std::{collections::HashMap, sync::Mutex};

use sha2::{Digest, Sha256};

use crate::stats::ReplaySummary;

/// What one answer was, compared with the answers before it for its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The first 201 for this key: it is the reference from now on.
    First,
    /// Equal to the reference.
    Same,
    /// Different from the reference: a double create or a broken replay.
    Mismatch,
}

#[derive(Debug, Default)]
pub struct ReplayCheck {
    inner: Mutex<Book>,
}

#[derive(Debug, Default)]
struct Book {
    first: HashMap<String, [u8; 32]>,
    compared: u64,
    mismatches: u64,
    /// A few keys that mismatched, for the operator to look up (keys are not secrets).
    examples: Vec<String>,
}

impl ReplayCheck {
    /// Records a 201 `body` for `key` and says how it compares.
    pub fn observe(&self, key: &str, body: &[u8]) -> Verdict {
        let digest: [u8; 32] = Sha256::digest(body).into();
        // A poisoned lock only means another task panicked mid-update of a
        // counter; the book is still usable.
        let mut book = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        match book.first.get(key) {
            None => {
                book.first.insert(key.to_owned(), digest);
                Verdict::First
            }
            Some(reference) if *reference == digest => {
                book.compared += 1;
                Verdict::Same
            }
            Some(_) => {
                book.compared += 1;
                book.mismatches += 1;
                if book.examples.len() < 10 {
                    book.examples.push(key.to_owned());
                }
                Verdict::Mismatch
            }
        }
    }

    pub fn summary(&self) -> ReplaySummary {
        let book = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        ReplaySummary { keys: book.first.len() as u64, compared: book.compared, mismatches: book.mismatches }
    }

    pub fn mismatched_keys(&self) -> Vec<String> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).examples.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_answer_is_the_reference_and_equal_replays_pass() {
        let check = ReplayCheck::default();
        assert_eq!(check.observe("k1", b"{\"id\":\"a\"}"), Verdict::First);
        assert_eq!(check.observe("k1", b"{\"id\":\"a\"}"), Verdict::Same);
        assert_eq!(check.observe("k2", b"{\"id\":\"b\"}"), Verdict::First);
        let s = check.summary();
        assert_eq!((s.keys, s.compared, s.mismatches), (2, 1, 0));
    }

    #[test]
    fn a_different_body_for_the_same_key_is_a_mismatch() {
        let check = ReplayCheck::default();
        check.observe("k1", b"{\"id\":\"a\"}");
        assert_eq!(check.observe("k1", b"{\"id\":\"b\"}"), Verdict::Mismatch);
        // Even one byte: replays must be byte-identical, not just equivalent JSON.
        assert_eq!(check.observe("k1", b"{\"id\": \"a\"}"), Verdict::Mismatch);
        assert_eq!(check.observe("k1", b"{\"id\":\"a\"}"), Verdict::Same);
        let s = check.summary();
        assert_eq!((s.keys, s.compared, s.mismatches), (1, 3, 2));
        assert_eq!(check.mismatched_keys(), vec!["k1".to_owned(), "k1".to_owned()]);
    }

    #[test]
    fn concurrent_observers_agree_on_one_reference() {
        let check = std::sync::Arc::new(ReplayCheck::default());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let check = check.clone();
                std::thread::spawn(move || {
                    for i in 0..100 {
                        check.observe(&format!("k{i}"), b"same");
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = check.summary();
        assert_eq!((s.keys, s.compared, s.mismatches), (100, 300, 0));
    }
}
