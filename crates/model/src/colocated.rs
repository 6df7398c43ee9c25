//! The colocated create (crates/gateway/src/colocated.rs), step by step as
//! docs/design.md#the-colocated-create writes it: look the key up; a done
//! key answers its 201; a key a saga left pending or aborted is followed by
//! the saga's own steps; otherwise PUT the object outside any transaction,
//! then one commit makes the paste row and the done key together.

use crate::{
    flaw::Flaw,
    protocol::{Next, Protocol},
    world::{Attempt, InsertOutcome, KeyState, KeyWorld, Op, Reply},
};

impl Protocol {
    /// The colocated create after one reply. A commit that found a record
    /// answers it, which the attempt follows like a lookup's answer.
    pub(crate) fn one_commit_step(&self, attempt: &mut Attempt, key: &mut KeyWorld, reply: Reply) -> Next {
        match (attempt.waiting_for, reply) {
            (Op::Lookup, Reply::Looked(None)) => {
                let paste = key.mint();
                attempt.paste = Some(paste);
                Next::Call(Op::Put(paste))
            }
            (Op::Lookup | Op::Commit { .. }, Reply::Looked(Some(record))) => match record.state {
                KeyState::Done => Next::Answer(Some(record.paste)),
                // `Saga::follow`: the saga's rules for the record. The model's
                // saga takes a record from its begin, which on an existing
                // key writes nothing and answers the record the lookup read.
                KeyState::Pending | KeyState::Aborted => {
                    key.saga_key_followed = true;
                    to_the_saga(attempt)
                }
            },
            // `Saga::run`, from the start: a new key is begun, and searched for.
            (Op::Commit { .. }, Reply::SearchFirst) => to_the_saga(attempt),
            (Op::Put(paste), Reply::Stored) => Next::Call(Op::Commit { paste }),
            (Op::Commit { .. }, Reply::Committed(paste)) if self.has(Flaw::OneCommitSplitInTwo) => {
                Next::Call(Op::Insert(paste))
            }
            (Op::Commit { .. }, Reply::Committed(paste)) => Next::Answer(Some(paste)),
            (Op::Insert(paste), Reply::Inserted(InsertOutcome::Inserted | InsertOutcome::AlreadyExists)) => {
                Next::Answer(Some(paste))
            }
            // Uncertain, refused, or the fence holds the fresh id: nothing
            // this attempt can still commit; 503, and the retry looks again.
            _ => Next::Answer(None),
        }
    }
}

/// The attempt goes on as the saga, from its begin.
fn to_the_saga(attempt: &mut Attempt) -> Next {
    attempt.one_commit = false;
    Next::Call(Op::Begin)
}
