use std::{collections::HashMap, sync::Arc};

use pastebin_core::{
    from_millis, to_millis, Clock, DeleteToken, DeleteTokenHash, FileName, KeyHash, Language, MediaType,
    PasteAttributes, PasteId, RequestHash, Slot, SlotRange,
};
use pastebin_runtime::db::{placeholders, Database};
use sqlx::{
    any::{AnyArguments, AnyRow},
    query::Query,
    Any, AssertSqlSafe, Row,
};

use crate::{
    stored::StoredTotals, BurnClaim, DeleteOutcome, DismissOutcome, Dismissal, IdFate, InsertOutcome, KeyedPaste,
    NewPaste, PasteRead, PasteRow, Report, ReportOrder, ReportedPaste, SlotRow, TakedownOutcome,
};

#[derive(Debug, thiserror::Error)]
pub enum PasteStoreError {
    #[error("paste database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("corrupt paste row: {0}")]
    Corrupt(String),
    /// A write that lost every race it ran; nothing was written.
    #[error("{0}")]
    Busy(&'static str),
}

/// Reports kept word for word per paste; the count goes on past them.
pub const KEPT_REPORTS: usize = 10;
/// Tries of a report's guarded update before the reader is told to retry.
const REPORT_ATTEMPTS: usize = 5;

/// The stored JSON array of reports, newest first (none: an empty list),
/// of a row that has had `report_count` reports. A note kept before notes
/// lost their link keys loses them here, so no listing shows one and the
/// row's next write keeps none; a report kept before reports were numbered
/// is numbered by its place (the newest is the `report_count`-th: nothing
/// was dismissed before numbers existed).
fn reports_from(raw: Option<String>, report_count: i64) -> Result<Vec<Report>, PasteStoreError> {
    let mut reports: Vec<Report> = raw.map_or(Ok(Vec::new()), |raw| {
        serde_json::from_str(&raw).map_err(|e| PasteStoreError::Corrupt(format!("reports: {e}")))
    })?;
    let total = u64::try_from(report_count).unwrap_or(0);
    for (place, report) in reports.iter_mut().enumerate() {
        if report.number == 0 {
            report.number = total.saturating_sub(place as u64);
        }
        if let Some(note) = report.note.as_mut() {
            *note = pastebin_core::without_link_keys(note);
        }
    }
    Ok(reports)
}

fn reports_json(reports: &[Report]) -> Result<String, PasteStoreError> {
    serde_json::to_string(reports).map_err(|e| PasteStoreError::Corrupt(e.to_string()))
}

/// A paste's reports as its row holds them.
#[derive(Debug, Clone)]
struct ReportsOf {
    /// Every report made (`report_count`).
    made: i64,
    /// Those an operator dismissed (`dismissed_reports`).
    dismissed: i64,
    /// The last few not dismissed, newest first.
    kept: Vec<Report>,
}

/// Why an id became a tombstone; kept for operators.
#[derive(Debug, Clone, Copy)]
enum TombstoneReason {
    Aborted,
    Deleted,
    Expired,
    Burned,
    /// Taken down by an operator; the row keeps the operator's reason.
    Removed,
}

impl TombstoneReason {
    fn as_str(self) -> &'static str {
        match self {
            Self::Aborted => "aborted",
            Self::Deleted => "deleted",
            Self::Expired => "expired",
            Self::Burned => "burned",
            Self::Removed => "removed",
        }
    }
}

/// Shard P's storage. The same SQL runs on PostgreSQL and SQLite. Reads go
/// through [`Database::read`]; every write goes through [`Database::execute`] or
/// [`Database::write`], committed (on SQLite, in a group) when they return.
#[derive(Clone)]
pub struct PasteStore {
    db: Database,
    clock: Arc<dyn Clock>,
    totals: Arc<StoredTotals>,
}

/// The insert of `paste` as a live row, which inserts nothing when its id
/// exists, live or a tombstone: no insert lands behind the fence. The saga's
/// P insert runs it alone; the colocated create in the same commit as its
/// done key (docs/design.md#the-colocated-create).
pub fn insert_paste(paste: &NewPaste) -> Query<'static, Any, AnyArguments> {
    sqlx::query(
        "INSERT INTO pastes (id, state, created_at, delete_token_sha256, expires_at, size, content_sha256,
                             media_type, file_name, language, burn_after_reading, key_sha256,
                             request_sha256, sealed)
         VALUES ($1, 'live', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (id) DO NOTHING",
    )
    .bind(paste.id.to_string())
    .bind(to_millis(paste.created_at))
    .bind(paste.delete_token_hash.to_hex())
    .bind(to_millis(paste.expires_at))
    .bind(i64::try_from(paste.size).unwrap_or(i64::MAX))
    .bind(hex::encode(paste.content_sha256))
    .bind(paste.attributes.media_type.as_ref().map(|t| t.as_str().to_owned()))
    .bind(paste.attributes.file_name.as_ref().map(|n| n.as_str().to_owned()))
    .bind(paste.attributes.language.as_ref().map(|l| l.as_str().to_owned()))
    .bind(i64::from(paste.attributes.burn_after_reading))
    .bind(paste.origin.map(|origin| origin.key_hash.to_hex()))
    .bind(paste.origin.map(|origin| origin.request_hash.to_hex()))
    .bind(i64::from(paste.attributes.sealed))
}

impl PasteStore {
    pub fn new(db: Database, clock: Arc<dyn Clock>) -> Self {
        Self { db, clock, totals: Arc::default() }
    }

    /// What this store holds, as exported (see [`crate::stored`]).
    pub(crate) fn totals(&self) -> &Arc<StoredTotals> {
        &self.totals
    }

    /// Live paste rows and the sum of their sizes, counted now. An expired
    /// paste counts until its row is purged.
    pub async fn count_stored(&self) -> Result<(u64, u64), PasteStoreError> {
        let row = self
            .db
            .read(|pool| {
                sqlx::query("SELECT COUNT(*) AS pastes, CAST(COALESCE(SUM(size), 0) AS BIGINT) AS bytes FROM pastes WHERE state = 'live'")
                    .fetch_one(pool)
            })
            .await?;
        let (pastes, bytes): (i64, i64) = (row.try_get("pastes")?, row.try_get("bytes")?);
        Ok((u64::try_from(pastes).unwrap_or(0), u64::try_from(bytes).unwrap_or(0)))
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The shard's database, for what moves its rows (docs/design.md#moving-slots).
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Step 4 of the saga. Repeating it is safe: the same id again is
    /// `AlreadyExists`; an id the fence killed is `Tombstoned`.
    pub async fn insert(&self, paste: &NewPaste) -> Result<InsertOutcome, PasteStoreError> {
        if self.db.execute(insert_paste(paste)).await? == 1 {
            self.counted(paste);
            return Ok(InsertOutcome::Inserted);
        }
        Ok(match self.fate(&paste.id).await? {
            IdFate::Live => InsertOutcome::AlreadyExists,
            IdFate::Tombstoned => InsertOutcome::Tombstoned,
        })
    }

    /// Counts `paste`, inserted just now by a commit of this store's
    /// database, in what the store exports.
    pub fn counted(&self, paste: &NewPaste) {
        self.totals.inserted(paste.size);
    }

    /// A readable paste: live and not yet expired. Expiry is checked here, so
    /// an expired paste is gone at once even before its row is purged.
    pub async fn get_live(&self, id: &PasteId) -> Result<Option<PasteRow>, PasteStoreError> {
        Ok(match self.read(id).await? {
            PasteRead::Live(row) => Some(row),
            PasteRead::RemovedByOperator { .. } | PasteRead::Missing => None,
        })
    }

    /// What a reader finds under `id`: the live paste, the operator's
    /// reason for a takedown, or nothing (every other way of being gone
    /// reads alike).
    pub async fn read(&self, id: &PasteId) -> Result<PasteRead, PasteStoreError> {
        let now = to_millis(self.clock.now());
        let row = self
            .db
            .read(|pool| {
                sqlx::query(
                    "SELECT id, state, created_at, expires_at, size, content_sha256, media_type, file_name, language,
                            burn_after_reading, sealed, tombstone_reason, removed_because
                       FROM pastes
                      WHERE id = $1 AND ((state = 'live' AND expires_at > $2) OR tombstone_reason = $3)",
                )
                .bind(id.as_str())
                .bind(now)
                .bind(TombstoneReason::Removed.as_str())
                .fetch_optional(pool)
            })
            .await?;
        let Some(row) = row else { return Ok(PasteRead::Missing) };
        if row.try_get::<String, _>("state")? == "live" {
            return Ok(PasteRead::Live(paste_from_row(&row)?));
        }
        let reason = row.try_get::<Option<String>, _>("removed_because")?.unwrap_or_default();
        Ok(PasteRead::RemovedByOperator { reason })
    }

    /// An operator's takedown: the live row (expired or not) becomes a
    /// tombstone that keeps `reason`, in one guarded update, so a takedown
    /// and a delete, a burn or the expiry reaper cannot both act on it. The
    /// caller deletes the object after this commit (the object reaper
    /// finishes if it cannot: the id is a tombstone). Reports stay on the
    /// row for the record.
    pub async fn take_down(&self, id: &PasteId, reason: &str) -> Result<TakedownOutcome, PasteStoreError> {
        let now = to_millis(self.clock.now());
        let changed = self
            .db
            .execute(
                sqlx::query(
                    "UPDATE pastes SET state = 'tombstoned', tombstoned_at = $1, tombstone_reason = $2,
                                       removed_because = $3
                      WHERE id = $4 AND state = 'live'",
                )
                .bind(now)
                .bind(TombstoneReason::Removed.as_str())
                .bind(reason.to_owned())
                .bind(id.to_string()),
            )
            .await?;
        if changed == 1 {
            return Ok(TakedownOutcome::TakenDown);
        }
        Ok(match self.read(id).await? {
            PasteRead::RemovedByOperator { .. } => TakedownOutcome::AlreadyTakenDown,
            PasteRead::Live(_) | PasteRead::Missing => TakedownOutcome::NotFound,
        })
    }

    /// A live, unexpired paste's reports as they stand: how many were made,
    /// how many dismissed, and the kept ones. `None`: no such paste.
    async fn reports_of(&self, id: &PasteId) -> Result<Option<ReportsOf>, PasteStoreError> {
        let now = to_millis(self.clock.now());
        let row = self
            .db
            .read(|pool| {
                sqlx::query(
                    "SELECT report_count, dismissed_reports, reports FROM pastes
                      WHERE id = $1 AND state = 'live' AND expires_at > $2",
                )
                .bind(id.as_str())
                .bind(now)
                .fetch_optional(pool)
            })
            .await?;
        let Some(row) = row else { return Ok(None) };
        let made: i64 = row.try_get("report_count")?;
        Ok(Some(ReportsOf {
            made,
            dismissed: row.try_get("dismissed_reports")?,
            kept: reports_from(row.try_get("reports")?, made)?,
        }))
    }

    /// Writes a paste's reports as `next`, unless they changed since `read`
    /// (another report or dismissal came in between): `false` then, and
    /// nothing is written.
    async fn replace_reports(
        &self,
        id: &PasteId,
        read: &ReportsOf,
        next: &ReportsOf,
        last_reported_at: Option<i64>,
    ) -> Result<bool, PasteStoreError> {
        let changed = self
            .db
            .execute(
                sqlx::query(
                    "UPDATE pastes SET report_count = $1, dismissed_reports = $2, reports = $3,
                                       last_reported_at = COALESCE($4, last_reported_at)
                      WHERE id = $5 AND state = 'live' AND report_count = $6 AND dismissed_reports = $7",
                )
                .bind(next.made)
                .bind(next.dismissed)
                .bind(reports_json(&next.kept)?)
                .bind(last_reported_at)
                .bind(id.to_string())
                .bind(read.made)
                .bind(read.dismissed),
            )
            .await?;
        Ok(changed == 1)
    }

    /// Stores a reader's report on a live, unexpired paste's row: the count
    /// and the last report's time, and the report, numbered, among the last
    /// [`KEPT_REPORTS`]. `None`: no such paste. A read, then an update
    /// guarded by the counts it read, retried when another report or a
    /// dismissal came in between (the same SQL on both databases; no row
    /// lock needed).
    pub async fn report(&self, id: &PasteId, report: Report) -> Result<Option<u64>, PasteStoreError> {
        for _ in 0..REPORT_ATTEMPTS {
            let Some(read) = self.reports_of(id).await? else { return Ok(None) };
            let made = read.made + 1;
            let mut kept = read.kept.clone();
            kept.insert(0, Report { number: u64::try_from(made).unwrap_or(0), ..report.clone() });
            kept.truncate(KEPT_REPORTS);
            let next = ReportsOf { made, dismissed: read.dismissed, kept };
            if self.replace_reports(id, &read, &next, Some(report.at)).await? {
                return Ok(Some(u64::try_from(made).unwrap_or(0)));
            }
        }
        Err(PasteStoreError::Busy("too many reports of this paste at once; retry"))
    }

    /// An operator's dismissal of one kept report of a live paste, or of all
    /// its reports: they leave the kept list and the open count (the count
    /// of reports made stays). Guarded and retried like [`Self::report`].
    pub async fn dismiss_report(&self, id: &PasteId, which: Dismissal) -> Result<DismissOutcome, PasteStoreError> {
        for _ in 0..REPORT_ATTEMPTS {
            let Some(read) = self.reports_of(id).await? else { return Ok(DismissOutcome::NotFound) };
            let next = match which {
                Dismissal::All => ReportsOf { made: read.made, dismissed: read.made, kept: Vec::new() },
                Dismissal::One(number) => {
                    let Some(place) = read.kept.iter().position(|report| report.number == number) else {
                        return Ok(DismissOutcome::NotFound);
                    };
                    let mut kept = read.kept.clone();
                    kept.remove(place);
                    ReportsOf { made: read.made, dismissed: read.dismissed + 1, kept }
                }
            };
            if self.replace_reports(id, &read, &next, None).await? {
                let open_reports = u64::try_from(next.made - next.dismissed).unwrap_or(0);
                return Ok(DismissOutcome::Dismissed { open_reports });
            }
        }
        Err(PasteStoreError::Busy("too many reports of this paste at once; retry"))
    }

    /// Up to `limit` live, reported pastes of the `owned` slots in `order`
    /// (expired ones are left out: the reaper takes them anyway). Only the
    /// owned slots: mid-move, the target holds copies of slots it does not
    /// own yet, which the source still lists (docs/design.md#moving-slots).
    pub async fn reported(
        &self,
        order: ReportOrder,
        limit: u32,
        owned: SlotRange,
    ) -> Result<Vec<ReportedPaste>, PasteStoreError> {
        let now = to_millis(self.clock.now());
        let order_by = match order {
            ReportOrder::Newest => "last_reported_at DESC, id",
            ReportOrder::Most => "report_count - dismissed_reports DESC, last_reported_at DESC, id",
        };
        let (open, prefixes) = open_reports_in(owned, 3);
        let sql = format!(
            "SELECT id, created_at, size, report_count, dismissed_reports, last_reported_at, reports, sealed FROM pastes
              WHERE {open} ORDER BY {order_by} LIMIT $2"
        );
        let rows = self
            .db
            .read(|pool| {
                let query = sqlx::query(AssertSqlSafe(sql)).bind(now).bind(i64::from(limit));
                prefixes.iter().fold(query, |query, prefix| query.bind(prefix.as_str())).fetch_all(pool)
            })
            .await?;
        rows.iter()
            .map(|row| {
                let corrupt = |what: &str| PasteStoreError::Corrupt(what.to_owned());
                let made: i64 = row.try_get("report_count")?;
                let dismissed: i64 = row.try_get("dismissed_reports")?;
                Ok(ReportedPaste {
                    id: PasteId::parse(&row.try_get::<String, _>("id")?).map_err(|_| corrupt("id"))?,
                    created_at: from_millis(row.try_get("created_at")?),
                    size: u64::try_from(row.try_get::<i64, _>("size")?).map_err(|_| corrupt("size"))?,
                    report_count: u64::try_from(made).map_err(|_| corrupt("report_count"))?,
                    open_reports: u64::try_from(made - dismissed).map_err(|_| corrupt("dismissed_reports"))?,
                    last_reported_at: from_millis(
                        row.try_get::<Option<i64>, _>("last_reported_at")?
                            .ok_or_else(|| corrupt("last_reported_at"))?,
                    ),
                    sealed: row.try_get::<i64, _>("sealed")? != 0,
                    recent: reports_from(row.try_get("reports")?, made)?,
                })
            })
            .collect()
    }

    /// Open reports of the `owned` slots: those on live, unexpired pastes
    /// not dismissed (a takedown, a delete or the expiry closes a paste's
    /// reports).
    pub async fn open_reports(&self, owned: SlotRange) -> Result<u64, PasteStoreError> {
        let now = to_millis(self.clock.now());
        let (open, prefixes) = open_reports_in(owned, 2);
        let sql = format!("SELECT CAST(SUM(report_count - dismissed_reports) AS BIGINT) FROM pastes WHERE {open}");
        let open: Option<i64> = self
            .db
            .read(|pool| {
                let query = sqlx::query_scalar(AssertSqlSafe(sql)).bind(now);
                prefixes.iter().fold(query, |query, prefix| query.bind(prefix.as_str())).fetch_one(pool)
            })
            .await?;
        Ok(u64::try_from(open.unwrap_or(0)).unwrap_or(0))
    }

    /// The fence. Inserting the tombstone and inserting the paste contend for
    /// the same primary key, so exactly one of them wins for an id, and the
    /// loser learns which fate the id has.
    pub async fn tombstone_unless_live(&self, id: &PasteId) -> Result<IdFate, PasteStoreError> {
        let now = to_millis(self.clock.now());
        let inserted = self
            .db
            .execute(
                sqlx::query(
                    "INSERT INTO pastes (id, state, created_at, tombstoned_at, tombstone_reason)
                     VALUES ($1, 'tombstoned', $2, $2, $3) ON CONFLICT (id) DO NOTHING",
                )
                .bind(id.to_string())
                .bind(now)
                .bind(TombstoneReason::Aborted.as_str()),
            )
            .await?
            == 1;
        if inserted {
            return Ok(IdFate::Tombstoned);
        }
        self.fate(id).await
    }

    /// The fence for a batch of ids, in one round trip for the caller and
    /// one write: a tombstone for every id no row holds (the same primary-key
    /// contest as [`Self::tombstone_unless_live`], decided per id), then each
    /// id's fate read back. A tombstone never becomes live again, so the read
    /// sees what the insert decided.
    pub async fn resolve_batch(&self, ids: &[PasteId]) -> Result<Vec<(PasteId, IdFate)>, PasteStoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let now = to_millis(self.clock.now());
        let raw: Vec<String> = ids.iter().map(ToString::to_string).collect();
        let tombstones = format!(
            "INSERT INTO pastes (id, state, created_at, tombstoned_at, tombstone_reason) VALUES {} ON CONFLICT (id) DO NOTHING",
            placeholders(raw.len(), |i| format!("(${}, 'tombstoned', $1, $1, $2)", i + 3))
        );
        let fates = format!(
            "SELECT id, state FROM pastes WHERE id IN ({})",
            placeholders(raw.len(), |i| format!("${}", i + 1))
        );
        let states: Vec<(String, String)> = self
            .db
            .write(move |conn| {
                Box::pin(async move {
                    let mut insert =
                        sqlx::query(AssertSqlSafe(tombstones)).bind(now).bind(TombstoneReason::Aborted.as_str());
                    for id in &raw {
                        insert = insert.bind(id.clone());
                    }
                    insert.execute(&mut *conn).await?;
                    let mut read = sqlx::query_as(AssertSqlSafe(fates));
                    for id in raw {
                        read = read.bind(id);
                    }
                    read.fetch_all(conn).await
                })
            })
            .await?;
        let states: HashMap<String, String> = states.into_iter().collect();
        ids.iter()
            .map(|id| {
                let state = states.get(id.as_str()).map(String::as_str);
                let fate = fate_of(state)?
                    .ok_or_else(|| PasteStoreError::Corrupt(format!("{id} vanished after a conflict")))?;
                Ok((id.clone(), fate))
            })
            .collect()
    }

    async fn fate(&self, id: &PasteId) -> Result<IdFate, PasteStoreError> {
        self.peek_fate(id).await?.ok_or_else(|| PasteStoreError::Corrupt(format!("{id} vanished after a conflict")))
    }

    /// What the fence would answer for `id`, read-only: `None` when P has
    /// never seen it (the fence would tombstone it). An expired but not yet
    /// purged row is `Live`, exactly as the fence sees it.
    pub async fn peek_fate(&self, id: &PasteId) -> Result<Option<IdFate>, PasteStoreError> {
        let state: Option<String> = self
            .db
            .read(|pool| {
                sqlx::query_scalar("SELECT state FROM pastes WHERE id = $1").bind(id.as_str()).fetch_optional(pool)
            })
            .await?;
        fate_of(state.as_deref())
    }

    /// [`Self::peek_fate`] for many ids in one read: `None` for an id P has
    /// never seen, in the order asked.
    pub async fn peek_batch(&self, ids: &[PasteId]) -> Result<Vec<(PasteId, Option<IdFate>)>, PasteStoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sql = format!(
            "SELECT id, state FROM pastes WHERE id IN ({})",
            placeholders(ids.len(), |i| format!("${}", i + 1))
        );
        let mut read = sqlx::query_as(AssertSqlSafe(sql));
        for id in ids {
            read = read.bind(id.to_string());
        }
        let states: Vec<(String, String)> = self.db.read(|pool| read.fetch_all(pool)).await?;
        let states: HashMap<String, String> = states.into_iter().collect();
        ids.iter().map(|id| Ok((id.clone(), fate_of(states.get(id.as_str()).map(String::as_str))?))).collect()
    }

    /// Up to `limit` rows (live and tombstones) of `slot`, ordered by id,
    /// after the id `after`.
    pub async fn list_slot(
        &self,
        slot: Slot,
        after: Option<&PasteId>,
        limit: u32,
    ) -> Result<Vec<SlotRow>, PasteStoreError> {
        let after = after.map(ToString::to_string).unwrap_or_default();
        let rows = self
            .db
            .read(|pool| {
                sqlx::query(
                    "SELECT id, state, created_at, content_sha256 FROM pastes
                      WHERE substr(id, 1, 2) = $1 AND id > $2 ORDER BY id LIMIT $3",
                )
                .bind(PasteId::slot_prefix_of(slot))
                .bind(after)
                .bind(i64::from(limit))
                .fetch_all(pool)
            })
            .await?;
        rows.iter()
            .map(|row| {
                let corrupt = |what: &str| PasteStoreError::Corrupt(what.to_owned());
                let state: String = row.try_get("state")?;
                let content_sha256 = match row.try_get::<Option<String>, _>("content_sha256")? {
                    Some(hex_text) if state == "live" => {
                        let mut hash = [0u8; 32];
                        hex::decode_to_slice(hex_text, &mut hash).map_err(|_| corrupt("content_sha256"))?;
                        Some(hash)
                    }
                    _ => None,
                };
                Ok(SlotRow {
                    id: PasteId::parse(&row.try_get::<String, _>("id")?).map_err(|_| corrupt("id"))?,
                    fate: fate_of(Some(&state))?.ok_or_else(|| corrupt("state"))?,
                    created_at: from_millis(row.try_get("created_at")?),
                    content_sha256,
                })
            })
            .collect()
    }

    /// Up to `limit` rows whose create carried `key_hash`, newest first (a
    /// lost life is recent; older ones may be lives the key retention ended):
    /// live ones and those that died since (deleted, expired, burned; the
    /// fence's tombstones carry no key hash). By the `pastes_by_key` index.
    pub async fn find_by_key(&self, key_hash: &KeyHash, limit: u32) -> Result<Vec<KeyedPaste>, PasteStoreError> {
        let rows = self
            .db
            .read(|pool| {
                sqlx::query(
                    "SELECT id, state, request_sha256, created_at, expires_at FROM pastes
                      WHERE key_sha256 = $1 ORDER BY created_at DESC, id DESC LIMIT $2",
                )
                .bind(key_hash.to_hex())
                .bind(i64::from(limit))
                .fetch_all(pool)
            })
            .await?;
        rows.iter().map(keyed_from_row).collect()
    }

    /// The adopting gateway's new delete token: the hash of a live row made
    /// under `key_hash` becomes `token_hash`. Setting the same hash again is
    /// a change too, so a repeat reports `true`. `false`: no such live row.
    pub async fn rotate_delete_token(
        &self,
        id: &PasteId,
        key_hash: &KeyHash,
        token_hash: &DeleteTokenHash,
    ) -> Result<bool, PasteStoreError> {
        let changed = self
            .db
            .execute(
                sqlx::query(
                    "UPDATE pastes SET delete_token_sha256 = $1 WHERE id = $2 AND state = 'live' AND key_sha256 = $3",
                )
                .bind(token_hash.to_hex())
                .bind(id.to_string())
                .bind(key_hash.to_hex()),
            )
            .await?;
        Ok(changed == 1)
    }

    /// Deleting turns the row into a tombstone, so the id can never be
    /// inserted again by a late saga step. The token is compared in constant
    /// time; the update is guarded by the token hash that was checked, so a
    /// token an adoption rotated away in between deletes nothing, and two
    /// deletes cannot both succeed.
    pub async fn delete(&self, id: &PasteId, token: &DeleteToken) -> Result<DeleteOutcome, PasteStoreError> {
        loop {
            let now = to_millis(self.clock.now());
            let Some(stored) = self.live_token_hash(id, now).await? else {
                return Ok(DeleteOutcome::NotFound);
            };
            if !stored.verify(token) {
                return Ok(DeleteOutcome::WrongToken);
            }
            pastebin_runtime::failpoints::hit(pastebin_runtime::failpoints::DELETE_TOKEN_CHECKED).await;
            let changed = self
                .db
                .execute(
                    sqlx::query(
                        "UPDATE pastes SET state = 'tombstoned', tombstoned_at = $1, tombstone_reason = $2
                          WHERE id = $3 AND state = 'live' AND delete_token_sha256 = $4",
                    )
                    .bind(now)
                    .bind(TombstoneReason::Deleted.as_str())
                    .bind(id.to_string())
                    .bind(stored.to_hex()),
                )
                .await?;
            if changed == 1 {
                return Ok(DeleteOutcome::Deleted);
            }
            // The row changed since it was read (gone, or its token
            // rotated): judge the token again against the row as it is now.
        }
    }

    /// The delete token hash of a live, unexpired paste.
    async fn live_token_hash(&self, id: &PasteId, now: i64) -> Result<Option<DeleteTokenHash>, PasteStoreError> {
        let stored: Option<String> = self
            .db
            .read(|pool| {
                sqlx::query_scalar(
                    "SELECT delete_token_sha256 FROM pastes WHERE id = $1 AND state = 'live' AND expires_at > $2",
                )
                .bind(id.as_str())
                .bind(now)
                .fetch_optional(pool)
            })
            .await?;
        stored
            .map(|stored| {
                DeleteTokenHash::from_hex(&stored)
                    .ok_or_else(|| PasteStoreError::Corrupt("delete_token_sha256 is not 32 hex bytes".into()))
            })
            .transpose()
    }

    /// Burn after reading: the one guarded update that decides which reader
    /// gets the content. Concurrent claims serialize on the row (PostgreSQL
    /// re-checks the `WHERE` after a concurrent update; SQLite has one
    /// writer), so exactly one sees a changed row. The row becomes a
    /// tombstone, so deleting the object afterwards (the caller, else the
    /// object reaper) is safe.
    pub async fn claim_burn(&self, id: &PasteId) -> Result<BurnClaim, PasteStoreError> {
        let now = to_millis(self.clock.now());
        let changed = self
            .db
            .execute(
                sqlx::query(
                    "UPDATE pastes SET state = 'tombstoned', tombstoned_at = $1, tombstone_reason = $2
                      WHERE id = $3 AND state = 'live' AND burn_after_reading = 1 AND expires_at > $1",
                )
                .bind(now)
                .bind(TombstoneReason::Burned.as_str())
                .bind(id.to_string()),
            )
            .await?;
        Ok(if changed == 1 { BurnClaim::Claimed } else { BurnClaim::Gone })
    }

    /// Tombstones up to `limit` live rows past their expiry and returns their
    /// ids, so the caller deletes their objects after this commit.
    pub async fn purge_expired(&self, limit: u32) -> Result<Vec<PasteId>, PasteStoreError> {
        let now = to_millis(self.clock.now());
        let ids: Vec<String> = self
            .db
            .write(move |conn| {
                Box::pin(
                    sqlx::query_scalar(
                        "UPDATE pastes SET state = 'tombstoned', tombstoned_at = $1, tombstone_reason = $2
                          WHERE state = 'live' AND expires_at <= $1 AND id IN (
                                SELECT id FROM pastes WHERE state = 'live' AND expires_at <= $1 LIMIT $3)
                         RETURNING id",
                    )
                    .bind(now)
                    .bind(TombstoneReason::Expired.as_str())
                    .bind(i64::from(limit))
                    .fetch_all(conn),
                )
            })
            .await?;
        ids.iter().map(|id| PasteId::parse(id).map_err(|e| PasteStoreError::Corrupt(e.to_string()))).collect()
    }
}

impl PasteStore {
    /// Deletes up to `limit` tombstones older than `min_age`. A tombstone only
    /// has to outlive every create that could still carry its id: the key
    /// that minted it is retired after 25 h, and no gateway call outlives its
    /// 2 s budget, so the callers keep [`MIN_TOMBSTONE_AGE`] or more.
    pub async fn purge_tombstones(&self, min_age: std::time::Duration, limit: u32) -> Result<u64, PasteStoreError> {
        let before = to_millis(pastebin_core::saturating_ago(self.clock.now(), min_age.max(MIN_TOMBSTONE_AGE)));
        let deleted = self
            .db
            .execute(
                sqlx::query(
                    "DELETE FROM pastes
                      WHERE state = 'tombstoned' AND tombstoned_at < $1 AND id IN (
                            SELECT id FROM pastes WHERE state = 'tombstoned' AND tombstoned_at < $1 LIMIT $2)",
                )
                .bind(before)
                .bind(i64::from(limit)),
            )
            .await?;
        Ok(deleted)
    }
}

/// The youngest a tombstone may be when purged: the 25 h key retention plus
/// an hour of margin.
pub const MIN_TOMBSTONE_AGE: std::time::Duration = std::time::Duration::from_secs(26 * 3600);

/// Which rows hold open reports (reported and not all dismissed, live,
/// unexpired at `$1`) in the
/// `owned` slots: the condition, with the id prefixes it binds from `$first`
/// (an id's first two characters name its slot).
fn open_reports_in(owned: SlotRange, first: usize) -> (String, Vec<String>) {
    let prefixes = PasteId::slot_prefixes_of(owned);
    let condition = format!(
        "report_count > 0 AND report_count > dismissed_reports AND state = 'live' AND expires_at > $1
         AND substr(id, 1, 2) IN ({})",
        placeholders(prefixes.len(), |i| format!("${}", i + first))
    );
    (condition, prefixes)
}

/// An id's fate from its row's state; `None` when there is no row.
fn fate_of(state: Option<&str>) -> Result<Option<IdFate>, PasteStoreError> {
    match state {
        None => Ok(None),
        Some("live") => Ok(Some(IdFate::Live)),
        Some("tombstoned") => Ok(Some(IdFate::Tombstoned)),
        Some(other) => Err(PasteStoreError::Corrupt(format!("state {other:?}"))),
    }
}

fn paste_from_row(row: &AnyRow) -> Result<PasteRow, PasteStoreError> {
    let corrupt = |what: &str| PasteStoreError::Corrupt(what.to_owned());
    let mut content_sha256 = [0u8; 32];
    hex::decode_to_slice(row.try_get::<String, _>("content_sha256")?, &mut content_sha256)
        .map_err(|_| corrupt("content_sha256"))?;
    Ok(PasteRow {
        id: PasteId::parse(&row.try_get::<String, _>("id")?).map_err(|_| corrupt("id"))?,
        created_at: from_millis(row.try_get("created_at")?),
        expires_at: from_millis(row.try_get("expires_at")?),
        size: u64::try_from(row.try_get::<i64, _>("size")?).map_err(|_| corrupt("size"))?,
        content_sha256,
        attributes: attributes_from_row(row)?,
    })
}

fn keyed_from_row(row: &AnyRow) -> Result<KeyedPaste, PasteStoreError> {
    let corrupt = |what: &str| PasteStoreError::Corrupt(what.to_owned());
    let state: String = row.try_get("state")?;
    let request_hash = row.try_get::<Option<String>, _>("request_sha256")?.and_then(|hex| RequestHash::from_hex(&hex));
    Ok(KeyedPaste {
        id: PasteId::parse(&row.try_get::<String, _>("id")?).map_err(|_| corrupt("id"))?,
        fate: fate_of(Some(&state))?.ok_or_else(|| corrupt("state"))?,
        request_hash: request_hash.ok_or_else(|| corrupt("request_sha256"))?,
        created_at: from_millis(row.try_get("created_at")?),
        expires_at: from_millis(row.try_get::<Option<i64>, _>("expires_at")?.ok_or_else(|| corrupt("expires_at"))?),
    })
}

fn attributes_from_row(row: &AnyRow) -> Result<PasteAttributes, PasteStoreError> {
    let text = |column: &str| row.try_get::<Option<String>, _>(column);
    let corrupt = |what: &str| PasteStoreError::Corrupt(what.to_owned());
    Ok(PasteAttributes {
        media_type: text("media_type")?.map(|t| MediaType::parse(&t)).transpose().map_err(|_| corrupt("media_type"))?,
        file_name: text("file_name")?.map(|n| FileName::parse(&n)).transpose().map_err(|_| corrupt("file_name"))?,
        language: text("language")?.map(|l| Language::parse(&l)).transpose().map_err(|_| corrupt("language"))?,
        burn_after_reading: row.try_get::<i64, _>("burn_after_reading")? == 1,
        sealed: row.try_get::<i64, _>("sealed")? == 1,
    })
}
