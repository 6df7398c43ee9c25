//! What the sweeper sees of the deployment each round, exported as metrics
//! and returned to the dashboard and the operator CLI.

use pastebin_core::SlotRange;
use pastebin_keys::PendingStats;
use pastebin_pastes::ReportOrder;
use pastebin_runtime::metrics as names;

use crate::{RoundReport, Sweeper};

/// Pending statistics of every K shard (None: unreachable), whether each
/// P shard answered, and the slots any shard has frozen for a move.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    pub key_shards: Vec<Option<PendingStats>>,
    pub paste_shards_reachable: Vec<bool>,
    /// Open reports on each P shard's live pastes (None: it did not say).
    pub open_reports: Vec<Option<u64>>,
    pub moving: Vec<MovingSlots>,
}

/// Slots a shard has frozen while they move to another shard
/// (docs/design.md#moving-slots): their writes wait until the move switches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovingSlots {
    /// `key` or `paste`.
    pub kind: &'static str,
    /// The shard's index in the sweeper's list of that kind.
    pub shard: usize,
    pub frozen: SlotRange,
}

impl Observation {
    /// The oldest pending age across the shards that answered, in seconds.
    pub fn oldest_pending_age_seconds(&self) -> f64 {
        self.key_shards.iter().flatten().map(age_seconds).fold(0.0, f64::max)
    }

    pub fn pending(&self) -> u64 {
        self.key_shards.iter().flatten().map(|s| s.pending).sum()
    }
}

fn age_seconds(stats: &PendingStats) -> f64 {
    stats.oldest_created_at.map(|at| (stats.now - at).num_milliseconds().max(0) as f64 / 1000.0).unwrap_or(0.0)
}

impl Sweeper {
    /// Reads pending statistics from every K shard and probes every P shard
    /// (an empty `ResolveBatch`), and sets the gauges.
    pub async fn observe(&self) -> Observation {
        let mut observation = Observation::default();
        for (shard, keys) in self.slot_map().key_shards().iter().enumerate() {
            let stats = keys.with_deadline(self.deadline()).pending_stats().await.ok();
            if let Some(stats) = &stats {
                let shard = shard.to_string();
                metrics::gauge!(names::PENDING_KEYS, "shard" => shard.clone()).set(stats.pending as f64);
                metrics::gauge!(names::OLDEST_PENDING_AGE_SECONDS, "shard" => shard.clone()).set(age_seconds(stats));
                metrics::gauge!(names::PENDING_KEYS_OLDER_THAN, "shard" => shard.clone(), "older_than" => "2s")
                    .set(stats.older_than_2s as f64);
                metrics::gauge!(names::PENDING_KEYS_OLDER_THAN, "shard" => shard, "older_than" => "60s")
                    .set(stats.older_than_60s as f64);
            }
            observation.key_shards.push(stats);
            if let Ok(Some(frozen)) = keys.with_deadline(self.deadline()).describe().await.map(|d| d.frozen) {
                observation.moving.push(MovingSlots { kind: "key", shard, frozen });
            }
        }
        for (shard, pastes) in self.slot_map().paste_shards().iter().enumerate() {
            let reachable = pastes.with_deadline(self.deadline()).resolve_batch(&[]).await.is_ok();
            metrics::gauge!(names::PASTE_SHARD_REACHABLE, "shard" => shard.to_string()).set(if reachable {
                1.0
            } else {
                0.0
            });
            observation.paste_shards_reachable.push(reachable);
            let reports = pastes.with_deadline(self.deadline()).reports(ReportOrder::Newest, 1).await;
            observation.open_reports.push(reports.ok().map(|(_, open)| open));
            if let Ok(Some(frozen)) = pastes.with_deadline(self.deadline()).describe().await.map(|d| d.frozen) {
                observation.moving.push(MovingSlots { kind: "paste", shard, frozen });
            }
        }
        observation
    }
}

/// Counts one round's work, and makes the process not ready while the last
/// round of `job` failed (a round of the other job does not hide it).
pub(crate) fn record(job: &'static str, report: &RoundReport) {
    let recovery = &report.recovery;
    for (decision, count) in [
        ("done", recovery.marked_done),
        ("aborted", recovery.aborted),
        ("already_resolved", recovery.already_resolved),
        ("skipped_unreachable", recovery.skipped_unreachable),
        ("not_owned", recovery.not_owned),
    ] {
        metrics::counter!(names::SWEEPER_DECISIONS, "decision" => decision).increment(count);
    }
    metrics::counter!(names::RETIRED_KEYS).increment(report.reap.retired_keys);
    metrics::counter!(names::EXPIRED_PASTES).increment(report.reap.expired_pastes);
    metrics::counter!(names::REAPED_OBJECTS).increment(report.reap.reaped_objects);
    metrics::counter!(names::PURGED_TOMBSTONES).increment(report.reap.purged_tombstones);
    pastebin_runtime::readiness::process().report(job, report.failure().map_or(Ok(()), Err));
    if report.failure().is_none() {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        metrics::gauge!(names::SWEEPER_LAST_SUCCESS).set(now.as_secs_f64());
    }
}
