//! What a shard records about a move: the identity both ends agree on, the
//! lease of the ctl run driving it, and how far it has come here.

use std::fmt;

use pastebin_core::{OwnedSlots, SlotRange};

/// One move, end to end: both shards record all of it, every call names
/// all of it, and a shard refuses a call whose identity differs from its
/// record (a typo in `--to` is refused, never obeyed). The addresses are
/// the operator's, as typed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity {
    pub id: String,
    pub slots: SlotRange,
    pub source: String,
    pub target: String,
}

impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "move {} of slots {} from {} to {}", self.id, self.slots, self.source, self.target)
    }
}

/// This shard's part in a move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    Source,
    Target,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Target => "target",
        }
    }
}

/// How far a move has come on this shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Step {
    /// Target: copies are arriving; the slots are not served here yet.
    Importing,
    /// Source: the move is recorded and the bulk of its rows is copied
    /// while the slots are still served (writes go on).
    Exporting,
    /// Source: the slots are frozen (writes refused, retryable) while they are copied.
    Frozen,
    /// Source: the slots are given up to the target; the copies here are still to be deleted.
    Released,
    Done,
    Abandoned,
}

impl Step {
    pub const ALL: [Step; 6] =
        [Self::Importing, Self::Exporting, Self::Frozen, Self::Released, Self::Done, Self::Abandoned];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Importing => "importing",
            Self::Exporting => "exporting",
            Self::Frozen => "frozen",
            Self::Released => "released",
            Self::Done => "done",
            Self::Abandoned => "abandoned",
        }
    }

    pub fn parse(raw: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|step| step.as_str() == raw)
    }

    pub fn finished(self) -> bool {
        matches!(self, Self::Done | Self::Abandoned)
    }
}

/// The ctl run that may drive a move: its epoch (each run takes a higher
/// one; a shard refuses calls of an older one, so a run that was taken over
/// cannot write again) and, until `until_ms` on this shard's clock, its
/// holder alone may take a new epoch (a second run is refused, named).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Lease {
    pub epoch: u64,
    pub holder: String,
    pub until_ms: i64,
}

/// What every call carries to say which run it is from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Fence {
    pub epoch: u64,
    pub holder: String,
    /// How long the lease lasts after this call.
    pub lease_ms: i64,
}

/// One move as this shard recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Record {
    pub identity: Identity,
    pub role: Role,
    pub step: Step,
    pub lease: Lease,
    /// An abandon has begun: nothing may be released or taken any more,
    /// and every run finishes the abandon (docs/design.md#moving-slots).
    pub abandoning: bool,
    /// Source: drawn when it released the slots; its release receipt (this
    /// record) carries it, the target takes only with it, and the source
    /// deletes its copies only when the target's record echoes it. Target:
    /// the token it took with.
    pub release_token: Option<String>,
    /// The lost-commits window (since, until: Unix milliseconds) the source
    /// held for these slots when it released them: it moves with them, and
    /// the target searches first for their keys until it ends
    /// (docs/design.md#adopting-after-a-k-loss).
    pub search_first: Option<(i64, i64)>,
    /// Unix milliseconds on this shard's clock.
    pub started_at_ms: i64,
    pub updated_at_ms: i64,
}

impl Record {
    /// The other shard's address.
    pub fn peer(&self) -> &str {
        match self.role {
            Role::Source => &self.identity.target,
            Role::Target => &self.identity.source,
        }
    }

    /// The same record, its lease's end left out: what must be stored.
    pub(crate) fn durable(&self) -> (Identity, Role, Step, u64, &str, bool, Option<&str>) {
        (
            self.identity.clone(),
            self.role,
            self.step,
            self.lease.epoch,
            &self.lease.holder,
            self.abandoning,
            self.release_token.as_deref(),
        )
    }
}

/// A shard's part of the handover: what it owns and the move it is in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shard {
    pub owned: OwnedSlots,
    /// The move in progress here; at most one.
    pub active: Option<Record>,
    /// When no move is in progress: the finished record of the move a call
    /// names, if this shard took part in it (its store looks it up by id).
    pub finished: Option<Record>,
}
