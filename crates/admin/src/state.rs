//! What the admin listener knows: the metrics handle, and for a process that
//! runs a sweeper, a short memory of what the sweeper saw (samples of
//! [`Sweeper::observe`]) and did (recorded [`RoundReport`]s). The memory is
//! only for the dashboard's plot; nothing here is needed after a restart.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use chrono::{DateTime, Utc};
use metrics_exporter_prometheus::PrometheusHandle;
use pastebin_sweeper::{Observation, RoundReport, Sweeper};

use crate::{
    status::{Sample, Status},
    traffic::{traffic_status, Reading},
};

/// How often the dashboard's sampler asks the shards for their pending stats.
pub const DEFAULT_SAMPLE_INTERVAL: Duration = Duration::from_secs(3);
/// How much history the plot shows.
pub const HISTORY: Duration = Duration::from_secs(15 * 60);
/// Sweeper rounds kept for the "recent decisions" table.
const ROUNDS_KEPT: usize = 60;
/// Traffic readings kept: a little over the minute the rates are taken over.
const TRAFFIC_KEPT: chrono::Duration = chrono::Duration::seconds(90);

/// Shared state of the admin listener; cheap to clone.
#[derive(Clone)]
pub struct AdminState {
    inner: Arc<Inner>,
}

struct Inner {
    metrics: PrometheusHandle,
    sweeper: Option<Sweeper>,
    sample_interval: Duration,
    memory: Mutex<Memory>,
}

#[derive(Default)]
struct Memory {
    samples: VecDeque<Sample>,
    /// Readings of this process's requests and storage, for the last minute's rates.
    traffic: VecDeque<(DateTime<Utc>, Reading)>,
    latest: Option<(DateTime<Utc>, Observation)>,
    rounds: VecDeque<(DateTime<Utc>, RoundReport)>,
}

impl AdminState {
    /// The admin state of a process that runs a sweeper (or may observe the
    /// shards as one): `/metrics` and the dashboard. Installs the process's
    /// metrics recorder if it is not installed yet.
    pub fn new(sweeper: Sweeper) -> Self {
        Self::build(Some(sweeper), DEFAULT_SAMPLE_INTERVAL)
    }

    /// The admin state of a service without a sweeper (K, P, the gateway):
    /// `/metrics` only.
    pub fn metrics_only() -> Self {
        Self::build(None, DEFAULT_SAMPLE_INTERVAL)
    }

    /// Samples every `interval` instead of every [`DEFAULT_SAMPLE_INTERVAL`].
    pub fn with_sample_interval(self, interval: Duration) -> Self {
        let inner = &self.inner;
        Self::build(inner.sweeper.clone(), interval.max(Duration::from_millis(100)))
    }

    fn build(sweeper: Option<Sweeper>, sample_interval: Duration) -> Self {
        let metrics = pastebin_runtime::metrics::install();
        Self { inner: Arc::new(Inner { metrics, sweeper, sample_interval, memory: Mutex::default() }) }
    }

    pub fn has_sweeper(&self) -> bool {
        self.inner.sweeper.is_some()
    }

    pub fn sample_interval(&self) -> Duration {
        self.inner.sample_interval
    }

    /// The Prometheus text exposition of every metric of this process.
    pub fn render_metrics(&self) -> String {
        self.inner.metrics.render()
    }

    /// Remembers what a sweeper round did, for the dashboard. Call it with
    /// every report of the process's sweeper loop.
    pub fn record_round(&self, report: RoundReport) {
        let mut memory = self.memory();
        memory.rounds.push_back((Utc::now(), report));
        while memory.rounds.len() > ROUNDS_KEPT {
            memory.rounds.pop_front();
        }
    }

    /// Observes the shards once (which also sets the pending gauges) and
    /// remembers the result, with this process's traffic and storage.
    /// Without a sweeper, does nothing.
    pub async fn sample_now(&self) {
        let Some(sweeper) = &self.inner.sweeper else {
            return;
        };
        let observation = sweeper.observe().await;
        let now = Utc::now();
        self.remember(now, observation);
        let reading = Reading::of(&self.render_metrics());
        let mut memory = self.memory();
        memory.traffic.push_back((now, reading));
        while memory.traffic.front().is_some_and(|(at, _)| now - *at > TRAFFIC_KEPT) {
            memory.traffic.pop_front();
        }
    }

    fn remember(&self, at: DateTime<Utc>, observation: Observation) {
        let keep = (HISTORY.as_secs_f64() / self.inner.sample_interval.as_secs_f64()).ceil() as usize + 1;
        let mut memory = self.memory();
        memory.samples.push_back(Sample::of(at, &observation));
        while memory.samples.len() > keep {
            memory.samples.pop_front();
        }
        memory.latest = Some((at, observation));
    }

    /// Samples every `sample_interval`, forever; the first sample at once.
    pub async fn run_sampler(self) {
        if self.inner.sweeper.is_none() {
            return std::future::pending().await;
        }
        let mut ticker = tokio::time::interval(self.inner.sample_interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            self.sample_now().await;
        }
    }

    /// What the dashboard shows, now.
    pub fn status(&self) -> Status {
        let memory = self.memory();
        let samples: Vec<Sample> = memory.samples.iter().cloned().collect();
        let rounds: Vec<(DateTime<Utc>, RoundReport)> = memory.rounds.iter().cloned().collect();
        let readings: Vec<(DateTime<Utc>, Reading)> = memory.traffic.iter().copied().collect();
        let mut status = Status::build(Utc::now(), memory.latest.as_ref(), &samples, &rounds);
        status.traffic = traffic_status(&readings);
        status
    }

    /// The memory holds plain data: a panic elsewhere cannot leave it half
    /// updated in a way that matters, so a poisoned lock is still usable.
    fn memory(&self) -> MutexGuard<'_, Memory> {
        self.inner.memory.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
