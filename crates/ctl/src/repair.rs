//! `pastebin ctl repair`: rebuilds the paste rows P lost (a done key, no
//! row: the lost pastes of `reconcile`, found by the same slot-by-slot
//! cross-check) from what the rest of the system still holds
//! (docs/operations.md#finding-and-repairing-lost-pastes):
//!
//! - from K's stored 201: the id, the expiry and the delete token, of which
//!   only the hash is kept on the row;
//! - from the object: the size and the content hash;
//! - from the key: the creation time.
//!
//! What is on neither is not rebuilt: the reader attributes (media type,
//! file name, language, burn after reading). A rebuilt paste reads as plain
//! text and is not burned on reading; the report says so.
//!
//! A dry run (the default) only reads. `--apply` inserts through P's own
//! insert, whose primary key is the fence: an id a tombstone holds is never
//! re-created, and a row someone else rebuilt meanwhile is left as it is.
//! Rerunning the command after an interruption finishes the work.

use std::{collections::BTreeMap, io::Write};

use futures::{stream, StreamExt};
use pastebin_core::{DeleteToken, KeyState, PasteAttributes, PasteOrigin, Slot};
use pastebin_gateway::Created;
use pastebin_objects::ObjectStore;
use pastebin_pastes::{InsertOutcome, NewPaste};
use pastebin_shards::reconcile::{reconcile_slot, LostPaste};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::{
    progress::{ProgressTo, SlotProgress},
    CtlError, Deployment, Exit,
};

/// Slots read at once.
const CONCURRENCY: usize = 4;

/// A crash point for the tests (`PASTEBIN_FAILPOINTS`): a lost paste was
/// found, and its key is about to be read again before the rebuild.
pub const LOST_PASTE_FOUND: &str = "repair_lost_paste_found";
/// What a rebuilt row cannot have: K's record and the object do not hold it.
const NOT_REBUILT: &[&str] = &["media_type", "file_name", "language", "burn_after_reading", "sealed"];

#[derive(Debug, Clone, clap::Args)]
pub struct RepairArgs {
    /// Insert the rebuilt rows on P. Without it, a dry run that only reads.
    #[arg(long)]
    pub apply: bool,
    /// Examples listed per outcome (the counts are always complete).
    #[arg(long, default_value_t = 20)]
    pub samples: usize,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// What became of one lost paste.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Outcome {
    /// Dry run: everything needed is there.
    WouldRebuild,
    Rebuilt,
    /// A row appeared meanwhile (another repair, or a late insert): left as it is.
    AlreadyThere,
    /// A tombstone holds the id now: never re-created.
    Fenced,
    /// Something needed is gone; `reason` says what.
    CannotRebuild,
}

#[derive(Debug, Serialize)]
struct Repair {
    paste_id: String,
    key: String,
    outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

#[derive(Debug, Serialize)]
struct Report {
    apply: bool,
    slots_read: usize,
    lost_pastes: usize,
    /// Counts per outcome.
    outcomes: BTreeMap<&'static str, usize>,
    samples: Vec<Repair>,
    not_rebuilt: &'static [&'static str],
    complete: bool,
    unreachable: Vec<String>,
}

/// Why a lost paste was not rebuilt.
#[derive(Debug, thiserror::Error)]
enum NotRebuilt {
    /// Something needed is gone for good.
    #[error("{0}")]
    Cannot(String),
    /// A part did not answer: rerun the repair.
    #[error("{0}")]
    Unreachable(String),
}

pub async fn run(
    deployment: &Deployment,
    args: &RepairArgs,
    progress: ProgressTo,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    let objects = deployment.object_store().await?;
    let mut report = Report {
        apply: args.apply,
        slots_read: 0,
        lost_pastes: 0,
        outcomes: BTreeMap::new(),
        samples: Vec::new(),
        not_rebuilt: NOT_REBUILT,
        complete: true,
        unreachable: Vec::new(),
    };
    let mut unreachable: BTreeMap<String, String> = BTreeMap::new();
    let mut bar = SlotProgress::new(progress, if args.apply { "repair" } else { "repair (dry run)" }, 256);
    let now = chrono::Utc::now();
    let mut slots = stream::iter(0..=u8::MAX)
        .map(|slot| {
            let objects = objects.clone();
            async move {
                let found =
                    reconcile_slot(&deployment.slots, objects.as_ref(), Slot(slot), now, deployment.timeout).await;
                match found {
                    Ok(found) => {
                        let mut repairs = Vec::new();
                        for lost in &found.lost {
                            repairs.push((lost.clone(), repair(deployment, objects.as_ref(), lost, args.apply).await));
                        }
                        Ok((found.keys_read + found.rows_read + found.objects_read, repairs))
                    }
                    Err(error) => Err(error),
                }
            }
        })
        .buffered(CONCURRENCY);
    while let Some(result) = slots.next().await {
        match result {
            Ok((read, repairs)) => {
                bar.slot_done(read, err)?;
                report.slots_read += 1;
                for (lost, outcome) in repairs {
                    record(&mut report, &mut unreachable, lost, outcome, args.samples);
                }
            }
            Err(error) => {
                bar.slot_done(0, err)?;
                report.complete = false;
                unreachable.entry(crate::reconcile::part(&error)).or_insert_with(|| error.to_string());
            }
        }
    }
    bar.finish();
    report.unreachable = unreachable.into_values().collect();
    for problem in &report.unreachable {
        writeln!(
            err,
            "warning: {problem}; what it holds was not repaired: run `pastebin ctl repair` again once it answers"
        )?;
    }
    if args.json {
        writeln!(out, "{}", serde_json::to_string(&report).map_err(|e| CtlError::Failed(e.to_string()))?)?;
    } else {
        print_text(&report, out)?;
    }
    Ok(if !report.complete {
        Exit::Unreachable
    } else if report.outcomes.contains_key("cannot_rebuild") {
        Exit::Failed
    } else {
        Exit::Ok
    })
}

fn record(
    report: &mut Report,
    unreachable: &mut BTreeMap<String, String>,
    lost: LostPaste,
    outcome: Result<Outcome, NotRebuilt>,
    samples: usize,
) {
    report.lost_pastes += 1;
    let (outcome, reason) = match outcome {
        Ok(outcome) => (outcome, None),
        Err(NotRebuilt::Cannot(reason)) => (Outcome::CannotRebuild, Some(reason)),
        Err(NotRebuilt::Unreachable(problem)) => {
            report.complete = false;
            unreachable.entry(problem.clone()).or_insert(problem);
            return;
        }
    };
    *report.outcomes.entry(outcome_name(outcome)).or_default() += 1;
    if report.samples.len() < samples || reason.is_some() && report.samples.len() < samples * 2 {
        report.samples.push(Repair { paste_id: lost.paste_id.to_string(), key: lost.key.canonical(), outcome, reason });
    }
}

fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::WouldRebuild => "would_rebuild",
        Outcome::Rebuilt => "rebuilt",
        Outcome::AlreadyThere => "already_there",
        Outcome::Fenced => "fenced",
        Outcome::CannotRebuild => "cannot_rebuild",
    }
}

/// Rebuilds one lost paste's row and, with `apply`, inserts it.
async fn repair(
    deployment: &Deployment,
    objects: &dyn ObjectStore,
    lost: &LostPaste,
    apply: bool,
) -> Result<Outcome, NotRebuilt> {
    pastebin_runtime::failpoints::hit(LOST_PASTE_FOUND).await;
    let row = rebuild(deployment, objects, lost).await?;
    if !apply {
        return Ok(Outcome::WouldRebuild);
    }
    let shard = deployment.slots.paste_shard_index(lost.paste_id.slot());
    let inserted = deployment
        .pastes(shard)
        .insert(&row)
        .await
        .map_err(|error| NotRebuilt::Unreachable(format!("P shard {}: {error}", deployment.paste_name(shard))))?;
    Ok(match inserted {
        InsertOutcome::Inserted => Outcome::Rebuilt,
        InsertOutcome::AlreadyExists => Outcome::AlreadyThere,
        InsertOutcome::Tombstoned => Outcome::Fenced,
    })
}

/// The row a lost paste had, from K's stored 201 and the object.
async fn rebuild(deployment: &Deployment, objects: &dyn ObjectStore, lost: &LostPaste) -> Result<NewPaste, NotRebuilt> {
    let shard = deployment.slots.key_shard_index(lost.key.slot());
    let record = deployment
        .keys(shard)
        .get(&lost.key)
        .await
        .map_err(|error| NotRebuilt::Unreachable(format!("K shard {}: {error}", deployment.key_name(shard))))?
        .ok_or_else(|| NotRebuilt::Cannot("its key is no longer on K (retired since it was read)".into()))?;
    if record.state != KeyState::Done || record.paste_id != lost.paste_id {
        return Err(NotRebuilt::Cannot("its key changed since it was read; run reconcile again".into()));
    }
    let created = Created::from_stored(&record.response_body)
        .filter(|created| created.id == lost.paste_id.as_str())
        .ok_or_else(|| NotRebuilt::Cannot("K's stored 201 for it cannot be read".into()))?;
    let expires_at =
        created.expires_at().ok_or_else(|| NotRebuilt::Cannot("K's stored 201 has no readable expiry".into()))?;
    let content = tokio::time::timeout(deployment.timeout, objects.get(lost.paste_id.as_str()))
        .await
        .unwrap_or_else(|_| Err(pastebin_objects::ObjectError::Uncertain("timed out".into())))
        .map_err(|error| NotRebuilt::Unreachable(format!("object store: {error}")))?
        .ok_or_else(|| {
            NotRebuilt::Cannot(
                "its object is missing too: restore it from a backup of the bucket, then run repair again".into(),
            )
        })?;
    Ok(NewPaste {
        id: lost.paste_id.clone(),
        delete_token_hash: DeleteToken::presented(&created.delete_token).hash(),
        created_at: record.created_at,
        expires_at,
        size: content.len() as u64,
        content_sha256: Sha256::digest(&content).into(),
        attributes: PasteAttributes::default(),
        // K's record names the create, so the rebuilt row can be found by
        // its key again (docs/design.md#adopting-after-a-k-loss).
        origin: Some(PasteOrigin { key_hash: record.key.hash(), request_hash: record.request_hash }),
    })
}

fn print_text(report: &Report, out: &mut (dyn Write + Send)) -> std::io::Result<()> {
    let mode = if report.apply { "applied" } else { "dry run: nothing was changed; add --apply to insert" };
    writeln!(
        out,
        "repair ({mode}): {}/256 slots read, {} lost paste(s) found{}",
        report.slots_read,
        report.lost_pastes,
        if report.complete { "" } else { " (INCOMPLETE: see warnings)" }
    )?;
    for (outcome, count) in &report.outcomes {
        writeln!(out, "  {}: {count}", outcome.replace('_', " "))?;
    }
    let rebuilt = ["rebuilt", "would_rebuild"].iter().any(|outcome| report.outcomes.contains_key(outcome));
    if rebuilt {
        writeln!(
            out,
            "not rebuilt (on neither K nor the object): {}; rebuilt pastes read as plain text and are not burned on reading",
            report.not_rebuilt.join(", ")
        )?;
    }
    for repair in &report.samples {
        let reason = repair.reason.as_deref().map(|r| format!(": {r}")).unwrap_or_default();
        writeln!(out, "  {}  {}  {}{reason}", repair.paste_id, repair.key, outcome_name(repair.outcome))?;
    }
    Ok(())
}
