use chrono::{DateTime, Utc};
use pastebin_core::{DeleteTokenHash, PasteAttributes, PasteId, PasteOrigin, RequestHash};

/// Step 4 of the saga: the paste row. The content itself is in the object store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPaste {
    pub id: PasteId,
    pub delete_token_hash: DeleteTokenHash,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub size: u64,
    pub content_sha256: [u8; 32],
    pub attributes: PasteAttributes,
    /// The create that made it; `None` from a caller that predates it.
    pub origin: Option<PasteOrigin>,
}

/// A live paste as readers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasteRow {
    pub id: PasteId,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
    pub size: u64,
    pub content_sha256: [u8; 32],
    pub attributes: PasteAttributes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertOutcome {
    Inserted,
    /// A live row with this id: a repeat of the same insert, which is success.
    AlreadyExists,
    /// The id was aborted or reaped: it can never become a paste.
    Tombstoned,
}

/// One row as `ctl reconcile` lists a slot: no token hash, no attributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRow {
    pub id: PasteId,
    pub fate: IdFate,
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Live rows only.
    pub content_sha256: Option<[u8; 32]>,
}

/// A row found by the hash of the key whose create made it
/// (docs/design.md#adopting-after-a-k-loss): what an adopting gateway needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyedPaste {
    pub id: PasteId,
    /// Live, or dead (deleted, expired, burned) since.
    pub fate: IdFate,
    pub request_hash: RequestHash,
    pub created_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

/// What is true of an id after the fence ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdFate {
    /// A paste row holds the id: the right action is done, never abort.
    Live,
    /// The id is dead for good: aborting the key (and reaping) is safe.
    Tombstoned,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeleteOutcome {
    Deleted,
    NotFound,
    WrongToken,
}

/// What a burn-after-reading claim found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BurnClaim {
    /// This caller tombstoned the row: it alone may send the content.
    Claimed,
    /// Someone else burned it first, or it was deleted, expired or never
    /// a burn paste: answer like a missing paste.
    Gone,
}

/// What a reader's read of an id finds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasteRead {
    Live(PasteRow),
    /// Taken down by the operator, for this reason (readers get 410 with it).
    RemovedByOperator {
        reason: String,
    },
    /// Never made, expired, deleted, burned or aborted: all alike to a reader.
    Missing,
}

/// One reader's report, as stored on the paste's row.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Unix milliseconds.
    pub at: i64,
    /// Its place among the paste's reports (1 for the first), which names
    /// it for a dismissal. 0 in a report stored before reports were
    /// numbered; the store numbers those by their place as it reads them.
    #[serde(default)]
    pub number: u64,
}

/// A live paste with reports, as `ctl reports` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReportedPaste {
    pub id: PasteId,
    pub created_at: DateTime<Utc>,
    pub size: u64,
    /// Every report ever made, dismissed ones included.
    pub report_count: u64,
    /// Those not dismissed.
    pub open_reports: u64,
    pub last_reported_at: DateTime<Utc>,
    /// A sealed paste: the server holds an envelope it cannot read.
    pub sealed: bool,
    /// The last few not dismissed, newest first.
    pub recent: Vec<Report>,
}

/// The order of `ctl reports`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportOrder {
    /// By the last report, newest first.
    Newest,
    /// By the number of reports, most first.
    Most,
}

/// What a takedown found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TakedownOutcome {
    /// The live row is a tombstone now: delete its object.
    TakenDown,
    /// Taken down before (a repeat of the same takedown is success).
    AlreadyTakenDown,
    /// No live row: never made, or already gone another way.
    NotFound,
}

/// Which of a paste's reports an operator dismisses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dismissal {
    /// One kept report, by its number.
    One(u64),
    /// Every report of the paste, kept or not.
    All,
}

/// What a dismissal found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DismissOutcome {
    /// Done: the paste has this many open reports left.
    Dismissed { open_reports: u64 },
    /// No live paste, or no kept report of that number (dismissed already,
    /// or too old to be kept: dismiss them all).
    NotFound,
}
