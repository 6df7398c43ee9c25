//! A model of moving one slot between two shards (docs/design.md#moving-slots),
//! checked exhaustively on its own: the slot's rows on the source and the
//! target, the step each shard recorded, writers that route by a slot map
//! that may be stale, and `ctl reshard`'s steps.
//!
//! ctl keeps no state: each of its steps is guarded only by what the shards
//! recorded, so a ctl killed anywhere and run again is just another
//! interleaving of the same steps, and every interleaving is explored. A
//! write is one atomic check-and-apply on a shard (the write permit a
//! freeze waits for). Abandoning is allowed until the source released.

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

/// What a shard recorded about the move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Step {
    None,
    Importing,
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
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct State {
    /// 0: the source, 1: the target.
    pub shards: [Shard; 2],
    pub writers: Vec<Writer>,
    /// History: the highest value acknowledged per row.
    pub acked: [u8; ROWS],
    /// ctl's one memory within a run: it compared the copies. A ctl that
    /// dies forgets it (and the rerun compares again).
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
    /// A writer sends its next write to the shard its map names.
    Write(usize),
    /// A writer refused there discovers the map again.
    Rediscover(usize),
    Prepare,
    Freeze,
    Copy(usize),
    Verify,
    /// ctl is killed and run again.
    CtlRestarts,
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
}

impl Model for Handover {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let source = Shard { owns: true, step: Step::None, rows: [0; ROWS] };
        let target = Shard { owns: false, step: Step::None, rows: [0; ROWS] };
        let writer = Writer { routes_to: 0, acked: 0, saw_frozen: false };
        vec![State { shards: [source, target], writers: vec![writer; self.writers], acked: [0; ROWS], verified: false }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (n, writer) in state.writers.iter().enumerate() {
            if writer.acked < WRITES.len() {
                actions.extend([Action::Write(n), Action::Rediscover(n)]);
            }
        }
        let [source, target] = &state.shards;
        let take_ready = source.step == Step::Released || self.flaw == Some(HandoverFlaw::TakeBeforeRelease);
        let steps = [
            (Action::Prepare, target.step == Step::None && source.step == Step::None),
            (Action::Freeze, target.step == Step::Importing && source.step == Step::None),
            (Action::Verify, source.step == Step::Frozen && source.rows == target.rows && !state.verified),
            (Action::CtlRestarts, state.verified),
            (Action::Release, source.step == Step::Frozen && self.may_release(state)),
            (Action::Take, target.step == Step::Importing && take_ready),
            (Action::DeleteCopies, source.step == Step::Released && target.step == Step::Done),
            (Action::Abandon, matches!(source.step, Step::None | Step::Frozen) && target.step == Step::Importing),
        ];
        actions.extend(steps.into_iter().filter(|(_, ready)| *ready).map(|(action, _)| action));
        if source.step == Step::Frozen {
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
                shard.rows[row] = shard.rows[row].max(value);
                next.acked[row] = next.acked[row].max(value);
                writer.acked += 1;
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
        ]
    }
}

impl State {
    /// One of ctl's steps, on what the shards recorded.
    fn ctl_step(&mut self, action: Action) {
        let [source, target] = &mut self.shards;
        match action {
            Action::Prepare => {
                target.step = Step::Importing;
                target.rows = [0; ROWS];
            }
            Action::Freeze => source.step = Step::Frozen,
            Action::Copy(row) => target.rows[row] = target.rows[row].max(source.rows[row]),
            Action::Verify => self.verified = true,
            Action::CtlRestarts => self.verified = false,
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
            Action::Write(_) | Action::Rediscover(_) => unreachable!("not a step of ctl"),
        }
    }
}

/// The safety properties, and the examples the checker must find.
pub const SAFETY: [&str; 2] = [ONE_WRITER, NOTHING_LOST];
pub const REACHABLE: [&str; 3] = [SOME_MOVE, SOME_ABANDON, SOME_FROZEN_WRITE];

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
