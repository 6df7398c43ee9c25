//! `pastebin ctl pending`: stale pending keys across every K shard, oldest
//! first. Ages are measured on each K shard's own clock (the one the sweeper's
//! threshold is measured on), not the operator's laptop.

use std::{io::Write, time::Duration};

use chrono::{DateTime, Utc};
use pastebin_keys::PendingKey;
use serde::Serialize;

use crate::{
    format::{age, parse_duration, seconds_between, table},
    CtlError, Deployment, Exit,
};

/// K answers at most this many keys per page.
const MAX_PAGE: u32 = 10_000;

#[derive(Debug, Clone, clap::Args)]
pub struct PendingArgs {
    /// Only keys at least this old (e.g. 2s, 60s, 5m). The sweeper acts after 60s.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub older_than: Duration,
    /// At most this many keys (the oldest).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=MAX_PAGE as i64))]
    pub limit: u32,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One listed key. The idempotency key is an identifier the client chose,
/// not a credential; the stored response body (which holds the delete
/// token) is never fetched.
#[derive(Debug, Clone, Serialize)]
pub struct PendingRow {
    pub age_seconds: f64,
    pub key: String,
    pub paste_id: String,
    /// The key's slot, which is its paste id's too.
    pub slot: u8,
    pub key_shard: usize,
    /// The P shard that said it owns the paste id's slot; `None` when no P
    /// shard that answered claims it (never a guess).
    pub paste_shard: Option<usize>,
    pub state: &'static str,
    pub created_at: DateTime<Utc>,
}

/// Pending keys older than `older_than` on one K shard (at most `limit`), and K's now.
pub(crate) async fn list_shard(
    deployment: &Deployment,
    shard: usize,
    older_than: Duration,
    limit: u32,
) -> Result<(Vec<PendingKey>, DateTime<Utc>), String> {
    let keys = deployment.keys(shard);
    let now = keys.pending_stats().await.map_err(|e| e.to_string())?.now;
    let page = keys.list_pending(older_than, None, limit).await.map_err(|e| e.to_string())?;
    Ok((page, now))
}

/// The P shard's address, or `unknown` when no shard that answered owns the slot.
fn paste_shard_address(deployment: &Deployment, shard: Option<usize>) -> String {
    shard.map_or_else(|| "unknown".to_owned(), |shard| deployment.paste_addresses()[shard].clone())
}

/// What an operator reads for a slot whose P owner is unknown.
pub(crate) fn unknown_paste_owner(slot: pastebin_core::Slot) -> String {
    format!("P shard for slot {slot}: unknown — no paste shard that answered owns it")
}

pub(crate) fn unreachable(deployment: &Deployment, kind: &str, shard: usize, error: &str) -> String {
    let name = if kind == "K" { deployment.key_name(shard) } else { deployment.paste_name(shard) };
    format!("{kind} shard {name} unreachable: {error}")
}

pub async fn run(
    deployment: &Deployment,
    args: &PendingArgs,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    let mut exit = Exit::Ok;
    let mut rows = Vec::new();
    let mut truncated = false;
    for shard in 0..deployment.key_addresses().len() {
        match list_shard(deployment, shard, args.older_than, args.limit).await {
            Ok((page, now)) => {
                truncated |= page.len() == args.limit as usize;
                rows.extend(page.into_iter().map(|p| PendingRow {
                    age_seconds: seconds_between(p.created_at, now),
                    key: p.key.canonical(),
                    paste_shard: deployment.slots.paste_owner(p.paste_id.slot()),
                    slot: p.paste_id.slot().0,
                    paste_id: p.paste_id.to_string(),
                    key_shard: shard,
                    state: "pending",
                    created_at: p.created_at,
                }));
            }
            Err(error) => {
                writeln!(err, "warning: {}; its keys are not listed", unreachable(deployment, "K", shard, &error))?;
                exit = Exit::Unreachable;
            }
        }
    }
    rows.sort_by(|a, b| b.age_seconds.total_cmp(&a.age_seconds).then_with(|| a.key.cmp(&b.key)));
    truncated |= rows.len() > args.limit as usize;
    rows.truncate(args.limit as usize);

    if args.json {
        for row in &rows {
            writeln!(out, "{}", serde_json::to_string(row).map_err(|e| CtlError::Failed(e.to_string()))?)?;
        }
    } else if rows.is_empty() {
        writeln!(out, "no pending keys older than {}", age(args.older_than.as_secs_f64()))?;
    } else {
        let cells: Vec<Vec<String>> = rows
            .iter()
            .map(|r| {
                vec![
                    age(r.age_seconds),
                    r.key.clone(),
                    r.paste_id.clone(),
                    deployment.key_addresses()[r.key_shard].clone(),
                    paste_shard_address(deployment, r.paste_shard),
                    r.state.to_owned(),
                    r.created_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                ]
            })
            .collect();
        out.write_all(
            table(&["AGE", "KEY", "PASTE ID", "K SHARD", "P SHARD", "STATE", "CREATED AT"], &cells).as_bytes(),
        )?;
        writeln!(
            out,
            "{} pending key(s) older than {}, oldest first. The sweeper reads P and resolves keys older than 60s; \
             `pastebin ctl recover KEY` does one now.",
            rows.len(),
            age(args.older_than.as_secs_f64())
        )?;
        let unknown: std::collections::BTreeSet<u8> =
            rows.iter().filter(|r| r.paste_shard.is_none()).map(|r| r.slot).collect();
        for slot in unknown {
            writeln!(out, "{}", unknown_paste_owner(pastebin_core::Slot(slot)))?;
        }
    }
    if truncated {
        writeln!(err, "note: showing the oldest {}; there are more (raise --limit)", rows.len())?;
    }
    Ok(exit)
}
