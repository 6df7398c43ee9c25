//! A model of moving one slot between two shards (docs/design.md#moving-slots),
//! checked exhaustively on its own: the slot's rows on the source and the
//! target, the step each shard recorded, writers that route by a slot map
//! that may be stale, and `ctl reshard`'s steps.
//!
//! ctl keeps no state: each of its steps is guarded only by what the shards
//! recorded, so a ctl killed anywhere and run again is just another
//! interleaving of the same steps, and every interleaving is explored.
//!
//! The bulk is copied while the source still serves the slot, so a write
//! there has two moments: it commits (the row changes, the write is
//! acknowledged), and then its permit is dropped, which records the row as
//! changed; a freeze waits for every permit. ctl copies the recorded rows
//! again in rounds, compares every row while served (what differs must be
//! recorded), and after the freeze copies and verifies only the recorded
//! rows; a source that restarted loses its record, and then ctl compares
//! every row while frozen. Abandoning is allowed until the source released.

use stateright::{Checker, HasDiscoveries, Model, Property};

/// Rows of the moving slot (a key, or a paste row and its tombstone).
pub const ROWS: usize = 2;
/// Each writer's writes, in order: (row, value). A higher value is a later
/// state of the row (pending → done, live → tombstone).
const WRITES: [(usize, u8); 3] = [(0, 1), (1, 1), (0, 2)];

pub const ONE_WRITER: &str = "never two shards accept writes for the slot";
pub const NOTHING_LOST: &str = "every acknowledged write is on the shard that holds the slot";
pub const SOME_MOVE: &str = "a move finishes with the target owning the slot";
pub const SOME_ABANDON: &str = "a move is abandoned and the source serves the slot again";
pub const SOME_FROZEN_WRITE: &str = "a write is refused while the slot is frozen, then acknowledged";
pub const SOME_BY_RECORD: &str = "a source releases the slot after a freeze that copied only the recorded rows";
pub const SOME_FALLBACK: &str = "a source that restarted releases the slot after every row was compared";

/// What a shard recorded about the move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Step {
    None,
    Importing,
    Exporting,
    Frozen,
    Released,
    Done,
    Abandoned,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shard {
    pub owns: bool,
    pub step: Step,
    pub rows: [u8; ROWS],
    /// The source's record: rows changed after ctl's last round.
    pub changed: [bool; ROWS],
    /// False once the source restarted during the move: changes are missing.
    pub record_complete: bool,
}

impl Shard {
    fn accepts_writes(&self) -> bool {
        self.owns && self.step != Step::Frozen
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Writer {
    /// The shard its slot map routes the slot to.
    pub routes_to: usize,
    /// How many of [`WRITES`] were acknowledged.
    pub acked: usize,
    pub saw_frozen: bool,
    /// A committed write whose permit it still holds: (shard, row), not yet recorded.
    pub holding: Option<(usize, usize)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct State {
    /// 0: the source, 1: the target.
    pub shards: [Shard; 2],
    pub writers: Vec<Writer>,
    /// History: the highest value acknowledged per row.
    pub acked: [u8; ROWS],
    /// ctl's memory within a run: it compared every row while served and
    /// trusts the source's record since; it verified the copies. A ctl that
    /// dies forgets both (and the rerun compares every row again).
    pub trusted: bool,
    pub verified: bool,
}

impl State {
    /// Where the slot's rows live now: its owner, or the target's verified
    /// copy between the source's release and the target's take.
    fn holder(&self) -> &Shard {
        self.shards.iter().find(|s| s.owns).unwrap_or(&self.shards[1])
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A writer sends its next write to the shard its map names; it commits there.
    Write(usize),
    /// The write's permit is dropped: the source records the row.
    Finish(usize),
    /// A writer refused there discovers the map again.
    Rediscover(usize),
    Prepare,
    PrepareExport,
    /// One row as the source has it now, onto the target (the bulk while
    /// served; every differing row after a freeze without a trusted record).
    Copy(usize),
    /// The rows recorded as changed, copied again; the record starts afresh.
    Round,
    /// Every row compared while served: what differs is recorded.
    Compare,
    Freeze,
    /// After the freeze: the recorded rows copied again.
    CatchUp,
    Verify,
    /// ctl is killed and run again.
    CtlRestarts,
    /// The source restarts: its record of changes is lost.
    SourceRestarts,
    Release,
    Take,
    DeleteCopies,
    Abandon,
}

/// A way to get the handover wrong, each of which the checker must catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoverFlaw {
    /// The source gives the slot up without comparing the copies.
    ReleaseWithoutVerify,
    /// A frozen slot still takes writes.
    FreezeDoesNotRefuse,
    /// The target owns the slot as soon as it recorded the move.
    TakeBeforeRelease,
    /// A write records its row when it takes its permit, before it commits.
    RecordBeforeCommit,
    /// A write path that names no row: its change is never recorded.
    UntrackedWrite,
}

#[derive(Clone, Debug)]
pub struct Handover {
    pub writers: usize,
    pub flaw: Option<HandoverFlaw>,
}

impl Handover {
    fn accepts(&self, shard: &Shard) -> bool {
        shard.accepts_writes() || (self.flaw == Some(HandoverFlaw::FreezeDoesNotRefuse) && shard.owns)
    }

    fn may_release(&self, state: &State) -> bool {
        self.flaw == Some(HandoverFlaw::ReleaseWithoutVerify) || state.verified
    }

    /// The source records `row` as changed, if it is exporting or frozen.
    fn record(&self, shard: &mut Shard, row: usize) {
        if matches!(shard.step, Step::Exporting | Step::Frozen) && self.flaw != Some(HandoverFlaw::UntrackedWrite) {
            shard.changed[row] = true;
        }
    }
}

impl Model for Handover {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let shard =
            |owns| Shard { owns, step: Step::None, rows: [0; ROWS], changed: [false; ROWS], record_complete: true };
        let writer = Writer { routes_to: 0, acked: 0, saw_frozen: false, holding: None };
        vec![State {
            shards: [shard(true), shard(false)],
            writers: vec![writer; self.writers],
            acked: [0; ROWS],
            trusted: false,
            verified: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (n, writer) in state.writers.iter().enumerate() {
            if writer.holding.is_some() {
                actions.push(Action::Finish(n));
            } else if writer.acked < WRITES.len() {
                actions.extend([Action::Write(n), Action::Rediscover(n)]);
            }
        }
        let [source, target] = &state.shards;
        let take_ready = source.step == Step::Released || self.flaw == Some(HandoverFlaw::TakeBeforeRelease);
        let permits_held = state.writers.iter().any(|w| w.holding.is_some_and(|(shard, _)| shard == 0));
        let exporting = source.step == Step::Exporting;
        let frozen = source.step == Step::Frozen;
        // After the freeze, the record is used only if this run trusts it and it is complete.
        let by_record = state.trusted && source.record_complete;
        let steps = [
            (Action::Prepare, target.step == Step::None && source.step == Step::None),
            // Recording the move takes the slot lock, as the freeze does: it waits for the permits.
            (Action::PrepareExport, target.step == Step::Importing && source.step == Step::None && !permits_held),
            (Action::Round, exporting && source.record_complete && source.changed.contains(&true)),
            (Action::Compare, exporting && !state.trusted && state.differing_are_recorded()),
            (
                Action::Freeze,
                target.step == Step::Importing && matches!(source.step, Step::None | Step::Exporting) && !permits_held,
            ),
            (Action::CatchUp, frozen && by_record && source.changed.contains(&true)),
            (Action::Verify, frozen && !state.verified && state.copies_match(by_record)),
            (Action::CtlRestarts, state.verified || state.trusted),
            (Action::SourceRestarts, (exporting || frozen) && source.record_complete),
            (Action::Release, frozen && self.may_release(state)),
            (Action::Take, target.step == Step::Importing && take_ready),
            (Action::DeleteCopies, source.step == Step::Released && target.step == Step::Done),
            (
                Action::Abandon,
                matches!(source.step, Step::None | Step::Exporting | Step::Frozen) && target.step == Step::Importing,
            ),
        ];
        actions.extend(steps.into_iter().filter(|(_, ready)| *ready).map(|(action, _)| action));
        if exporting || (frozen && !by_record) {
            actions.extend((0..ROWS).filter(|&row| target.rows[row] != source.rows[row]).map(Action::Copy));
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut next = last.clone();
        match action {
            Action::Write(n) => {
                let writer = &mut next.writers[n];
                let shard = &mut next.shards[writer.routes_to];
                if !self.accepts(shard) {
                    writer.saw_frozen |= shard.owns;
                    return (next != *last).then_some(next);
                }
                let (row, value) = WRITES[writer.acked];
                if self.flaw == Some(HandoverFlaw::RecordBeforeCommit) {
                    // Recorded now; the commit follows when the permit drops.
                    self.record(shard, row);
                    writer.holding = Some((writer.routes_to, row));
                    return Some(next);
                }
                shard.rows[row] = shard.rows[row].max(value);
                next.acked[row] = next.acked[row].max(value);
                writer.acked += 1;
                writer.holding = Some((writer.routes_to, row));
            }
            Action::Finish(n) => {
                let writer = &mut next.writers[n];
                let (shard, row) = writer.holding.take()?;
                let shard = &mut next.shards[shard];
                if self.flaw == Some(HandoverFlaw::RecordBeforeCommit) {
                    let value = WRITES[writer.acked].1;
                    shard.rows[row] = shard.rows[row].max(value);
                    next.acked[row] = next.acked[row].max(value);
                    writer.acked += 1;
                } else {
                    self.record(shard, row);
                }
            }
            Action::Rediscover(n) => {
                // A map is built only when exactly one shard owns the slot.
                let owner = next
                    .shards
                    .iter()
                    .position(|s| s.owns)
                    .filter(|_| next.shards.iter().filter(|s| s.owns).count() == 1);
                let writer = &mut next.writers[n];
                match owner {
                    Some(owner) if owner != writer.routes_to => writer.routes_to = owner,
                    _ => return None,
                }
            }
            ctl => next.ctl_step(ctl),
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(ONE_WRITER, |m: &Handover, s: &State| !s.shards.iter().all(|shard| m.accepts(shard))),
            Property::always(NOTHING_LOST, |_, s: &State| {
                let holder = s.holder();
                (0..ROWS).all(|row| holder.rows[row] >= s.acked[row])
            }),
            Property::sometimes(SOME_MOVE, |_, s: &State| s.shards[1].owns && s.shards[0].step == Step::Done),
            Property::sometimes(SOME_ABANDON, |_, s: &State| {
                s.shards[0].step == Step::Abandoned && s.writers.iter().any(|w| w.acked == WRITES.len())
            }),
            Property::sometimes(SOME_FROZEN_WRITE, |_, s: &State| {
                s.writers.iter().any(|w| w.saw_frozen && w.acked == WRITES.len())
            }),
            Property::sometimes(SOME_BY_RECORD, |_, s: &State| {
                s.trusted && s.shards[0].record_complete && s.shards[0].step == Step::Released && s.acked != [0; ROWS]
            }),
            Property::sometimes(SOME_FALLBACK, |_, s: &State| {
                !s.shards[0].record_complete && s.shards[0].step == Step::Released
            }),
        ]
    }
}

impl State {
    /// Every row that differs between the two sides is recorded as changed.
    fn differing_are_recorded(&self) -> bool {
        let [source, target] = &self.shards;
        source.record_complete && (0..ROWS).all(|row| source.rows[row] == target.rows[row] || source.changed[row])
    }

    /// The verification's comparison: the recorded rows, or every row.
    fn copies_match(&self, by_record: bool) -> bool {
        let [source, target] = &self.shards;
        (0..ROWS).all(|row| (by_record && !source.changed[row]) || source.rows[row] == target.rows[row])
    }

    /// One of ctl's steps, on what the shards recorded.
    fn ctl_step(&mut self, action: Action) {
        let [source, target] = &mut self.shards;
        match action {
            Action::Prepare => {
                target.step = Step::Importing;
                target.rows = [0; ROWS];
            }
            Action::PrepareExport => {
                source.step = Step::Exporting;
                (source.changed, source.record_complete) = ([false; ROWS], true);
            }
            Action::Copy(row) => target.rows[row] = source.rows[row],
            Action::Round => {
                for row in (0..ROWS).filter(|&row| source.changed[row]) {
                    target.rows[row] = source.rows[row];
                }
                source.changed = [false; ROWS];
            }
            Action::Compare => self.trusted = true,
            Action::Freeze => source.step = Step::Frozen,
            Action::CatchUp => {
                for row in (0..ROWS).filter(|&row| source.changed[row]) {
                    target.rows[row] = source.rows[row];
                }
            }
            Action::Verify => self.verified = true,
            Action::CtlRestarts => (self.trusted, self.verified) = (false, false),
            Action::SourceRestarts => {
                (source.changed, source.record_complete) = ([false; ROWS], false);
                // Its writes in flight die with it: committed, never recorded.
                for writer in self.writers.iter_mut().filter(|w| w.holding.is_some_and(|(shard, _)| shard == 0)) {
                    writer.holding = None;
                }
            }
            Action::Release => {
                source.owns = false;
                source.step = Step::Released;
            }
            Action::Take => {
                target.owns = true;
                target.step = Step::Done;
            }
            Action::DeleteCopies => {
                source.rows = [0; ROWS];
                source.step = Step::Done;
            }
            Action::Abandon => {
                source.step = Step::Abandoned;
                target.step = Step::Abandoned;
                target.rows = [0; ROWS];
            }
            Action::Write(_) | Action::Finish(_) | Action::Rediscover(_) => unreachable!("not a step of ctl"),
        }
    }
}

/// The safety properties, and the examples the checker must find.
pub const SAFETY: [&str; 2] = [ONE_WRITER, NOTHING_LOST];
pub const REACHABLE: [&str; 5] = [SOME_MOVE, SOME_ABANDON, SOME_FROZEN_WRITE, SOME_BY_RECORD, SOME_FALLBACK];

/// Every reachable state of `model`: the properties that fail, the
/// examples found, and the number of distinct states.
pub fn check(model: Handover) -> (Vec<&'static str>, Vec<&'static str>, usize) {
    let checker = model.checker().spawn_bfs().join();
    let discoveries = checker.discoveries();
    let failed = SAFETY.iter().copied().filter(|name| discoveries.contains_key(name)).collect();
    let found = REACHABLE.iter().copied().filter(|name| discoveries.contains_key(name)).collect();
    (failed, found, checker.unique_state_count())
}

/// The shortest trace to `property`'s failure, if there is one.
pub fn counterexample(model: Handover, property: &'static str) -> Option<Vec<Action>> {
    let wanted = HasDiscoveries::AnyOf([property].into_iter().collect());
    let checker = model.checker().finish_when(wanted).spawn_bfs().join();
    checker.discoveries().get(property).map(|path| path.clone().into_actions())
}
