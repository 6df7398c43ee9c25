//! Keeping a public instance (docs/operations.md#reports-and-takedowns):
//! `pastebin ctl reports` lists what readers reported, across every P
//! shard, and `--dismiss REPORT` dismisses one; `pastebin ctl takedown ID
//! --reason TEXT` removes a paste without its delete token. Each calls P as
//! every other command does (mutual TLS in a deployment, the private
//! sockets of `up`).

use std::io::Write;

use pastebin_core::{from_millis, PasteId, MAX_TAKEDOWN_REASON_CHARS};
use pastebin_pastes::{DismissOutcome, Dismissal, ReportOrder, ReportedPaste, TakedownOutcome};
use pastebin_runtime::grpc::CallError;
use serde::Serialize;

use crate::{
    format::{age, seconds_between, table},
    CtlError, Deployment, Exit,
};

#[derive(Debug, Clone, clap::Args)]
pub struct ReportsArgs {
    /// `newest`: by the last report; `most`: by the number of reports.
    #[arg(long, value_enum, default_value_t = Order::Newest)]
    pub order: Order,
    /// Reported pastes listed at most (per shard, then merged).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub limit: u32,
    /// One JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Dismiss a report instead of listing: `ID-N` (as the REPORT column
    /// shows it) dismisses that one, a paste's id (or link) all of its
    /// reports. It leaves the open count; the paste stays.
    #[arg(long, value_name = "REPORT")]
    pub dismiss: Option<String>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Order {
    Newest,
    Most,
}

#[derive(Debug, Clone, clap::Args)]
pub struct TakedownArgs {
    /// The paste's id (or its link).
    pub id: String,
    /// Why, shown to every reader (410) and kept on the tombstone (at most 500 characters).
    #[arg(long)]
    pub reason: String,
    /// Who takes it down, for the audit log [default: $USER].
    #[arg(long, env = "PASTEBIN_OPERATOR")]
    pub operator: Option<String>,
}

/// The operator's name as ctl sends it: `--operator`, else `$PASTEBIN_OPERATOR`
/// or `$USER`. P's audit line names the identity it verified beside it.
fn operator_name(given: Option<&str>) -> String {
    given
        .map(str::to_owned)
        .or_else(|| std::env::var("PASTEBIN_OPERATOR").ok())
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "unknown".into())
}

#[derive(Debug, Serialize)]
struct ReportedRow {
    id: String,
    /// Reports not dismissed.
    open_reports: u64,
    /// Every report made, dismissed ones too.
    reports: u64,
    last_reported_at: String,
    age_seconds: f64,
    size: u64,
    /// Whether the content is a sealed paste's envelope, which the server
    /// cannot read (docs/api.md#sealed-pastes).
    encrypted: bool,
    recent: Vec<RecentReport>,
}

#[derive(Debug, Serialize)]
struct RecentReport {
    /// What `--dismiss` takes: the paste's id and the report's number.
    id: String,
    reason: String,
    note: Option<String>,
    at: String,
}

pub async fn reports(
    deployment: &Deployment,
    args: &ReportsArgs,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    if let Some(report) = &args.dismiss {
        return dismiss(deployment, report, out).await;
    }
    let order = match args.order {
        Order::Newest => ReportOrder::Newest,
        Order::Most => ReportOrder::Most,
    };
    let (mut listed, mut open, mut exit) = (Vec::new(), 0u64, Exit::Ok);
    for shard in 0..deployment.paste_addresses().len() {
        match deployment.pastes(shard).reports(order, args.limit).await {
            Ok((pastes, shard_open)) => {
                listed.extend(pastes);
                open += shard_open;
            }
            Err(error) => {
                writeln!(err, "{}", crate::pending::unreachable(deployment, "P", shard, &error.to_string()))?;
                exit = Exit::Unreachable;
            }
        }
    }
    sort(&mut listed, order);
    listed.truncate(args.limit as usize);
    let now = chrono::Utc::now();
    let rows: Vec<ReportedRow> = listed.into_iter().map(|paste| row(paste, now)).collect();
    if args.json {
        let report = serde_json::json!({ "open_reports": open, "pastes": rows });
        writeln!(out, "{report}")?;
        return Ok(exit);
    }
    writeln!(out, "open reports: {open}")?;
    let pastes: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            vec![
                row.id.clone(),
                row.open_reports.to_string(),
                row.reports.to_string(),
                row.last_reported_at.clone(),
                age(row.age_seconds),
                row.size.to_string(),
                if row.encrypted { "yes" } else { "no" }.into(),
            ]
        })
        .collect();
    write!(out, "{}", table(&["ID", "OPEN", "REPORTS", "LAST REPORT", "AGE", "SIZE", "ENCRYPTED"], &pastes))?;
    // Every report P keeps of each, newest first, by the name --dismiss takes.
    let reports: Vec<Vec<String>> = rows
        .iter()
        .flat_map(|row| &row.recent)
        .map(|report| {
            let note = report.note.as_deref().unwrap_or_default().replace(['\r', '\n'], " ");
            vec![report.id.clone(), report.at.clone(), report.reason.clone(), note]
        })
        .collect();
    if !reports.is_empty() {
        write!(out, "\n{}", table(&["REPORT", "AT", "REASON", "NOTE"], &reports))?;
    }
    Ok(exit)
}

/// `reports --dismiss REPORT`: one report (`ID-N`) or all of a paste's (`ID`).
async fn dismiss(deployment: &Deployment, raw: &str, out: &mut (dyn Write + Send)) -> Result<Exit, CtlError> {
    let (id, which) = report_name(raw)?;
    let shard = owner(deployment, &id)?;
    let operator = operator_name(None);
    let outcome = deployment
        .pastes(shard)
        .dismiss_report(&id, which, &operator)
        .await
        .map_err(|error| operator_call_failed(deployment, shard, error, "dismissed"))?;
    match (outcome, which) {
        (DismissOutcome::Dismissed { open_reports }, Dismissal::One(_)) => {
            writeln!(out, "dismissed report {raw}; {id} has {open_reports} open reports")?;
        }
        (DismissOutcome::Dismissed { .. }, Dismissal::All) => writeln!(out, "dismissed every report of {id}")?,
        (DismissOutcome::NotFound, Dismissal::One(_)) => {
            return Err(CtlError::Failed(format!(
                "no open report {raw} among those P keeps of a live paste: nothing was dismissed \
                 (`ctl reports` lists them; `--dismiss {id}` dismisses all of the paste's)"
            )));
        }
        (DismissOutcome::NotFound, Dismissal::All) => {
            return Err(CtlError::Failed(format!("no live paste {id}: nothing was dismissed")));
        }
    }
    Ok(Exit::Ok)
}

/// A report as `ctl reports` names it, `ID-N`, or a paste (its id or link) for all of its reports.
fn report_name(raw: &str) -> Result<(PasteId, Dismissal), CtlError> {
    let numbered = raw.trim().rsplit_once('-').and_then(|(id, number)| {
        let number = number.parse::<u64>().ok().filter(|n| *n > 0)?;
        Some((PasteId::parse(id).ok()?, Dismissal::One(number)))
    });
    match numbered {
        Some(named) => Ok(named),
        None => paste_id(raw).map(|id| (id, Dismissal::All)).map_err(|_| {
            CtlError::Usage(format!(
                "`{raw}` names no report: give ID-N as the REPORT column of `ctl reports` shows it, \
                 or a paste's id for all of its reports"
            ))
        }),
    }
}

/// An operator's call to P that did not answer as it should: refused (P
/// said why, e.g. that this identity is no operator's: nothing changed), or
/// unanswered (it may have been `done`: the same command again settles it).
fn operator_call_failed(deployment: &Deployment, shard: usize, error: CallError, done: &str) -> CtlError {
    match error {
        CallError::Refused(status) => CtlError::Failed(format!(
            "P shard {} refused: {}; nothing was {done}",
            deployment.paste_name(shard),
            status.message()
        )),
        error => CtlError::Unreachable(format!(
            "{}; it may or may not be {done}: run the same command again",
            crate::pending::unreachable(deployment, "P", shard, &error.to_string())
        )),
    }
}

/// The P shard that owns `id`'s slot.
fn owner(deployment: &Deployment, id: &PasteId) -> Result<usize, CtlError> {
    deployment.slots.paste_owner(id.slot()).ok_or_else(|| {
        CtlError::Unreachable(format!(
            "P shard for slot {}: unknown — no paste shard that answered owns it; nothing changed. \
             Retry when the paste shards answer",
            id.slot()
        ))
    })
}

/// Every shard's list as one, in the order asked for.
fn sort(pastes: &mut [ReportedPaste], order: ReportOrder) {
    match order {
        ReportOrder::Newest => pastes.sort_by_key(|paste| std::cmp::Reverse(paste.last_reported_at)),
        ReportOrder::Most => {
            pastes.sort_by(|a, b| b.open_reports.cmp(&a.open_reports).then(b.last_reported_at.cmp(&a.last_reported_at)))
        }
    }
}

fn row(paste: ReportedPaste, now: chrono::DateTime<chrono::Utc>) -> ReportedRow {
    let at = |at: chrono::DateTime<chrono::Utc>| at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let id = paste.id.to_string();
    ReportedRow {
        open_reports: paste.open_reports,
        reports: paste.report_count,
        last_reported_at: at(paste.last_reported_at),
        age_seconds: seconds_between(paste.created_at, now),
        size: paste.size,
        encrypted: paste.sealed,
        recent: paste
            .recent
            .into_iter()
            .map(|report| RecentReport {
                id: format!("{id}-{}", report.number),
                reason: report.reason,
                note: report.note,
                at: at(from_millis(report.at)),
            })
            .collect(),
        id,
    }
}

pub async fn takedown(
    deployment: &Deployment,
    args: &TakedownArgs,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    let id = paste_id(&args.id)?;
    let reason = args.reason.trim();
    if reason.is_empty() || reason.chars().count() > MAX_TAKEDOWN_REASON_CHARS {
        return Err(CtlError::Usage("--reason must be 1 to 500 characters: readers are shown it".into()));
    }
    let operator = operator_name(args.operator.as_deref());
    let shard = owner(deployment, &id)?;
    let outcome = deployment
        .pastes(shard)
        .take_down(&id, reason, &operator)
        .await
        .map_err(|error| operator_call_failed(deployment, shard, error, "taken down"))?;
    match outcome {
        TakedownOutcome::NotFound => {
            return Err(CtlError::Failed(format!("no live paste {id}: nothing was taken down")));
        }
        TakedownOutcome::AlreadyTakenDown => writeln!(out, "{id} was already taken down")?,
        TakedownOutcome::TakenDown => writeln!(out, "{id} taken down: readers now get 410 \"{reason}\"")?,
    }
    // The row is a tombstone now, so deleting the bytes is safe; if it
    // fails, the object reaper deletes them (the id holds no live paste).
    match deployment.object_store().await {
        Ok(objects) => {
            if let Err(error) = objects.delete(id.as_str()).await {
                writeln!(err, "warning: the object of {id} was not deleted ({error}); the sweeper's reaper will")?;
            }
        }
        Err(error) => writeln!(err, "warning: {error}; the sweeper's reaper deletes the object of {id}")?,
    }
    Ok(Exit::Ok)
}

/// An id, or the last path segment of a paste's link (`https://host/ID`,
/// `…/raw/ID`, `…/api/v1/pastes/ID`), ignoring a query or a fragment.
fn paste_id(raw: &str) -> Result<PasteId, CtlError> {
    let path = raw.trim().split(['?', '#']).next().unwrap_or_default();
    let last = path.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
    PasteId::parse(last).map_err(|_| CtlError::Usage(format!("`{raw}` is neither a paste id nor a paste's link")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_is_read_from_a_link_too() {
        let id = PasteId::mint(pastebin_core::Slot(7)).to_string();
        for raw in [id.clone(), format!("https://paste.example/{id}"), format!("http://h/raw/{id}?download#k")] {
            assert_eq!(paste_id(&raw).unwrap().to_string(), id, "{raw}");
        }
        assert!(matches!(paste_id("https://paste.example/"), Err(CtlError::Usage(_))));
    }

    #[test]
    fn a_report_is_named_by_its_paste_and_number_and_a_paste_names_all_of_its() {
        let id = PasteId::mint(pastebin_core::Slot(7));
        let (named, which) = report_name(&format!("{id}-3")).unwrap();
        assert_eq!((named.to_string(), which), (id.to_string(), Dismissal::One(3)));
        let (named, which) = report_name(&format!("https://paste.example/{id}")).unwrap();
        assert_eq!((named.to_string(), which), (id.to_string(), Dismissal::All));
        for bad in [format!("{id}-0"), format!("{id}-x"), "3".to_owned()] {
            assert!(matches!(report_name(&bad), Err(CtlError::Usage(_))), "{bad}");
        }
    }
}
