//! The dashboard's view of the deployment (`GET /dashboard/status.json`):
//! built from the latest observation, the recent samples and the recorded
//! sweeper rounds. No key, paste id or token is ever part of it.

use chrono::{DateTime, Utc};
use pastebin_sweeper::{Observation, RoundReport, ShardMove};
use serde::Serialize;

use pastebin_core::alert::{
    alert_level, move_stalled, CardRow, Level, CARD, CLIMBING_PER_MINUTE, MOVE_STALLED_AFTER, MOVE_UNSERVED_AFTER,
};

/// The window over which "the count is climbing" is judged.
const CLIMB_WINDOW_SECONDS: f64 = 60.0;
/// Less history than this is too little to call a trend.
const CLIMB_MIN_SPAN_SECONDS: f64 = 20.0;
/// Rounds shown in the "recent decisions" table.
const ROUNDS_SHOWN: usize = 12;

/// One point of the plot.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Milliseconds since the Unix epoch.
    pub at_ms: i64,
    pub oldest_pending_age_seconds: f64,
    pub pending: u64,
    /// Pending keys older than the 2 s create budget: the ones that are stuck or slow.
    pub older_than_2s: u64,
    /// K shards that did not answer this sample.
    pub key_shards_unreachable: usize,
}

impl Sample {
    pub fn of(at: DateTime<Utc>, observation: &Observation) -> Self {
        Self {
            at_ms: at.timestamp_millis(),
            oldest_pending_age_seconds: observation.oldest_pending_age_seconds(),
            pending: observation.pending(),
            older_than_2s: observation.key_shards.iter().flatten().map(|s| s.older_than_2s).sum(),
            key_shards_unreachable: observation.key_shards.iter().filter(|s| s.is_none()).count(),
        }
    }
}

/// Growth of stale pendings per minute over the last minute of samples, or
/// `None` when the samples span too little time to tell.
pub fn climb_per_minute(samples: &[Sample]) -> Option<f64> {
    let newest = samples.last()?;
    let window_start = newest.at_ms - (CLIMB_WINDOW_SECONDS * 1000.0) as i64;
    let first = samples.iter().find(|s| s.at_ms >= window_start)?;
    let span = (newest.at_ms - first.at_ms) as f64 / 1000.0;
    if span < CLIMB_MIN_SPAN_SECONDS {
        return None;
    }
    Some((newest.older_than_2s as f64 - first.older_than_2s as f64) * 60.0 / span)
}

#[derive(Debug, Clone, Serialize)]
pub struct KeyShardStatus {
    /// Its position in the sweeper's list (not a name: lists may differ).
    pub shard: usize,
    pub address: String,
    /// The slots it is known to own: `0-127`, or `none`.
    pub slots: String,
    pub reachable: bool,
    pub pending: Option<u64>,
    pub older_than_2s: Option<u64>,
    pub older_than_60s: Option<u64>,
    pub oldest_pending_age_seconds: Option<f64>,
    pub level: Option<Level>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PasteShardStatus {
    pub shard: usize,
    pub address: String,
    pub slots: String,
    pub reachable: bool,
}

/// A slot move in any step, as its two shards recorded it.
#[derive(Debug, Clone, Serialize)]
pub struct MovingStatus {
    pub move_id: String,
    /// `key` or `paste`.
    pub kind: &'static str,
    /// `FIRST-LAST`.
    pub slots: String,
    /// The source's and the target's addresses.
    pub source: String,
    pub target: String,
    /// Each shard's step, as `source exporting`, `target importing`.
    pub steps: Vec<String>,
    /// The slots the source has frozen for it, if any (their writes wait).
    pub frozen: Option<String>,
    /// Since the move began.
    pub age_seconds: f64,
    /// Since either shard last changed step.
    pub step_age_seconds: f64,
    /// Its slots are frozen, or released and not taken yet: their creates wait.
    pub unserved: bool,
    /// No step for longer than the threshold (docs/alerts.md#slot-move-stalled).
    pub stalled: bool,
    /// How long without a step counts as stalled, for these slots.
    pub stalled_after_seconds: f64,
}

impl MovingStatus {
    /// One row per move id, from what each shard recorded.
    fn of(moves: &[ShardMove]) -> Vec<Self> {
        let mut rows: Vec<MovingStatus> = Vec::new();
        for recorded in moves {
            let (source, target) = match recorded.role {
                "source" => (&recorded.address, &recorded.peer),
                _ => (&recorded.peer, &recorded.address),
            };
            let unserved = recorded.role == "source" && ["frozen", "released"].contains(&recorded.step.as_str());
            let step = format!("{} {}", recorded.role, recorded.step);
            match rows.iter_mut().find(|row| row.move_id == recorded.move_id) {
                Some(row) => {
                    row.steps.push(step);
                    row.frozen = row.frozen.take().or(recorded.frozen.map(|f| f.to_string()));
                    row.age_seconds = row.age_seconds.max(recorded.age_seconds);
                    row.step_age_seconds = row.step_age_seconds.min(recorded.step_age_seconds);
                    row.unserved |= unserved;
                    if recorded.role == "source" {
                        (row.source, row.target) = (source.clone(), target.clone());
                    }
                }
                None => rows.push(MovingStatus {
                    move_id: recorded.move_id.clone(),
                    kind: recorded.kind,
                    slots: recorded.slots.to_string(),
                    source: source.clone(),
                    target: target.clone(),
                    steps: vec![step],
                    frozen: recorded.frozen.map(|f| f.to_string()),
                    age_seconds: recorded.age_seconds,
                    step_age_seconds: recorded.step_age_seconds,
                    unserved,
                    stalled: false,
                    stalled_after_seconds: 0.0,
                }),
            }
        }
        for row in &mut rows {
            row.stalled = move_stalled(row.unserved, row.step_age_seconds);
            let limit = if row.unserved { MOVE_UNSERVED_AFTER } else { MOVE_STALLED_AFTER };
            row.stalled_after_seconds = limit.as_secs_f64();
        }
        rows
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct RoundStatus {
    pub at: DateTime<Utc>,
    pub examined: u64,
    pub marked_done: u64,
    pub aborted: u64,
    pub already_resolved: u64,
    pub skipped_unreachable: u64,
    pub key_shards_unreachable: u64,
    pub retired_keys: u64,
    pub expired_pastes: u64,
    pub reaped_objects: u64,
    pub errors: u64,
}

impl RoundStatus {
    fn of(at: DateTime<Utc>, report: &RoundReport) -> Self {
        let (r, p) = (&report.recovery, &report.reap);
        Self {
            at,
            examined: r.examined,
            marked_done: r.marked_done,
            aborted: r.aborted,
            already_resolved: r.already_resolved,
            skipped_unreachable: r.skipped_unreachable,
            key_shards_unreachable: r.key_shards_unreachable,
            retired_keys: p.retired_keys,
            expired_pastes: p.expired_pastes,
            reaped_objects: p.reaped_objects,
            errors: p.errors,
        }
    }
}

/// Totals of the recorded rounds.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DecisionTotals {
    pub rounds: usize,
    pub marked_done: u64,
    pub aborted: u64,
    pub already_resolved: u64,
    pub skipped_unreachable: u64,
}

/// Refusals of the public listeners of this process, by protocol and
/// reason (`pastebin_edge_refusals_total`, docs/security.md#total-bounds).
#[derive(Debug, Clone, Serialize)]
pub struct EdgeRefusals {
    pub protocol: &'static str,
    pub reason: &'static str,
    pub count: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Status {
    pub generated_at: DateTime<Utc>,
    /// False until the first sample: the numbers below mean nothing yet.
    pub sampled: bool,
    pub sampled_at: Option<DateTime<Utc>>,
    /// `None` before the first sample.
    pub level: Option<Level>,
    pub oldest_pending_age_seconds: f64,
    pub pending: u64,
    pub older_than_2s: u64,
    pub older_than_60s: u64,
    pub climbing: bool,
    pub climb_per_minute: Option<f64>,
    pub climbing_threshold_per_minute: f64,
    pub key_shards: Vec<KeyShardStatus>,
    pub paste_shards: Vec<PasteShardStatus>,
    /// Slot moves in progress, in any step, with their age.
    pub moving: Vec<MovingStatus>,
    /// Readers' reports on live pastes (`pastebin ctl reports`), summed over
    /// the P shards that said; `None` when none did.
    pub open_reports: Option<u64>,
    /// Some move has made no progress for longer than its threshold.
    pub moves_stalled: bool,
    /// The thresholds (docs/alerts.md#slot-move-stalled).
    pub move_stalled_after_seconds: f64,
    pub move_unserved_after_seconds: f64,
    pub card: [CardRow; 4],
    pub history: Vec<Sample>,
    pub decisions: DecisionTotals,
    /// The most recent rounds that did something, newest first.
    pub rounds: Vec<RoundStatus>,
    pub last_round_at: Option<DateTime<Utc>>,
    /// Who the edge turned away since this process started.
    pub edge_refusals: Vec<EdgeRefusals>,
    /// Requests answered and what the storage holds, beside the saga.
    pub traffic: crate::traffic::TrafficStatus,
}

impl Status {
    pub fn build(
        now: DateTime<Utc>,
        latest: Option<&(DateTime<Utc>, Observation)>,
        samples: &[Sample],
        rounds: &[(DateTime<Utc>, RoundReport)],
    ) -> Self {
        let climb = climb_per_minute(samples);
        let climbing = climb.is_some_and(|rate| rate >= CLIMBING_PER_MINUTE);
        let (key_shards, paste_shards) = match latest {
            Some((_, observation)) => shards(observation),
            None => (Vec::new(), Vec::new()),
        };
        let sum = |f: fn(&KeyShardStatus) -> Option<u64>| key_shards.iter().filter_map(f).sum::<u64>();
        let oldest = latest.map(|(_, o)| o.oldest_pending_age_seconds()).unwrap_or(0.0);
        let moving = latest.map(|(_, o)| MovingStatus::of(&o.moves)).unwrap_or_default();
        let mut decisions = DecisionTotals { rounds: rounds.len(), ..DecisionTotals::default() };
        for (_, report) in rounds {
            decisions.marked_done += report.recovery.marked_done;
            decisions.aborted += report.recovery.aborted;
            decisions.already_resolved += report.recovery.already_resolved;
            decisions.skipped_unreachable += report.recovery.skipped_unreachable;
        }
        Self {
            generated_at: now,
            sampled: latest.is_some(),
            sampled_at: latest.map(|(at, _)| *at),
            level: latest.map(|_| alert_level(oldest, climbing)),
            oldest_pending_age_seconds: oldest,
            pending: sum(|s| s.pending),
            older_than_2s: sum(|s| s.older_than_2s),
            older_than_60s: sum(|s| s.older_than_60s),
            climbing,
            climb_per_minute: climb,
            climbing_threshold_per_minute: CLIMBING_PER_MINUTE,
            key_shards,
            paste_shards,
            edge_refusals: pastebin_edge::refusals::counted()
                .into_iter()
                .map(|r| EdgeRefusals { protocol: r.protocol.as_str(), reason: r.reason, count: r.count })
                .collect(),
            open_reports: latest.and_then(|(_, o)| o.open_reports.iter().flatten().copied().reduce(|a, b| a + b)),
            moves_stalled: moving.iter().any(|m| m.stalled),
            move_stalled_after_seconds: MOVE_STALLED_AFTER.as_secs_f64(),
            move_unserved_after_seconds: MOVE_UNSERVED_AFTER.as_secs_f64(),
            moving,
            card: CARD,
            history: samples.to_vec(),
            decisions,
            rounds: rounds
                .iter()
                .rev()
                .filter(|(_, report)| *report != RoundReport::default())
                .take(ROUNDS_SHOWN)
                .map(|(at, report)| RoundStatus::of(*at, report))
                .collect(),
            last_round_at: rounds.last().map(|(at, _)| *at),
            traffic: crate::traffic::TrafficStatus::default(),
        }
    }
}

fn shards(observation: &Observation) -> (Vec<KeyShardStatus>, Vec<PasteShardStatus>) {
    let keys = observation
        .key_shards
        .iter()
        .enumerate()
        .map(|(shard, stats)| {
            // The same arithmetic as the sweeper's gauge: K's own clock minus
            // its oldest pending key's creation time.
            let age = stats.as_ref().map(|s| {
                s.oldest_created_at.map(|at| (s.now - at).num_milliseconds().max(0) as f64 / 1000.0).unwrap_or(0.0)
            });
            let name = observation.key_names.get(shard);
            KeyShardStatus {
                shard,
                address: name.map(|n| n.address.clone()).unwrap_or_default(),
                slots: name.map(|n| n.slots.clone()).unwrap_or_default(),
                reachable: stats.is_some(),
                pending: stats.map(|s| s.pending),
                older_than_2s: stats.map(|s| s.older_than_2s),
                older_than_60s: stats.map(|s| s.older_than_60s),
                oldest_pending_age_seconds: age,
                level: age.map(|age| alert_level(age, false)),
            }
        })
        .collect();
    let pastes = observation
        .paste_shards_reachable
        .iter()
        .enumerate()
        .map(|(shard, &reachable)| {
            let name = observation.paste_names.get(shard);
            PasteShardStatus {
                shard,
                address: name.map(|n| n.address.clone()).unwrap_or_default(),
                slots: name.map(|n| n.slots.clone()).unwrap_or_default(),
                reachable,
            }
        })
        .collect();
    (keys, pastes)
}

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use pastebin_keys::PendingStats;

    use super::*;

    fn sample(at_s: i64, stale: u64) -> Sample {
        Sample {
            at_ms: at_s * 1000,
            oldest_pending_age_seconds: 0.0,
            pending: stale,
            older_than_2s: stale,
            key_shards_unreachable: 0,
        }
    }

    #[test]
    fn a_trend_needs_twenty_seconds_of_samples() {
        assert_eq!(climb_per_minute(&[]), None);
        assert_eq!(climb_per_minute(&[sample(0, 0), sample(10, 5000)]), None);
        assert_eq!(climb_per_minute(&[sample(0, 0), sample(30, 1000)]), Some(2000.0));
    }

    #[test]
    fn only_the_last_minute_counts() {
        // A big climb two minutes ago, flat since: not climbing now.
        let samples = [sample(0, 0), sample(60, 20_000), sample(120, 20_000), sample(180, 20_000)];
        assert_eq!(climb_per_minute(&samples), Some(0.0));
        let draining = [sample(0, 20_000), sample(30, 10_000), sample(60, 0)];
        assert!(climb_per_minute(&draining).unwrap() < 0.0);
    }

    fn observation(now: DateTime<Utc>, oldest_age_s: i64, pending: u64) -> Observation {
        Observation {
            key_shards: vec![
                Some(PendingStats {
                    pending,
                    oldest_created_at: Some(now - Duration::seconds(oldest_age_s)),
                    older_than_2s: pending,
                    older_than_60s: if oldest_age_s > 60 { pending } else { 0 },
                    now,
                }),
                None,
            ],
            paste_shards_reachable: vec![true, false],
            open_reports: vec![Some(3), None],
            ..Observation::default()
        }
    }

    fn recorded(role: &'static str, step: &str, step_age_seconds: f64) -> ShardMove {
        let (address, peer) = if role == "source" { ("a:1", "b:2") } else { ("b:2", "a:1") };
        ShardMove {
            kind: "key",
            address: address.into(),
            move_id: "move-1".into(),
            role,
            slots: "128-255".parse().unwrap(),
            peer: peer.into(),
            step: step.into(),
            age_seconds: 1000.0,
            step_age_seconds,
            frozen: (step == "frozen").then(|| "128-255".parse().unwrap()),
        }
    }

    #[test]
    fn a_move_in_any_step_shows_once_with_both_shards_steps_and_its_age() {
        let now = Utc::now();
        let mut copying = observation(now, 0, 0);
        copying.moves = vec![recorded("source", "exporting", 30.0), recorded("target", "importing", 20.0)];
        let status = Status::build(now, Some(&(now, copying)), &[], &[]);
        let json = serde_json::to_value(&status).unwrap();
        let moving = &json["moving"][0];
        assert_eq!(json["moving"].as_array().unwrap().len(), 1, "{json}");
        assert_eq!((moving["source"].as_str(), moving["target"].as_str()), (Some("a:1"), Some("b:2")));
        assert_eq!(moving["steps"], serde_json::json!(["source exporting", "target importing"]));
        assert_eq!((moving["age_seconds"].as_f64(), moving["step_age_seconds"].as_f64()), (Some(1000.0), Some(20.0)));
        assert_eq!((moving["unserved"].as_bool(), moving["stalled"].as_bool()), (Some(false), Some(false)));
        assert!(!status.moves_stalled);
        assert_eq!(Status::build(now, None, &[], &[]).moving.len(), 0);
    }

    #[test]
    fn a_move_stalls_after_fifteen_minutes_on_a_step_or_two_with_its_slots_frozen() {
        let now = Utc::now();
        let status = |moves: Vec<ShardMove>| {
            let mut seen = observation(now, 0, 0);
            seen.moves = moves;
            Status::build(now, Some(&(now, seen)), &[], &[])
        };
        assert!(!status(vec![recorded("source", "exporting", 600.0)]).moves_stalled);
        let stopped = status(vec![recorded("source", "exporting", 901.0), recorded("target", "importing", 901.0)]);
        assert!(stopped.moves_stalled && stopped.moving[0].stalled);
        assert_eq!(stopped.moving[0].stalled_after_seconds, 900.0);
        let frozen = status(vec![recorded("source", "frozen", 150.0)]);
        assert!(frozen.moving[0].unserved && frozen.moves_stalled, "frozen for over two minutes");
        assert_eq!(frozen.moving[0].frozen.as_deref(), Some("128-255"));
    }

    #[test]
    fn status_shows_the_level_of_the_oldest_pending_and_each_shard() {
        let now = Utc::now();
        let latest = (now, observation(now, 120, 3));
        let status = Status::build(now, Some(&latest), &[Sample::of(now, &latest.1)], &[]);
        assert!(status.sampled);
        assert_eq!(status.level, Some(Level::Recovery));
        assert_eq!(status.pending, 3);
        assert_eq!(status.older_than_60s, 3);
        assert!((status.oldest_pending_age_seconds - 120.0).abs() < 0.01);
        assert_eq!(status.key_shards[0].level, Some(Level::Recovery));
        assert!(!status.key_shards[1].reachable);
        assert_eq!(status.key_shards[1].level, None);
        assert!(status.paste_shards[0].reachable && !status.paste_shards[1].reachable);
        assert_eq!(status.open_reports, Some(3), "the shards that said, summed");
        assert!(!status.climbing);
    }

    #[test]
    fn a_climbing_stale_count_makes_the_status_stuck() {
        let now = Utc::now();
        let samples: Vec<Sample> = (0..=10)
            .map(|i| Sample {
                at_ms: (now - Duration::seconds(50 - 5 * i)).timestamp_millis(),
                ..sample(0, 100 * i as u64)
            })
            .collect();
        let latest = (now, observation(now, 5, 1000));
        let status = Status::build(now, Some(&latest), &samples, &[]);
        assert!(status.climbing, "{:?}", status.climb_per_minute);
        assert_eq!(status.level, Some(Level::Stuck));
    }

    #[test]
    fn nothing_sampled_means_no_level() {
        let status = Status::build(Utc::now(), None, &[], &[]);
        assert!(!status.sampled);
        assert_eq!(status.level, None);
    }

    #[test]
    fn only_rounds_that_did_something_are_listed_newest_first() {
        let now = Utc::now();
        let mut busy = RoundReport::default();
        busy.recovery.marked_done = 2;
        busy.recovery.skipped_unreachable = 1;
        let rounds = [(now - Duration::seconds(10), busy), (now, RoundReport::default())];
        let status = Status::build(now, None, &[], &rounds);
        assert_eq!(status.rounds.len(), 1);
        assert_eq!(status.rounds[0].marked_done, 2);
        assert_eq!(status.decisions.rounds, 2);
        assert_eq!(status.decisions.skipped_unreachable, 1);
        assert_eq!(status.last_round_at, Some(now));
    }
}
