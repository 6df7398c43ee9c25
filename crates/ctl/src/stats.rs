//! `pastebin ctl stats`: one reading of every K shard's pending statistics,
//! placed on the alert card, and whether each P shard answers. One reading
//! cannot show a climbing count: that row of the card is the dashboard's and
//! the alert rules' (they keep history).

use std::io::Write;

use pastebin_core::alert::{alert_level, Level};
use serde::Serialize;

use crate::{
    format::{age, seconds_between, table},
    pending::unreachable,
    CtlError, Deployment, Exit,
};

#[derive(Debug, Clone, clap::Args)]
pub struct StatsArgs {
    /// One JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct KeyShardStats {
    shard: usize,
    address: String,
    /// The slots it said it owns (`unknown` when it did not answer).
    slots: String,
    reachable: bool,
    pending: Option<u64>,
    older_than_2s: Option<u64>,
    older_than_60s: Option<u64>,
    oldest_pending_age_seconds: Option<f64>,
    level: Option<Level>,
}

#[derive(Debug, Serialize)]
struct PasteShardStats {
    shard: usize,
    address: String,
    slots: String,
    reachable: bool,
}

/// Where the whole deployment is on the alert card: a level only when
/// every shard answered. A shard that did not may hold the oldest pending,
/// or be the P that every create waits for: that is never `healthy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Summary {
    Known(Level),
    /// Some shard did not answer.
    Unknown,
}

impl Summary {
    fn new(answered: Level, every_shard_answered: bool) -> Self {
        if every_shard_answered {
            Summary::Known(answered)
        } else {
            Summary::Unknown
        }
    }

    fn action(self) -> &'static str {
        match self {
            Summary::Known(level) => level.card_row().action,
            Summary::Unknown => "Reach the shards that did not answer before reading the level",
        }
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Summary::Known(level) => level.fmt(f),
            Summary::Unknown => f.write_str("unknown"),
        }
    }
}

impl Serialize for Summary {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[derive(Debug, Serialize)]
struct Total {
    pending: u64,
    older_than_2s: u64,
    older_than_60s: u64,
    oldest_pending_age_seconds: f64,
    /// `unknown` unless every K and P shard answered.
    level: Summary,
    /// What the K shards that answered read (the level when all did).
    answered_level: Level,
    action: &'static str,
    key_shards_unreachable: usize,
    paste_shards_unreachable: usize,
}

/// What a shard that answered says of its database: does an acknowledged
/// commit survive the loss of the server?
#[derive(Debug, Serialize)]
struct ShardDurability {
    shard: String,
    kind: String,
    detail: String,
    commits_survive_server_loss: Option<bool>,
}

/// A K shard started with `--may-have-lost-commits-since`: its creates
/// search P before minting (docs/design.md#adopting-after-a-k-loss).
#[derive(Debug, Serialize)]
struct SearchFirst {
    shard: String,
    may_have_lost_commits_since: chrono::DateTime<chrono::Utc>,
    until: chrono::DateTime<chrono::Utc>,
    active: bool,
}

#[derive(Debug, Serialize)]
struct Report {
    total: Total,
    key_shards: Vec<KeyShardStats>,
    paste_shards: Vec<PasteShardStats>,
    durability: Vec<ShardDurability>,
    search_first: Vec<SearchFirst>,
}

/// Every K shard that answered and is in the search-first mode.
async fn search_first(deployment: &Deployment, key_shards: &[KeyShardStats]) -> Vec<SearchFirst> {
    let mut found = Vec::new();
    for shard in key_shards.iter().filter(|s| s.reachable).map(|s| s.shard) {
        if let Ok(Some(lost)) = deployment.keys(shard).lost_commits().await {
            found.push(SearchFirst {
                shard: deployment.key_addresses()[shard].clone(),
                may_have_lost_commits_since: lost.since,
                until: lost.search_first_until(),
                active: lost.search_first(chrono::Utc::now()),
            });
        }
    }
    found
}

/// The durability of every shard that answered and has read its own.
async fn durability(
    deployment: &Deployment,
    key_shards: &[KeyShardStats],
    paste_shards: &[PasteShardStats],
) -> Vec<ShardDurability> {
    let row = |shard: String, reported: pastebin_runtime::durability::Reported| ShardDurability {
        shard,
        kind: reported.kind,
        detail: reported.detail,
        commits_survive_server_loss: reported.commits_survive_server_loss,
    };
    let mut found = Vec::new();
    for shard in key_shards.iter().filter(|s| s.reachable).map(|s| s.shard) {
        if let Ok(Some(reported)) = deployment.keys(shard).durability().await {
            found.push(row(deployment.key_addresses()[shard].clone(), reported));
        }
    }
    for shard in paste_shards.iter().filter(|s| s.reachable).map(|s| s.shard) {
        if let Ok(Some(reported)) = deployment.pastes(shard).durability().await {
            found.push(row(deployment.paste_addresses()[shard].clone(), reported));
        }
    }
    found
}

pub async fn run(
    deployment: &Deployment,
    args: &StatsArgs,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    let mut exit = Exit::Ok;
    let mut key_shards = Vec::new();
    for (shard, address) in deployment.key_addresses().iter().enumerate() {
        let mut row = KeyShardStats {
            shard,
            address: address.clone(),
            slots: deployment.slots.key_shard_slots(shard),
            reachable: false,
            pending: None,
            older_than_2s: None,
            older_than_60s: None,
            oldest_pending_age_seconds: None,
            level: None,
        };
        match deployment.keys(shard).pending_stats().await {
            Ok(stats) => {
                let oldest = stats.oldest_created_at.map(|at| seconds_between(at, stats.now)).unwrap_or(0.0);
                row.reachable = true;
                row.pending = Some(stats.pending);
                row.older_than_2s = Some(stats.older_than_2s);
                row.older_than_60s = Some(stats.older_than_60s);
                row.oldest_pending_age_seconds = Some(oldest);
                row.level = Some(alert_level(oldest, false));
            }
            Err(error) => {
                writeln!(err, "warning: {}", unreachable(deployment, "K", shard, &error.to_string()))?;
                exit = Exit::Unreachable;
            }
        }
        key_shards.push(row);
    }
    let mut paste_shards = Vec::new();
    for (shard, address) in deployment.paste_addresses().iter().enumerate() {
        // An empty batch reads nothing and fences nothing: a pure probe.
        let reachable = match deployment.pastes(shard).resolve_batch(&[]).await {
            Ok(_) => true,
            Err(error) => {
                writeln!(err, "warning: {}", unreachable(deployment, "P", shard, &error.to_string()))?;
                exit = Exit::Unreachable;
                false
            }
        };
        let slots = deployment.slots.paste_shard_slots(shard);
        paste_shards.push(PasteShardStats { shard, address: address.clone(), slots, reachable });
    }
    let oldest = key_shards.iter().filter_map(|s| s.oldest_pending_age_seconds).fold(0.0, f64::max);
    let every_shard_answered = key_shards.iter().all(|s| s.reachable) && paste_shards.iter().all(|s| s.reachable);
    let answered_level = alert_level(oldest, false);
    let level = Summary::new(answered_level, every_shard_answered);
    let total = Total {
        pending: key_shards.iter().filter_map(|s| s.pending).sum(),
        older_than_2s: key_shards.iter().filter_map(|s| s.older_than_2s).sum(),
        older_than_60s: key_shards.iter().filter_map(|s| s.older_than_60s).sum(),
        oldest_pending_age_seconds: oldest,
        level,
        answered_level,
        action: level.action(),
        key_shards_unreachable: key_shards.iter().filter(|s| !s.reachable).count(),
        paste_shards_unreachable: paste_shards.iter().filter(|s| !s.reachable).count(),
    };
    let durability = durability(deployment, &key_shards, &paste_shards).await;
    let search_first = search_first(deployment, &key_shards).await;
    let report = Report { total, key_shards, paste_shards, durability, search_first };

    if args.json {
        writeln!(out, "{}", serde_json::to_string(&report).map_err(|e| CtlError::Failed(e.to_string()))?)?;
        return Ok(exit);
    }
    let dash = || "-".to_owned();
    let number = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_else(dash);
    let mut rows: Vec<Vec<String>> = report
        .key_shards
        .iter()
        .map(|s| {
            vec![
                s.address.clone(),
                s.slots.clone(),
                if s.reachable { "yes".into() } else { "NO".into() },
                number(s.pending),
                number(s.older_than_2s),
                number(s.older_than_60s),
                s.oldest_pending_age_seconds.map(age).unwrap_or_else(dash),
                s.level.map(|l| l.to_string()).unwrap_or_else(|| "unknown".into()),
            ]
        })
        .collect();
    let t = &report.total;
    rows.push(vec![
        "total".into(),
        "0-255".into(),
        format!("{}/{}", report.key_shards.len() - t.key_shards_unreachable, report.key_shards.len()),
        t.pending.to_string(),
        t.older_than_2s.to_string(),
        t.older_than_60s.to_string(),
        age(t.oldest_pending_age_seconds),
        t.level.to_string(),
    ]);
    out.write_all(
        table(&["KEY SHARD", "SLOTS", "REACHABLE", "PENDING", ">2s", ">60s", "OLDEST", "LEVEL"], &rows).as_bytes(),
    )?;
    let pastes: Vec<String> = report
        .paste_shards
        .iter()
        .map(|s| format!("{} (slots {}) {}", s.address, s.slots, if s.reachable { "reachable" } else { "UNREACHABLE" }))
        .collect();
    writeln!(out, "paste shards: {}", pastes.join(", "))?;
    if !report.durability.is_empty() {
        let kinds: Vec<String> = report.durability.iter().map(|d| format!("{} {}", d.shard, d.kind)).collect();
        writeln!(out, "durability: {}", kinds.join(", "))?;
        let at_risk: Vec<&str> = report
            .durability
            .iter()
            .filter(|d| d.commits_survive_server_loss != Some(true))
            .map(|d| d.shard.as_str())
            .collect();
        if !at_risk.is_empty() {
            writeln!(
                out,
                "commits on {} can be lost on a failover of their database (or may be: see each detail in --json); docs/operations.md#durability-and-failover",
                at_risk.join(", ")
            )?;
        }
    }
    for mode in &report.search_first {
        let seconds = chrono::SecondsFormat::Secs;
        writeln!(
            out,
            "search first: {} may have lost commits since {}; {} {}; docs/operations.md#after-an-unsafe-failover",
            mode.shard,
            mode.may_have_lost_commits_since.to_rfc3339_opts(seconds, true),
            if mode.active {
                "creates of keys it does not know search their paste shard first until"
            } else {
                "searched until"
            },
            mode.until.to_rfc3339_opts(seconds, true),
        )?;
    }
    match t.level {
        Summary::Known(level) => {
            let row = level.card_row();
            writeln!(out, "level: {level} ({}: {}). Action: {}", row.signal, row.meaning, row.action)?;
        }
        Summary::Unknown => {
            let silent = t.key_shards_unreachable + t.paste_shards_unreachable;
            let answered = if t.key_shards_unreachable == report.key_shards.len() {
                "no key shard answered".to_owned()
            } else {
                format!("the key shards that answered read {}", t.answered_level)
            };
            writeln!(out, "level: unknown ({silent} shard(s) did not answer; {answered}). Action: {}", t.action)?;
        }
    }
    if t.key_shards_unreachable > 0 {
        writeln!(
            out,
            "{} key shard(s) unreachable: their pending keys are not counted above",
            t.key_shards_unreachable
        )?;
    }
    writeln!(out, "a climbing count (creates stuck: page, never mass-abort) shows on the dashboard and in the alerts")?;
    Ok(exit)
}
