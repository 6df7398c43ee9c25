//! The faults of a run, drawn from its seed: partitions (both ways, or one
//! way so requests arrive and replies are lost after the commit), held links
//! (messages arrive late, all at once, when released), process
//! crashes and restarts, clock skew, slow links and object-store outages.
//! Each fault is undone after a while; [`Nemesis::heal`] undoes them all.

use std::time::Duration;

use rand::{rngs::StdRng, seq::IndexedRandom, Rng, SeedableRng};
use turmoil::Sim;

use crate::{clock::Clocks, objects::SimObjects, topology};

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
}

pub struct Nemesis {
    rng: StdRng,
    next_at: Duration,
    /// Faults to undo, with when.
    pending: Vec<(Duration, Fault)>,
    clocks: Clocks,
    objects: SimObjects,
    /// Everything done, for the report.
    pub log: Vec<(Duration, Fault)>,
}

impl Nemesis {
    pub fn new(seed: u64, clocks: Clocks, objects: SimObjects) -> Self {
        Self {
            rng: StdRng::seed_from_u64(seed),
            next_at: Duration::ZERO,
            pending: Vec::new(),
            clocks,
            objects,
            log: Vec::new(),
        }
    }

    /// Called after every step: undoes what is due, and now and then strikes.
    pub fn act(&mut self, sim: &mut Sim<'_>, now: Duration) {
        let (due, later): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.pending).into_iter().partition(|(at, _)| *at <= now);
        self.pending = later;
        for (_, fault) in due {
            self.undo(sim, &fault);
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
