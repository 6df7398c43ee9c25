//! A model of a move under the authority (docs/design.md#ownership-on-etcd),
//! where a shard's database may forget: it rolls back to an earlier state of
//! itself, as a restore, a new volume or an asynchronous standby does. The
//! authority is a linearizable register holding a
//! [`pastebin_topology::Topology`], and every change to it is the function
//! ctl and the shards run (`record_move`, `freeze`, `verified`, `take`,
//! `taken_again`, `may_delete_copies`, `finish`, `confirm`); what a shard
//! serves is `Topology::serving`, as the shards decide it. What the model
//! adds is the world: the moving slot's one row on each shard's database,
//! each database's marker, and a nemesis that takes one snapshot of each
//! database and may later roll it back to it.

use pastebin_core::{OwnedSlots, Slot, SlotRange};
use pastebin_topology::{Confirmation, Phase, Topology};
use stateright::{Model, Property};

pub const ONE_WRITER: &str = "never two shards accept writes for the slot";
pub const NOTHING_LOST: &str = "the move never leaves the slot's row on no shard";
pub const SOME_MOVE: &str = "a move finishes with the target serving the slot";
pub const SOME_FORGOTTEN_MOVE: &str = "a move finishes after a database forgot";

const SHARDS: [&str; 2] = ["A", "B"];
const SOURCE: usize = 0;
const TARGET: usize = 1;
const MOVE: &str = "mv";
const SLOT: Slot = Slot(200);

fn moving() -> SlotRange {
    "128-255".parse().expect("a range")
}

/// A broken variant of the rules, each of which the checker must catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OwnershipFlaw {
    /// The cut-over trusts the target's copy as it is now, instead of
    /// comparing it with what was verified (its digest and its marker).
    TakeTrustsTheTargetAsItIs,
    /// A shard serves the range its own database records, not its grant.
    ServesFromItsOwnRecord,
    /// The source deletes its copies without recording it first, so a
    /// target that forgets afterwards is copied again from a source that
    /// no longer has the rows (what the model found in the first design).
    DeletesUnrecorded,
}

/// A shard's database: what a rollback takes back.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Database {
    /// The slot's row, if this database holds it.
    pub row: bool,
    /// Its record of the slot: whether it owns it (what it would serve from its own record).
    pub owns: bool,
    pub marker: Option<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shard {
    pub database: Database,
    /// The state the nemesis kept, and whether it rolled back to it already.
    pub snapshot: Option<Database>,
    pub rolled_back: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The authority: one register, read and swapped atomically.
    pub topology: Topology,
    pub shards: [Shard; 2],
    /// Markers drawn so far (each fresh marker is the next number).
    pub markers: u8,
    /// A rollback took the row from the shard that held the one copy the
    /// move relies on (the only copy, or the target's once the source began
    /// deleting): an ordinary failover's loss, for reconcile and repair, not
    /// the move's.
    pub lost_to_rollback: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// ctl records the move.
    Record,
    /// ctl copies the row to the target (while copying, or again after the target forgot).
    Copy,
    Freeze,
    /// ctl compares both copies; the target stamps a fresh marker over its
    /// copy (its database, then the authority); ctl records the verified copy.
    Verify,
    CutOver,
    /// After a take the target forgot: copied, verified and stamped again.
    TakeAgain,
    /// The shards' own records of the cut-over.
    Release,
    TakeLocally,
    /// ctl records that the source begins deleting its copies.
    StartDeleting,
    DeleteCopies,
    Finish,
    Snapshot(usize),
    /// The database rolls back to its snapshot; the shard restarts and
    /// confirms its marker.
    RollBack(usize),
}

#[derive(Clone, Debug)]
pub struct Ownership {
    pub flaw: Option<OwnershipFlaw>,
}

impl Ownership {
    fn serves_writes(&self, state: &State, shard: usize) -> bool {
        match self.flaw {
            Some(OwnershipFlaw::ServesFromItsOwnRecord) => state.shards[shard].database.owns,
            _ => state.topology.serving(SHARDS[shard]).writable(SLOT),
        }
    }

    fn phase(state: &State) -> Option<&Phase> {
        state.topology.moving.as_ref().map(|moving| &moving.phase)
    }

    fn target_held(state: &State) -> bool {
        state.topology.serving(SHARDS[TARGET]).held.is_some()
    }

    /// A fresh marker, in the target's database first, then the authority.
    fn stamp(state: &mut State, shard: usize) -> String {
        state.markers += 1;
        state.shards[shard].database.marker = Some(state.markers);
        let marker = state.markers.to_string();
        if let Confirmation::Forgot { next, .. } = state.topology.confirm(SHARDS[shard], None, &marker) {
            state.topology = *next;
        }
        marker
    }

    /// The digest of the target's copy: whether it holds the row.
    fn digest(state: &State) -> String {
        state.shards[TARGET].database.row.to_string()
    }
}

impl Model for Ownership {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let mut topology = Topology::initial([
            (SHARDS[SOURCE].to_owned(), OwnedSlots::Range(SlotRange::ALL)),
            (SHARDS[TARGET].to_owned(), OwnedSlots::Nothing),
        ])
        .expect("a valid topology");
        for (shard, marker) in [(SOURCE, "1"), (TARGET, "2")] {
            if let Confirmation::Forgot { next, .. } = topology.confirm(SHARDS[shard], None, marker) {
                topology = *next;
            }
        }
        let shard = |row, owns, marker| Shard {
            database: Database { row, owns, marker: Some(marker) },
            snapshot: None,
            rolled_back: false,
        };
        let shards = [shard(true, true, 1), shard(false, false, 2)];
        vec![State { topology, shards, markers: 2, lost_to_rollback: false }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        let (source, target) = (&state.shards[SOURCE].database, &state.shards[TARGET].database);
        match Self::phase(state) {
            None if state.topology.finished.is_empty() => actions.push(Action::Record),
            Some(Phase::Copying) => actions.extend([Action::Copy, Action::Freeze]),
            Some(Phase::Frozen) => actions.push(if source.row == target.row { Action::Verify } else { Action::Copy }),
            // A cut-over refused because the target forgot since is copied and verified again.
            Some(Phase::Verified { target_marker, .. }) => {
                let marker = state.topology.grant(SHARDS[TARGET]).and_then(|grant| grant.marker.as_deref());
                if marker != Some(target_marker.as_str()) || source.row != target.row {
                    actions.push(if source.row == target.row { Action::Verify } else { Action::Copy });
                }
                actions.push(Action::CutOver);
            }
            Some(Phase::Taken { .. }) if Self::target_held(state) => actions.push(Action::TakeAgain),
            Some(Phase::Taken { .. }) => {
                if source.owns {
                    actions.push(Action::Release);
                }
                if !target.owns {
                    actions.push(Action::TakeLocally);
                }
                let deleting = state.topology.moving.as_ref().is_some_and(|moving| moving.deleting);
                if source.row && !source.owns && target.owns {
                    let unrecorded = self.flaw == Some(OwnershipFlaw::DeletesUnrecorded);
                    actions.push(if deleting || unrecorded { Action::DeleteCopies } else { Action::StartDeleting });
                }
                if !source.row {
                    actions.push(Action::Finish);
                }
            }
            _ => {}
        }
        for (n, shard) in state.shards.iter().enumerate() {
            match (&shard.snapshot, shard.rolled_back) {
                (None, _) => actions.push(Action::Snapshot(n)),
                (Some(snapshot), false) if *snapshot != shard.database => actions.push(Action::RollBack(n)),
                _ => {}
            }
        }
    }

    fn next_state(&self, state: &State, action: Action) -> Option<State> {
        let mut next = state.clone();
        let topology = &state.topology;
        match action {
            Action::Record => {
                next.topology = topology.record_move(MOVE, moving(), SHARDS[SOURCE], SHARDS[TARGET]).ok()?
            }
            Action::Copy => next.shards[TARGET].database.row = state.shards[SOURCE].database.row,
            Action::Freeze => next.topology = topology.freeze(MOVE).ok()?,
            Action::Verify => {
                let digest = Self::digest(state);
                let marker = Self::stamp(&mut next, TARGET);
                next.topology = next.topology.verified(MOVE, &digest, &marker).ok()?;
            }
            // ctl reads the target's digest back now; the take compares it,
            // and the target's marker, with what was verified.
            Action::CutOver => {
                let digest = Self::digest(state);
                next.topology = match self.flaw {
                    Some(OwnershipFlaw::TakeTrustsTheTargetAsItIs) => {
                        let mut trusting = topology.clone();
                        let marker = topology.grant(SHARDS[TARGET])?.marker.clone()?;
                        trusting.moving.as_mut()?.phase =
                            Phase::Verified { digest: digest.clone(), target_marker: marker };
                        trusting.take(MOVE, &digest, None).ok()?
                    }
                    _ => topology.take(MOVE, &digest, None).ok()?,
                };
            }
            Action::TakeAgain => {
                next.shards[TARGET].database.row = state.shards[SOURCE].database.row;
                next.shards[TARGET].database.owns = true;
                let digest = Self::digest(&next);
                let marker = Self::stamp(&mut next, TARGET);
                next.topology = next.topology.taken_again(MOVE, &digest, &marker).ok()?;
            }
            Action::Release => next.shards[SOURCE].database.owns = false,
            Action::TakeLocally => next.shards[TARGET].database.owns = true,
            Action::StartDeleting => next.topology = topology.deleting(MOVE).ok()?,
            Action::DeleteCopies => {
                topology.may_delete_copies(MOVE).ok()?;
                next.shards[SOURCE].database.row = false;
            }
            Action::Finish => next.topology = topology.finish(MOVE).ok()?,
            Action::Snapshot(n) => next.shards[n].snapshot = Some(state.shards[n].database.clone()),
            Action::RollBack(n) => {
                let only_copy = state.shards.iter().enumerate().all(|(m, shard)| shard.database.row == (m == n));
                let relied_on = n == TARGET && state.topology.moving.as_ref().is_some_and(|moving| moving.deleting);
                let shard = &mut next.shards[n];
                shard.database = shard.snapshot.clone()?;
                shard.rolled_back = true;
                next.lost_to_rollback |= (only_copy || relied_on) && !shard.database.row;
                // The restart: a database without the marker the authority
                // has draws a fresh one (its database first).
                let stored = shard.database.marker.map(|marker| marker.to_string());
                if let Confirmation::Forgot { .. } = next.topology.confirm(SHARDS[n], stored.as_deref(), "") {
                    Self::stamp(&mut next, n);
                }
            }
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(ONE_WRITER, |model: &Ownership, state: &State| {
                (0..SHARDS.len()).filter(|&shard| model.serves_writes(state, shard)).count() <= 1
            }),
            Property::always(NOTHING_LOST, |_, state: &State| {
                state.lost_to_rollback || state.shards.iter().any(|shard| shard.database.row)
            }),
            Property::sometimes(SOME_MOVE, |model: &Ownership, state: &State| {
                state.topology.finished.iter().any(|done| done.phase == Phase::Done)
                    && model.serves_writes(state, TARGET)
            }),
            Property::sometimes(SOME_FORGOTTEN_MOVE, |_, state: &State| {
                state.topology.finished.iter().any(|done| done.phase == Phase::Done)
                    && state.shards.iter().any(|shard| shard.rolled_back)
            }),
        ]
    }
}

const SAFETY: [&str; 2] = [ONE_WRITER, NOTHING_LOST];
const REACHABLE: [&str; 2] = [SOME_MOVE, SOME_FORGOTTEN_MOVE];

/// Checks every state: the properties that failed, those found reachable,
/// and how many states there were.
pub fn check(model: Ownership) -> (Vec<&'static str>, Vec<&'static str>, usize) {
    crate::check::check_properties(model, &SAFETY, &REACHABLE)
}

/// The shortest trace to `property`'s failure, if there is one.
pub fn counterexample(model: Ownership, property: &'static str) -> Option<Vec<Action>> {
    crate::check::shortest_counterexample(model, property)
}
