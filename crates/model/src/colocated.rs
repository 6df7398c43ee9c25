//! The colocated create (crates/gateway/src/colocated.rs), step by step as
//! docs/design.md#the-colocated-create writes it: look the key up; a done
//! key answers its 201; otherwise PUT the object outside any transaction,
//! then one commit makes the paste row and the done key together. A key a
//! saga left pending is finished with its own id, and an aborted one is
//! restarted with a fresh id, each in that one commit.

use crate::{
    flaw::Flaw,
    protocol::{Next, Protocol},
    world::{Attempt, InsertOutcome, KeyState, KeyWorld, Op, Over, Reply},
};

impl Protocol {
    /// The colocated create after one reply. A commit that found the key
    /// otherwise than expected answers what it found, which the attempt
    /// follows like a lookup's answer.
    pub(crate) fn one_commit_step(&self, attempt: &mut Attempt, key: &mut KeyWorld, reply: Reply) -> Next {
        match (attempt.waiting_for, reply) {
            (Op::Lookup | Op::Commit { .. }, Reply::Looked(None)) => fresh(attempt, key, Over::Nothing),
            (Op::Lookup | Op::Commit { .. }, Reply::Looked(Some(record))) => match record.state {
                KeyState::Done => Next::Answer(Some(record.paste)),
                KeyState::Pending => {
                    attempt.paste = Some(record.paste);
                    attempt.one_commit = Some(Over::Pending);
                    Next::Call(Op::Put(record.paste))
                }
                KeyState::Aborted => fresh(attempt, key, Over::Aborted(record.paste)),
            },
            (Op::Put(paste), Reply::Stored) => {
                Next::Call(Op::Commit { paste, over: attempt.one_commit.unwrap_or(Over::Nothing) })
            }
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

/// A fresh id for a key with no record or an aborted one, then its PUT.
fn fresh(attempt: &mut Attempt, key: &mut KeyWorld, over: Over) -> Next {
    let paste = key.mint();
    attempt.paste = Some(paste);
    attempt.one_commit = Some(over);
    Next::Call(Op::Put(paste))
}
