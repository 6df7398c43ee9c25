//! The model: which actions can happen in a [`World`], and what each does.
//!
//! Every saga step is its own atomic action (docs/design.md#saga), and so is
//! every step of the sweeper and the reaper. The environment may, within a
//! fault budget, lose a reply, delay a request past its caller's deadline
//! (it may land later, in any order, or never), duplicate a request, refuse
//! a PUT or a P insert definitely, crash a gateway or a sweeper at any
//! step, let a client give up and retry while its attempt still runs, and
//! make P unreachable for a while, and make K lose a key's record (an
//! unsafe failover), after which K runs in the search-first mode.

use stateright::{Model, Property};

use crate::{
    flaw::Flaw,
    properties, servers,
    world::{
        violation, Actor, Attempt, Call, Chore, Client, Fate, InsertOutcome, Job, KeyState, KeyWorld, Op, PasteNo,
        Reply, Row, World,
    },
};

/// How big a world to check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub keys: u8,
    pub gateways: u8,
    pub sweepers: u8,
    /// Attempts each client makes with its one key.
    pub attempts: u8,
    /// Faults the environment may inject in one run, of any kind.
    pub faults: u8,
    /// Whether a client's attempt may also land on a gateway that runs the
    /// colocated create (a mixed deployment: saga and one commit on the
    /// same keys, as while a slot's owners differ or a map is older).
    pub colocated: bool,
}

impl Bounds {
    /// The bound CI checks to completion: 2 keys × 2 gateways × 1 sweeper,
    /// 3 attempts per client, 2 faults (crashes, losses, delays,
    /// duplicates, refusals, give-ups, P outages) per run.
    pub const CI: Bounds = Bounds { keys: 2, gateways: 2, sweepers: 1, attempts: 3, faults: 2, colocated: false };

    /// The mixed bound CI checks to completion: the same, with each attempt
    /// running either the saga or the colocated create.
    pub const CI_COLOCATED: Bounds = Bounds { colocated: true, ..Bounds::CI };
}

/// The protocol at some bounds, correct or with one [`Flaw`].
#[derive(Clone, Debug)]
pub struct Protocol {
    pub bounds: Bounds,
    pub flaw: Option<Flaw>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The key's client sends an attempt to an idle gateway, which runs
    /// the saga or, for a colocated slot, the one commit.
    Send {
        key: u8,
        gateway: u8,
        one_commit: bool,
    },
    /// The client stops waiting; its attempt runs on. A fault.
    GiveUp {
        key: u8,
    },
    /// The actor's call lands and the reply arrives.
    Land(Actor),
    /// The call lands; the reply is lost. A fault.
    LandReplyLost(Actor),
    /// The call lands and the network keeps a copy. A fault.
    LandDuplicated(Actor),
    /// The call is still in the network at the caller's deadline. A fault.
    Delay(Actor),
    /// The server answers a definite refusal and does nothing. A fault.
    Refuse(Actor),
    /// The actor's process dies; its call may still be in the network. A fault.
    Crash(Actor),
    LandOrphan(Call),
    DropOrphan(Call),
    /// A fault.
    PasteServiceDown,
    PasteServiceBack,
    Recover {
        sweeper: u8,
        key: u8,
    },
    Reap {
        sweeper: u8,
        key: u8,
        paste: PasteNo,
    },
    /// The client deletes its paste with the delete token.
    OwnerDeletes {
        key: u8,
    },
    /// K fails over to a standby that lacks the key's record, and is
    /// restarted with `--may-have-lost-commits-since`. A fault; once.
    KLosesKey {
        key: u8,
    },
}

/// What an actor does after a reply.
pub(crate) enum Next {
    Call(Op),
    Answer(Option<PasteNo>),
    /// Only the broken variant that answers before done.
    AnswerThenCall(PasteNo, Op),
    Finish,
}

impl Protocol {
    pub fn new(bounds: Bounds, flaw: Option<Flaw>) -> Self {
        Self { bounds, flaw }
    }

    pub(crate) fn has(&self, flaw: Flaw) -> bool {
        self.flaw == Some(flaw)
    }

    fn actor_actions(&self, world: &World, actor: Actor, actions: &mut Vec<Action>) {
        let Some(call) = world.waiting_for(actor) else { return };
        let faults = world.faults_left > 0;
        if world.reachable(call) {
            actions.push(Action::Land(actor));
            if faults {
                actions.extend([Action::LandReplyLost(actor), Action::LandDuplicated(actor)]);
                if call.op.can_be_refused() {
                    actions.push(Action::Refuse(actor));
                }
            }
        }
        if faults {
            actions.extend([Action::Delay(actor), Action::Crash(actor)]);
        }
    }

    fn client_actions(&self, world: &World, key: u8, actions: &mut Vec<Action>) {
        let this = &world.keys[usize::from(key)];
        let client = &this.client;
        match client.waiting_on {
            None if !client.has_201 && client.attempts_left > 0 => {
                for (gateway, attempt) in (0..).zip(&world.gateways) {
                    if attempt.is_none() {
                        actions.push(Action::Send { key, gateway, one_commit: false });
                        if self.bounds.colocated {
                            actions.push(Action::Send { key, gateway, one_commit: true });
                        }
                    }
                }
            }
            Some(_) if world.faults_left > 0 => actions.push(Action::GiveUp { key }),
            _ => {}
        }
        let done_live = this.record.is_some_and(|r| r.state == KeyState::Done && this.row(r.paste) == Row::Live);
        if client.has_201 && done_live {
            actions.push(Action::OwnerDeletes { key });
        }
    }

    fn sweeper_actions(&self, world: &World, sweeper: u8, actions: &mut Vec<Action>) {
        for (key, this) in (0..).zip(&world.keys) {
            if let Some(record) = this.record {
                if record.state == KeyState::Pending && !world.pending_is_young(key, record.paste) {
                    actions.push(Action::Recover { sweeper, key });
                }
            }
            for (paste, slot) in (0..).zip(&this.pastes) {
                let old_enough = self.has(Flaw::ReapsWithoutAgeFloor) || !world.object_is_young(key, paste);
                if slot.object && slot.row != Row::Live && old_enough {
                    actions.push(Action::Reap { sweeper, key, paste });
                }
            }
        }
    }

    /// Applies a call on its server; returns the reply and whether it minted.
    fn land(&self, world: &mut World, call: Call) -> (Reply, bool) {
        let searches_first = world.k_searches_first(self.flaw);
        servers::apply(self.flaw, searches_first, &mut world.keys[usize::from(call.key)], call.op)
    }

    /// The actor reads `reply` and takes its next step.
    fn proceed(&self, world: &mut World, actor: Actor, reply: Reply, minted: bool) {
        match actor {
            Actor::Gateway(g) => self.gateway_proceeds(world, g, reply, minted),
            Actor::Sweeper(s) => self.sweeper_proceeds(world, s, reply),
        }
    }

    fn gateway_proceeds(&self, world: &mut World, gateway: u8, reply: Reply, minted: bool) {
        let slot = usize::from(gateway);
        let Some(mut attempt) = world.gateways[slot].take() else { return };
        match reply {
            Reply::Record { record, search_first } if record.state != KeyState::Done => {
                attempt.search_first = search_first;
                if record.state == KeyState::Pending {
                    attempt.paste = Some(record.paste);
                    attempt.minted = minted;
                }
            }
            Reply::Restarted(Some(paste)) => {
                attempt.paste = Some(paste);
                attempt.minted = true;
            }
            _ => {}
        }
        let next = match attempt.one_commit {
            true => {
                let key = usize::from(attempt.key);
                self.one_commit_step(&mut attempt, &mut world.keys[key], reply)
            }
            false => self.saga_step(attempt.waiting_for, reply, attempt.search_first),
        };
        match next {
            Next::Call(op) => {
                attempt.waiting_for = op;
                world.gateways[slot] = Some(attempt);
            }
            Next::AnswerThenCall(paste, op) => {
                self.answer(world, gateway, attempt.key, Some(paste));
                attempt.answered = true;
                attempt.waiting_for = op;
                world.gateways[slot] = Some(attempt);
            }
            Next::Answer(outcome) if !attempt.answered => self.answer(world, gateway, attempt.key, outcome),
            Next::Answer(_) | Next::Finish => {}
        }
    }

    /// The create saga after one reply (crates/gateway/src/saga.rs).
    fn saga_step(&self, step: Op, reply: Reply, search_first: bool) -> Next {
        match (step, reply) {
            (Op::Begin, Reply::Record { record, .. }) => match record.state {
                KeyState::Done => Next::Answer(Some(record.paste)),
                KeyState::Pending => finish_pending(record.paste, search_first),
                KeyState::Aborted => Next::Call(Op::Restart { aborted: record.paste }),
            },
            (Op::Restart { .. }, Reply::Restarted(Some(paste))) => finish_pending(paste, search_first),
            (Op::Search { own }, Reply::Found(None)) => Next::Call(Op::Put(own)),
            (Op::Search { own }, Reply::Found(Some((paste, Fate::Live)))) => {
                Next::Call(Op::Rotate { pending: own, paste })
            }
            (Op::Search { own }, Reply::Found(Some((paste, _)))) => Next::Call(Op::Adopt { pending: own, paste }),
            (Op::Rotate { pending, paste }, Reply::Changed(true)) => Next::Call(Op::Adopt { pending, paste }),
            (Op::Adopt { paste, .. }, Reply::Changed(true)) => Next::Answer(Some(paste)),
            (Op::Put(paste), Reply::Stored) => Next::Call(Op::Insert(paste)),
            (Op::Put(paste) | Op::Insert(paste), Reply::Refused) => self.compensate(paste),
            (Op::Insert(paste), Reply::Inserted(InsertOutcome::Inserted | InsertOutcome::AlreadyExists)) => {
                if self.has(Flaw::AnswersBeforeDone) {
                    Next::AnswerThenCall(paste, Op::Done(paste))
                } else {
                    Next::Call(Op::Done(paste))
                }
            }
            // The fence is already up: recording the abort is safe.
            (Op::Insert(paste), Reply::Inserted(InsertOutcome::Tombstoned)) => Next::Call(Op::Abort(paste)),
            (Op::Fence(paste), Reply::Fate(Fate::Live)) => Next::Call(Op::Done(paste)),
            (Op::Fence(paste), Reply::Fate(_)) => Next::Call(Op::Abort(paste)),
            (Op::Done(paste), Reply::Changed(true)) => Next::Answer(Some(paste)),
            // Everything else (uncertain, refused, a lost guard, an abort
            // recorded) leaves the key as it is and answers 503.
            _ => Next::Answer(None),
        }
    }

    /// `Saga::abort`: the fence first, unless the broken variant skips it.
    fn compensate(&self, paste: PasteNo) -> Next {
        if self.has(Flaw::SagaAbortsWithoutFence) {
            Next::Call(Op::Abort(paste))
        } else {
            Next::Call(Op::Fence(paste))
        }
    }

    fn sweeper_proceeds(&self, world: &mut World, sweeper: u8, reply: Reply) {
        let slot = usize::from(sweeper);
        let Some(mut job) = world.sweepers[slot].take() else { return };
        let next = match job.chore {
            Chore::Recover => self.recovery_step(job.waiting_for, job.paste, reply),
            Chore::Reap => reaper_step(job.waiting_for, job.paste, reply),
        };
        if let Next::Call(op) = next {
            job.waiting_for = op;
            world.sweepers[slot] = Some(job);
        }
    }

    /// Recovery of one stale pending key (crates/sweeper/src/recovery.rs).
    fn recovery_step(&self, step: Op, paste: PasteNo, reply: Reply) -> Next {
        match (step, reply) {
            (Op::Fence(_) | Op::Read(_), Reply::Fate(Fate::Live)) => Next::Call(Op::Done(paste)),
            (Op::Fence(_) | Op::Read(_), Reply::Fate(Fate::Dead | Fate::Unknown)) => Next::Call(Op::Abort(paste)),
            (Op::Fence(_) | Op::Read(_), _) if self.has(Flaw::SweeperAbortsWhenUnreachable) => {
                Next::Call(Op::Abort(paste))
            }
            _ => Next::Finish,
        }
    }

    fn answer(&self, world: &mut World, gateway: u8, key: u8, outcome: Option<PasteNo>) {
        let undisturbed = world.faults_left == self.bounds.faults;
        let this = &mut world.keys[usize::from(key)];
        let mut seen = 0;
        match outcome {
            Some(paste) => {
                if !this.row(paste).was_created() {
                    seen |= violation::NAMES_DEAD_ID;
                }
                if !this.record.is_some_and(|r| r.is(paste, KeyState::Done)) {
                    seen |= violation::BEFORE_DONE;
                }
                match this.first_201 {
                    Some(first) if first != paste => seen |= violation::BODY_CHANGED,
                    Some(_) => {}
                    None => this.first_201 = Some(paste),
                }
            }
            None if undisturbed => seen |= violation::UNDISTURBED_503,
            None => {}
        }
        if this.client.waiting_on == Some(gateway) {
            this.client.waiting_on = None;
            this.client.has_201 |= outcome.is_some();
        }
        world.violations |= seen;
    }

    fn start_job(&self, world: &mut World, sweeper: u8, chore: Chore, key: u8, paste: PasteNo) {
        let waiting_for = match chore {
            Chore::Recover if self.has(Flaw::SweeperFinishesBlind) => Op::Done(paste),
            Chore::Recover if self.has(Flaw::SweeperAbortsWithoutFence) => Op::Read(paste),
            Chore::Reap if self.has(Flaw::ReapsWithoutFence) => Op::Read(paste),
            Chore::Recover | Chore::Reap => Op::Fence(paste),
        };
        world.sweepers[usize::from(sweeper)] = Some(Job { chore, key, paste, waiting_for });
    }
}

/// `Saga::finish_pending`: search P first when K says so, else roll forward.
fn finish_pending(paste: PasteNo, search_first: bool) -> Next {
    if search_first {
        Next::Call(Op::Search { own: paste })
    } else {
        Next::Call(Op::Put(paste))
    }
}

/// The object reaper for one object (crates/sweeper/src/reapers.rs): only
/// behind a dead id.
fn reaper_step(step: Op, paste: PasteNo, reply: Reply) -> Next {
    match (step, reply) {
        (Op::Fence(_) | Op::Read(_), Reply::Fate(Fate::Dead | Fate::Unknown)) => Next::Call(Op::DeleteObject(paste)),
        _ => Next::Finish,
    }
}

fn fault(world: &mut World) {
    world.faults_left -= 1;
}

impl Model for Protocol {
    type State = World;
    type Action = Action;

    fn init_states(&self) -> Vec<World> {
        let client = Client { attempts_left: self.bounds.attempts, waiting_on: None, has_201: false };
        let key = KeyWorld {
            record: None,
            pastes: Vec::new(),
            client,
            first_201: None,
            adopted: false,
            one_commit: false,
            saga_key_followed: false,
        };
        vec![World {
            keys: vec![key; usize::from(self.bounds.keys)],
            gateways: vec![None; usize::from(self.bounds.gateways)],
            sweepers: vec![None; usize::from(self.bounds.sweepers)],
            orphans: Default::default(),
            paste_service_reachable: true,
            k_lost_commits: false,
            faults_left: self.bounds.faults,
            violations: 0,
        }]
    }

    fn actions(&self, world: &World, actions: &mut Vec<Action>) {
        for key in 0..self.bounds.keys {
            self.client_actions(world, key, actions);
        }
        for gateway in 0..self.bounds.gateways {
            self.actor_actions(world, Actor::Gateway(gateway), actions);
        }
        for sweeper in 0..self.bounds.sweepers {
            match world.sweepers[usize::from(sweeper)] {
                Some(_) => self.actor_actions(world, Actor::Sweeper(sweeper), actions),
                None => self.sweeper_actions(world, sweeper, actions),
            }
        }
        for &call in &world.orphans {
            if world.reachable(call) {
                actions.push(Action::LandOrphan(call));
            }
            actions.push(Action::DropOrphan(call));
        }
        if world.faults_left > 0 && !world.k_lost_commits {
            for (key, this) in (0..).zip(&world.keys) {
                if this.record.is_some() && world.key_is_quiet(key) {
                    actions.push(Action::KLosesKey { key });
                }
            }
        }
        if !world.paste_service_reachable {
            actions.push(Action::PasteServiceBack);
        } else if world.faults_left > 0 {
            actions.push(Action::PasteServiceDown);
        }
    }

    fn next_state(&self, last: &World, action: Action) -> Option<World> {
        let mut world = last.clone();
        match action {
            Action::Send { key, gateway, one_commit } => {
                let client = &mut world.keys[usize::from(key)].client;
                client.attempts_left -= 1;
                client.waiting_on = Some(gateway);
                world.gateways[usize::from(gateway)] = Some(Attempt {
                    key,
                    paste: None,
                    minted: false,
                    answered: false,
                    search_first: false,
                    one_commit,
                    waiting_for: if one_commit { Op::Lookup } else { Op::Begin },
                });
            }
            Action::GiveUp { key } => {
                fault(&mut world);
                world.keys[usize::from(key)].client.waiting_on = None;
            }
            Action::Land(actor) => {
                let call = world.waiting_for(actor)?;
                let (reply, minted) = self.land(&mut world, call);
                self.proceed(&mut world, actor, reply, minted);
            }
            Action::LandReplyLost(actor) => {
                fault(&mut world);
                let call = world.waiting_for(actor)?;
                self.land(&mut world, call);
                self.proceed(&mut world, actor, Reply::Uncertain, false);
            }
            Action::LandDuplicated(actor) => {
                fault(&mut world);
                let call = world.waiting_for(actor)?;
                world.orphans.insert(call);
                let (reply, minted) = self.land(&mut world, call);
                self.proceed(&mut world, actor, reply, minted);
            }
            Action::Delay(actor) => {
                fault(&mut world);
                let call = world.waiting_for(actor)?;
                world.orphans.insert(call);
                self.proceed(&mut world, actor, Reply::Uncertain, false);
            }
            Action::Refuse(actor) => {
                fault(&mut world);
                self.proceed(&mut world, actor, Reply::Refused, false);
            }
            Action::Crash(actor) => {
                fault(&mut world);
                let call = world.waiting_for(actor)?;
                world.orphans.insert(call);
                match actor {
                    Actor::Gateway(g) => {
                        world.gateways[usize::from(g)] = None;
                        // The client's connection breaks: it sees an error at once.
                        let client = &mut world.keys[usize::from(call.key)].client;
                        if client.waiting_on == Some(g) {
                            client.waiting_on = None;
                        }
                    }
                    Actor::Sweeper(s) => world.sweepers[usize::from(s)] = None,
                }
            }
            Action::LandOrphan(call) => {
                world.orphans.remove(&call);
                self.land(&mut world, call);
            }
            Action::DropOrphan(call) => {
                world.orphans.remove(&call);
            }
            Action::PasteServiceDown => {
                fault(&mut world);
                world.paste_service_reachable = false;
            }
            Action::PasteServiceBack => world.paste_service_reachable = true,
            Action::Recover { sweeper, key } => {
                let paste = world.keys[usize::from(key)].record?.paste;
                self.start_job(&mut world, sweeper, Chore::Recover, key, paste);
            }
            Action::Reap { sweeper, key, paste } => self.start_job(&mut world, sweeper, Chore::Reap, key, paste),
            Action::KLosesKey { key } => {
                fault(&mut world);
                world.k_lost_commits = true;
                world.keys[usize::from(key)].record = None;
            }
            Action::OwnerDeletes { key } => {
                let this = &mut world.keys[usize::from(key)];
                let paste = this.record?.paste;
                this.pastes[usize::from(paste)].row = Row::DeletedByOwner;
            }
        }
        Some(world)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        properties::all()
    }
}
