//! What the sweeper sees of the deployment each round, exported as metrics
//! and returned to the dashboard and the operator CLI.

use pastebin_core::SlotRange;
use pastebin_keys::PendingStats;
use pastebin_pastes::ReportOrder;
use pastebin_proto::shard::v1 as shard_pb;
use pastebin_runtime::metrics as names;
use pastebin_slots::shard_slots;

use crate::{RoundReport, Sweeper};

/// Pending statistics of every K shard (None: unreachable), whether each
/// P shard answered, every shard by address and range, and the slot moves
/// the shards have recorded.
#[derive(Debug, Clone, Default)]
pub struct Observation {
    pub key_shards: Vec<Option<PendingStats>>,
    pub paste_shards_reachable: Vec<bool>,
    /// Open reports on each P shard's live pastes (None: it did not say).
    pub open_reports: Vec<Option<u64>>,
    /// The K shards, in the order of `key_shards`.
    pub key_names: Vec<ShardName>,
    /// The P shards, in the order of `paste_shards_reachable`.
    pub paste_names: Vec<ShardName>,
    pub moves: Vec<ShardMove>,
}

/// How a shard is shown: its address and the slots it is known to own (the
/// position in a list is no name: lists may be ordered differently).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardName {
    pub address: String,
    /// `0-127`, or `none`.
    pub slots: String,
}

/// A slot move as one shard recorded it (docs/design.md#moving-slots),
/// read as `ctl reshard --status` reads it, in any step: a move whose ctl
/// stopped shows here with its age.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardMove {
    /// `key` or `paste`.
    pub kind: &'static str,
    /// The shard that recorded it.
    pub address: String,
    pub move_id: String,
    /// `source` or `target`.
    pub role: &'static str,
    pub slots: SlotRange,
    /// The other shard, as ctl named it.
    pub peer: String,
    /// `exporting`, `importing`, `frozen`, `released`...
    pub step: String,
    /// Since the move began, on the shard's clock.
    pub age_seconds: f64,
    /// Since its last step, on the shard's clock.
    pub step_age_seconds: f64,
    /// The slots the shard has frozen for it (their writes wait).
    pub frozen: Option<SlotRange>,
}

impl ShardMove {
    /// The move in a shard's `MoveStatus` answer, if it is in one.
    fn of(kind: &'static str, address: &str, answer: shard_pb::MoveStatusResponse) -> Option<Self> {
        let active = answer.r#move?;
        let shard = answer.shard.unwrap_or_default();
        let shard_kind = if kind == "key" { shard_pb::ShardKind::Key } else { shard_pb::ShardKind::Paste };
        let seconds_since = |at_ms: i64| (shard.now_ms - at_ms).max(0) as f64 / 1000.0;
        let step = shard_pb::MoveStep::try_from(active.step).map_or("unknown", |step| step.as_str_name());
        Some(Self {
            kind,
            address: address.to_owned(),
            role: if active.role == shard_pb::MoveRole::Source as i32 { "source" } else { "target" },
            slots: shard_slots::span_range(active.slots.as_ref()).ok()?,
            peer: active.peer,
            step: step.trim_start_matches("MOVE_STEP_").to_lowercase(),
            age_seconds: seconds_since(active.started_at_ms),
            step_age_seconds: seconds_since(active.updated_at_ms),
            frozen: shard_slots::described(shard_kind, &shard).ok().and_then(|described| described.frozen),
            move_id: active.move_id,
        })
    }
}

/// Reads the move `address` is in (a shard that does not answer shows
/// none) and sets its step-age gauge (0: no move).
fn observed_move(
    kind: &'static str,
    address: &str,
    answer: Result<shard_pb::MoveStatusResponse, pastebin_runtime::grpc::CallError>,
) -> Option<ShardMove> {
    let found = answer.ok().and_then(|answer| ShardMove::of(kind, address, answer));
    let step_age = found.as_ref().map_or(0.0, |found| found.step_age_seconds);
    metrics::gauge!(names::SLOT_MOVE_STEP_AGE_SECONDS, "kind" => kind, "address" => address.to_owned()).set(step_age);
    found
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
        let slots = self.slot_map();
        for (shard, keys) in slots.key_shards().iter().enumerate() {
            // Labelled by address, not list position: two sweepers may list
            // the shards in different orders (docs/operations.md#operator-tools).
            let address = &slots.key_addresses()[shard];
            let stats = keys.with_deadline(self.deadline()).pending_stats().await.ok();
            if let Some(stats) = &stats {
                metrics::gauge!(names::PENDING_KEYS, "address" => address.clone()).set(stats.pending as f64);
                metrics::gauge!(names::OLDEST_PENDING_AGE_SECONDS, "address" => address.clone())
                    .set(age_seconds(stats));
                metrics::gauge!(names::PENDING_KEYS_OLDER_THAN, "address" => address.clone(), "older_than" => "2s")
                    .set(stats.older_than_2s as f64);
                metrics::gauge!(names::PENDING_KEYS_OLDER_THAN, "address" => address.clone(), "older_than" => "60s")
                    .set(stats.older_than_60s as f64);
            }
            observation.key_shards.push(stats);
            observation.key_names.push(ShardName { address: address.clone(), slots: slots.key_shard_slots(shard) });
            let answer = keys.with_deadline(self.deadline()).move_status().await;
            observation.moves.extend(observed_move("key", address, answer));
        }
        for (shard, pastes) in slots.paste_shards().iter().enumerate() {
            let address = &slots.paste_addresses()[shard];
            let reachable = pastes.with_deadline(self.deadline()).resolve_batch(&[]).await.is_ok();
            metrics::gauge!(names::PASTE_SHARD_REACHABLE, "address" => address.clone()).set(if reachable {
                1.0
            } else {
                0.0
            });
            observation.paste_shards_reachable.push(reachable);
            let reports = pastes.with_deadline(self.deadline()).reports(ReportOrder::Newest, 1).await;
            observation.open_reports.push(reports.ok().map(|(_, open)| open));
            observation.paste_names.push(ShardName { address: address.clone(), slots: slots.paste_shard_slots(shard) });
            let answer = pastes.with_deadline(self.deadline()).move_status().await;
            observation.moves.extend(observed_move("paste", address, answer));
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
