//! Simulated time as the real code reads it: every part's [`Clock`] is the
//! simulation's elapsed time plus that host's skew, which the nemesis moves.

use std::sync::{
    atomic::{AtomicI64, Ordering},
    Arc,
};

use chrono::{DateTime, Utc};
use pastebin_core::Clock;

/// When every simulated run starts, so that one seed gives the same times.
const EPOCH_MS: i64 = 1_800_000_000_000;

/// The simulation's elapsed time, written by the driver after each step.
#[derive(Debug, Clone, Default)]
pub struct SimTime(Arc<AtomicI64>);

impl SimTime {
    pub fn set(&self, elapsed: std::time::Duration) {
        let ms = i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX);
        self.0.store(ms, Ordering::SeqCst);
    }

    pub fn elapsed_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }

    /// A clock for one host, with no skew until the nemesis sets one.
    pub fn host_clock(&self) -> HostClock {
        HostClock { time: self.clone(), skew_ms: Arc::default() }
    }
}

/// One host's wall clock: the simulation's time plus its skew.
#[derive(Debug, Clone)]
pub struct HostClock {
    time: SimTime,
    skew_ms: Arc<AtomicI64>,
}

impl HostClock {
    pub fn skew(&self, by_ms: i64) {
        self.skew_ms.store(by_ms, Ordering::SeqCst);
    }
}

impl Clock for HostClock {
    fn now(&self) -> DateTime<Utc> {
        let ms = EPOCH_MS + self.time.elapsed_ms() + self.skew_ms.load(Ordering::SeqCst);
        DateTime::from_timestamp_millis(ms).unwrap_or(DateTime::<Utc>::MIN_UTC)
    }
}

/// Every host's clock, by host name.
#[derive(Debug, Clone)]
pub struct Clocks(Vec<(String, HostClock)>);

impl Clocks {
    /// One unskewed clock for each of `hosts`.
    pub fn new(time: &SimTime, hosts: impl IntoIterator<Item = String>) -> Self {
        Self(hosts.into_iter().map(|host| (host, time.host_clock())).collect())
    }

    /// The clock of `host`, which must be one of the hosts this was made for.
    pub fn of(&self, host: &str) -> HostClock {
        let found = self.0.iter().find(|(name, _)| name == host);
        found.map(|(_, clock)| clock.clone()).expect("every simulated host has a clock")
    }

    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(host, _)| host.as_str())
    }
}
