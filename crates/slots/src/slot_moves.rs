//! The shard's half of a slot move (docs/design.md#moving-slots): the
//! `SlotMoves` gRPC service that K and P both serve beside their own, over
//! the one table each moves. Rows travel as their columns' values in JSON,
//! so the same code copies, verifies and deletes keys and pastes; each shard
//! only says which table, which columns and how a row's id names its slot.

use std::collections::BTreeMap;

use pastebin_core::{Clock, OwnedSlots, PasteId, Slot, SlotRange};
use pastebin_proto::shard::v1::{self as pb, slot_moves_server::SlotMoves};
use sha2::{Digest, Sha256};
use sqlx::{any::AnyRow, AssertSqlSafe, Column, Row};
use tonic::{Request, Response, Status};

use pastebin_handover::{Call, Effect, Fence, Identity, Record, Request as MoveRequest, Role, Step};

use pastebin_runtime::db::{placeholders, Database};
use pastebin_topology::ShardStep;

use crate::shard_slots::{move_from_pb, move_to_pb, span_range, Applied, ShardSlots, IMPORT_FENCE};

/// The target committed its take and has not answered it (a crash here
/// loses the answer, not the take).
pub const AFTER_TAKE_COMMIT: &str = "after_take_commit";

/// A column of a moved table, and how its values are read and written.
#[derive(Debug, Clone, Copy)]
pub enum ColumnType {
    Text,
    Integer,
}

/// The one table a shard moves, described for the generic copy.
#[derive(Debug)]
pub struct MovedTable {
    pub table: &'static str,
    /// The primary key; rows are paged in its order.
    pub id: &'static str,
    /// The state column the summary and the digests count by.
    pub state: &'static str,
    /// The states a row may be in, in the order they are reported.
    pub states: &'static [&'static str],
    /// Every column of the table. A table with a column missing here is
    /// refused for moves: a copy that dropped a column would lose data.
    pub columns: &'static [(&'static str, ColumnType)],
    /// The slot a row's id is in (`None`: an id that names no slot).
    pub slot_of: fn(&str) -> Option<Slot>,
    /// The column whose first two characters encode the row's slot (a paste
    /// id), indexed by (prefix, …) in the schema: rows are read slot by slot.
    pub slot_column: &'static str,
}

/// Rows per INSERT of an import: 250 rows of the widest moved table (P's,
/// 20 columns: 5,000 bound parameters) stay far below SQLite's (32,766)
/// and PostgreSQL's (65,535) limits on bound parameters.
const INSERT_CHUNK: usize = 250;

/// The largest page of rows asked for at once.
const MAX_PAGE: u32 = 5_000;

/// `SlotMoves` over one shard's table.
pub struct SlotMovesService {
    slots: ShardSlots,
    db: Database,
    table: &'static MovedTable,
    clock: std::sync::Arc<dyn Clock>,
}

impl SlotMovesService {
    pub fn new(slots: ShardSlots, db: Database, table: &'static MovedTable, clock: std::sync::Arc<dyn Clock>) -> Self {
        Self { slots, db, table, clock }
    }

    pub fn into_server(self) -> pb::slot_moves_server::SlotMovesServer<Self> {
        let stale = self.slots.take_stale_copies();
        if !stale.is_empty() {
            let service =
                Self { slots: self.slots.clone(), db: self.db.clone(), table: self.table, clock: self.clock.clone() };
            tokio::spawn(async move { service.delete_stale_copies(stale).await });
        }
        pb::slot_moves_server::SlotMovesServer::new(self)
    }

    /// The rows a restored source still has of slots a finished move gave
    /// away: never served (the topology grants them elsewhere), deleted as
    /// the move's last step would have (docs/design.md#ownership-on-etcd).
    async fn delete_stale_copies(&self, stale: Vec<SlotRange>) {
        for slots in stale {
            // Taken up by a move since the start that found them stale: its own steps decide.
            let ownership = self.slots.ownership().await;
            let moving = ownership.active.as_ref().map(|active| active.identity.slots);
            let shares = |held: OwnedSlots| held.overlap(slots.into()) != OwnedSlots::Nothing;
            if shares(ownership.serves()) || moving.is_some_and(|moving| shares(moving.into())) {
                tracing::warn!(%slots, "stale copies not deleted: this shard holds these slots again");
                continue;
            }
            match self.delete_all(slots).await {
                Ok(deleted) => {
                    tracing::warn!(%slots, deleted, "deleted the stale copies of slots a finished move gave away")
                }
                Err(error) => tracing::error!(%slots, %error, "cannot delete stale copies: they stay, never served"),
            }
        }
    }

    fn now_ms(&self) -> i64 {
        pastebin_core::to_millis(self.clock.now())
    }

    /// The shard's ranges and moves. `last` is the move `asked` names (by
    /// id, or as typed: slots, source and target) when this shard finished
    /// it, else the move it finished last.
    async fn status(&self, asked: &pb::MoveStatusRequest) -> Result<pb::MoveStatusResponse, Status> {
        let ownership = self.slots.ownership().await;
        let asked = match (asked.move_id.as_str(), &asked.slots) {
            ("", None) => None,
            ("", Some(slots)) => {
                let slots = span_range(Some(slots)).map_err(bad)?;
                self.slots.last_finished_like(slots, &asked.source, &asked.target).await.map_err(database)?
            }
            (id, _) => self.slots.finished_move(id).await.map_err(database)?,
        };
        let last = match asked {
            Some(record) => Some(record),
            None => self.slots.last_finished().await.map_err(database)?,
        };
        Ok(pb::MoveStatusResponse {
            shard: Some(self.slots.description(self.now_ms()).await),
            r#move: ownership.active.as_ref().map(move_to_pb),
            last: last.as_ref().map(move_to_pb),
        })
    }

    /// `call` on this shard as the move call `sent` names it, checked and
    /// applied (`ShardSlots::apply`: every guard of the handover).
    async fn apply(&self, sent: Option<&pb::MoveCall>, call: Call) -> Result<Applied, Status> {
        Ok(self.slots.apply(self.move_request(sent, call)?).await?)
    }

    fn move_request(&self, sent: Option<&pb::MoveCall>, call: Call) -> Result<MoveRequest, Status> {
        let sent = sent.ok_or_else(|| bad("no move call"))?;
        if [&sent.move_id, &sent.source, &sent.target, &sent.holder].iter().any(|field| field.trim().is_empty()) {
            return Err(bad("a move call names its move id, source, target and holder"));
        }
        Ok(MoveRequest {
            identity: Identity {
                id: sent.move_id.clone(),
                slots: span_range(sent.slots.as_ref()).map_err(bad)?,
                source: sent.source.clone(),
                target: sent.target.clone(),
            },
            fence: Fence { epoch: sent.epoch, holder: sent.holder.clone(), lease_ms: i64::from(sent.lease_ms) },
            now_ms: self.now_ms(),
            call,
        })
    }

    /// Under a topology, refuses `step` unless the topology records it for
    /// the move `sent` names (docs/design.md#ownership-on-etcd).
    async fn authorized(&self, sent: Option<&pb::MoveCall>, step: ShardStep) -> Result<(), Status> {
        let Some(granted) = self.slots.granted() else { return Ok(()) };
        let id = sent.map(|call| call.move_id.as_str()).unwrap_or_default();
        granted.authorize(|topology| topology.allows(id, step).map_err(|refused| refused.to_string())).await
    }

    /// The record of a move call that went through: the moving slots.
    fn moving(applied: &Applied) -> Result<Record, Status> {
        applied.record.clone().ok_or_else(|| Status::failed_precondition("no move is recorded here"))
    }

    /// Up to `limit` rows of `slots` after the row `after` ("" for the
    /// first page), and the id to ask the next page after (`None`: no row is
    /// left). One query through the table's index on the slot prefix: rows
    /// come in (prefix, id) order, both compared by the database itself, so
    /// the pages do not depend on its collation.
    async fn moving_rows(
        &self,
        slots: SlotRange,
        after: &str,
        limit: u32,
    ) -> Result<(Vec<pb::MovedRow>, Option<String>), Status> {
        let t = self.table;
        let cursor = match (t.slot_of)(after) {
            Some(slot) if slots.contains(slot) => Some((PasteId::slot_prefix_of(slot), after.to_owned())),
            _ if after.is_empty() => None,
            _ => return Err(bad(format!("the cursor {after:?} is not a row of slots {slots}"))),
        };
        let prefixes = PasteId::slot_prefixes_of(slots);
        let prefix = format!("substr({}, 1, 2)", t.slot_column);
        let after_cursor = match cursor {
            Some(_) => {
                let (p, id) = (prefixes.len() + 1, prefixes.len() + 2);
                format!("AND ({prefix} > ${p} OR ({prefix} = ${p} AND {} > ${id}))", t.id)
            }
            None => String::new(),
        };
        let sql = format!(
            "SELECT {} FROM {} WHERE {prefix} IN ({}) {after_cursor} ORDER BY {prefix}, {} LIMIT {limit}",
            t.columns.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", "),
            t.table,
            placeholders(prefixes.len(), |i| format!("${}", i + 1)),
            t.id,
        );
        let mut query = sqlx::query(AssertSqlSafe(sql));
        for prefix in prefixes {
            query = query.bind(prefix);
        }
        if let Some((prefix, id)) = cursor {
            query = query.bind(prefix).bind(id);
        }
        let rows = self.db.read(|pool| query.fetch_all(pool)).await.map_err(database)?;
        let moved = rows.iter().map(|row| self.encode(row)).collect::<Result<Vec<_>, _>>()?;
        let next = (moved.len() == limit as usize).then(|| moved.last().map(|row| row.id.clone())).flatten();
        Ok((moved, next))
    }

    /// The page an export asks for: the rows it names by id (then nothing
    /// follows), or the next page after its cursor.
    async fn page(
        &self,
        slots: SlotRange,
        request: &pb::ExportRequest,
    ) -> Result<(Vec<pb::MovedRow>, Option<String>), Status> {
        if request.ids.is_empty() {
            return self.moving_rows(slots, &request.after_id, request.limit.clamp(1, MAX_PAGE)).await;
        }
        if request.ids.len() > MAX_PAGE as usize {
            return Err(bad(format!("at most {MAX_PAGE} rows by id at once")));
        }
        Ok((self.rows_by_id(slots, &request.ids).await?, None))
    }

    /// The rows of `ids` that exist, each checked to be in `slots` (the
    /// catch-up after the freeze asks for the rows that changed).
    async fn rows_by_id(&self, slots: SlotRange, ids: &[String]) -> Result<Vec<pb::MovedRow>, Status> {
        self.check_in(slots, ids.iter())?;
        let t = self.table;
        let mut moved = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(INSERT_CHUNK) {
            let sql = format!(
                "SELECT {} FROM {} WHERE {} IN ({})",
                t.columns.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", "),
                t.table,
                t.id,
                placeholders(chunk.len(), |i| format!("${}", i + 1)),
            );
            let query = chunk.iter().fold(sqlx::query(AssertSqlSafe(sql)), |query, id| query.bind(id.clone()));
            let rows = self.db.read(|pool| query.fetch_all(pool)).await.map_err(database)?;
            for row in &rows {
                moved.push(self.encode(row)?);
            }
        }
        Ok(moved)
    }

    /// Refuses ids outside the moving slots: a move never touches another slot's rows.
    fn check_in<'i>(&self, slots: SlotRange, mut ids: impl Iterator<Item = &'i String>) -> Result<(), Status> {
        match ids.find(|id| !(self.table.slot_of)(id).is_some_and(|slot| slots.contains(slot))) {
            Some(foreign) => Err(bad(format!("row {foreign} is not in the moving slots {slots}"))),
            None => Ok(()),
        }
    }

    fn encode(&self, row: &AnyRow) -> Result<pb::MovedRow, Status> {
        let mut values = Vec::with_capacity(self.table.columns.len());
        for (index, (_, kind)) in self.table.columns.iter().enumerate() {
            let value = match kind {
                ColumnType::Text => row.try_get::<Option<String>, _>(index).map(serde_json::Value::from),
                ColumnType::Integer => row.try_get::<Option<i64>, _>(index).map(serde_json::Value::from),
            };
            values.push(value.map_err(database)?);
        }
        let id = row.try_get::<String, _>(self.table.id).map_err(database)?;
        let state = row.try_get::<String, _>(self.table.state).map_err(database)?;
        let record = serde_json::to_vec(&values).map_err(|e| Status::internal(e.to_string()))?;
        Ok(pb::MovedRow { id, state, record })
    }

    /// Refuses a move of a table with columns this build does not copy.
    async fn check_columns(&self) -> Result<(), Status> {
        let sql = format!("SELECT * FROM {} LIMIT 1", self.table.table);
        let read = sqlx::query(AssertSqlSafe(sql));
        let Some(row) = self.db.read(|pool| read.fetch_optional(pool)).await.map_err(database)? else {
            return Ok(());
        };
        let known: Vec<&str> = self.table.columns.iter().map(|(name, _)| *name).collect();
        match row.columns().iter().find(|column| !known.contains(&column.name())) {
            Some(unknown) => Err(Status::failed_precondition(format!(
                "table {} has a column {} that this build does not copy: upgrade every shard before moving slots",
                self.table.table,
                unknown.name()
            ))),
            None => Ok(()),
        }
    }

    /// Deletes every row of `slots` (the copies an abandoned attempt left on
    /// a target, or the moved rows on a source), page by page.
    async fn delete_all(&self, slots: SlotRange) -> Result<u64, Status> {
        let (mut after, mut deleted) = (String::new(), 0);
        loop {
            let (rows, last) = self.moving_rows(slots, &after, MAX_PAGE).await?;
            deleted += self.delete_rows(&rows).await?;
            match last {
                Some(last) => after = last,
                None => return Ok(deleted),
            }
        }
    }

    async fn delete_rows(&self, rows: &[pb::MovedRow]) -> Result<u64, Status> {
        if rows.is_empty() {
            return Ok(0);
        }
        let ids: Vec<String> = rows.iter().map(|row| row.id.clone()).collect();
        let sql = format!(
            "DELETE FROM {} WHERE {} IN ({})",
            self.table.table,
            self.table.id,
            placeholders(ids.len(), |i| format!("${}", i + 1))
        );
        self.db
            .write(move |conn| {
                Box::pin(async move {
                    let mut delete = sqlx::query(AssertSqlSafe(sql));
                    for id in ids {
                        delete = delete.bind(id);
                    }
                    Ok(delete.execute(&mut *conn).await?.rows_affected())
                })
            })
            .await
            .map_err(database)
    }

    /// Stores `rows` (a row already here is replaced: it may have changed
    /// on the source since an earlier page copied it) and deletes `gone`,
    /// in one write.
    async fn import(
        &self,
        fence: &MoveRequest,
        rows: Vec<pb::MovedRow>,
        gone: Vec<String>,
    ) -> Result<(u64, u64), Status> {
        let t = self.table;
        let mut decoded = Vec::with_capacity(rows.len());
        for row in rows {
            let values: Vec<serde_json::Value> = serde_json::from_slice(&row.record)
                .map_err(|e| Status::invalid_argument(format!("row {}: {e}", row.id)))?;
            if values.len() != t.columns.len() {
                return Err(Status::invalid_argument(format!("row {} has {} columns", row.id, values.len())));
            }
            decoded.push(values);
        }
        let names = t.columns.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ");
        let replace = t
            .columns
            .iter()
            .filter(|(name, _)| *name != t.id)
            .map(|(name, _)| format!("{name} = excluded.{name}"))
            .collect::<Vec<_>>()
            .join(", ");
        let width = t.columns.len();
        let (id, epoch, holder) = (fence.identity.id.clone(), fence.fence.epoch, fence.fence.holder.clone());
        let epoch = i64::try_from(epoch).unwrap_or(i64::MAX);
        let written = self
            .db
            .write(move |conn| {
                Box::pin(async move {
                    let fenced =
                        sqlx::query(IMPORT_FENCE).bind(&id).bind(epoch).bind(&holder).execute(&mut *conn).await?;
                    if fenced.rows_affected() != 1 {
                        return Ok(None);
                    }
                    let mut deleted = 0;
                    for chunk in gone.chunks(INSERT_CHUNK) {
                        let sql = format!(
                            "DELETE FROM {} WHERE {} IN ({})",
                            t.table,
                            t.id,
                            placeholders(chunk.len(), |i| format!("${}", i + 1))
                        );
                        let delete =
                            chunk.iter().fold(sqlx::query(AssertSqlSafe(sql)), |query, id| query.bind(id.clone()));
                        deleted += delete.execute(&mut *conn).await?.rows_affected();
                    }
                    let mut inserted = 0;
                    // Many rows per statement: one round trip per chunk, not per row.
                    for chunk in decoded.chunks(INSERT_CHUNK) {
                        let tuples = (0..chunk.len())
                            .map(|row| format!("({})", placeholders(width, |i| format!("${}", row * width + i + 1))))
                            .collect::<Vec<_>>()
                            .join(", ");
                        let sql = format!(
                            "INSERT INTO {} ({names}) VALUES {tuples} ON CONFLICT ({}) DO UPDATE SET {replace}",
                            t.table, t.id
                        );
                        let mut insert = sqlx::query(AssertSqlSafe(sql));
                        for values in chunk {
                            for ((_, kind), value) in t.columns.iter().zip(values) {
                                insert = match kind {
                                    ColumnType::Text => insert.bind(value.as_str().map(str::to_owned)),
                                    ColumnType::Integer => insert.bind(value.as_i64()),
                                };
                            }
                        }
                        inserted += insert.execute(&mut *conn).await?.rows_affected();
                    }
                    Ok(Some((inserted, deleted)))
                })
            })
            .await
            .map_err(database)?;
        written.ok_or_else(|| {
            Status::failed_precondition(
                "this import's ctl run was taken over (or the move went on) while it waited to be written: nothing \
                 was written; the newer run finishes the move",
            )
        })
    }
}

/// Copy progress for `/metrics` (`pastebin_slot_move_rows_total`).
fn count_rows(direction: &'static str, rows: u64) {
    metrics::counter!(pastebin_runtime::metrics::SLOT_MOVE_ROWS, "direction" => direction).increment(rows);
}

fn database(error: sqlx::Error) -> Status {
    Status::unavailable(format!("shard database: {error}"))
}

fn bad(reason: impl std::fmt::Display) -> Status {
    Status::invalid_argument(reason.to_string())
}

/// Rows and an order-independent checksum per state: the XOR of the
/// SHA-256 of each row's id, state and record.
#[derive(Debug, Default)]
struct Digests(BTreeMap<String, (u64, [u8; 32])>);

/// The SHA-256 of a row's id, state and record: what the digests add up,
/// and what the catch-up compares row by row.
fn row_hash(row: &pb::MovedRow) -> [u8; 32] {
    let mut hash = Sha256::new();
    for part in [row.id.as_bytes(), row.state.as_bytes(), &row.record] {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    hash.finalize().into()
}

impl Digests {
    fn add(&mut self, row: &pb::MovedRow) {
        let entry = self.0.entry(row.state.clone()).or_insert((0, [0; 32]));
        entry.0 += 1;
        for (sum, byte) in entry.1.iter_mut().zip(row_hash(row)) {
            *sum ^= byte;
        }
    }

    fn into_pb(self, states: &[&str]) -> Vec<pb::StateDigest> {
        let mut by_state = self.0;
        let mut digests: Vec<pb::StateDigest> = states
            .iter()
            .map(|state| {
                let (rows, checksum) = by_state.remove(*state).unwrap_or((0, [0; 32]));
                pb::StateDigest { state: (*state).to_owned(), rows, checksum: checksum.to_vec() }
            })
            .collect();
        digests.extend(by_state.into_iter().map(|(state, (rows, checksum))| pb::StateDigest {
            state,
            rows,
            checksum: checksum.to_vec(),
        }));
        digests
    }
}

#[tonic::async_trait]
impl SlotMoves for SlotMovesService {
    async fn move_status(
        &self,
        request: Request<pb::MoveStatusRequest>,
    ) -> Result<Response<pb::MoveStatusResponse>, Status> {
        Ok(Response::new(self.status(&request.into_inner()).await?))
    }

    async fn prepare_import(&self, request: Request<pb::MoveCall>) -> Result<Response<pb::MoveStatusResponse>, Status> {
        self.authorized(Some(request.get_ref()), ShardStep::PrepareImport).await?;
        self.check_columns().await?;
        let applied = self.apply(Some(request.get_ref()), Call::PrepareImport).await?;
        if applied.has(&Effect::ClearCopies) {
            let slots = Self::moving(&applied)?.identity.slots;
            let stale = self.delete_all(slots).await?;
            if stale > 0 {
                tracing::warn!(move_id = %request.get_ref().move_id, %slots, stale, "deleted rows an abandoned move left here");
            }
        }
        Ok(Response::new(self.status(&pb::MoveStatusRequest::default()).await?))
    }

    async fn prepare_export(&self, request: Request<pb::MoveCall>) -> Result<Response<pb::MoveStatusResponse>, Status> {
        self.check_columns().await?;
        self.apply(Some(request.get_ref()), Call::PrepareExport).await?;
        Ok(Response::new(self.status(&pb::MoveStatusRequest::default()).await?))
    }

    async fn freeze(&self, request: Request<pb::MoveCall>) -> Result<Response<pb::MoveStatusResponse>, Status> {
        self.authorized(Some(request.get_ref()), ShardStep::Freeze).await?;
        self.apply(Some(request.get_ref()), Call::Freeze).await?;
        Ok(Response::new(self.status(&pb::MoveStatusRequest::default()).await?))
    }

    async fn export_rows(&self, request: Request<pb::ExportRequest>) -> Result<Response<pb::ExportResponse>, Status> {
        let request = request.into_inner();
        let moving = Self::moving(&self.apply(request.call.as_ref(), Call::Read(Some(Role::Source))).await?)?;
        let (rows, last) = self.page(moving.identity.slots, &request).await?;
        count_rows("exported", rows.len() as u64);
        Ok(Response::new(pb::ExportResponse {
            rows,
            finished: last.is_none(),
            last_scanned_id: last.unwrap_or_default(),
        }))
    }

    async fn import_rows(&self, request: Request<pb::ImportRequest>) -> Result<Response<pb::ImportResponse>, Status> {
        let request = request.into_inner();
        let fence = self.move_request(request.call.as_ref(), Call::Import)?;
        let moving = Self::moving(&self.slots.apply(fence.clone()).await?)?;
        self.check_in(moving.identity.slots, request.rows.iter().map(|row| &row.id).chain(&request.deleted_ids))?;
        let (imported, deleted) = self.import(&fence, request.rows, request.deleted_ids).await?;
        count_rows("imported", imported);
        Ok(Response::new(pb::ImportResponse { imported, deleted }))
    }

    async fn row_hashes(&self, request: Request<pb::ExportRequest>) -> Result<Response<pb::RowHashesResponse>, Status> {
        let request = request.into_inner();
        let moving = Self::moving(&self.apply(request.call.as_ref(), Call::Read(None)).await?)?;
        let (rows, last) = self.page(moving.identity.slots, &request).await?;
        let rows = rows
            .iter()
            .map(|row| pb::RowHash { id: row.id.clone(), state: row.state.clone(), hash: row_hash(row).to_vec() })
            .collect();
        Ok(Response::new(pb::RowHashesResponse {
            rows,
            finished: last.is_none(),
            last_scanned_id: last.unwrap_or_default(),
        }))
    }

    async fn digest(&self, request: Request<pb::MoveCall>) -> Result<Response<pb::DigestResponse>, Status> {
        let moving = Self::moving(&self.apply(Some(request.get_ref()), Call::Read(None)).await?)?;
        let (mut after, mut digests) = (String::new(), Digests::default());
        loop {
            let (rows, last) = self.moving_rows(moving.identity.slots, &after, MAX_PAGE).await?;
            rows.iter().for_each(|row| digests.add(row));
            match last {
                Some(last) => after = last,
                None => break,
            }
        }
        Ok(Response::new(pb::DigestResponse { states: digests.into_pb(self.table.states) }))
    }

    async fn changed_rows(
        &self,
        request: Request<pb::ChangedRowsRequest>,
    ) -> Result<Response<pb::ChangedRowsResponse>, Status> {
        let request = request.into_inner();
        let limit = request.limit.clamp(1, MAX_PAGE) as usize;
        let read = self.move_request(request.call.as_ref(), Call::Read(Some(Role::Source)))?;
        let changed = self.slots.changed_rows(read, request.since, limit).await?;
        Ok(Response::new(pb::ChangedRowsResponse {
            ids: changed.ids,
            up_to: changed.up_to,
            more: changed.more,
            complete: changed.complete,
        }))
    }

    async fn release(&self, request: Request<pb::MoveCall>) -> Result<Response<pb::MoveStatusResponse>, Status> {
        self.authorized(Some(request.get_ref()), ShardStep::Release).await?;
        let token = pastebin_core::random_name(16);
        let slots = span_range(request.get_ref().slots.as_ref()).map_err(bad)?;
        // The lost-commits window of these slots leaves with them (docs/design.md#adopting-after-a-k-loss).
        let search_first = self.slots.window_for(slots, self.now_ms());
        self.apply(Some(request.get_ref()), Call::Release { token, search_first }).await?;
        Ok(Response::new(self.status(&pb::MoveStatusRequest::default()).await?))
    }

    async fn take(&self, request: Request<pb::TakeRequest>) -> Result<Response<pb::MoveStatusResponse>, Status> {
        self.authorized(request.get_ref().call.as_ref(), ShardStep::Take).await?;
        let request = request.into_inner();
        let receipt = move_from_pb(request.receipt.as_ref().ok_or_else(|| bad("no release receipt"))?).map_err(bad)?;
        // The lost-commits window that leaves the source with the slots is
        // held here before this shard serves them, and again by every rerun
        // (`hold_window` stores it once): a take whose answer was lost still
        // leaves it held (docs/design.md#adopting-after-a-k-loss).
        if let Some((since, until)) = receipt.search_first {
            self.slots.hold_window(receipt.identity.slots, since, until).await.map_err(database)?;
        }
        self.apply(request.call.as_ref(), Call::Take { receipt }).await?;
        pastebin_runtime::failpoints::hit(AFTER_TAKE_COMMIT).await;
        Ok(Response::new(self.status(&pb::MoveStatusRequest::default()).await?))
    }

    async fn delete_moved(
        &self,
        request: Request<pb::DeleteMovedRequest>,
    ) -> Result<Response<pb::DeleteMovedResponse>, Status> {
        self.authorized(request.get_ref().call.as_ref(), ShardStep::DeleteCopies).await?;
        let request = request.into_inner();
        let taken = move_from_pb(request.taken.as_ref().ok_or_else(|| bad("no record of the take"))?).map_err(bad)?;
        let applied = self.apply(request.call.as_ref(), Call::DeleteCopies { taken: taken.clone() }).await?;
        let moving = Self::moving(&applied)?;
        // A rerun after the last page: already finished.
        if applied.has(&Effect::AlreadyDone) || moving.step == Step::Done {
            return Ok(Response::new(pb::DeleteMovedResponse { deleted: 0, finished: true }));
        }
        // From the first slot each time: the rows the last call deleted are gone.
        let (batch, rest) = self.moving_rows(moving.identity.slots, "", request.limit.clamp(1, MAX_PAGE)).await?;
        let finished = rest.is_none();
        let deleted = self.delete_rows(&batch).await?;
        count_rows("deleted", deleted);
        if finished {
            self.apply(request.call.as_ref(), Call::Finish { taken }).await?;
        }
        Ok(Response::new(pb::DeleteMovedResponse { deleted, finished }))
    }

    async fn abandon(&self, request: Request<pb::MoveCall>) -> Result<Response<pb::MoveStatusResponse>, Status> {
        self.authorized(Some(request.get_ref()), ShardStep::Abandon).await?;
        self.apply(Some(request.get_ref()), Call::Abandon).await?;
        Ok(Response::new(self.status(&pb::MoveStatusRequest::default()).await?))
    }

    async fn undo(&self, request: Request<pb::MoveCall>) -> Result<Response<pb::MoveStatusResponse>, Status> {
        self.authorized(Some(request.get_ref()), ShardStep::Abandon).await?;
        let applied = self.apply(Some(request.get_ref()), Call::Undo).await?;
        if applied.has(&Effect::ClearCopies) {
            self.delete_all(Self::moving(&applied)?.identity.slots).await?;
        }
        tracing::warn!(move_id = %request.get_ref().move_id, "slot move undone here");
        Ok(Response::new(self.status(&pb::MoveStatusRequest::default()).await?))
    }

    async fn stamp_marker(&self, request: Request<pb::MoveCall>) -> Result<Response<pb::StampMarkerResponse>, Status> {
        let granted = self.slots.granted().ok_or_else(|| {
            Status::failed_precondition("this shard runs without --topology: it has no marker to stamp")
        })?;
        self.authorized(Some(request.get_ref()), ShardStep::StampMarker).await?;
        if request.get_ref().target != granted.address {
            return Err(bad(format!("{} is not the target of this move", granted.address)));
        }
        let pool = self.db.pool().clone();
        let marker =
            crate::granted::stamp(&pool, granted).await.map_err(|error| Status::unavailable(error.to_string()))?;
        Ok(Response::new(pb::StampMarkerResponse { marker }))
    }

    async fn renew(&self, request: Request<pb::MoveCall>) -> Result<Response<pb::MoveStatusResponse>, Status> {
        self.apply(Some(request.get_ref()), Call::Read(None)).await?;
        Ok(Response::new(self.status(&pb::MoveStatusRequest::default()).await?))
    }
}

/// The gRPC service name, for health reporting.
pub const SERVICE_NAME: &str = "pastebin.shard.v1.SlotMoves";
