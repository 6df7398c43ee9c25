//! What the clients saw, in order, and the checker that judges it against
//! the final state of K, P and the object store (Jepsen-style: the system
//! is a black box; only requests, answers and the final state are read).

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt,
    sync::{Arc, Mutex},
};

use bytes::Bytes;

/// The fields of a 201 that must never change for a key (`replayed` may).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer201 {
    pub id: String,
    pub url: String,
    pub raw_url: String,
    pub expires_at: String,
    pub delete_token: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A client sends a create for its key (by index) to a gateway.
    Invoke { client: usize, key: usize, gateway: usize },
    /// `key_state` is the key's state on K when the answer arrived (an
    /// oracle beyond the client's view: a 201 must follow K's done).
    Created { client: usize, key: usize, answer: Answer201, replayed: bool, key_state: Option<String> },
    /// An error status; whether the create happened is unknown to the client.
    Failed { client: usize, key: usize, code: tonic::Code },
    /// No answer within the client's own timeout.
    TimedOut { client: usize, key: usize },
    /// A read of a created id right after its 201.
    Read { client: usize, key: usize, id: String, outcome: ReadOutcome },
    /// One attempt to delete a created id with the delete token of its 201,
    /// sent at `sent_ms` (the entry's time is when it ended).
    Deleted { client: usize, key: usize, id: String, outcome: DeleteOutcome, sent_ms: i64 },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    /// 404: deleted by an earlier attempt whose answer was lost, or never
    /// there (a paste lost).
    NotFound,
    /// 403: the token of the paste's own 201 refused.
    Refused,
    /// No answer, or an error that says nothing: the client tries again.
    Unknown,
}

/// What the clients know of a paste's deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Deletion {
    /// A delete answered 204, or 404 after an attempt with no answer.
    Certain,
    /// Only attempts with no answer: deleted or not.
    Maybe,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    Content(Bytes),
    NotFound,
    /// The read could not be done (unavailable, timed out): says nothing.
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Simulated milliseconds since the start.
    pub at_ms: i64,
    pub event: Event,
}

/// The history all clients append to. The simulation runs on one thread,
/// so the order is the order things happened in.
#[derive(Debug, Clone, Default)]
pub struct History(Arc<Mutex<Vec<Entry>>>);

impl History {
    pub fn record(&self, at_ms: i64, event: Event) {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).push(Entry { at_ms, event });
    }

    pub fn entries(&self) -> Vec<Entry> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
    }
}

/// A key's row on K at the end.
#[derive(Debug, Clone)]
pub struct KeyRow {
    pub state: String,
    pub paste_id: String,
    pub answer: Option<Answer201>,
}

/// Everything the checker reads after the run.
#[derive(Debug, Default)]
pub struct FinalState {
    /// By idempotency key.
    pub keys: BTreeMap<String, KeyRow>,
    /// Paste id → `live` or `tombstoned`, on the P shard that owns its slot.
    pub pastes: BTreeMap<String, String>,
    /// Paste id → the object's bytes.
    pub objects: BTreeMap<String, Bytes>,
    /// Ids whose object was ever deleted.
    pub deleted_objects: BTreeSet<String>,
    /// What shard databases that were rolled back forgot
    /// ([`crate::amnesia`]): what may legitimately have changed.
    pub forgotten: crate::amnesia::Forgotten,
}

impl FinalState {
    /// Whether a rollback erased or changed the row of `key` on K.
    fn key_forgotten(&self, key: &str) -> bool {
        self.forgotten.keys.contains(key)
    }

    /// Whether a rollback erased or changed the row of paste `id` on P.
    fn paste_forgotten(&self, id: &str) -> bool {
        self.forgotten.pastes.contains(id)
    }

    /// Whether two 201s of `key` may both hold: the same, or what a
    /// rollback outside a move may change. A K shard that forgot the key
    /// adopts its paste again on the retry, with a new delete token (as
    /// after any unsafe failover, docs/design.md#adopting-after-a-k-loss);
    /// if its P shard forgot the paste too, both lost it, and the retry
    /// makes another. A P shard that forgot alone changes no answer: K
    /// replays its record.
    fn may_differ(&self, key: &str, first: &Answer201, other: &Answer201) -> bool {
        let untokened = |answer: &Answer201| Answer201 { delete_token: String::new(), ..answer.clone() };
        first == other
            || (self.key_forgotten(key) && (untokened(first) == untokened(other) || self.paste_forgotten(&first.id)))
    }
}

/// One broken promise, in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation(pub String);

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A key of the workload: its idempotency key and the content every
/// attempt sends.
#[derive(Debug, Clone)]
pub struct KeySpec {
    pub key: String,
    pub content: String,
}

/// Checks the invariants of docs/design.md#invariants on one run.
pub fn check(keys: &[KeySpec], history: &[Entry], end: &FinalState) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut found = |text: String| violations.push(Violation(text));
    let answers = answers_by_key(history);
    let deletions = deletions_by_key(history, keys, end, &mut found);
    for (index, spec) in keys.iter().enumerate() {
        let sent = answers.get(&index).map(Vec::as_slice).unwrap_or_default();
        if let Some(first) = sent.first() {
            if sent.iter().any(|answer| !end.may_differ(&spec.key, first, answer)) {
                found(format!("key {index}: two different 201 bodies ({} and another)", first.id));
            }
        }
        let Some(row) = end.keys.get(&spec.key) else {
            if !sent.is_empty() && !end.key_forgotten(&spec.key) {
                found(format!("key {index}: answered 201 but K has no record"));
            }
            continue;
        };
        match row.state.as_str() {
            "pending" => found(format!("key {index}: still pending after healing and recovery")),
            "done" => match deletions.get(&index) {
                None => check_done(index, spec, row, sent, end, &mut found),
                Some(deletion) => check_deleted(index, row, *deletion, end, &mut found),
            },
            // A K shard that forgot a done key whose paste was deleted since aborts it on recovery.
            _ if !sent.is_empty() && !end.key_forgotten(&spec.key) => {
                found(format!("key {index}: answered 201 but ended {}", row.state))
            }
            _ => {}
        }
    }
    let done_ids: BTreeSet<&str> =
        end.keys.values().filter(|row| row.state == "done").map(|row| row.paste_id.as_str()).collect();
    for (id, state) in &end.pastes {
        let key_forgotten = end.forgotten.keys_pastes.contains(id) || end.paste_forgotten(id);
        if state == "live" && !done_ids.contains(id.as_str()) && !key_forgotten {
            found(format!("paste {id} is live but no done key names it (a second paste, or an abort under it)"));
        }
    }
    for entry in history {
        if let Event::Created { key, key_state, .. } = &entry.event {
            // A rollback of its K shard may erase the done record before the 201 arrives.
            let forgotten = keys.get(*key).is_some_and(|spec| end.key_forgotten(&spec.key));
            if key_state.as_deref() != Some("done") && !forgotten {
                found(format!("key {key}: answered 201 at {} ms while K had it {key_state:?}", entry.at_ms));
            }
        }
        if let Event::Read { key, id, outcome: ReadOutcome::NotFound, .. } = &entry.event {
            // Once a delete of the key was sent (two clients may share one) a read rightly finds nothing.
            if !deleting(history, *key, entry.at_ms, None) && !end.paste_forgotten(id) {
                found(format!("key {key}: its 201 named {id}, which a read at {} ms did not find", entry.at_ms));
            }
        }
        if let Event::Read { key, id, outcome: ReadOutcome::Content(content), .. } = &entry.event {
            if content.as_ref() != keys[*key].content.as_bytes() {
                found(format!("key {key}: a read of {id} returned other content"));
            }
        }
    }
    violations
}

fn check_done(
    index: usize,
    spec: &KeySpec,
    row: &KeyRow,
    sent: &[Answer201],
    end: &FinalState,
    found: &mut impl FnMut(String),
) {
    let id = &row.paste_id;
    if let Some(first) = sent.first() {
        if !row.answer.as_ref().is_some_and(|stored| end.may_differ(&spec.key, first, stored)) {
            found(format!("key {index}: the stored 201 differs from the one answered"));
        }
    }
    // A paste a rollback of its P shard erased is lost, as in any failover
    // that loses commits; `ctl repair` and `reconcile` are the remedy.
    if end.paste_forgotten(id) || sent.first().is_some_and(|first| end.paste_forgotten(&first.id)) {
        return;
    }
    if end.pastes.get(id).map(String::as_str) != Some("live") {
        found(format!("key {index}: done, but its paste {id} is not live"));
    }
    match end.objects.get(id) {
        Some(content) if content.as_ref() == spec.content.as_bytes() => {}
        Some(_) => found(format!("key {index}: the object of {id} holds other content")),
        None => found(format!("key {index}: done, but the object of {id} is gone")),
    }
    if end.deleted_objects.contains(id) {
        found(format!("key {index}: the object of its done paste {id} was deleted at some point"));
    }
}

/// A done key whose paste a client deleted: the key stays done (a retry
/// replays its 201), and once a delete was certain the paste is a
/// tombstone on the P shard that owns its slot, never live again and never
/// gone (a move carries tombstones with their slots).
fn check_deleted(index: usize, row: &KeyRow, deletion: Deletion, end: &FinalState, found: &mut impl FnMut(String)) {
    let id = &row.paste_id;
    if end.paste_forgotten(id) {
        return;
    }
    match (deletion, end.pastes.get(id).map(String::as_str)) {
        (Deletion::Certain, Some("live")) => {
            found(format!("key {index}: its paste {id} was deleted, and is live at the end"))
        }
        (Deletion::Certain, None) => {
            found(format!("key {index}: its paste {id} was deleted, and its tombstone is gone"))
        }
        _ => {}
    }
}

/// Whether a delete of `key` other than the one that ended at `but` was
/// sent by `at_ms`: what a 404 of a read or of a delete may follow from.
fn deleting(history: &[Entry], key: usize, at_ms: i64, but: Option<usize>) -> bool {
    history.iter().enumerate().any(|(index, entry)| {
        let sent =
            matches!(entry.event, Event::Deleted { key: deleted, sent_ms, .. } if deleted == key && sent_ms <= at_ms);
        sent && Some(index) != but
    })
}

/// What the clients know of each key's deletion; a delete refused with the
/// token of the paste's own 201, or a 404 no other attempt (of any client:
/// two may share a key) explains, is a finding in itself.
fn deletions_by_key(
    history: &[Entry],
    keys: &[KeySpec],
    end: &FinalState,
    found: &mut impl FnMut(String),
) -> BTreeMap<usize, Deletion> {
    let mut deletions = BTreeMap::new();
    for (index, entry) in history.iter().enumerate() {
        let Event::Deleted { key, id, outcome, .. } = &entry.event else { continue };
        let earlier = deletions.get(key).copied();
        let deletion = match outcome {
            DeleteOutcome::Deleted => Deletion::Certain,
            DeleteOutcome::NotFound if deleting(history, *key, entry.at_ms, Some(index)) => Deletion::Certain,
            DeleteOutcome::NotFound => {
                if !end.paste_forgotten(id) {
                    found(format!("key {key}: a delete of {id} at {} ms found no paste", entry.at_ms));
                }
                Deletion::Certain
            }
            DeleteOutcome::Refused => {
                // An adopted paste has a new delete token: the old one is refused.
                if !keys.get(*key).is_some_and(|spec| end.key_forgotten(&spec.key)) {
                    found(format!("key {key}: a delete of {id} at {} ms refused the token of its 201", entry.at_ms));
                }
                earlier.unwrap_or(Deletion::Maybe)
            }
            DeleteOutcome::Unknown => earlier.unwrap_or(Deletion::Maybe),
        };
        deletions.insert(*key, deletion);
    }
    deletions
}

fn answers_by_key(history: &[Entry]) -> BTreeMap<usize, Vec<Answer201>> {
    let mut answers: BTreeMap<usize, Vec<Answer201>> = BTreeMap::new();
    for entry in history {
        if let Event::Created { key, answer, .. } = &entry.event {
            answers.entry(*key).or_default().push(answer.clone());
        }
    }
    answers
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(id: &str, token: &str) -> Answer201 {
        Answer201 {
            id: id.into(),
            url: format!("https://paste.sim/{id}"),
            raw_url: format!("https://paste.sim/raw/{id}"),
            expires_at: "2027-01-01T00:00:00Z".into(),
            delete_token: token.into(),
        }
    }

    fn one_key() -> Vec<KeySpec> {
        vec![KeySpec { key: "k".into(), content: "hello".into() }]
    }

    fn created(at_ms: i64, answer: Answer201) -> Entry {
        Entry {
            at_ms,
            event: Event::Created { client: 0, key: 0, answer, replayed: false, key_state: Some("done".into()) },
        }
    }

    /// K done with `id`, P live `id`, the object holding "hello".
    fn settled(id: &str, token: &str) -> FinalState {
        let mut end = FinalState::default();
        let row = KeyRow { state: "done".into(), paste_id: id.into(), answer: Some(answer(id, token)) };
        end.keys.insert("k".into(), row);
        end.pastes.insert(id.into(), "live".into());
        end.objects.insert(id.into(), Bytes::from_static(b"hello"));
        end
    }

    #[test]
    fn a_consistent_run_has_no_violation() {
        let history = [created(10, answer("A", "t")), created(20, answer("A", "t"))];
        assert_eq!(check(&one_key(), &history, &settled("A", "t")), Vec::new());
    }

    #[test]
    fn two_bodies_for_one_key_are_a_violation() {
        let history = [created(10, answer("A", "t")), created(20, answer("A", "other token"))];
        let found = check(&one_key(), &history, &settled("A", "t"));
        assert!(found.iter().any(|v| v.0.contains("two different 201 bodies")), "{found:?}");
    }

    #[test]
    fn a_201_before_done_is_a_violation() {
        let mut early = created(10, answer("A", "t"));
        if let Event::Created { key_state, .. } = &mut early.event {
            *key_state = Some("pending".into());
        }
        let found = check(&one_key(), &[early], &settled("A", "t"));
        assert!(found.iter().any(|v| v.0.contains("while K had it")), "{found:?}");
    }

    #[test]
    fn a_second_live_paste_is_a_violation() {
        let mut end = settled("A", "t");
        end.pastes.insert("B".into(), "live".into());
        let found = check(&one_key(), &[created(10, answer("A", "t"))], &end);
        assert!(found.iter().any(|v| v.0.contains("paste B is live but no done key names it")), "{found:?}");
    }

    #[test]
    fn an_answered_key_that_ended_aborted_or_pending_is_a_violation() {
        for state in ["aborted", "pending"] {
            let mut end = settled("A", "t");
            if let Some(row) = end.keys.get_mut("k") {
                row.state = state.into();
            }
            end.pastes.insert("A".into(), "tombstoned".into());
            let found = check(&one_key(), &[created(10, answer("A", "t"))], &end);
            assert!(!found.is_empty(), "{state}: {found:?}");
        }
    }

    #[test]
    fn a_lost_or_deleted_object_of_a_done_paste_is_a_violation() {
        let mut end = settled("A", "t");
        end.objects.clear();
        assert!(!check(&one_key(), &[], &end).is_empty());
        let mut end = settled("A", "t");
        end.deleted_objects.insert("A".into());
        assert!(!check(&one_key(), &[], &end).is_empty());
    }

    fn deleted(at_ms: i64, outcome: DeleteOutcome) -> Entry {
        Entry { at_ms, event: Event::Deleted { client: 0, key: 0, id: "A".into(), outcome, sent_ms: at_ms - 5 } }
    }

    #[test]
    fn a_deleted_paste_must_end_a_tombstone() {
        let history = [created(10, answer("A", "t")), deleted(20, DeleteOutcome::Deleted)];
        let mut end = settled("A", "t");
        end.pastes.insert("A".into(), "tombstoned".into());
        end.objects.clear();
        assert_eq!(check(&one_key(), &history, &end), Vec::new());
        end.pastes.insert("A".into(), "live".into());
        let found = check(&one_key(), &history, &end);
        assert!(found.iter().any(|v| v.0.contains("was deleted, and is live")), "{found:?}");
        end.pastes.clear();
        let found = check(&one_key(), &history, &end);
        assert!(found.iter().any(|v| v.0.contains("its tombstone is gone")), "{found:?}");
    }

    #[test]
    fn a_404_is_a_deletion_only_after_an_attempt_with_no_answer() {
        let mut end = settled("A", "t");
        end.pastes.insert("A".into(), "tombstoned".into());
        let retried =
            [created(10, answer("A", "t")), deleted(20, DeleteOutcome::Unknown), deleted(30, DeleteOutcome::NotFound)];
        assert_eq!(check(&one_key(), &retried, &end), Vec::new());
        let first = [created(10, answer("A", "t")), deleted(20, DeleteOutcome::NotFound)];
        let found = check(&one_key(), &first, &end);
        assert!(found.iter().any(|v| v.0.contains("found no paste")), "{found:?}");
        let refused = [created(10, answer("A", "t")), deleted(20, DeleteOutcome::Refused)];
        let found = check(&one_key(), &refused, &settled("A", "t"));
        assert!(found.iter().any(|v| v.0.contains("refused the token of its 201")), "{found:?}");
    }

    #[test]
    fn a_404_after_another_client_sent_a_delete_is_no_violation() {
        let mut end = settled("A", "t");
        end.pastes.insert("A".into(), "tombstoned".into());
        let read = |at_ms| Entry {
            at_ms,
            event: Event::Read { client: 1, key: 0, id: "A".into(), outcome: ReadOutcome::NotFound },
        };
        // The delete was sent at 15 and answered at 40; the read's 404 came between.
        let history = [created(10, answer("A", "t")), read(30), deleted(40, DeleteOutcome::Deleted)];
        let history = history.map(|mut entry| {
            if let Event::Deleted { sent_ms, .. } = &mut entry.event {
                *sent_ms = 15;
            }
            entry
        });
        assert_eq!(check(&one_key(), &history, &end), Vec::new());
        let before = [created(10, answer("A", "t")), read(12), deleted(40, DeleteOutcome::Deleted)];
        let found = check(&one_key(), &before, &end);
        assert!(found.iter().any(|v| v.0.contains("did not find")), "a read before any delete was sent: {found:?}");
    }

    #[test]
    fn a_read_that_misses_a_created_id_is_a_violation() {
        let read = Entry {
            at_ms: 30,
            event: Event::Read { client: 0, key: 0, id: "A".into(), outcome: ReadOutcome::NotFound },
        };
        let found = check(&one_key(), &[created(10, answer("A", "t")), read], &settled("A", "t"));
        assert!(found.iter().any(|v| v.0.contains("did not find")), "{found:?}");
    }
}
