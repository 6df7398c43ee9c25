//! `pastebin ctl recover KEY`: the sweeper's rules for one key, now. P is
//! read first; a key whose paste shard cannot be read stays pending. A key
//! younger than the recovery threshold may still have its create in flight,
//! so it is left alone unless `--force` (the fence would make forcing safe,
//! but the client in flight would get a 503 it need not have had).

use std::io::Write;

use pastebin_core::{IdempotencyKey, KeyState, RECOVERY_THRESHOLD};
use pastebin_shards::Decision;
use serde::Serialize;
use tokio::time::Instant;

use crate::{
    format::{age, seconds_between},
    CtlError, Deployment, Exit,
};

#[derive(Debug, Clone, clap::Args)]
pub struct RecoverArgs {
    /// The idempotency key (a UUID).
    pub key: String,
    /// Only read P and say what would happen; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Recover even if the key is younger than the 60 s recovery threshold.
    #[arg(long)]
    pub force: bool,
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Serialize)]
struct Report {
    key: String,
    dry_run: bool,
    /// `marked_done`, `aborted`, `not_pending`, `already_resolved`, `left_pending`, `no_such_key`, `too_young`.
    decision: &'static str,
    detail: String,
    paste_id: Option<String>,
    /// The P shard that said it owns the paste id's slot (`null`: none that answered).
    paste_shard: Option<usize>,
    age_seconds: Option<f64>,
}

pub async fn run(
    deployment: &Deployment,
    args: &RecoverArgs,
    out: &mut (dyn Write + Send),
    _err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    let key = IdempotencyKey::parse(&args.key)
        .map_err(|_| CtlError::Usage(format!("`{}` is not an idempotency key (a UUID)", args.key)))?;
    let slot = key.slot();
    let shard = deployment.slots.key_owner(slot).ok_or_else(|| {
        CtlError::Unreachable(format!(
            "K shard for slot {slot}: unknown — no key shard that answered owns it; nothing changed. \
             Retry when the key shards answer"
        ))
    })?;
    let keys = deployment.keys(shard);
    let unreachable =
        |error: String| CtlError::Unreachable(crate::pending::unreachable(deployment, "K", shard, &error));
    // Read the key first, for the report and the age check. Only its
    // state, paste id and creation time are used: the stored body, which
    // holds the delete token, is dropped unread.
    let record = keys.get(&key).await.map_err(|e| unreachable(e.to_string()))?;
    let now = keys.pending_stats().await.map_err(|e| unreachable(e.to_string()))?.now;
    let paste_slot = record.as_ref().map(|r| r.paste_id.slot());
    let mut report = Report {
        key: key.canonical(),
        dry_run: args.dry_run,
        decision: "no_such_key",
        detail: String::new(),
        paste_id: record.as_ref().map(|r| r.paste_id.to_string()),
        paste_shard: paste_slot.and_then(|slot| deployment.slots.paste_owner(slot)),
        age_seconds: record.as_ref().map(|r| seconds_between(r.created_at, now)),
    };
    let pending = record.as_ref().is_some_and(|r| r.state == KeyState::Pending);
    let young = pending && report.age_seconds.unwrap_or(0.0) < RECOVERY_THRESHOLD.as_secs_f64();
    drop(record);

    let exit = if young && !args.force && !args.dry_run {
        report.decision = "too_young";
        report.detail = format!(
            "the key is pending for only {}: its create may still be in flight. The sweeper waits for 60s; \
             wait too, or pass --force",
            age(report.age_seconds.unwrap_or(0.0))
        );
        Exit::Failed
    } else if let (true, None, Some(slot)) = (pending, report.paste_shard, paste_slot) {
        // Recovery reads P before it decides; an unknown P is never read as "no paste".
        report.decision = "left_pending";
        report.detail = format!(
            "left pending: {}. Never abort what cannot be seen; retry when the paste shards answer",
            crate::pending::unknown_paste_owner(slot)
        );
        Exit::Unreachable
    } else {
        let deadline = Instant::now() + deployment.timeout;
        let decision = pastebin_shards::recover_key(&deployment.slots, &key, args.dry_run, deadline).await;
        let (name, detail, exit) = describe(&decision, args.dry_run);
        report.decision = name;
        report.detail = detail;
        if young && args.dry_run && !args.force {
            report.detail.push_str(&format!(
                " (note: the key is only {} old; without --force, recover waits for 60s)",
                age(report.age_seconds.unwrap_or(0.0))
            ));
        }
        exit
    };

    if args.json {
        writeln!(out, "{}", serde_json::to_string(&report).map_err(|e| CtlError::Failed(e.to_string()))?)?;
    } else {
        let mut context = Vec::new();
        if let Some(id) = &report.paste_id {
            context.push(match report.paste_shard {
                Some(p) => format!("paste id {id} on {}", deployment.paste_name(p)),
                None => format!("paste id {id}, its P shard unknown"),
            });
        }
        if let Some(seconds) = report.age_seconds {
            context.push(format!("created {} ago", age(seconds)));
        }
        let context = if context.is_empty() { String::new() } else { format!(" ({})", context.join(", ")) };
        writeln!(out, "key {}{}: {}", report.key, context, report.detail)?;
    }
    Ok(exit)
}

/// The decision's name, a sentence for the operator, and the exit code.
fn describe(decision: &Decision, dry_run: bool) -> (&'static str, String, Exit) {
    let would = |done: &str, would: &str| {
        if dry_run {
            would.to_owned()
        } else {
            done.to_owned()
        }
    };
    match decision {
        Decision::MarkedDone => (
            "marked_done",
            would(
                "marked done: its paste exists; the client's retry gets the original 201",
                "would mark done: its paste exists on P (dry run: nothing changed)",
            ),
            Exit::Ok,
        ),
        Decision::Aborted => (
            "aborted",
            would(
                "aborted: no paste held its id; the id is now tombstoned and the client's retry starts a new paste",
                "would abort: no paste holds its id on P (dry run: no tombstone, nothing changed)",
            ),
            Exit::Ok,
        ),
        Decision::NotPending(state) => {
            ("not_pending", format!("nothing to do: the key is already {}", state.as_str()), Exit::Ok)
        }
        Decision::AlreadyResolved => {
            ("already_resolved", "nothing to do: another executor resolved it first".into(), Exit::Ok)
        }
        Decision::LeftPending(reason) => (
            "left_pending",
            format!("left pending: {reason}. Never abort what cannot be seen; retry later"),
            Exit::Unreachable,
        ),
        Decision::NoSuchKey => ("no_such_key", "no such key on its K shard".into(), Exit::Failed),
    }
}
