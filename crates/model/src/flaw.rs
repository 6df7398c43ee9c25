//! Deliberately broken variants of the protocol. Each removes one safety
//! rule the design depends on; the checker must find a counterexample for
//! each, which shows the model can see the bug the rule prevents.

/// One safety rule taken out, or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flaw {
    /// The sweeper reads P and aborts when no row is there, without the
    /// tombstone (docs/design.md#fence).
    SweeperAbortsWithoutFence,
    /// The sweeper marks a stale pending key done without asking P.
    SweeperFinishesBlind,
    /// The sweeper aborts a key whose P it could not reach.
    SweeperAbortsWhenUnreachable,
    /// `Saga::abort` aborts the key on K without tombstoning the id first.
    SagaAbortsWithoutFence,
    /// Done is guarded by state only, not by the paste id.
    DoneWithoutIdGuard,
    /// Abort is guarded by state only, not by the paste id.
    AbortWithoutIdGuard,
    /// Restart is guarded by state only, not by the aborted id.
    RestartWithoutIdGuard,
    /// P's insert overwrites a tombstone: the fence does not hold.
    FenceDoesNotHold,
    /// The gateway answers 201 once the row is in, before K says done.
    AnswersBeforeDone,
    /// The object reaper takes objects of any age (still behind the fence).
    ReapsWithoutAgeFloor,
    /// The object reaper reads P instead of fencing before it deletes.
    ReapsWithoutFence,
    /// K loses commits and is restarted without `--may-have-lost-commits-since`:
    /// creates never search P first (docs/design.md#adopting-after-a-k-loss).
    NoSearchAfterKLoss,
    /// The colocated create commits the done key, then inserts the paste
    /// row in a second commit (docs/design.md#the-colocated-create).
    OneCommitSplitInTwo,
    /// The colocated create's commit inserts its row over the fence's tombstone.
    OneCommitOverTombstone,
}

impl Flaw {
    pub const ALL: [Flaw; 14] = [
        Flaw::SweeperAbortsWithoutFence,
        Flaw::SweeperFinishesBlind,
        Flaw::SweeperAbortsWhenUnreachable,
        Flaw::SagaAbortsWithoutFence,
        Flaw::DoneWithoutIdGuard,
        Flaw::AbortWithoutIdGuard,
        Flaw::RestartWithoutIdGuard,
        Flaw::FenceDoesNotHold,
        Flaw::AnswersBeforeDone,
        Flaw::ReapsWithoutAgeFloor,
        Flaw::ReapsWithoutFence,
        Flaw::NoSearchAfterKLoss,
        Flaw::OneCommitSplitInTwo,
        Flaw::OneCommitOverTombstone,
    ];
}
