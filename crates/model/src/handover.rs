//! A model of moving one slot between shards (docs/design.md#moving-slots),
//! checked exhaustively on its own. It does not re-implement the handover:
//! every call a shard answers goes through `pastebin_handover::step_with`,
//! the function the shards run (with all its guards, unless a broken
//! variant turns one off), and every ctl run picks its next call with
//! `pastebin_handover::next`, as `ctl reshard` does. What the model adds is
//! the world around them: the slot's rows on each shard, writers that route
//! by a slot map that may be stale and whose permits may outlive their
//! handlers, and operators who crash, rerun, mistype `--to`, abandon half
//! way, or run twice at once.
//!
//! A ctl run reads both shards' records, decides, and only then calls: the
//! record may have changed in between (another run, a crash), so the guards
//! in `step` are what keeps the slot safe, not the decision.

use pastebin_core::{OwnedSlots, Slot, SlotRange};
use pastebin_handover::{
    next, step_with, Call, Effect, Fence, Guards, Identity, Next, Record, Request, Role, Shard as Slots, Step,
};
use stateright::{Model, Property};

/// Rows of the moving slot: one row, whose versions are what a move can
/// lose (an older version copied over a newer one, a version never copied).
pub const ROWS: usize = 1;
/// Each writer's writes, in order: (row, value). A higher value is a later
/// state of the row (pending → done, live → tombstone).
const WRITES: [(usize, u8); 2] = [(0, 1), (0, 2)];
/// The slot that moves; the source keeps slot 0.
const MOVING: Slot = Slot(1);
/// Shards: the source, the target, and a shard an operator may name by mistake.
const NAMES: [&str; 3] = ["A", "B", "C"];
const SOURCE: usize = 0;

pub const ONE_WRITER: &str = "never two shards accept writes for the slot";
pub const NOTHING_LOST: &str = "every committed write is on the shard that holds the slot";
pub const SOME_MOVE: &str = "a move finishes with the target owning the slot";
pub const SOME_ABANDON: &str = "a move is abandoned and the source serves the slot again";
pub const SOME_FROZEN_WRITE: &str = "a write is refused while the slot is frozen, then acknowledged";
pub const SOME_REFUSED_RUN: &str = "a ctl run is refused by a shard's guard";

/// One shard: its handover state (what `step` reads and returns) and the
/// slot's rows.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    pub slots: Slots,
    pub rows: [u8; ROWS],
    /// The source's record: rows changed since ctl's last round.
    pub changed: [bool; ROWS],
    /// False once the source restarted during the move: changes are missing.
    pub record_complete: bool,
}

impl Node {
    fn accepts_writes(&self) -> bool {
        let frozen = self.slots.active.as_ref().is_some_and(|m| m.role == Role::Source && m.step == Step::Frozen);
        self.slots.owned.contains(MOVING) && !frozen
    }

    fn owns(&self) -> bool {
        self.slots.owned.contains(MOVING)
    }

    /// What ctl reads of the move here.
    fn view(&self) -> Option<&Record> {
        self.slots.active.as_ref().or(self.slots.finished.as_ref())
    }
}

/// A write in flight: checked under its permit, maybe committed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InFlight {
    pub shard: usize,
    pub row: usize,
    pub committed: bool,
    /// The permit is still held (a handler cancelled in a build that drops
    /// it on cancel lets it go before the commit).
    pub permit: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Writer {
    /// The shard its slot map routes the slot to.
    pub routes_to: usize,
    /// How many of [`WRITES`] were done (acknowledged, or cancelled).
    pub done: usize,
    pub saw_frozen: bool,
    pub in_flight: Option<InFlight>,
}

/// One `ctl reshard` run, as the operator started it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Run {
    /// The shard its `--to` names.
    pub target: usize,
    pub abandon: bool,
    pub phase: Phase,
    pub epoch: u64,
    /// What it read, and decided, before its next call.
    pub decided: Option<Next>,
    /// Memory within the run: a page exported and not yet imported (row,
    /// value); it compared every row while served; it verified the copies.
    pub page: Option<(usize, u8)>,
    pub trusted: bool,
    pub verified: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    NotStarted,
    Running,
    /// Finished, refused, or killed.
    Ended,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    pub nodes: [Node; 3],
    pub writers: Vec<Writer>,
    pub runs: Vec<Run>,
    /// History: the highest value committed per row.
    pub committed: [u8; ROWS],
    pub refused: bool,
}

impl State {
    /// Where the slot's rows live now: its owner, or the verified copy of
    /// the target the source released it to, until that one takes it.
    fn holder(&self) -> &Node {
        let released_to = self.nodes[SOURCE].view().and_then(|r| NAMES.iter().position(|n| *n == r.identity.target));
        self.nodes.iter().find(|n| n.owns()).unwrap_or(&self.nodes[released_to.unwrap_or(1)])
    }

    fn permits_held(&self, shard: usize) -> bool {
        self.writers.iter().any(|w| w.in_flight.is_some_and(|f| f.shard == shard && f.permit))
    }
}

/// The operator's schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    /// One move; ctl may be killed anywhere and is run again.
    Reruns,
    /// A run is killed, and the rerun names the wrong `--to` (C); then the right one.
    WrongPeer,
    /// A run is killed; an `--abandon` is killed between its calls; then `--resume`.
    AbandonInTwoCalls,
    /// Two runs of the same move at once (a second terminal).
    TwoRuns,
}

/// A way to get the handover wrong, each of which the checker must catch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandoverFlaw {
    /// The source gives the slot up without comparing the copies.
    ReleaseWithoutVerify,
    /// A frozen slot still takes writes.
    FreezeDoesNotRefuse,
    /// A write records its row when it takes its permit, before it commits.
    RecordBeforeCommit,
    /// A write path that names no row: its change is never recorded.
    UntrackedWrite,
    /// A handler cancelled mid-write drops its permit before the commit.
    PermitDropsOnCancel,
    /// `step` without its identity guard: a call naming another peer is obeyed.
    NoIdentityGuard,
    /// `step` without its receipt guard: a take without the source's release.
    NoReceiptGuard,
    /// `step` without its epoch fence: an older run's calls are obeyed.
    NoEpochFence,
}

#[derive(Clone, Debug)]
pub struct Handover {
    pub writers: usize,
    pub operator: Operator,
    pub flaw: Option<HandoverFlaw>,
}

impl Handover {
    fn guards(&self) -> Guards {
        let mut guards = Guards::ALL;
        match self.flaw {
            Some(HandoverFlaw::NoIdentityGuard) => guards.identity = false,
            Some(HandoverFlaw::NoReceiptGuard) => guards.receipt = false,
            Some(HandoverFlaw::NoEpochFence) => guards.epoch = false,
            _ => {}
        }
        guards
    }

    fn accepts(&self, node: &Node) -> bool {
        node.accepts_writes() || (self.flaw == Some(HandoverFlaw::FreezeDoesNotRefuse) && node.owns())
    }

    /// The source records `row` as changed, if it is exporting or frozen.
    fn record(&self, node: &mut Node, row: usize) {
        let exporting = node
            .slots
            .active
            .as_ref()
            .is_some_and(|m| m.role == Role::Source && matches!(m.step, Step::Exporting | Step::Frozen));
        if exporting && self.flaw != Some(HandoverFlaw::UntrackedWrite) {
            node.changed[row] = true;
        }
    }

    fn runs(&self) -> Vec<Run> {
        let run = |target, abandon| Run {
            target,
            abandon,
            phase: Phase::NotStarted,
            epoch: 0,
            decided: None,
            page: None,
            trusted: false,
            verified: false,
        };
        match self.operator {
            Operator::Reruns => vec![run(1, false), run(1, false)],
            Operator::WrongPeer => vec![run(1, false), run(2, false), run(1, false)],
            Operator::AbandonInTwoCalls => vec![run(1, false), run(1, true), run(1, false)],
            Operator::TwoRuns => vec![run(1, false), run(1, false)],
        }
    }

    /// Whether run `n` may start now: a rerun starts once the run before
    /// it ended; two runs at once start independently.
    fn may_start(&self, state: &State, n: usize) -> bool {
        state.runs[n].phase == Phase::NotStarted
            && (self.operator == Operator::TwoRuns || n == 0 || state.runs[n - 1].phase == Phase::Ended)
    }
}

/// Run `run`'s call `call` on node `shard`, through the shards' own `step`.
fn request(run: &Run, n: usize, call: Call) -> Request {
    Request {
        identity: Identity {
            id: "m".into(),
            slots: SlotRange::new(MOVING.0, MOVING.0).expect("one slot is a range"),
            source: NAMES[SOURCE].into(),
            target: NAMES[run.target].into(),
        },
        // Every lease has run out (0 ms): any newer run may take over at any
        // moment, the worst case; safety rests on the epochs.
        fence: Fence { epoch: run.epoch, holder: format!("run {n}"), lease_ms: 0 },
        now_ms: 0,
        call,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// A writer takes its permit on the shard its map names (refused there
    /// when the shard does not accept writes for the slot).
    Write(usize),
    /// Its write commits.
    Commit(usize),
    /// Its permit is dropped: the source records the row; acknowledged.
    Finish(usize),
    /// Its handler is cancelled (a deadline) after the permit, before the commit.
    Cancel(usize),
    /// A writer refused there discovers the map again.
    Rediscover(usize),
    /// The operator starts run n (with the next epoch the shards show).
    Start(usize),
    /// Run n reads both shards' records and decides its next step.
    Decide(usize),
    /// Run n makes the call it decided (or a part of it: a page of the copy).
    Call(usize, Part),
    /// Run n is killed.
    Kill(usize),
    /// The source restarts: its record of changes is lost.
    SourceRestarts,
}

/// The calls of a decided step that the model interleaves one by one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Part {
    /// The whole step (one call).
    Whole,
    /// A page of the copy: the row as the source has it now.
    Export(usize),
    /// The exported page onto the target.
    Import,
    /// The recorded rows copied again; the record starts afresh.
    Round,
    /// Every row compared while served.
    Compare,
    /// After the freeze: the recorded rows copied again.
    CatchUp,
    Verify,
}

impl Model for Handover {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        let node = |owned| Node {
            slots: Slots { owned, active: None, finished: None },
            rows: [0; ROWS],
            changed: [false; ROWS],
            record_complete: true,
        };
        let source = OwnedSlots::Range(SlotRange::new(0, MOVING.0).expect("0-1 is a range"));
        let writer = Writer { routes_to: SOURCE, done: 0, saw_frozen: false, in_flight: None };
        vec![State {
            nodes: [node(source), node(OwnedSlots::Nothing), node(OwnedSlots::Nothing)],
            writers: vec![writer; self.writers],
            runs: self.runs(),
            committed: [0; ROWS],
            refused: false,
        }]
    }

    fn actions(&self, state: &State, actions: &mut Vec<Action>) {
        for (n, writer) in state.writers.iter().enumerate() {
            match writer.in_flight {
                Some(flight) if !flight.committed => {
                    actions.push(Action::Commit(n));
                    if flight.permit && self.flaw == Some(HandoverFlaw::PermitDropsOnCancel) {
                        actions.push(Action::Cancel(n));
                    }
                }
                Some(_) => actions.push(Action::Finish(n)),
                None if writer.done < WRITES.len() => actions.extend([Action::Write(n), Action::Rediscover(n)]),
                None => {}
            }
        }
        for (n, run) in state.runs.iter().enumerate() {
            if self.may_start(state, n) {
                actions.push(Action::Start(n));
            }
            if run.phase != Phase::Running {
                continue;
            }
            actions.push(Action::Kill(n));
            match run.decided {
                None => actions.push(Action::Decide(n)),
                Some(decided) => self.parts(state, run, decided, |part| actions.push(Action::Call(n, part))),
            }
        }
        let source = &state.nodes[SOURCE];
        let moving = source.slots.active.as_ref().is_some_and(|m| matches!(m.step, Step::Exporting | Step::Frozen));
        if moving && source.record_complete {
            actions.push(Action::SourceRestarts);
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut next = last.clone();
        match action {
            Action::Write(n) => {
                let routes_to = next.writers[n].routes_to;
                if !self.accepts(&next.nodes[routes_to]) {
                    let owns = next.nodes[routes_to].owns();
                    next.writers[n].saw_frozen |= owns;
                    return (next != *last).then_some(next);
                }
                let row = WRITES[next.writers[n].done].0;
                if self.flaw == Some(HandoverFlaw::RecordBeforeCommit) {
                    self.record(&mut next.nodes[routes_to], row);
                }
                next.writers[n].in_flight = Some(InFlight { shard: routes_to, row, committed: false, permit: true });
            }
            Action::Commit(n) => {
                let (row, value) = WRITES[next.writers[n].done];
                let flight = next.writers[n].in_flight.as_mut()?;
                flight.committed = true;
                let node = &mut next.nodes[flight.shard];
                node.rows[row] = node.rows[row].max(value);
                next.committed[row] = next.committed[row].max(value);
            }
            Action::Cancel(n) => {
                let flight = next.writers[n].in_flight.as_mut()?;
                flight.permit = false;
                let (shard, row) = (flight.shard, flight.row);
                self.record(&mut next.nodes[shard], row);
            }
            Action::Finish(n) => {
                let flight = next.writers[n].in_flight.take()?;
                if flight.permit && self.flaw != Some(HandoverFlaw::RecordBeforeCommit) {
                    self.record(&mut next.nodes[flight.shard], flight.row);
                }
                next.writers[n].done += 1;
            }
            Action::Rediscover(n) => {
                // A map is built only when exactly one shard owns the slot.
                let owners: Vec<usize> = (0..3).filter(|&i| next.nodes[i].owns()).collect();
                match owners[..] {
                    [owner] if owner != next.writers[n].routes_to => next.writers[n].routes_to = owner,
                    _ => return None,
                }
            }
            Action::Start(n) => {
                // The epoch ctl reads from the shards; two runs at once may read the same.
                let epoch = next.nodes.iter().filter_map(|node| node.view()).map(|r| r.lease.epoch).max();
                let epoch = epoch.unwrap_or(0) + 1;
                let run = &mut next.runs[n];
                (run.phase, run.epoch) = (Phase::Running, epoch);
            }
            Action::Decide(n) => {
                let run = &next.runs[n];
                let (source, target) = (next.nodes[SOURCE].view(), next.nodes[run.target].view());
                match next_step(source, target, run.abandon) {
                    Some(Next::Done | Next::Abandoned) | None => next.runs[n].phase = Phase::Ended,
                    decided => next.runs[n].decided = decided,
                }
            }
            Action::Kill(n) => next.runs[n].phase = Phase::Ended,
            Action::SourceRestarts => {
                let source = &mut next.nodes[SOURCE];
                (source.changed, source.record_complete) = ([false; ROWS], false);
                // Its writes in flight die with it (committed or not, never recorded).
                for writer in next.writers.iter_mut() {
                    if writer.in_flight.is_some_and(|f| f.shard == SOURCE) {
                        writer.in_flight = None;
                        writer.done += 1;
                    }
                }
                for run in next.runs.iter_mut() {
                    run.trusted = false;
                }
            }
            Action::Call(n, part) => self.call(&mut next, n, part)?,
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(ONE_WRITER, |m: &Handover, s: &State| {
                s.nodes.iter().filter(|node| m.accepts(node)).count() <= 1
            }),
            Property::always(NOTHING_LOST, |_, s: &State| {
                let holder = s.holder();
                (0..ROWS).all(|row| holder.rows[row] >= s.committed[row])
            }),
            Property::sometimes(SOME_MOVE, |_, s: &State| {
                s.nodes[1].owns() && s.nodes[SOURCE].view().is_some_and(|r| r.step == Step::Done)
            }),
            Property::sometimes(SOME_ABANDON, |_, s: &State| {
                s.nodes[SOURCE].view().is_some_and(|r| r.step == Step::Abandoned) && s.nodes[SOURCE].accepts_writes()
            }),
            Property::sometimes(SOME_FROZEN_WRITE, |_, s: &State| {
                s.writers.iter().any(|w| w.saw_frozen && w.done == WRITES.len())
            }),
            Property::sometimes(SOME_REFUSED_RUN, |_, s: &State| s.refused),
        ]
    }
}

/// ctl's choice, or `None` when it refuses to go on.
fn next_step(source: Option<&Record>, target: Option<&Record>, abandon: bool) -> Option<Next> {
    next(source, target, abandon).ok()
}

impl Handover {
    /// The calls run `run` may make for the step it decided.
    fn parts(&self, state: &State, run: &Run, decided: Next, mut push: impl FnMut(Part)) {
        let (source, target) = (&state.nodes[SOURCE], &state.nodes[run.target]);
        let by_record = run.trusted && source.record_complete;
        let copying = match decided {
            Next::CopyThenFreeze => true,
            Next::VerifyThenRelease => !by_record,
            _ => false,
        };
        // A run imports the page it exported before anything else (ctl's
        // copy is one page at a time); another run may act in between.
        if run.page.is_some() {
            return push(Part::Import);
        }
        if copying {
            (0..ROWS).filter(|&row| target.rows[row] != source.rows[row]).for_each(|row| push(Part::Export(row)));
        }
        match decided {
            Next::CopyThenFreeze => {
                if source.record_complete && source.changed.contains(&true) {
                    push(Part::Round);
                }
                if !run.trusted && differing_are_recorded(source, target) {
                    push(Part::Compare);
                }
                push(Part::Whole);
            }
            Next::VerifyThenRelease => {
                if by_record && source.changed.contains(&true) {
                    push(Part::CatchUp);
                }
                if !run.verified && copies_match(source, target, by_record) {
                    push(Part::Verify);
                }
                if run.verified || self.flaw == Some(HandoverFlaw::ReleaseWithoutVerify) {
                    push(Part::Whole);
                }
            }
            _ => push(Part::Whole),
        }
    }

    /// One call of run `n`: through `step` on the shard it goes to; a
    /// refusal ends the run (ctl exits, naming it). `None`: it waits (for
    /// the writes in flight there).
    fn call(&self, state: &mut State, n: usize, part: Part) -> Option<()> {
        let run = state.runs[n].clone();
        let decided = run.decided?;
        let target = run.target;
        let outcome = match (decided, part) {
            (_, Part::Export(row)) => self.on(state, &run, n, SOURCE, Call::Read(Some(Role::Source))).map(|_| {
                state.runs[n].page = Some((row, state.nodes[SOURCE].rows[row]));
            }),
            (_, Part::Import) => self.on(state, &run, n, target, Call::Import).map(|_| {
                if let Some((row, value)) = state.runs[n].page.take() {
                    state.nodes[target].rows[row] = value;
                }
            }),
            (_, Part::Round | Part::CatchUp) => self.copy_recorded(state, &run, n, part == Part::Round),
            // Both read every row of both sides (RowHashes): a read call on each.
            (_, Part::Compare | Part::Verify) => self.on(state, &run, n, SOURCE, Call::Read(None)).and_then(|_| {
                self.on(state, &run, n, target, Call::Read(None))?;
                match part {
                    Part::Compare => state.runs[n].trusted = true,
                    _ => state.runs[n].verified = true,
                }
                Ok(())
            }),
            (Next::PrepareImport, _) => self.on(state, &run, n, target, Call::PrepareImport),
            (Next::PrepareExport, _) => self.on(state, &run, n, SOURCE, Call::PrepareExport),
            (Next::CopyThenFreeze, _) => self.on(state, &run, n, SOURCE, Call::Freeze),
            (Next::VerifyThenRelease, _) => {
                self.on(state, &run, n, SOURCE, Call::Release { token: format!("{n}"), search_first: None })
            }
            (Next::Take, _) => match state.nodes[SOURCE].view().cloned() {
                Some(receipt) => self.on(state, &run, n, target, Call::Take { receipt }),
                None => Err(Failed::Refused),
            },
            (Next::DeleteCopies, _) => match state.nodes[target].view().cloned() {
                Some(taken) => {
                    self.on(state, &run, n, SOURCE, Call::DeleteCopies { taken: taken.clone() }).and_then(|_| {
                        state.nodes[SOURCE].rows = [0; ROWS];
                        self.on(state, &run, n, SOURCE, Call::Finish { taken })
                    })
                }
                None => Err(Failed::Refused),
            },
            (Next::Abandon(role), _) => self.on(state, &run, n, shard_of(role, target), Call::Abandon),
            (Next::Undo(role), _) => self.on(state, &run, n, shard_of(role, target), Call::Undo),
            (Next::Done | Next::Abandoned, _) => Ok(()),
        };
        let run = &mut state.runs[n];
        match outcome {
            // A copy goes on within its step; every other call ends it.
            Ok(()) if matches!(part, Part::Whole) => run.decided = None,
            Ok(()) => {}
            Err(Failed::Blocked) => return None,
            Err(Failed::Refused) => {
                run.phase = Phase::Ended;
                state.refused = true;
            }
        }
        Some(())
    }

    /// The rows the source recorded as changed, read there and imported on
    /// the target (a round while served; the catch-up while frozen).
    fn copy_recorded(&self, state: &mut State, run: &Run, n: usize, restart_record: bool) -> Result<(), Failed> {
        self.on(state, run, n, SOURCE, Call::Read(Some(Role::Source)))?;
        self.on(state, run, n, run.target, Call::Import)?;
        let source = state.nodes[SOURCE].clone();
        for row in (0..ROWS).filter(|&row| source.changed[row]) {
            state.nodes[run.target].rows[row] = source.rows[row];
        }
        if restart_record {
            state.nodes[SOURCE].changed = [false; ROWS];
        }
        Ok(())
    }

    /// `call` of run `n` on node `shard`, through `step`, its effects done.
    /// A call waits for the writes in flight there (the slot lock).
    fn on(&self, state: &mut State, run: &Run, n: usize, shard: usize, call: Call) -> Result<(), Failed> {
        if state.permits_held(shard) && !matches!(call, Call::Read(_) | Call::Import) {
            return Err(Failed::Blocked);
        }
        let request = request(run, n, call);
        let transition = step_with(self.guards(), &state.nodes[shard].slots, &request).map_err(|_| Failed::Refused)?;
        let node = &mut state.nodes[shard];
        node.slots = transition.shard;
        for effect in transition.effects {
            match effect {
                Effect::ClearCopies => node.rows = [0; ROWS],
                Effect::StartRecording => (node.changed, node.record_complete) = ([false; ROWS], true),
                Effect::StopRecording => node.changed = [false; ROWS],
                Effect::AlreadyDone => {}
            }
        }
        Ok(())
    }
}

/// Why a call did not go through.
enum Failed {
    /// It waits for the writes in flight on that shard.
    Blocked,
    /// The shard refused it: the run ends.
    Refused,
}

fn shard_of(role: Role, target: usize) -> usize {
    match role {
        Role::Source => SOURCE,
        Role::Target => target,
    }
}

/// Every row that differs between the two sides is recorded as changed.
fn differing_are_recorded(source: &Node, target: &Node) -> bool {
    source.record_complete && (0..ROWS).all(|row| source.rows[row] == target.rows[row] || source.changed[row])
}

/// The verification's comparison: the recorded rows, or every row.
fn copies_match(source: &Node, target: &Node, by_record: bool) -> bool {
    (0..ROWS).all(|row| (by_record && !source.changed[row]) || source.rows[row] == target.rows[row])
}

/// The safety properties, and the examples the checker must find.
pub const SAFETY: [&str; 2] = [ONE_WRITER, NOTHING_LOST];
pub const REACHABLE: [&str; 4] = [SOME_MOVE, SOME_ABANDON, SOME_FROZEN_WRITE, SOME_REFUSED_RUN];

/// Every reachable state of `model`: the properties that fail, the
/// examples found, and the number of distinct states.
pub fn check(model: Handover) -> (Vec<&'static str>, Vec<&'static str>, usize) {
    crate::check::check_properties(model, &SAFETY, &REACHABLE)
}

/// The shortest trace to `property`'s failure, if there is one.
pub fn counterexample(model: Handover, property: &'static str) -> Option<Vec<Action>> {
    crate::check::shortest_counterexample(model, property)
}
