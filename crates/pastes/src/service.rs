use pastebin_core::{to_millis, DeleteToken, DeleteTokenHash, PasteId, ReportReason, MAX_TAKEDOWN_REASON_CHARS};
use pastebin_proto::{pastes::v1 as pb, shard::v1 as shard_pb};
use pastebin_runtime::metrics as names;
use pastebin_runtime::operator::operator_of;
use pastebin_runtime::{
    failpoints::{self, AFTER_P_DELETE},
    grpc::{store_status, StoreFailure},
};
use pastebin_slots::shard_slots::ShardSlots;
use tonic::{Request, Response, Status};

use crate::{
    convert, BurnClaim, DeleteOutcome, DismissOutcome, PasteRead, PasteStore, PasteStoreError, Report, ReportOrder,
    TakedownOutcome,
};

/// The most rows one `FindByKey` returns: a key makes one paste per life,
/// and a life ends only by a K loss or the 25 h retention.
const MAX_KEYED: u32 = 8;
/// The most ids one `ResolveBatch` takes.
const MAX_BATCH: usize = 1_000;
const MAX_PAGE: u32 = 10_000;

/// Shard P over gRPC. Every field is validated before storage is touched,
/// an id whose slot is outside `slots` is FAILED_PRECONDITION, and a write
/// for a slot frozen by a move is UNAVAILABLE, "not executed"
/// (docs/design.md#moving-slots).
pub struct PasteServiceImpl {
    store: PasteStore,
    slots: ShardSlots,
}

impl PasteServiceImpl {
    pub fn new(store: PasteStore, slots: ShardSlots) -> Self {
        Self { store, slots }
    }

    /// `id`, for a read, refused unless this shard owns its slot.
    async fn owned(&self, id: PasteId) -> Result<PasteId, Status> {
        self.slots.readable(id.slot()).await?;
        Ok(id)
    }

    /// A batch of ids, each valid and owned. One id outside the range refuses
    /// the whole batch: the caller's slot map is wrong, and no fence goes up
    /// for any of them.
    async fn owned_batch(&self, raw: &[String]) -> Result<Vec<PasteId>, Status> {
        let ids = valid_batch(raw)?;
        for id in &ids {
            self.slots.readable(id.slot()).await?;
        }
        Ok(ids)
    }

    pub fn into_server(self) -> pb::paste_service_server::PasteServiceServer<Self> {
        pb::paste_service_server::PasteServiceServer::new(self)
    }
}

impl StoreFailure for PasteStoreError {
    fn database(&self) -> Option<&sqlx::Error> {
        match self {
            PasteStoreError::Database(error) => Some(error),
            _ => None,
        }
    }
}

impl From<PasteStoreError> for Status {
    fn from(error: PasteStoreError) -> Self {
        match error {
            PasteStoreError::Busy(_) => Status::unavailable(error.to_string()),
            error => store_status(&error),
        }
    }
}

/// Reads and deletes answer a malformed id exactly like a missing one.
fn id_lookup(raw: &str) -> Result<PasteId, Status> {
    PasteId::parse(raw).map_err(|_| not_found())
}

fn valid_batch(raw: &[String]) -> Result<Vec<PasteId>, Status> {
    if raw.len() > MAX_BATCH {
        return Err(Status::invalid_argument("at most 1000 ids per batch"));
    }
    raw.iter().map(|id| Ok(convert::id(id)?)).collect()
}

fn not_found() -> Status {
    Status::not_found("no such paste")
}

#[tonic::async_trait]
impl pb::paste_service_server::PasteService for PasteServiceImpl {
    async fn insert(&self, request: Request<pb::InsertRequest>) -> Result<Response<pb::InsertResponse>, Status> {
        let paste = convert::new_paste(request.into_inner())?;
        let (permit, store) = (self.slots.writable([&paste.id]).await?, self.store.clone());
        let outcome = permit.complete(async move { store.insert(&paste).await }).await??;
        Ok(Response::new(convert::outcome_to_pb(outcome)))
    }

    async fn get(&self, request: Request<pb::GetRequest>) -> Result<Response<pb::Paste>, Status> {
        let id = self.owned(id_lookup(&request.into_inner().id)?).await?;
        match self.store.read(&id).await? {
            PasteRead::Live(row) => Ok(Response::new(convert::paste_to_pb(row))),
            PasteRead::RemovedByOperator { reason } => Err(convert::removed_status(&reason)),
            PasteRead::Missing => Err(not_found()),
        }
    }

    async fn take_down(&self, request: Request<pb::TakeDownRequest>) -> Result<Response<pb::TakeDownResponse>, Status> {
        let operator = operator_of(&request, "TakeDown")?;
        let request = request.into_inner();
        let id = id_lookup(&request.id)?;
        let reason = request.reason.trim();
        if reason.is_empty() || reason.chars().count() > MAX_TAKEDOWN_REASON_CHARS {
            return Err(Status::invalid_argument("reason must be 1 to 500 characters"));
        }
        // Through the permit like every other write: a move waits for it to
        // commit even if this call is cancelled (docs/design.md#moving-slots).
        let (permit, store) = (self.slots.writable([&id]).await?, self.store.clone());
        let (paste, why) = (id.clone(), reason.to_owned());
        let outcome = permit.complete(async move { store.take_down(&paste, &why).await }).await??;
        if outcome == TakedownOutcome::TakenDown {
            // The audit line: who took what down and why (never the content);
            // the operator as verified, and the name the caller gave.
            tracing::warn!(
                target: "pastebin::audit",
                paste_id = %id,
                operator = %operator,
                operator_says = %request.operator,
                reason,
                "paste taken down by the operator"
            );
            metrics::counter!(names::TAKEDOWNS).increment(1);
        }
        Ok(Response::new(pb::TakeDownResponse { outcome: convert::takedown_to_pb(outcome) }))
    }

    async fn report(&self, request: Request<pb::ReportRequest>) -> Result<Response<pb::ReportResponse>, Status> {
        let request = request.into_inner();
        let id = id_lookup(&request.id)?;
        let invalid = |e: pastebin_core::ReportError| Status::invalid_argument(e.to_string());
        let reason = ReportReason::parse(&request.reason).map_err(invalid)?;
        let note = pastebin_core::report_note(Some(&request.note)).map_err(invalid)?;
        let (permit, store) = (self.slots.writable([&id]).await?, self.store.clone());
        let at = to_millis(store.clock().now());
        // Numbered by the store, which knows the paste's count.
        let report = Report { reason: reason.as_str().to_owned(), note, at, number: 0 };
        let report_count =
            permit.complete(async move { store.report(&id, report).await }).await??.ok_or_else(not_found)?;
        metrics::counter!(names::REPORTS, "reason" => reason.as_str()).increment(1);
        Ok(Response::new(pb::ReportResponse { report_count }))
    }

    async fn list_reports(
        &self,
        request: Request<pb::ListReportsRequest>,
    ) -> Result<Response<pb::ListReportsResponse>, Status> {
        let request = request.into_inner();
        if request.limit == 0 || request.limit > MAX_PAGE {
            return Err(Status::invalid_argument("limit must be 1 to 10000"));
        }
        let order = match pb::ReportOrder::try_from(request.order) {
            Ok(pb::ReportOrder::Most) => ReportOrder::Most,
            Ok(pb::ReportOrder::Newest) => ReportOrder::Newest,
            Err(_) => return Err(Status::invalid_argument("unknown order")),
        };
        // Only the slots this shard owns: each paste is listed by its one owner.
        let Some(owned) = self.slots.ownership().await.owned.range() else {
            return Ok(Response::new(pb::ListReportsResponse { pastes: Vec::new(), open_reports: 0 }));
        };
        let pastes = self.store.reported(order, request.limit, owned).await?;
        let open_reports = self.store.open_reports(owned).await?;
        Ok(Response::new(pb::ListReportsResponse {
            pastes: pastes.into_iter().map(convert::reported_to_pb).collect(),
            open_reports,
        }))
    }

    async fn dismiss_report(
        &self,
        request: Request<pb::DismissReportRequest>,
    ) -> Result<Response<pb::DismissReportResponse>, Status> {
        let operator = operator_of(&request, "DismissReport")?;
        let request = request.into_inner();
        let id = id_lookup(&request.id)?;
        let which = convert::dismissal_from_pb(request.number);
        let (permit, store) = (self.slots.writable([&id]).await?, self.store.clone());
        let paste = id.clone();
        let outcome = permit.complete(async move { store.dismiss_report(&paste, which).await }).await??;
        if let DismissOutcome::Dismissed { open_reports } = outcome {
            // The audit line: who dismissed which report (0: all of them).
            tracing::warn!(
                target: "pastebin::audit",
                paste_id = %id,
                report = request.number,
                operator = %operator,
                operator_says = %request.operator,
                open_reports,
                "report dismissed by the operator"
            );
        }
        Ok(Response::new(convert::dismissed_to_pb(outcome)))
    }

    async fn tombstone_unless_live(
        &self,
        request: Request<pb::TombstoneRequest>,
    ) -> Result<Response<pb::TombstoneResponse>, Status> {
        let id = convert::id(&request.into_inner().id)?;
        let (permit, store) = (self.slots.writable([&id]).await?, self.store.clone());
        let fate = permit.complete(async move { store.tombstone_unless_live(&id).await }).await??;
        Ok(Response::new(pb::TombstoneResponse { fate: convert::fate_to_pb(fate) }))
    }

    async fn fate(&self, request: Request<pb::TombstoneRequest>) -> Result<Response<pb::TombstoneResponse>, Status> {
        let id = self.owned(convert::id(&request.into_inner().id)?).await?;
        let fate = self.store.peek_fate(&id).await?.map(convert::fate_to_pb).unwrap_or(pb::IdFate::Unspecified.into());
        Ok(Response::new(pb::TombstoneResponse { fate }))
    }

    async fn resolve_batch(
        &self,
        request: Request<pb::ResolveBatchRequest>,
    ) -> Result<Response<pb::ResolveBatchResponse>, Status> {
        // Fencing writes: the ids of a slot a move has frozen are left
        // untouched and reported, and the rest of the batch does not wait for
        // them (docs/design.md#sweeper). An id of a slot this shard does not
        // own refuses the batch: the caller's map is stale or wrong.
        let ids = valid_batch(&request.into_inner().ids)?;
        let (permit, writable, waiting) = self.slots.writable_unless_frozen(ids, |id| id).await?;
        let store = self.store.clone();
        let fates = permit.complete(async move { store.resolve_batch(&writable).await }).await??;
        Ok(Response::new(pb::ResolveBatchResponse {
            ids: fates
                .into_iter()
                .map(|(id, fate)| pb::ResolvedId { id: id.to_string(), fate: convert::fate_to_pb(fate) })
                .collect(),
            waiting: waiting.iter().map(ToString::to_string).collect(),
        }))
    }

    async fn peek_batch(
        &self,
        request: Request<pb::ResolveBatchRequest>,
    ) -> Result<Response<pb::ResolveBatchResponse>, Status> {
        let ids = self.owned_batch(&request.into_inner().ids).await?;
        let fates = self.store.peek_batch(&ids).await?;
        Ok(Response::new(pb::ResolveBatchResponse {
            ids: fates
                .into_iter()
                .map(|(id, fate)| pb::ResolvedId {
                    id: id.to_string(),
                    fate: fate.map(convert::fate_to_pb).unwrap_or(pb::IdFate::Unspecified.into()),
                })
                .collect(),
            waiting: Vec::new(),
        }))
    }

    async fn claim_burn(&self, request: Request<pb::GetRequest>) -> Result<Response<pb::ClaimBurnResponse>, Status> {
        let id = id_lookup(&request.into_inner().id)?;
        let (permit, store) = (self.slots.writable([&id]).await?, self.store.clone());
        let claimed = permit.complete(async move { store.claim_burn(&id).await }).await?? == BurnClaim::Claimed;
        Ok(Response::new(pb::ClaimBurnResponse { claimed }))
    }

    async fn delete(&self, request: Request<pb::DeleteRequest>) -> Result<Response<pb::DeleteResponse>, Status> {
        let request = request.into_inner();
        let id = id_lookup(&request.id)?;
        let (permit, store) = (self.slots.writable([&id]).await?, self.store.clone());
        let token = DeleteToken::presented(&request.delete_token);
        match permit.complete(async move { store.delete(&id, &token).await }).await?? {
            DeleteOutcome::Deleted => {
                failpoints::hit(AFTER_P_DELETE).await;
                Ok(Response::new(pb::DeleteResponse {}))
            }
            DeleteOutcome::NotFound => Err(not_found()),
            DeleteOutcome::WrongToken => Err(Status::permission_denied("wrong delete token")),
        }
    }

    async fn list_slot(
        &self,
        request: Request<pb::ListSlotRowsRequest>,
    ) -> Result<Response<pb::ListSlotRowsResponse>, Status> {
        let request = request.into_inner();
        if request.limit == 0 || request.limit > MAX_PAGE {
            return Err(Status::invalid_argument("limit must be 1 to 10000"));
        }
        let slot = u8::try_from(request.slot)
            .map(pastebin_core::Slot)
            .map_err(|_| Status::invalid_argument("slot must be 0 to 255"))?;
        self.slots.readable(slot).await?;
        let after = if request.after_id.is_empty() { None } else { Some(convert::id(&request.after_id)?) };
        let rows = self.store.list_slot(slot, after.as_ref(), request.limit).await?;
        Ok(Response::new(pb::ListSlotRowsResponse { rows: rows.into_iter().map(convert::slot_row_to_pb).collect() }))
    }

    async fn purge_expired(
        &self,
        request: Request<pb::PurgeExpiredRequest>,
    ) -> Result<Response<pb::PurgeExpiredResponse>, Status> {
        let limit = request.into_inner().limit;
        if limit == 0 || limit > MAX_PAGE {
            return Err(Status::invalid_argument("limit must be 1 to 10000"));
        }
        let (permit, store) = (self.slots.writable_everywhere().await?, self.store.clone());
        let ids = permit.complete(async move { store.purge_expired(limit).await }).await??;
        Ok(Response::new(pb::PurgeExpiredResponse { ids: ids.iter().map(ToString::to_string).collect() }))
    }

    async fn purge_tombstones(
        &self,
        request: Request<pb::PurgeTombstonesRequest>,
    ) -> Result<Response<pb::PurgeTombstonesResponse>, Status> {
        let request = request.into_inner();
        if request.limit == 0 || request.limit > MAX_PAGE {
            return Err(Status::invalid_argument("limit must be 1 to 10000"));
        }
        let min_age = std::time::Duration::from_secs(request.min_age_seconds);
        if min_age < crate::MIN_TOMBSTONE_AGE {
            return Err(Status::invalid_argument("min_age_seconds must be at least 93600 (26 h)"));
        }
        let (permit, store, limit) = (self.slots.writable_everywhere().await?, self.store.clone(), request.limit);
        let deleted = permit.complete(async move { store.purge_tombstones(min_age, limit).await }).await??;
        Ok(Response::new(pb::PurgeTombstonesResponse { deleted }))
    }

    async fn find_by_key(
        &self,
        request: Request<pb::FindByKeyRequest>,
    ) -> Result<Response<pb::FindByKeyResponse>, Status> {
        let key_hash = convert::key_hash(request.into_inner().key_sha256)?;
        // Every paste of a key has an id in the key's slot: the shard that
        // owns the slot holds them all, and any other refuses, so a caller
        // with a stale slot map learns it instead of hearing "nothing".
        let slot = key_hash.slot();
        self.slots.readable(slot).await?;
        let found = self.store.find_by_key(&key_hash, MAX_KEYED).await?;
        let pastes = found.into_iter().filter(|paste| paste.id.slot() == slot).map(convert::keyed_to_pb).collect();
        Ok(Response::new(pb::FindByKeyResponse { pastes }))
    }

    async fn rotate_delete_token(
        &self,
        request: Request<pb::RotateDeleteTokenRequest>,
    ) -> Result<Response<pb::RotateDeleteTokenResponse>, Status> {
        let request = request.into_inner();
        let id = convert::id(&request.id)?;
        let key_hash = convert::key_hash(request.key_sha256)?;
        let token_hash = DeleteTokenHash(
            request
                .delete_token_sha256
                .try_into()
                .map_err(|_| Status::invalid_argument("delete_token_sha256 must be 32 bytes"))?,
        );
        let (permit, store) = (self.slots.writable([&id]).await?, self.store.clone());
        let rotated =
            permit.complete(async move { store.rotate_delete_token(&id, &key_hash, &token_hash).await }).await??;
        Ok(Response::new(pb::RotateDeleteTokenResponse { rotated }))
    }

    async fn describe(
        &self,
        _request: Request<shard_pb::DescribeRequest>,
    ) -> Result<Response<shard_pb::ShardDescription>, Status> {
        let now = to_millis(self.store.clock().now());
        Ok(Response::new(self.slots.description(now).await))
    }
}
