//! [`next`]: the step `ctl reshard` runs, from what both shards recorded of
//! the move. ctl keeps nothing of its own between runs, so a rerun after any
//! crash, or a run of another terminal, reads the same records and goes on
//! from there; the model runs the same function as its operator.

use crate::{
    record::{Record, Role, Step},
    refusal::Refusal,
};

/// What a shard shows of the move: its record (in progress or finished),
/// or nothing when it never took part.
pub type View<'a> = Option<&'a Record>;

/// The next step of a move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Next {
    /// The source records the move first: a rerun that names another
    /// target (a typo in `--to`) then finds the move on the source and is
    /// refused, where a target-first record would let it begin a new move
    /// and leave the first target importing.
    PrepareExport,
    PrepareImport,
    /// Copy the bulk while the slots are still served, then freeze them.
    CopyThenFreeze,
    /// Catch up and verify the copies while frozen, then release.
    VerifyThenRelease,
    /// The target takes the slots on the source's release receipt.
    Take,
    /// The source deletes its copies, on the target's record of the take.
    DeleteCopies,
    /// Both shards finished the move.
    Done,
    /// Record "abandoning" on this shard (the source first).
    Abandon(Role),
    /// Undo on this shard, once both recorded the abandon (the target first).
    Undo(Role),
    /// Both shards finished undoing the move.
    Abandoned,
}

/// The next step, or why there is none. `abandon`: the operator asked to
/// undo the move. An abandon that either shard began is always finished,
/// never turned into a take.
pub fn next(source: View<'_>, target: View<'_>, abandon: bool) -> Result<Next, Refusal> {
    let step = |view: View<'_>| view.map(|record| record.step);
    let abandoning = |view: View<'_>| view.is_some_and(|r| r.abandoning || r.step == Step::Abandoned);
    if abandon || abandoning(source) || abandoning(target) {
        return undo(source, target);
    }
    Ok(match (step(source), step(target)) {
        (None, _) => Next::PrepareExport,
        (Some(_), None) => Next::PrepareImport,
        (Some(Step::Exporting), Some(Step::Importing)) => Next::CopyThenFreeze,
        (Some(Step::Frozen), Some(Step::Importing)) => Next::VerifyThenRelease,
        (Some(Step::Released), Some(Step::Importing)) => Next::Take,
        (Some(Step::Released), Some(Step::Done)) => Next::DeleteCopies,
        (Some(Step::Done), Some(Step::Done)) => Next::Done,
        (Some(step), _) => {
            let have = source.or(target).map(|r| r.identity.clone()).expect("a step was read from a record");
            return Err(Refusal::WrongStep {
                have,
                step,
                what: "the two shards' records of it do not fit together: check `pastebin ctl reshard --status`",
            });
        }
    })
}

/// The steps of an abandon: both shards record it (the source first, so
/// it never releases again), then the target drops its copies, then the
/// source serves the slots again.
fn undo(source: View<'_>, target: View<'_>) -> Result<Next, Refusal> {
    if let Some(released) = source.filter(|r| matches!(r.step, Step::Released | Step::Done)) {
        return Err(Refusal::Released { have: released.identity.clone() });
    }
    fn active(view: View<'_>) -> View<'_> {
        view.filter(|r| !r.step.finished())
    }
    Ok(match (active(source), active(target)) {
        (Some(s), _) if !s.abandoning => Next::Abandon(Role::Source),
        (_, Some(t)) if !t.abandoning => Next::Abandon(Role::Target),
        (_, Some(_)) => Next::Undo(Role::Target),
        (Some(_), None) => Next::Undo(Role::Source),
        (None, None) => Next::Abandoned,
    })
}
