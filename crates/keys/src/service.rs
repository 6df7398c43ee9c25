use chrono::{DateTime, Utc};
use pastebin_core::{from_millis, to_millis, IdempotencyKey, KeyState, PasteId, RequestHash, ResponseBody, SlotRange};
use pastebin_proto::{keys::v1 as pb, shard::v1 as shard_pb};
use pastebin_runtime::shard_slots;
use tonic::{Request, Response, Status};

use crate::{Begun, KeyRecord, KeyStore, KeyStoreError, NewKey};

/// The largest stored 201 body accepted; real ones are a few hundred bytes.
const MAX_RESPONSE_BODY: usize = 16 * 1024;
/// The largest page `ListPending` returns.
const MAX_PAGE: u32 = 10_000;

/// Shard K over gRPC. Validates every field before touching storage, so bad
/// input is INVALID_ARGUMENT and writes nothing; a key whose slot is outside
/// `slots` is FAILED_PRECONDITION and reads nothing either.
pub struct KeyServiceImpl {
    store: KeyStore,
    slots: SlotRange,
}

impl KeyServiceImpl {
    pub fn new(store: KeyStore, slots: SlotRange) -> Self {
        Self { store, slots }
    }

    /// A key argument this shard owns.
    fn owned_key(&self, raw: &str) -> Result<IdempotencyKey, Status> {
        let key = key(raw)?;
        shard_slots::ensure_owned(self.slots, key.slot())?;
        Ok(key)
    }

    pub fn into_server(self) -> pb::key_service_server::KeyServiceServer<Self> {
        pb::key_service_server::KeyServiceServer::new(self)
    }
}

impl From<KeyStoreError> for Status {
    fn from(error: KeyStoreError) -> Self {
        match error {
            // Connection trouble is the caller's "uncertain"; the rest is ours.
            KeyStoreError::Database(sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::PoolClosed) => {
                Status::unavailable(error.to_string())
            }
            other => Status::internal(other.to_string()),
        }
    }
}

fn key(raw: &str) -> Result<IdempotencyKey, Status> {
    IdempotencyKey::parse(raw).map_err(|e| Status::invalid_argument(e.to_string()))
}

fn paste_id(raw: &str) -> Result<PasteId, Status> {
    PasteId::parse(raw).map_err(|e| Status::invalid_argument(format!("paste_id: {e}")))
}

fn response_body(raw: Vec<u8>) -> Result<ResponseBody, Status> {
    if raw.is_empty() || raw.len() > MAX_RESPONSE_BODY {
        return Err(Status::invalid_argument("response_body must be 1 to 16384 bytes"));
    }
    String::from_utf8(raw).map(ResponseBody::new).map_err(|_| Status::invalid_argument("response_body must be UTF-8"))
}

fn state_to_pb(state: KeyState) -> pb::KeyState {
    match state {
        KeyState::Pending => pb::KeyState::Pending,
        KeyState::Done => pb::KeyState::Done,
        KeyState::Aborted => pb::KeyState::Aborted,
    }
}

fn record_to_pb(record: KeyRecord) -> pb::KeyRecord {
    pb::KeyRecord {
        key: record.key.canonical(),
        request_hash: record.request_hash.0.to_vec(),
        paste_id: record.paste_id.to_string(),
        state: state_to_pb(record.state).into(),
        response_body: record.response_body.into_inner().into_bytes(),
        created_at_ms: to_millis(record.created_at),
        retain_until_ms: to_millis(record.retain_until),
    }
}

fn millis(ms: i64) -> DateTime<Utc> {
    from_millis(ms)
}

#[tonic::async_trait]
impl pb::key_service_server::KeyService for KeyServiceImpl {
    async fn begin(&self, request: Request<pb::BeginRequest>) -> Result<Response<pb::BeginResponse>, Status> {
        let request = request.into_inner();
        let new = NewKey {
            key: self.owned_key(&request.key)?,
            request_hash: RequestHash(
                request
                    .request_hash
                    .try_into()
                    .map_err(|_| Status::invalid_argument("request_hash must be 32 bytes"))?,
            ),
            paste_id: paste_id(&request.paste_id)?,
            response_body: response_body(request.response_body)?,
        };
        let (inserted, record) = match self.store.begin(&new).await? {
            Begun::Inserted(record) => (true, record),
            Begun::Existing(record) => (false, record),
        };
        Ok(Response::new(pb::BeginResponse { inserted, record: Some(record_to_pb(record)) }))
    }

    async fn get(&self, request: Request<pb::GetKeyRequest>) -> Result<Response<pb::KeyRecord>, Status> {
        let key = self.owned_key(&request.into_inner().key)?;
        match self.store.get(&key).await? {
            Some(record) => Ok(Response::new(record_to_pb(record))),
            None => Err(Status::not_found("no such key")),
        }
    }

    async fn mark_done(&self, request: Request<pb::GuardedUpdate>) -> Result<Response<pb::UpdateResult>, Status> {
        let request = request.into_inner();
        let changed = self.store.mark_done(&self.owned_key(&request.key)?, &paste_id(&request.paste_id)?).await?;
        Ok(Response::new(pb::UpdateResult { changed }))
    }

    async fn abort(&self, request: Request<pb::GuardedUpdate>) -> Result<Response<pb::UpdateResult>, Status> {
        let request = request.into_inner();
        let changed = self.store.abort(&self.owned_key(&request.key)?, &paste_id(&request.paste_id)?).await?;
        Ok(Response::new(pb::UpdateResult { changed }))
    }

    async fn restart(&self, request: Request<pb::RestartRequest>) -> Result<Response<pb::UpdateResult>, Status> {
        let request = request.into_inner();
        let changed = self
            .store
            .restart(
                &self.owned_key(&request.key)?,
                &paste_id(&request.aborted_paste_id)?,
                &paste_id(&request.paste_id)?,
                &response_body(request.response_body)?,
            )
            .await?;
        Ok(Response::new(pb::UpdateResult { changed }))
    }

    async fn list_pending(
        &self,
        request: Request<pb::ListPendingRequest>,
    ) -> Result<Response<pb::ListPendingResponse>, Status> {
        let request = request.into_inner();
        if request.limit == 0 || request.limit > MAX_PAGE {
            return Err(Status::invalid_argument("limit must be 1 to 10000"));
        }
        #[allow(deprecated)] // Read only to refuse it.
        if request.created_before_ms != 0 {
            return Err(Status::failed_precondition(
                "created_before_ms is no longer accepted: send older_than_ms, judged on this shard's clock",
            ));
        }
        let after = if request.after_key.is_empty() {
            None
        } else {
            Some((millis(request.after_created_at_ms), key(&request.after_key)?))
        };
        // The cutoff is computed here, on K's clock, the same clock that
        // stamped created_at (docs/design.md#clock).
        let older_than = chrono::Duration::milliseconds(i64::try_from(request.older_than_ms).unwrap_or(i64::MAX));
        let created_before =
            self.store.clock().now().checked_sub_signed(older_than).unwrap_or(DateTime::<Utc>::MIN_UTC);
        let keys = self.store.list_pending(created_before, after, request.limit).await?;
        Ok(Response::new(pb::ListPendingResponse {
            keys: keys
                .into_iter()
                .map(|pending| pb::PendingKey {
                    key: pending.key.canonical(),
                    paste_id: pending.paste_id.to_string(),
                    created_at_ms: to_millis(pending.created_at),
                })
                .collect(),
        }))
    }

    async fn pending_stats(
        &self,
        _request: Request<pb::PendingStatsRequest>,
    ) -> Result<Response<pb::PendingStatsResponse>, Status> {
        let stats = self.store.pending_stats().await?;
        Ok(Response::new(pb::PendingStatsResponse {
            pending: stats.pending,
            oldest_created_at_ms: stats.oldest_created_at.map(to_millis).unwrap_or(0),
            older_than_2s: stats.older_than_2s,
            older_than_60s: stats.older_than_60s,
            now_ms: to_millis(stats.now),
        }))
    }

    async fn purge_retired(
        &self,
        request: Request<pb::PurgeRetiredRequest>,
    ) -> Result<Response<pb::PurgeRetiredResponse>, Status> {
        let limit = request.into_inner().limit;
        if limit == 0 || limit > MAX_PAGE {
            return Err(Status::invalid_argument("limit must be 1 to 10000"));
        }
        let deleted = self.store.purge_retired(limit).await?;
        Ok(Response::new(pb::PurgeRetiredResponse { deleted }))
    }

    async fn describe(
        &self,
        _request: Request<shard_pb::DescribeRequest>,
    ) -> Result<Response<shard_pb::ShardDescription>, Status> {
        let now = to_millis(self.store.clock().now());
        Ok(Response::new(shard_slots::description(shard_pb::ShardKind::Key, self.slots, now)))
    }
}
