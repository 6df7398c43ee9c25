//! `pastebin ctl reconcile`: where K, P and the object store disagree, read
//! only. P is read with `Get`, never with the fencing `ResolveBatch`, so a
//! report changes nothing. Each finding says who repairs it:
//!
//! - a pending key whose paste exists: the sweeper marks it done after 60 s
//!   (or `ctl recover KEY` now);
//! - an object without a live paste row: the reaper deletes it once it is
//!   older than the age floor (1 h) and its id is tombstoned;
//! - a paste row whose object is missing: a lost PUT or a deleted object,
//!   which nothing repairs by itself. P has no listing call yet, so this is
//!   checked for the pastes of pending keys only (see docs/alerts.md).

use std::{collections::HashMap, io::Write, time::Duration};

use chrono::{DateTime, Utc};
use futures::{stream, StreamExt};
use pastebin_core::PasteId;
use pastebin_keys::PendingKey;
use serde::Serialize;

use crate::{
    format::{age, parse_duration, seconds_between, table},
    pending::unreachable,
    CtlError, Deployment, Exit,
};

/// Calls to P in flight at once.
const CONCURRENCY: usize = 16;
const PAGE: u32 = 1000;
/// The reaper's default age floor: younger orphans may still get their row.
const OBJECT_AGE_FLOOR: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, clap::Args)]
pub struct ReconcileArgs {
    /// Pending keys younger than this are creates in flight, not findings.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub older_than: Duration,
    /// Examples listed per finding (the counts are always complete for what was scanned).
    #[arg(long, default_value_t = 20)]
    pub samples: usize,
    /// Stop after this many pending keys per K shard.
    #[arg(long, default_value_t = 100_000)]
    pub max_keys: usize,
    /// Stop after this many objects.
    #[arg(long, default_value_t = 1_000_000)]
    pub max_objects: usize,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
pub struct PendingWithPaste {
    pub key: String,
    pub paste_id: String,
    pub paste_shard: usize,
    pub age_seconds: f64,
    pub object_present: Option<bool>,
}

#[derive(Debug, Serialize)]
pub struct OrphanObject {
    pub paste_id: String,
    pub age_seconds: f64,
    pub size: u64,
    /// Older than the reaper's age floor: the reaper will take it.
    pub past_age_floor: bool,
    /// Its id belongs to a key still pending: the sweeper resolves the key first.
    pub key_pending: bool,
}

#[derive(Debug, Serialize)]
pub struct MissingObject {
    pub paste_id: String,
    pub paste_shard: usize,
}

#[derive(Debug, Serialize)]
pub struct Finding<T> {
    pub count: usize,
    pub samples: Vec<T>,
}

impl<T> Finding<T> {
    fn new() -> Self {
        Self { count: 0, samples: Vec::new() }
    }

    fn push(&mut self, item: T, samples: usize) {
        self.count += 1;
        if self.samples.len() < samples {
            self.samples.push(item);
        }
    }
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub read_only: bool,
    pub pending_keys_scanned: usize,
    pub pending_keys_checked: usize,
    pub objects_scanned: usize,
    /// False when a limit or an unreachable part cut a scan short.
    pub complete: bool,
    pub pending_with_paste: Finding<PendingWithPaste>,
    pub orphan_objects: Finding<OrphanObject>,
    pub rows_without_objects: Finding<MissingObject>,
    pub rows_without_objects_scope: &'static str,
    pub unreachable: Vec<String>,
}

struct Pending {
    key: PendingKey,
    age_seconds: f64,
}

pub async fn run(
    deployment: &Deployment,
    args: &ReconcileArgs,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    let objects = deployment.object_store().await?;
    let mut report = Report {
        read_only: true,
        pending_keys_scanned: 0,
        pending_keys_checked: 0,
        objects_scanned: 0,
        complete: true,
        pending_with_paste: Finding::new(),
        orphan_objects: Finding::new(),
        rows_without_objects: Finding::new(),
        rows_without_objects_scope: "paste rows of pending keys (P has no listing call)",
        unreachable: Vec::new(),
    };

    // 1. Every pending key, oldest first, per K shard.
    let mut pending: Vec<Pending> = Vec::new();
    for shard in 0..deployment.key_addresses().len() {
        match scan_pending(deployment, shard, args.max_keys).await {
            Ok((keys, full)) => {
                report.complete &= !full;
                pending.extend(keys);
            }
            Err(error) => report.unreachable.push(unreachable(deployment, "K", shard, &error)),
        }
    }
    report.pending_keys_scanned = pending.len();
    let pending_ids: HashMap<String, usize> =
        pending.iter().enumerate().map(|(i, p)| (p.key.paste_id.to_string(), i)).collect();

    // 2. Of those past the in-flight window: is their paste on P? And its object?
    let threshold = args.older_than.as_secs_f64();
    let stale: Vec<&Pending> = pending.iter().filter(|p| p.age_seconds >= threshold).collect();
    report.pending_keys_checked = stale.len();
    let lookups = stream::iter(stale)
        .map(|p| async move {
            let shard = deployment.slots.paste_shard_index(p.key.paste_id.slot());
            (p, shard, deployment.pastes(shard).get(&p.key.paste_id).await)
        })
        .buffered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    let mut p_errors: HashMap<usize, String> = HashMap::new();
    for (p, shard, found) in lookups {
        match found {
            Ok(Some(_)) => {
                let object_present = match objects.get(p.key.paste_id.as_str()).await {
                    Ok(found) => Some(found.is_some()),
                    Err(error) => {
                        report.unreachable.push(format!("object store: {error}"));
                        None
                    }
                };
                if object_present == Some(false) {
                    let missing = MissingObject { paste_id: p.key.paste_id.to_string(), paste_shard: shard };
                    report.rows_without_objects.push(missing, args.samples);
                }
                let finding = PendingWithPaste {
                    key: p.key.key.canonical(),
                    paste_id: p.key.paste_id.to_string(),
                    paste_shard: shard,
                    age_seconds: p.age_seconds,
                    object_present,
                };
                report.pending_with_paste.push(finding, args.samples);
            }
            Ok(None) => {}
            Err(error) => {
                p_errors.entry(shard).or_insert_with(|| error.to_string());
            }
        }
    }

    // 3. Every object: does a live row hold its id?
    let now = Utc::now();
    let mut after: Option<String> = None;
    'pages: loop {
        let page = match objects.list(after.as_deref(), PAGE as usize).await {
            Ok(page) => page,
            Err(error) => {
                report.unreachable.push(format!("object store: {error}"));
                break;
            }
        };
        let Some(last) = page.last() else { break };
        after = Some(last.paste_id.clone());
        let lookups = stream::iter(page)
            .map(|object| async move {
                let id = PasteId::parse(&object.paste_id).ok();
                let found = match &id {
                    Some(id) => {
                        let shard = deployment.slots.paste_shard_index(id.slot());
                        Some((shard, deployment.pastes(shard).get(id).await))
                    }
                    None => None,
                };
                (object, found)
            })
            .buffered(CONCURRENCY)
            .collect::<Vec<_>>()
            .await;
        for (object, found) in lookups {
            report.objects_scanned += 1;
            let live = match found {
                // Not a paste id at all: nothing can ever hold it.
                None => false,
                Some((_, Ok(row))) => row.is_some(),
                Some((shard, Err(error))) => {
                    p_errors.entry(shard).or_insert_with(|| error.to_string());
                    continue;
                }
            };
            if !live {
                let age_seconds = seconds_between(object.created_at, now);
                let orphan = OrphanObject {
                    key_pending: pending_ids.contains_key(&object.paste_id),
                    past_age_floor: age_seconds >= OBJECT_AGE_FLOOR.as_secs_f64(),
                    paste_id: object.paste_id,
                    age_seconds,
                    size: object.size,
                };
                report.orphan_objects.push(orphan, args.samples);
            }
            if report.objects_scanned >= args.max_objects {
                report.complete = false;
                break 'pages;
            }
        }
    }
    let mut p_errors: Vec<_> = p_errors.into_iter().collect();
    p_errors.sort();
    for (shard, error) in p_errors {
        report.unreachable.push(unreachable(deployment, "P", shard, &error));
    }
    report.unreachable.dedup();
    report.complete &= report.unreachable.is_empty();

    let exit = if report.unreachable.is_empty() { Exit::Ok } else { Exit::Unreachable };
    for problem in &report.unreachable {
        writeln!(err, "warning: {problem}; the report is incomplete")?;
    }
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&report).map_err(|e| CtlError::Failed(e.to_string()))?)?;
    } else {
        print_text(&report, args, out)?;
    }
    Ok(exit)
}

/// Pending keys of one shard, oldest first, at most `max`; and whether it stopped at `max`.
async fn scan_pending(deployment: &Deployment, shard: usize, max: usize) -> Result<(Vec<Pending>, bool), String> {
    let keys = deployment.keys(shard);
    let now: DateTime<Utc> = keys.pending_stats().await.map_err(|e| e.to_string())?.now;
    let mut found = Vec::new();
    let mut cursor: Option<PendingKey> = None;
    loop {
        let page = deployment
            .keys(shard)
            .list_pending(Duration::ZERO, cursor.as_ref(), PAGE)
            .await
            .map_err(|e| e.to_string())?;
        let full = page.len() == PAGE as usize;
        cursor = page.last().cloned();
        for key in page {
            if found.len() >= max {
                return Ok((found, true));
            }
            found.push(Pending { age_seconds: seconds_between(key.created_at, now), key });
        }
        if !full {
            return Ok((found, false));
        }
    }
}

fn print_text(report: &Report, args: &ReconcileArgs, out: &mut (dyn Write + Send)) -> std::io::Result<()> {
    writeln!(
        out,
        "reconcile (read-only): {} pending key(s) scanned, {} older than {} checked on P; {} object(s) scanned{}",
        report.pending_keys_scanned,
        report.pending_keys_checked,
        age(args.older_than.as_secs_f64()),
        report.objects_scanned,
        if report.complete { "" } else { " (INCOMPLETE: see warnings and limits)" }
    )?;
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_owned();

    writeln!(out, "\npending keys whose paste exists: {}", report.pending_with_paste.count)?;
    if report.pending_with_paste.count > 0 {
        writeln!(out, "  the sweeper marks these done once they are 60s old; `pastebin ctl recover KEY` does one now")?;
        let rows: Vec<Vec<String>> = report
            .pending_with_paste
            .samples
            .iter()
            .map(|f| {
                vec![
                    age(f.age_seconds),
                    f.key.clone(),
                    f.paste_id.clone(),
                    format!("P{}", f.paste_shard),
                    f.object_present.map(yes_no).unwrap_or_else(|| "?".into()),
                ]
            })
            .collect();
        write_indented(out, &table(&["AGE", "KEY", "PASTE ID", "P SHARD", "OBJECT"], &rows))?;
    }

    writeln!(out, "\nobjects without a live paste row: {}", report.orphan_objects.count)?;
    if report.orphan_objects.count > 0 {
        writeln!(
            out,
            "  the reaper deletes these once older than the age floor (1h), behind a tombstone; never delete them by hand"
        )?;
        let rows: Vec<Vec<String>> = report
            .orphan_objects
            .samples
            .iter()
            .map(|o| {
                vec![
                    age(o.age_seconds),
                    o.paste_id.clone(),
                    o.size.to_string(),
                    yes_no(o.past_age_floor),
                    yes_no(o.key_pending),
                ]
            })
            .collect();
        write_indented(out, &table(&["AGE", "PASTE ID", "BYTES", "PAST FLOOR", "KEY PENDING"], &rows))?;
    }

    writeln!(
        out,
        "\npaste rows whose object is missing: {} (checked: {})",
        report.rows_without_objects.count, report.rows_without_objects_scope
    )?;
    if report.rows_without_objects.count > 0 {
        let rows: Vec<Vec<String>> = report
            .rows_without_objects
            .samples
            .iter()
            .map(|m| vec![m.paste_id.clone(), format!("P{}", m.paste_shard)])
            .collect();
        write_indented(out, &table(&["PASTE ID", "P SHARD"], &rows))?;
    }
    Ok(())
}

fn write_indented(out: &mut (dyn Write + Send), text: &str) -> std::io::Result<()> {
    for line in text.lines() {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}
