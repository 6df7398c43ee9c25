//! The faults of a run, drawn from its seed: partitions (both ways, or one
//! way so requests arrive and replies are lost after the commit), held links
//! (messages arrive late, all at once, when released), process
//! crashes and restarts, clock skew, slow links and object-store outages.
//! Each fault is undone after a while; [`Nemesis::heal`] undoes them all.
//!
//! Beside them, a few times a run, it asks the operator to move a range of
//! slots between the two K shards or the two P shards ([`Fault::MoveSlots`]), one move at a time,
//! while every other fault goes on striking (the ctl host included), and
//! draws the mistake the operator makes in it, if any ([`Mistake`]). A move
//! is not undone: healing lets it finish, or the abandon the operator typed.

use std::time::Duration;

use pastebin_ctl::reshard::Kind;
use rand::{rngs::StdRng, seq::IndexedRandom, Rng, SeedableRng};
use turmoil::Sim;

use crate::{
    clock::Clocks,
    objects::SimObjects,
    reshard::{Mistake, Operator, SlotsMove},
    topology,
};

/// One fault every this many milliseconds of simulated time, on average.
const MEAN_GAP_MS: u64 = 400;
/// The largest clock skew, either way. Far beyond the 5 s recovery
/// threshold: a wrong age may fence a live create, which must stay safe.
const MAX_SKEW_MS: i64 = 30_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    Partition(String, String),
    /// Messages from the first host to the second are dropped.
    PartitionOneWay(String, String),
    /// Messages between the two hosts wait, and arrive late when released.
    Hold(String, String),
    Crash(String),
    Restart(String),
    Skew(String, i64),
    SlowLinks(Duration),
    ObjectOutage,
    /// The operator runs `ctl reshard` to move these slots (`first..=last`)
    /// from one shard of `kind` to the other, making `mistake` on the way.
    MoveSlots {
        kind: Kind,
        from: &'static str,
        to: &'static str,
        first: u8,
        last: u8,
        mistake: Option<Mistake>,
    },
}

/// The most moves in one run, and the largest range one moves.
const MAX_MOVES: u32 = 4;
const MAX_MOVED_SLOTS: u8 = 96;
/// An operator's mistake comes this many milliseconds into the move, at
/// most: about as long as a move that nothing strikes takes.
const MISTAKE_WITHIN_MS: u64 = 500;

/// The two shards of `kind` that split the slots, the first owning those
/// below the boundary.
fn pair(kind: Kind) -> (&'static str, &'static str) {
    match kind {
        Kind::Key => (topology::KEY_SHARDS[0].0, topology::KEY_SHARDS[1].0),
        Kind::Paste => (topology::PASTE_SHARDS[0].0, topology::PASTE_SHARDS[1].0),
    }
}

fn index(kind: Kind) -> usize {
    match kind {
        Kind::Key => 0,
        Kind::Paste => 1,
    }
}

/// The moves of a run: when the next is asked for, and where the boundary
/// between the two shards of each kind will be once every move asked for
/// is done.
struct Moves {
    rng: StdRng,
    operator: Operator,
    left: u32,
    next_at: Option<Duration>,
    /// By kind (K, then P): the first slot of the second shard (the first
    /// owns the slots before it) once the moves that ended are counted.
    boundaries: [u8; 2],
    /// The kind of the move asked for last, and where its boundary is if it
    /// moves its slots (an abandon leaves them with the source).
    if_moved: Option<(Kind, u8)>,
}

impl Moves {
    fn new(seed: u64, operator: Operator) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x6d6f_7665);
        let left = rng.random_range(1..=MAX_MOVES);
        let first_at = Duration::from_millis(rng.random_range(0..4_000));
        let boundaries = [topology::KEY_SHARDS[1].1, topology::PASTE_SHARDS[1].1];
        Self { rng, operator, left, next_at: Some(first_at), boundaries, if_moved: None }
    }

    /// The next move when it is due: the operator has finished the last
    /// one, and a pause drawn after it has passed. Half the moves are of K
    /// slots, half of P slots (with their tombstones).
    fn due(&mut self, now: Duration) -> Option<Fault> {
        if self.left == 0 || !self.operator.idle() {
            return None;
        }
        self.boundaries = self.settled_boundaries();
        self.if_moved = None;
        let next_at = *self.next_at.get_or_insert_with(|| now + Duration::from_millis(self.rng.random_range(0..3_000)));
        if now < next_at {
            return None;
        }
        self.next_at = None;
        self.left -= 1;
        let kind = if self.rng.random_bool(0.5) { Kind::Key } else { Kind::Paste };
        let ((first_shard, second_shard), boundary) = (pair(kind), self.boundaries[index(kind)]);
        let count = self.rng.random_range(1..=MAX_MOVED_SLOTS);
        // Either the second shard's first slots go to the first, or the
        // first's last ones to the second; each keeps at least one slot.
        let second_gives = match boundary {
            1 => true,
            u8::MAX => false,
            _ => self.rng.random_bool(0.5),
        };
        let (from, to, first, last) = if second_gives {
            (second_shard, first_shard, boundary, boundary.saturating_add(count - 1).min(u8::MAX - 1))
        } else {
            (first_shard, second_shard, boundary.saturating_sub(count).max(1), boundary - 1)
        };
        self.if_moved = Some((kind, if second_gives { last + 1 } else { first }));
        let slots = pastebin_core::SlotRange::new(first, last).expect("first <= last: each shard keeps a slot");
        let (batch, mistake) = (self.rng.random_range(1..=3), self.mistake(kind));
        self.operator.ask(SlotsMove { kind, from, to, slots, batch, mistake });
        Some(Fault::MoveSlots { kind, from, to, first, last, mistake })
    }

    /// Half the moves go as the runbook says; the other half, the operator
    /// gets something wrong, at a point of the move drawn here: a move takes
    /// about 0.5 s when nothing strikes it, so any of its steps. A typo in
    /// `--to` needs a shard to type by mistake: only K has one (k2), so a P
    /// move drawn with one goes as the runbook says.
    fn mistake(&mut self, kind: Kind) -> Option<Mistake> {
        let rng = &mut self.rng;
        let after = Duration::from_millis(rng.random_range(0..MISTAKE_WITHIN_MS));
        Some(match rng.random_range(0..100) {
            0..=49 => return None,
            50..=64 => Mistake::Abandon { after, halfway: false, then_resume: rng.random_bool(0.5) },
            65..=74 => Mistake::Abandon { after, halfway: true, then_resume: true },
            75..=89 if kind == Kind::Paste => return None,
            75..=89 => Mistake::WrongTo { after },
            _ => Mistake::TwoRuns { after },
        })
    }

    /// The boundaries once the last move asked for has ended.
    fn settled_boundaries(&self) -> [u8; 2] {
        let mut boundaries = self.boundaries;
        if let Some((kind, boundary)) = self.if_moved.filter(|_| self.operator.last_moved()) {
            boundaries[index(kind)] = boundary;
        }
        boundaries
    }

    /// The range each shard of `kind` owns once every move asked for has
    /// ended (the spare K shard: none).
    fn final_ranges(&self, kind: Kind) -> Vec<pastebin_core::OwnedSlots> {
        let boundary = self.settled_boundaries()[index(kind)];
        let range = |first, last| pastebin_core::SlotRange::new(first, last).expect("1 <= boundary <= 255").into();
        let mut ranges = vec![range(0, boundary - 1), range(boundary, u8::MAX)];
        if kind == Kind::Key {
            ranges.push(pastebin_core::OwnedSlots::Nothing);
        }
        ranges
    }
}

pub struct Nemesis {
    rng: StdRng,
    next_at: Duration,
    /// Faults to undo, with when.
    pending: Vec<(Duration, Fault)>,
    clocks: Clocks,
    objects: SimObjects,
    moves: Moves,
    /// Everything done, for the report.
    pub log: Vec<(Duration, Fault)>,
}

impl Nemesis {
    pub fn new(seed: u64, clocks: Clocks, objects: SimObjects, operator: Operator) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
            next_at: Duration::ZERO,
            pending: Vec::new(),
            clocks,
            objects,
            moves: Moves::new(seed, operator),
            log: Vec::new(),
        }
    }

    /// The range each shard of `kind` must own once the moves asked for are done.
    pub fn final_ranges(&self, kind: Kind) -> Vec<pastebin_core::OwnedSlots> {
        self.moves.final_ranges(kind)
    }

    /// Called after every step: undoes what is due, and now and then strikes.
    pub fn act(&mut self, sim: &mut Sim<'_>, now: Duration) {
        let (due, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.pending).into_iter().partition(|(at, _)| *at <= now);
        self.pending = later;
        for (_, fault) in due {
            self.undo(sim, &fault);
        }
        if let Some(fault) = self.moves.due(now) {
            self.log.push((now, fault));
        }
        if now >= self.next_at {
            self.next_at = now + Duration::from_millis(self.rng.random_range(1..2 * MEAN_GAP_MS));
            let fault = self.draw();
            let lasts = Duration::from_millis(self.rng.random_range(100..4_000));
            self.strike(sim, &fault);
            self.log.push((now, fault.clone()));
            self.pending.push((now + lasts, fault));
        }
    }

    fn draw(&mut self) -> Fault {
        let servers = topology::servers();
        let pick = |rng: &mut StdRng| servers.choose(rng).cloned().unwrap_or_default();
        let (a, b) = (pick(&mut self.rng), pick(&mut self.rng));
        match self.rng.random_range(0..100) {
            0..=24 if a != b => Fault::Partition(a, b),
            25..=39 if a != b => Fault::PartitionOneWay(a, b),
            40..=49 if a != b => Fault::Hold(a, b),
            50..=64 => Fault::Crash(a),
            65..=79 => Fault::Restart(a),
            80..=89 => {
                let skew = self.rng.random_range(-MAX_SKEW_MS..=MAX_SKEW_MS);
                let hosts: Vec<&str> = self.clocks.hosts().collect();
                Fault::Skew(hosts.choose(&mut self.rng).map(|host| (*host).to_owned()).unwrap_or_default(), skew)
            }
            90..=94 => Fault::SlowLinks(Duration::from_millis(self.rng.random_range(50..1_500))),
            95..=99 => Fault::ObjectOutage,
            _ => Fault::Restart(a),
        }
    }

    fn strike(&self, sim: &mut Sim<'_>, fault: &Fault) {
        match fault {
            Fault::Partition(a, b) => sim.partition(a.as_str(), b.as_str()),
            Fault::PartitionOneWay(a, b) => sim.partition_oneway(a.as_str(), b.as_str()),
            Fault::Hold(a, b) => sim.hold(a.as_str(), b.as_str()),
            Fault::Crash(host) => sim.crash(host.as_str()),
            Fault::Restart(host) => sim.bounce(host.as_str()),
            Fault::Skew(host, by) => self.clocks.of(host).skew(*by),
            Fault::SlowLinks(latency) => sim.set_max_message_latency(*latency),
            Fault::ObjectOutage => self.objects.set_outage(true),
            // Asked of the operator when drawn ([`Moves::due`]), never undone.
            Fault::MoveSlots { .. } => {}
        }
    }

    fn undo(&self, sim: &mut Sim<'_>, fault: &Fault) {
        match fault {
            Fault::Partition(a, b) => sim.repair(a.as_str(), b.as_str()),
            Fault::PartitionOneWay(a, b) => sim.repair_oneway(a.as_str(), b.as_str()),
            Fault::Hold(a, b) => sim.release(a.as_str(), b.as_str()),
            Fault::Crash(host) => sim.bounce(host.as_str()),
            Fault::Restart(_) => {}
            Fault::Skew(host, _) => self.clocks.of(host).skew(0),
            Fault::SlowLinks(_) => sim.set_max_message_latency(crate::MAX_LATENCY),
            Fault::ObjectOutage => self.objects.set_outage(false),
            Fault::MoveSlots { .. } => {}
        }
    }

    /// Ends every fault at once: the network whole, every process up, every
    /// clock right, the object store back.
    pub fn heal(&mut self, sim: &mut Sim<'_>) {
        for (_, fault) in std::mem::take(&mut self.pending) {
            self.undo(sim, &fault);
        }
    }
}
