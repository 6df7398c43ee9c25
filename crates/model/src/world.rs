//! The whole system's state at one instant: K, P and the object store per
//! key, every client, gateway and sweeper, the requests still in the network,
//! and the few history variables the properties need.
//!
//! Paste ids are numbered per key in minting order ([`PasteNo`]): only
//! distinctness matters to the protocol, and numbering them per key keeps the
//! keys interchangeable for symmetry reduction.

use std::collections::BTreeSet;

/// The n-th paste id minted for a key. Ids are never reused.
pub type PasteNo = u8;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyState {
    Pending,
    Done,
    Aborted,
}

/// A key's record on K: the paste id it names and its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyRecord {
    pub paste: PasteNo,
    pub state: KeyState,
}

impl KeyRecord {
    pub fn is(&self, paste: PasteNo, state: KeyState) -> bool {
        self.paste == paste && self.state == state
    }
}

/// What P holds for one paste id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Row {
    Absent,
    Live,
    /// The fence: this id can never be inserted.
    Tombstone,
    /// Deleted by its owner with the delete token: dead like a tombstone.
    DeletedByOwner,
}

impl Row {
    /// A paste that exists or existed: what "at most one paste per key" counts.
    pub fn was_created(self) -> bool {
        matches!(self, Row::Live | Row::DeletedByOwner)
    }
}

/// P's row and the object store's object for one paste id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PasteSlot {
    pub row: Row,
    pub object: bool,
}

/// The one client of a key: it saves once and retries with the same key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Client {
    pub attempts_left: u8,
    /// The gateway it sent its current attempt to and still waits on.
    pub waiting_on: Option<u8>,
    pub has_201: bool,
}

/// Everything about one idempotency key.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyWorld {
    pub record: Option<KeyRecord>,
    /// Indexed by [`PasteNo`]: every id minted for this key so far.
    pub pastes: Vec<PasteSlot>,
    pub client: Client,
    /// History: the id named by the first 201 any gateway sent for this key.
    pub first_201: Option<PasteNo>,
    /// History: a retry adopted the paste a K loss left without its key.
    pub adopted: bool,
    /// History: a colocated create's one commit made the key done.
    pub one_commit: bool,
    /// History: a colocated create found the key pending or aborted, left by
    /// a saga, and followed it with the saga's steps.
    pub saga_key_followed: bool,
}

impl KeyWorld {
    pub fn row(&self, paste: PasteNo) -> Row {
        self.pastes[usize::from(paste)].row
    }

    pub fn is_pending(&self) -> bool {
        self.record.is_some_and(|record| record.state == KeyState::Pending)
    }

    /// Mints the next paste id: K assigns it when its insert or restart
    /// wins, which is the same as the gateway minting it beforehand, since a
    /// minted id that loses is never used anywhere.
    pub fn mint(&mut self) -> PasteNo {
        self.pastes.push(PasteSlot { row: Row::Absent, object: false });
        PasteNo::try_from(self.pastes.len() - 1).expect("a key mints at most one id per client attempt")
    }
}

/// One request to K, P or the object store, on one key's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Call {
    pub key: u8,
    pub op: Op,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// K: insert the key as pending with a fresh id, or return what is there.
    Begin,
    /// K: aborted → pending with a fresh id, guarded by the aborted id.
    Restart { aborted: PasteNo },
    /// Object store: create-only PUT.
    Put(PasteNo),
    /// P: insert the paste row.
    Insert(PasteNo),
    /// P: the fence, `tombstone_unless_live`.
    Fence(PasteNo),
    /// P: a plain read (only the broken variants use it instead of the fence).
    Read(PasteNo),
    /// K: pending → aborted, guarded by the paste id.
    Abort(PasteNo),
    /// K: pending → done, guarded by the paste id.
    Done(PasteNo),
    /// Object store: delete the object.
    DeleteObject(PasteNo),
    /// P: the rows made under this key (live, or deleted by their owner
    /// since; the fence's tombstones carry no key), for an attempt whose
    /// pending record names `own` (docs/design.md#adopting-after-a-k-loss).
    Search { own: PasteNo },
    /// P: the adopted live row takes the pending record's delete token.
    Rotate { pending: PasteNo, paste: PasteNo },
    /// K: pending (with `pending`) → done with `paste`, guarded.
    Adopt { pending: PasteNo, paste: PasteNo },
    /// The colocated shard: the key's record, read without writing.
    Lookup,
    /// The colocated shard's one commit (docs/design.md#the-colocated-create):
    /// the paste row and the done key together, if the key has no record.
    Commit { paste: PasteNo },
}

impl Op {
    pub fn on_paste_service(self) -> bool {
        matches!(self, Op::Insert(_) | Op::Fence(_) | Op::Read(_) | Op::Search { .. } | Op::Rotate { .. })
    }

    /// Steps whose definite refusal the saga compensates for, and the
    /// colocated commit, which a refusal leaves undone.
    pub fn can_be_refused(self) -> bool {
        matches!(self, Op::Put(_) | Op::Insert(_) | Op::Commit { .. })
    }
}

/// What the caller learns from a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reply {
    /// K's record after a begin, and whether K says to search P first (it
    /// may have lost commits, and the record is not done).
    Record {
        record: KeyRecord,
        search_first: bool,
    },
    /// What a search chose to adopt: the oldest live row made under the
    /// key, else the oldest one its owner deleted; none when the attempt's
    /// own id is among them.
    Found(Option<(PasteNo, Fate)>),
    /// Whether a guarded update on K applied. For done, also true when the
    /// key is already done with this id (the saga's re-read, folded in: the
    /// key cannot become done with this id between the two).
    Changed(bool),
    Restarted(Option<PasteNo>),
    /// The colocated shard's record of the key, as a lookup or a commit
    /// that found it otherwise than expected reads it.
    Looked(Option<KeyRecord>),
    /// The one commit made the key done with this paste.
    Committed(PasteNo),
    /// The colocated shard may have lost commits: the commit wrote nothing,
    /// and a key it does not know goes to the saga, which searches first.
    SearchFirst,
    Inserted(InsertOutcome),
    Fate(Fate),
    Stored,
    /// The other side answered: it did not act.
    Refused,
    /// Timeout or lost reply: it may or may not have acted.
    Uncertain,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum InsertOutcome {
    Inserted,
    AlreadyExists,
    Tombstoned,
}

/// P's answer to the fence or to a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fate {
    Live,
    Dead,
    /// Only a read can answer this: P never saw the id.
    Unknown,
}

/// One create attempt in a gateway: which key, which id it works on, and
/// the call it waits on.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Attempt {
    pub key: u8,
    pub paste: Option<PasteNo>,
    /// Whether this attempt's own begin or restart created the key's
    /// current pending record: such a record is young, and recovery leaves
    /// young records alone (the 60 s threshold is 30 times the 2 s budget).
    pub minted: bool,
    /// Only the broken variant that answers before done sets this.
    pub answered: bool,
    /// K said to search P before minting (its begin's record).
    pub search_first: bool,
    /// The colocated create; false: the saga.
    pub one_commit: bool,
    pub waiting_for: Op,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Chore {
    /// Recover one stale pending key.
    Recover,
    /// Reap one orphan object.
    Reap,
}

/// One unit of sweeper work in progress.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Job {
    pub chore: Chore,
    pub key: u8,
    pub paste: PasteNo,
    pub waiting_for: Op,
}

/// Who waits on a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Actor {
    Gateway(u8),
    Sweeper(u8),
}

/// Violations recorded when they happen, for the properties that are about
/// what was sent rather than about the state.
pub mod violation {
    pub const BODY_CHANGED: u8 = 1;
    pub const NAMES_DEAD_ID: u8 = 1 << 1;
    pub const BEFORE_DONE: u8 = 1 << 2;
    pub const UNDISTURBED_503: u8 = 1 << 3;
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct World {
    pub keys: Vec<KeyWorld>,
    pub gateways: Vec<Option<Attempt>>,
    pub sweepers: Vec<Option<Job>>,
    /// Requests whose sender stopped waiting (timeout, crash) or that the
    /// network duplicated: they may still land, in any order, or never.
    pub orphans: BTreeSet<Call>,
    pub paste_service_reachable: bool,
    /// K lost commits once (an unsafe failover) and was restarted in the
    /// search-first mode (unless the broken variant leaves it out).
    pub k_lost_commits: bool,
    pub faults_left: u8,
    /// Bits of [`violation`].
    pub violations: u8,
}

impl World {
    /// The call an actor waits on, if it is busy.
    pub fn waiting_for(&self, actor: Actor) -> Option<Call> {
        match actor {
            Actor::Gateway(g) => self.gateways[usize::from(g)].as_ref().map(|a| Call { key: a.key, op: a.waiting_for }),
            Actor::Sweeper(s) => self.sweepers[usize::from(s)].as_ref().map(|j| Call { key: j.key, op: j.waiting_for }),
        }
    }

    /// Whether K answers `search_first` now.
    pub fn k_searches_first(&self, flaw: Option<crate::flaw::Flaw>) -> bool {
        self.k_lost_commits && flaw != Some(crate::flaw::Flaw::NoSearchAfterKLoss)
    }

    /// Nothing is in flight for `key`: no attempt, no job, no late request.
    /// A K failover and the restart in the search-first mode take far
    /// longer than any call's 2 s budget, so the loss is modelled between
    /// the key's calls.
    pub fn key_is_quiet(&self, key: u8) -> bool {
        self.gateways.iter().flatten().all(|a| a.key != key)
            && self.sweepers.iter().flatten().all(|j| j.key != key)
            && self.orphans.iter().all(|call| call.key != key)
    }

    /// Whether `call` can reach its server now.
    pub fn reachable(&self, call: Call) -> bool {
        self.paste_service_reachable || !call.op.on_paste_service()
    }

    /// The key's pending record is young: the attempt that created it is
    /// still running. The stand-in for "younger than 60 s".
    pub fn pending_is_young(&self, key: u8, paste: PasteNo) -> bool {
        self.gateways.iter().flatten().any(|a| a.key == key && a.minted && a.paste == Some(paste))
    }

    /// An attempt is still working on this id. The stand-in for the
    /// object reaper's age floor (1 h, far past any attempt's 2 s budget).
    pub fn object_is_young(&self, key: u8, paste: PasteNo) -> bool {
        self.gateways.iter().flatten().any(|a| a.key == key && a.paste == Some(paste))
    }
}
