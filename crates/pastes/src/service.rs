use pastebin_core::{from_millis, to_millis, DeleteToken, DeleteTokenHash, PasteId};
use pastebin_proto::pastes::v1 as pb;
use tonic::{Request, Response, Status};

use crate::{
    wire::{attributes_from_pb, attributes_to_pb},
    BurnClaim, DeleteOutcome, IdFate, InsertOutcome, NewPaste, PasteRow, PasteStore, PasteStoreError,
};

/// The most ids one `ResolveBatch` takes.
const MAX_BATCH: usize = 1_000;
const MAX_PAGE: u32 = 10_000;

/// Shard P over gRPC. Every field is validated before storage is touched.
pub struct PasteServiceImpl {
    store: PasteStore,
}

impl PasteServiceImpl {
    pub fn new(store: PasteStore) -> Self {
        Self { store }
    }

    pub fn into_server(self) -> pb::paste_service_server::PasteServiceServer<Self> {
        pb::paste_service_server::PasteServiceServer::new(self)
    }
}

impl From<PasteStoreError> for Status {
    fn from(error: PasteStoreError) -> Self {
        match error {
            PasteStoreError::Database(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed) => {
                Status::unavailable(error.to_string())
            }
            other => Status::internal(other.to_string()),
        }
    }
}

fn id_argument(raw: &str) -> Result<PasteId, Status> {
    PasteId::parse(raw).map_err(|e| Status::invalid_argument(format!("id: {e}")))
}

/// Reads and deletes answer a malformed id exactly like a missing one.
fn id_lookup(raw: &str) -> Result<PasteId, Status> {
    PasteId::parse(raw).map_err(|_| not_found())
}

fn not_found() -> Status {
    Status::not_found("no such paste")
}

fn sha256(raw: Vec<u8>, field: &str) -> Result<[u8; 32], Status> {
    raw.try_into().map_err(|_| Status::invalid_argument(format!("{field} must be 32 bytes")))
}

fn fate_to_pb(fate: IdFate) -> i32 {
    match fate {
        IdFate::Live => pb::IdFate::Live,
        IdFate::Tombstoned => pb::IdFate::Tombstoned,
    }
    .into()
}

fn paste_to_pb(row: PasteRow) -> pb::Paste {
    pb::Paste {
        id: row.id.to_string(),
        created_at_ms: to_millis(row.created_at),
        expires_at_ms: to_millis(row.expires_at),
        size: row.size,
        content_sha256: row.content_sha256.to_vec(),
        attributes: Some(attributes_to_pb(&row.attributes)),
    }
}

#[tonic::async_trait]
impl pb::paste_service_server::PasteService for PasteServiceImpl {
    async fn insert(&self, request: Request<pb::InsertRequest>) -> Result<Response<pb::InsertResponse>, Status> {
        let request = request.into_inner();
        if request.expires_at_ms <= request.created_at_ms {
            return Err(Status::invalid_argument("expires_at must be after created_at"));
        }
        let paste = NewPaste {
            id: id_argument(&request.id)?,
            delete_token_hash: DeleteTokenHash(sha256(request.delete_token_sha256, "delete_token_sha256")?),
            created_at: from_millis(request.created_at_ms),
            expires_at: from_millis(request.expires_at_ms),
            size: request.size,
            content_sha256: sha256(request.content_sha256, "content_sha256")?,
            attributes: attributes_from_pb(request.attributes)
                .map_err(|e| Status::invalid_argument(format!("attributes: {e}")))?,
        };
        let outcome = match self.store.insert(&paste).await? {
            InsertOutcome::Inserted => pb::InsertOutcome::Inserted,
            InsertOutcome::AlreadyExists => pb::InsertOutcome::AlreadyExists,
            InsertOutcome::Tombstoned => pb::InsertOutcome::Tombstoned,
        };
        Ok(Response::new(pb::InsertResponse { outcome: outcome.into() }))
    }

    async fn get(&self, request: Request<pb::GetRequest>) -> Result<Response<pb::Paste>, Status> {
        let id = id_lookup(&request.into_inner().id)?;
        let row = self.store.get_live(&id).await?.ok_or_else(not_found)?;
        Ok(Response::new(paste_to_pb(row)))
    }

    async fn tombstone_unless_live(
        &self,
        request: Request<pb::TombstoneRequest>,
    ) -> Result<Response<pb::TombstoneResponse>, Status> {
        let id = id_argument(&request.into_inner().id)?;
        let fate = self.store.tombstone_unless_live(&id).await?;
        Ok(Response::new(pb::TombstoneResponse { fate: fate_to_pb(fate) }))
    }

    async fn fate(&self, request: Request<pb::TombstoneRequest>) -> Result<Response<pb::TombstoneResponse>, Status> {
        let id = id_argument(&request.into_inner().id)?;
        let fate = self.store.peek_fate(&id).await?.map(fate_to_pb).unwrap_or(pb::IdFate::Unspecified.into());
        Ok(Response::new(pb::TombstoneResponse { fate }))
    }

    async fn resolve_batch(
        &self,
        request: Request<pb::ResolveBatchRequest>,
    ) -> Result<Response<pb::ResolveBatchResponse>, Status> {
        let raw = request.into_inner().ids;
        if raw.len() > MAX_BATCH {
            return Err(Status::invalid_argument("at most 1000 ids per batch"));
        }
        let ids = raw.iter().map(|id| id_argument(id)).collect::<Result<Vec<_>, _>>()?;
        let fates = self.store.resolve_batch(&ids).await?;
        Ok(Response::new(pb::ResolveBatchResponse {
            ids: fates
                .into_iter()
                .map(|(id, fate)| pb::ResolvedId { id: id.to_string(), fate: fate_to_pb(fate) })
                .collect(),
        }))
    }

    async fn claim_burn(&self, request: Request<pb::GetRequest>) -> Result<Response<pb::ClaimBurnResponse>, Status> {
        let id = id_lookup(&request.into_inner().id)?;
        let claimed = self.store.claim_burn(&id).await? == BurnClaim::Claimed;
        Ok(Response::new(pb::ClaimBurnResponse { claimed }))
    }

    async fn delete(&self, request: Request<pb::DeleteRequest>) -> Result<Response<pb::DeleteResponse>, Status> {
        let request = request.into_inner();
        let id = id_lookup(&request.id)?;
        match self.store.delete(&id, &DeleteToken::presented(&request.delete_token)).await? {
            DeleteOutcome::Deleted => Ok(Response::new(pb::DeleteResponse {})),
            DeleteOutcome::NotFound => Err(not_found()),
            DeleteOutcome::WrongToken => Err(Status::permission_denied("wrong delete token")),
        }
    }

    async fn purge_expired(
        &self,
        request: Request<pb::PurgeExpiredRequest>,
    ) -> Result<Response<pb::PurgeExpiredResponse>, Status> {
        let limit = request.into_inner().limit;
        if limit == 0 || limit > MAX_PAGE {
            return Err(Status::invalid_argument("limit must be 1 to 10000"));
        }
        let ids = self.store.purge_expired(limit).await?;
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
        let deleted = self.store.purge_tombstones(min_age, request.limit).await?;
        Ok(Response::new(pb::PurgeTombstonesResponse { deleted }))
    }
}
