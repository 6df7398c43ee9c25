//! `pastebin ctl reconcile`: where K, P and the object store disagree, read
//! only, slot by slot (each slot read on the K and P shards that own it and
//! under its prefix in the store; the rules are in `pastebin_shards::reconcile`).
//! Nothing here calls a fencing RPC, so a report changes nothing. Each
//! finding says who repairs it:
//!
//! - a **lost paste** (a done key, no paste row): `ctl repair` rebuilds the row
//!   from the key's stored 201 and the object; exit 4;
//! - a **missing object** (a done key or a live row, no object): nothing
//!   rebuilds the bytes; exit 5;
//! - an **orphan** (a live paste no key names: K lost the key, and a retry
//!   may have minted a duplicate, shown by content hash); exit 6;
//! - a pending key whose paste exists: the sweeper marks it done after 60 s
//!   (or `ctl recover KEY` now);
//! - an object without a live paste row: the reaper deletes it once it is
//!   older than the age floor (1 h) and its id is tombstoned — unless a done
//!   key names it, when it is a lost paste's only copy.

use std::{collections::BTreeMap, io::Write, time::Duration};

use chrono::{DateTime, Utc};
use futures::{stream, StreamExt};
use pastebin_core::Slot;
use pastebin_shards::reconcile::{reconcile_slot, ReconcileError, SlotReport};
use serde::Serialize;

use crate::{
    format::{age, parse_duration, seconds_between, table},
    progress::{ProgressTo, SlotProgress},
    CtlError, Deployment, Exit,
};

/// Slots read at once.
const CONCURRENCY: usize = 4;
/// The reaper's default age floor: younger orphan objects may still get their row.
const OBJECT_AGE_FLOOR: Duration = Duration::from_secs(3600);

#[derive(Debug, Clone, clap::Args)]
pub struct ReconcileArgs {
    /// Pending keys younger than this are creates in flight, not findings.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub older_than: Duration,
    /// Examples listed per finding (the counts are always complete for what was read).
    #[arg(long, default_value_t = 20)]
    pub samples: usize,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
pub struct LostPaste {
    pub paste_id: String,
    pub key: String,
    pub key_shard: usize,
    pub paste_shard: usize,
    pub key_shard_address: String,
    pub paste_shard_address: String,
    /// False: the bytes are gone too, and `ctl repair` cannot rebuild it.
    pub object_present: bool,
}

#[derive(Debug, Serialize)]
pub struct Orphan {
    pub paste_id: String,
    pub paste_shard: usize,
    pub paste_shard_address: String,
    pub age_seconds: f64,
    pub content_sha256: String,
    /// Other live pastes of the slot with the same bytes: likely duplicates.
    pub same_content: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct MissingObject {
    pub paste_id: String,
    pub paste_shard: usize,
    pub paste_shard_address: String,
    /// A done key names it (the product answered 201 for it).
    pub key_done: bool,
}

#[derive(Debug, Serialize)]
pub struct PendingWithPaste {
    pub key: String,
    pub paste_id: String,
    pub paste_shard: usize,
    pub paste_shard_address: String,
    pub age_seconds: f64,
    pub object_present: bool,
}

#[derive(Debug, Serialize)]
pub struct OrphanObject {
    pub paste_id: String,
    pub age_seconds: f64,
    pub size: u64,
    /// Older than the reaper's age floor: the reaper will take it (unless `key_done`).
    pub past_age_floor: bool,
    /// Its id belongs to a key still pending: the sweeper resolves the key first.
    pub key_pending: bool,
    /// Its id belongs to a done key: a lost paste's only copy; the reaper spares it.
    pub key_done: bool,
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
    pub slots_read: usize,
    pub keys_read: u64,
    pub rows_read: u64,
    pub objects_read: u64,
    /// False when a slot could not be read (see `unreachable`).
    pub complete: bool,
    pub lost_pastes: Finding<LostPaste>,
    pub missing_objects: Finding<MissingObject>,
    pub orphans: Finding<Orphan>,
    /// Orphans that share their bytes with another live paste of their slot.
    pub likely_duplicates: usize,
    pub pending_with_paste: Finding<PendingWithPaste>,
    pub orphan_objects: Finding<OrphanObject>,
    pub unreachable: Vec<String>,
}

impl Report {
    fn new() -> Self {
        Self {
            read_only: true,
            slots_read: 0,
            keys_read: 0,
            rows_read: 0,
            objects_read: 0,
            complete: true,
            lost_pastes: Finding::new(),
            missing_objects: Finding::new(),
            orphans: Finding::new(),
            likely_duplicates: 0,
            pending_with_paste: Finding::new(),
            orphan_objects: Finding::new(),
            unreachable: Vec::new(),
        }
    }

    /// The worst finding decides the exit code; a partial read with no
    /// finding is "unreachable", never "ok".
    fn exit(&self) -> Exit {
        if self.lost_pastes.count > 0 {
            Exit::LostPastes
        } else if self.missing_objects.count > 0 {
            Exit::MissingObjects
        } else if self.orphans.count > 0 {
            Exit::Orphans
        } else if !self.complete {
            Exit::Unreachable
        } else {
            Exit::Ok
        }
    }
}

pub async fn run(
    deployment: &Deployment,
    args: &ReconcileArgs,
    progress: ProgressTo,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    let objects = deployment.object_store().await?;
    let now = Utc::now();
    let mut report = Report::new();
    let mut unreachable: BTreeMap<String, String> = BTreeMap::new();
    let mut bar = SlotProgress::new(progress, "reconcile", 256);
    let mut slots = stream::iter(0..=u8::MAX)
        .map(|slot| {
            let objects = objects.clone();
            async move {
                let slot = Slot(slot);
                (slot, reconcile_slot(&deployment.slots, objects.as_ref(), slot, now, deployment.timeout).await)
            }
        })
        .buffered(CONCURRENCY);
    while let Some((slot, result)) = slots.next().await {
        match result {
            Ok(found) => {
                bar.slot_done(found.keys_read + found.rows_read + found.objects_read, err)?;
                add(&mut report, deployment, slot, found, now, args);
            }
            Err(error) => {
                bar.slot_done(0, err)?;
                report.complete = false;
                unreachable.entry(part(&error)).or_insert_with(|| error.to_string());
            }
        }
    }
    bar.finish();
    report.unreachable = unreachable.into_values().collect();
    for problem in &report.unreachable {
        writeln!(err, "warning: {problem}; the slots it owns were not checked, the report is incomplete")?;
    }
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&report).map_err(|e| CtlError::Failed(e.to_string()))?)?;
    } else {
        print_text(&report, out)?;
    }
    Ok(report.exit())
}

/// The part a failure is about, so each is warned about once (the warning
/// itself names a shard by its address).
pub(crate) fn part(error: &ReconcileError) -> String {
    match error {
        ReconcileError::KeyShard(_, address, _) => format!("key shard {address}"),
        ReconcileError::PasteShard(_, address, _) => format!("paste shard {address}"),
        ReconcileError::Objects(_) => "objects".into(),
    }
}

fn add(
    report: &mut Report,
    deployment: &Deployment,
    slot: Slot,
    found: SlotReport,
    now: DateTime<Utc>,
    args: &ReconcileArgs,
) {
    let n = args.samples;
    let key_shard = deployment.slots.key_shard_index(slot);
    let paste_shard = deployment.slots.paste_shard_index(slot);
    let key_shard_address = &deployment.key_addresses()[key_shard];
    let paste_shard_address = &deployment.paste_addresses()[paste_shard];
    report.slots_read += 1;
    report.keys_read += found.keys_read;
    report.rows_read += found.rows_read;
    report.objects_read += found.objects_read;
    for lost in found.lost {
        let finding = LostPaste {
            paste_id: lost.paste_id.to_string(),
            key: lost.key.canonical(),
            key_shard,
            paste_shard,
            key_shard_address: key_shard_address.clone(),
            paste_shard_address: paste_shard_address.clone(),
            object_present: lost.object_present,
        };
        report.lost_pastes.push(finding, n);
    }
    for missing in &found.missing_objects {
        let finding = MissingObject {
            paste_id: missing.paste_id.to_string(),
            paste_shard,
            paste_shard_address: paste_shard_address.clone(),
            key_done: missing.key_done,
        };
        report.missing_objects.push(finding, n);
    }
    for orphan in found.orphans {
        if !orphan.same_content.is_empty() {
            report.likely_duplicates += 1;
        }
        let finding = Orphan {
            paste_id: orphan.paste_id.to_string(),
            paste_shard,
            paste_shard_address: paste_shard_address.clone(),
            age_seconds: seconds_between(orphan.created_at, now),
            content_sha256: hex::encode(orphan.content_sha256),
            same_content: orphan.same_content.iter().map(ToString::to_string).collect(),
        };
        report.orphans.push(finding, n);
    }
    let threshold = args.older_than.as_secs_f64();
    for key in &found.pending_with_paste {
        let age_seconds = seconds_between(key.created_at, now);
        if age_seconds < threshold {
            continue;
        }
        let finding = PendingWithPaste {
            key: key.key.canonical(),
            paste_id: key.paste_id.to_string(),
            paste_shard,
            paste_shard_address: paste_shard_address.clone(),
            age_seconds,
            object_present: !found.missing_objects.iter().any(|missing| missing.paste_id == key.paste_id),
        };
        report.pending_with_paste.push(finding, n);
    }
    for orphan in found.orphan_objects {
        let age_seconds = seconds_between(orphan.object.created_at, now);
        let finding = OrphanObject {
            past_age_floor: age_seconds >= OBJECT_AGE_FLOOR.as_secs_f64(),
            paste_id: orphan.object.paste_id,
            age_seconds,
            size: orphan.object.size,
            key_pending: orphan.key_pending,
            key_done: orphan.key_done,
        };
        report.orphan_objects.push(finding, n);
    }
}

fn print_text(report: &Report, out: &mut (dyn Write + Send)) -> std::io::Result<()> {
    writeln!(
        out,
        "reconcile (read-only): {}/256 slots read: {} key(s), {} paste row(s), {} object(s){}",
        report.slots_read,
        report.keys_read,
        report.rows_read,
        report.objects_read,
        if report.complete { "" } else { " (INCOMPLETE: see warnings)" }
    )?;
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_owned();
    write_finding(
        out,
        format!("lost pastes (done key, no paste row): {}", report.lost_pastes.count),
        &report.lost_pastes,
        "the product answered 201 for these; `pastebin ctl repair` shows what it can rebuild, `--apply` rebuilds it",
        &["PASTE ID", "KEY", "K SHARD", "P SHARD", "OBJECT"],
        |l| {
            vec![
                l.paste_id.clone(),
                l.key.clone(),
                l.key_shard_address.clone(),
                l.paste_shard_address.clone(),
                yes_no(l.object_present),
            ]
        },
    )?;
    write_finding(
        out,
        format!("missing objects (done key or live row, no object): {}", report.missing_objects.count),
        &report.missing_objects,
        "the bytes are gone: restore them from a backup of the bucket; nothing rebuilds them",
        &["PASTE ID", "P SHARD", "DONE KEY"],
        |m| vec![m.paste_id.clone(), m.paste_shard_address.clone(), yes_no(m.key_done)],
    )?;
    write_finding(
        out,
        format!(
            "orphans (live paste, no key): {} ({} likely duplicate(s) of another live paste)",
            report.orphans.count, report.likely_duplicates
        ),
        &report.orphans,
        "K lost their keys (an unsafe failover?): a retry may have created a second paste; see docs/operations.md#finding-and-repairing-lost-pastes",
        &["AGE", "PASTE ID", "P SHARD", "CONTENT", "SAME CONTENT"],
        |o| {
            vec![
                age(o.age_seconds),
                o.paste_id.clone(),
                o.paste_shard_address.clone(),
                o.content_sha256[..12].to_owned(),
                if o.same_content.is_empty() { "-".into() } else { o.same_content.join(",") },
            ]
        },
    )?;
    write_finding(
        out,
        format!("pending keys whose paste exists: {}", report.pending_with_paste.count),
        &report.pending_with_paste,
        "the sweeper marks these done once they are 60s old; `pastebin ctl recover KEY` does one now",
        &["AGE", "KEY", "PASTE ID", "P SHARD", "OBJECT"],
        |f| {
            vec![
                age(f.age_seconds),
                f.key.clone(),
                f.paste_id.clone(),
                f.paste_shard_address.clone(),
                yes_no(f.object_present),
            ]
        },
    )?;
    write_finding(
        out,
        format!("objects without a live paste row: {}", report.orphan_objects.count),
        &report.orphan_objects,
        "the reaper deletes these once older than the age floor (1h), behind a tombstone, and spares those a done key names; never delete them by hand",
        &["AGE", "PASTE ID", "BYTES", "PAST FLOOR", "KEY PENDING", "DONE KEY"],
        |o| {
            vec![
                age(o.age_seconds),
                o.paste_id.clone(),
                o.size.to_string(),
                yes_no(o.past_age_floor),
                yes_no(o.key_pending),
                yes_no(o.key_done),
            ]
        },
    )
}

/// One kind of finding: its heading (with its count), then, when there is
/// any, what to do about it and a table of its samples.
fn write_finding<T>(
    out: &mut (dyn Write + Send),
    heading: String,
    finding: &Finding<T>,
    what_to_do: &str,
    header: &[&str],
    row: impl Fn(&T) -> Vec<String>,
) -> std::io::Result<()> {
    writeln!(out, "\n{heading}")?;
    if finding.count > 0 {
        writeln!(out, "  {what_to_do}")?;
        let rows: Vec<Vec<String>> = finding.samples.iter().map(row).collect();
        write_indented(out, &table(header, &rows))?;
    }
    Ok(())
}

fn write_indented(out: &mut (dyn Write + Send), text: &str) -> std::io::Result<()> {
    for line in text.lines() {
        writeln!(out, "  {line}")?;
    }
    Ok(())
}
