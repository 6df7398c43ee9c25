//! The sweeper: the saga's orchestrator of last resort, and the janitor.
//!
//! [`recovery`] finishes or aborts pending keys older than the recovery
//! threshold (60 s), always after reading shard P, never blind. [`reapers`]
//! deletes retired keys (25 h), purges expired pastes, reaps orphan
//! objects behind a tombstone and, much later, purges the tombstones.
//! [`audit`] cross-checks one slot of K, P and the objects per round for
//! the divergence gauges (lost pastes, missing objects, orphans). All state lives in K and P: a sweeper can be
//! killed at any point and restarted, and several can run at once, because
//! every change it makes is a guarded update.

mod audit;
mod observe;
mod reapers;
mod recovery;

use std::{
    future::Future,
    sync::{Arc, Mutex},
    time::Duration,
};

use pastebin_core::Clock;
use pastebin_objects::ObjectStore;
use pastebin_shards::{Rediscover, SlotMap, SlotMapCell};

pub use audit::Divergence;
pub use observe::{Observation, ShardMove, ShardName};
pub use pastebin_shards::Decision;
pub use reapers::ReapReport;
pub use recovery::RecoveryReport;

#[derive(Debug, Clone)]
pub struct SweeperSettings {
    /// Time between rounds.
    pub interval: Duration,
    /// A pending key younger than this may still have a create in flight.
    pub recovery_threshold: Duration,
    /// Keys per page on K, and ids per `ResolveBatch` on P.
    pub batch_size: u32,
    /// Deadline of each call to a shard or the object store.
    pub call_timeout: Duration,
    /// An object younger than this is never reaped (an uncertain PUT may
    /// still be followed by its paste insert).
    pub object_age_floor: Duration,
    /// Time between object-reaper scans (they list the whole bucket).
    pub reap_interval: Duration,
    /// How long a tombstone is kept on P before it is purged (at least
    /// `pastebin_pastes::MIN_TOMBSTONE_AGE`, 26 h).
    pub tombstone_retention: Duration,
}

impl Default for SweeperSettings {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(5),
            recovery_threshold: pastebin_core::RECOVERY_THRESHOLD,
            batch_size: 500,
            call_timeout: Duration::from_secs(5),
            object_age_floor: Duration::from_secs(3600),
            reap_interval: Duration::from_secs(600),
            tombstone_retention: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

#[derive(Clone)]
pub struct Sweeper {
    slots: SlotMapCell,
    objects: Arc<dyn ObjectStore>,
    clock: Arc<dyn Clock>,
    settings: SweeperSettings,
    /// Shared by the clones of one sweeper, so their rounds walk the slots together.
    audit: Arc<Mutex<audit::Audit>>,
}

/// What one round did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundReport {
    pub recovery: RecoveryReport,
    pub reap: ReapReport,
}

impl RoundReport {
    /// Why the round could not do all its work (a shard or the object store
    /// could not be reached), in words safe to show anyone; `None` if it could.
    pub fn failure(&self) -> Option<String> {
        let recovery = &self.recovery;
        let failures: Vec<String> = [
            (recovery.key_shards_unreachable, "key shards unreachable"),
            (recovery.skipped_unreachable, "keys left pending, their paste shard unreachable"),
            (self.reap.errors, "cleanup calls failed"),
        ]
        .into_iter()
        .filter(|(count, _)| *count > 0)
        .map(|(count, what)| format!("{count} {what}"))
        .collect();
        (!failures.is_empty()).then(|| format!("last round: {}", failures.join(", ")))
    }
}

impl Sweeper {
    pub fn new(
        slots: SlotMap,
        objects: Arc<dyn ObjectStore>,
        clock: Arc<dyn Clock>,
        settings: SweeperSettings,
    ) -> Self {
        Self { slots: SlotMapCell::ready(slots), objects, clock, settings, audit: Arc::default() }
    }

    /// The same sweeper, discovering its slot map again before each round,
    /// so it follows slot moves without a restart (docs/design.md#moving-slots).
    pub fn rediscovering(self, rediscover: Rediscover) -> Self {
        self.slots.rediscover_with(rediscover);
        self
    }

    /// The cell its slot map lives in, for a follower of the topology to refresh.
    pub fn slot_map_cell(&self) -> SlotMapCell {
        self.slots.clone()
    }

    fn slot_map(&self) -> Arc<SlotMap> {
        // Filled when the sweeper was made, and never emptied.
        self.slots.get().expect("a sweeper always has a slot map")
    }

    pub fn settings(&self) -> &SweeperSettings {
        &self.settings
    }

    /// One round: recovery first (it is what clients wait for), then key
    /// retention and paste expiry; the object reaper when `reap_objects`;
    /// last, the cross-check of one slot.
    pub async fn round(&self, reap_objects: bool) -> RoundReport {
        self.slots.refresh().await;
        let recovery = self.recover_stale().await;
        let (retired, expired) = (self.retire_keys_drained().await, self.purge_expired_pastes_drained().await);
        let purged = self.purge_tombstones_drained().await;
        let mut reap = ReapReport {
            retired_keys: retired.deleted,
            expired_pastes: expired.deleted,
            purged_tombstones: purged.deleted,
            errors: retired.failures + expired.failures + purged.failures,
            ..ReapReport::default()
        };
        if reap_objects {
            let objects = self.reap_orphan_objects().await;
            reap.reaped_objects = objects.reaped_objects;
            reap.lost_pastes_spared = objects.lost_pastes_spared;
            reap.errors += objects.errors;
        }
        let report = RoundReport { recovery, reap };
        observe::record("sweeper rounds", &report);
        self.observe().await;
        self.audit_next_slot().await;
        if report != RoundReport::default() {
            tracing::info!(?report, "sweeper round");
        }
        report
    }

    /// Rounds every `interval` until `shutdown`; the object reaper every
    /// `reap_interval`. Nothing here needs to survive a restart.
    pub async fn run(self, shutdown: impl Future<Output = ()>) {
        self.run_with(shutdown, |_| {}).await;
    }

    /// [`Self::run`], handing each round's report to `on_round` (the
    /// dashboard's list of recent decisions).
    pub async fn run_with(self, shutdown: impl Future<Output = ()>, on_round: impl FnMut(&RoundReport)) {
        // The object reaper lists the whole store, which can take minutes; it
        // runs in its own loop so recovery and retention never wait for it.
        let on_round = std::cell::RefCell::new(on_round);
        let report = |report: RoundReport| (on_round.borrow_mut())(&report);
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let rounds = self.every(self.settings.interval, stopped.clone(), || async {
            report(self.round(false).await);
        });
        let reaper = self.every(self.settings.reap_interval, stopped, || async {
            let reap = self.reap_orphan_objects().await;
            let round = RoundReport { reap, ..RoundReport::default() };
            observe::record("object reaper", &round);
            report(round);
        });
        let trigger = async {
            shutdown.await;
            let _ = stop.send(true);
        };
        tokio::join!(rounds, reaper, trigger);
    }

    /// Runs `job` now and then every `period` until `stopped` flips.
    async fn every<F: Future<Output = ()>>(
        &self,
        period: Duration,
        mut stopped: tokio::sync::watch::Receiver<bool>,
        mut job: impl FnMut() -> F,
    ) {
        let mut ticker = tokio::time::interval(period.max(Duration::from_millis(10)));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticker.tick() => job().await,
                _ = stopped.changed() => break,
            }
        }
    }

    fn deadline(&self) -> tokio::time::Instant {
        tokio::time::Instant::now() + self.settings.call_timeout
    }
}
