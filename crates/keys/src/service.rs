use chrono::{DateTime, Utc};
use pastebin_core::{from_millis, to_millis, IdempotencyKey, KeyState, Slot};
use pastebin_proto::{keys::v1 as pb, shard::v1 as shard_pb};
use pastebin_runtime::grpc::{store_status, StoreFailure};
use pastebin_slots::shard_slots::{self, ShardSlots};
use tonic::{Request, Response, Status};

use crate::{
    convert::{self, check_body_size, key},
    Begun, KeyStore, KeyStoreError,
};

/// The largest page `ListPending` returns.
const MAX_PAGE: u32 = 10_000;

/// Shard K over gRPC. Validates every field before touching storage, so bad
/// input is INVALID_ARGUMENT and writes nothing; a key whose slot is outside
/// `slots` is FAILED_PRECONDITION and reads nothing either, and a write for
/// a slot frozen by a move is UNAVAILABLE, "not executed" (docs/design.md#moving-slots).
pub struct KeyServiceImpl {
    store: KeyStore,
    slots: ShardSlots,
}

impl KeyServiceImpl {
    pub fn new(store: KeyStore, slots: ShardSlots) -> Self {
        Self { store, slots }
    }

    /// A key argument this shard owns, for a read.
    async fn owned_key(&self, raw: &str) -> Result<IdempotencyKey, Status> {
        let key = key(raw)?;
        self.slots.readable(key.slot()).await?;
        Ok(key)
    }

    pub fn into_server(self) -> pb::key_service_server::KeyServiceServer<Self> {
        pb::key_service_server::KeyServiceServer::new(self)
    }
}

impl StoreFailure for KeyStoreError {
    fn database(&self) -> Option<&sqlx::Error> {
        match self {
            KeyStoreError::Database(error) => Some(error),
            _ => None,
        }
    }
}

impl From<KeyStoreError> for Status {
    fn from(error: KeyStoreError) -> Self {
        store_status(&error)
    }
}

fn check_limit(limit: u32) -> Result<u32, Status> {
    if limit == 0 || limit > MAX_PAGE {
        return Err(Status::invalid_argument("limit must be 1 to 10000"));
    }
    Ok(limit)
}

#[tonic::async_trait]
impl pb::key_service_server::KeyService for KeyServiceImpl {
    async fn begin(&self, request: Request<pb::BeginRequest>) -> Result<Response<pb::BeginResponse>, Status> {
        let request = request.into_inner();
        check_body_size(&request.response_body)?;
        let new = convert::new_key(request)?;
        let (permit, store) = (self.slots.writable([&new.key]).await?, self.store.clone());
        let (inserted, record) = match permit.complete(async move { store.begin(&new).await }).await?? {
            Begun::Inserted(record) => (true, record),
            Begun::Existing(record) => (false, record),
        };
        Ok(Response::new(pb::BeginResponse { inserted, record: Some(convert::record_to_pb(record)) }))
    }

    async fn get(&self, request: Request<pb::GetKeyRequest>) -> Result<Response<pb::KeyRecord>, Status> {
        let key = self.owned_key(&request.into_inner().key).await?;
        match self.store.get(&key).await? {
            Some(record) => Ok(Response::new(convert::record_to_pb(record))),
            None => Err(Status::not_found("no such key")),
        }
    }

    async fn mark_done(&self, request: Request<pb::GuardedUpdate>) -> Result<Response<pb::UpdateResult>, Status> {
        let request = request.into_inner();
        let key = key(&request.key)?;
        let (paste_id, store) = (convert::paste_id(&request.paste_id)?, self.store.clone());
        let permit = self.slots.writable([&key]).await?;
        let changed = permit.complete(async move { store.mark_done(&key, &paste_id).await }).await??;
        Ok(Response::new(pb::UpdateResult { changed }))
    }

    async fn abort(&self, request: Request<pb::GuardedUpdate>) -> Result<Response<pb::UpdateResult>, Status> {
        let request = request.into_inner();
        let key = key(&request.key)?;
        let (paste_id, store) = (convert::paste_id(&request.paste_id)?, self.store.clone());
        let permit = self.slots.writable([&key]).await?;
        let changed = permit.complete(async move { store.abort(&key, &paste_id).await }).await??;
        Ok(Response::new(pb::UpdateResult { changed }))
    }

    async fn apply_verdicts(
        &self,
        request: Request<pb::ApplyVerdictsRequest>,
    ) -> Result<Response<pb::ApplyVerdictsResponse>, Status> {
        let request = request.into_inner();
        let to = match pb::KeyState::try_from(request.to) {
            Ok(pb::KeyState::Done) => KeyState::Done,
            Ok(pb::KeyState::Aborted) => KeyState::Aborted,
            _ => return Err(Status::invalid_argument("to must be DONE or ABORTED")),
        };
        if request.keys.len() > MAX_PAGE as usize {
            return Err(Status::invalid_argument("at most 10000 keys per call"));
        }
        let verdicts = request
            .keys
            .iter()
            .map(|update| Ok((key(&update.key)?, convert::paste_id(&update.paste_id)?)))
            .collect::<Result<Vec<_>, Status>>()?;
        // A foreign key is reported, not refused: in a resharding window this
        // shard still lists stale copies of moved slots, and refusing the whole
        // batch for one of them would leave its own keys pending forever
        // (docs/design.md#sweeper). So is a key of a slot a move has frozen:
        // it waits for the move, the rest of the batch does not; the sweeper
        // tries it again next round.
        let (permit, owned, not_owned) = self.slots.writable_owned(verdicts, |(key, _)| key).await?;
        let store = self.store.clone();
        let changed = permit.complete(async move { store.apply_verdicts(to, &owned).await }).await??;
        Ok(Response::new(pb::ApplyVerdictsResponse {
            changed: changed.iter().map(IdempotencyKey::canonical).collect(),
            not_owned: not_owned.iter().map(|(key, _)| key.canonical()).collect(),
        }))
    }

    async fn restart(&self, request: Request<pb::RestartRequest>) -> Result<Response<pb::UpdateResult>, Status> {
        let request = request.into_inner();
        check_body_size(&request.response_body)?;
        let key = key(&request.key)?;
        let (aborted, paste_id) =
            (convert::paste_id(&request.aborted_paste_id)?, convert::paste_id(&request.paste_id)?);
        let (body, store) = (convert::response_body(request.response_body)?, self.store.clone());
        let permit = self.slots.writable([&key]).await?;
        let changed = permit.complete(async move { store.restart(&key, &aborted, &paste_id, &body).await }).await??;
        Ok(Response::new(pb::UpdateResult { changed }))
    }

    async fn adopt(&self, request: Request<pb::AdoptRequest>) -> Result<Response<pb::UpdateResult>, Status> {
        let request = request.into_inner();
        check_body_size(&request.response_body)?;
        let adopted = convert::adopted(request)?;
        let (permit, store) = (self.slots.writable([&adopted.key]).await?, self.store.clone());
        let changed = permit.complete(async move { store.adopt(&adopted).await }).await??;
        Ok(Response::new(pb::UpdateResult { changed }))
    }

    async fn list_pending(
        &self,
        request: Request<pb::ListPendingRequest>,
    ) -> Result<Response<pb::ListPendingResponse>, Status> {
        let request = request.into_inner();
        let limit = check_limit(request.limit)?;
        #[allow(deprecated)] // Read only to refuse it.
        if request.created_before_ms != 0 {
            return Err(Status::failed_precondition(
                "created_before_ms is no longer accepted: send older_than_ms, judged on this shard's clock",
            ));
        }
        let after = if request.after_key.is_empty() {
            None
        } else {
            Some((from_millis(request.after_created_at_ms), key(&request.after_key)?))
        };
        // The cutoff is computed here, on K's clock, the same clock that
        // stamped created_at (docs/design.md#clock).
        let older_than = chrono::Duration::milliseconds(i64::try_from(request.older_than_ms).unwrap_or(i64::MAX));
        let created_before =
            self.store.clock().now().checked_sub_signed(older_than).unwrap_or(DateTime::<Utc>::MIN_UTC);
        let keys = self.store.list_pending(created_before, after, limit).await?;
        Ok(Response::new(pb::ListPendingResponse { keys: keys.into_iter().map(convert::pending_to_pb).collect() }))
    }

    async fn pending_stats(
        &self,
        _request: Request<pb::PendingStatsRequest>,
    ) -> Result<Response<pb::PendingStatsResponse>, Status> {
        Ok(Response::new(convert::stats_to_pb(self.store.pending_stats().await?)))
    }

    async fn purge_retired(
        &self,
        request: Request<pb::PurgeRetiredRequest>,
    ) -> Result<Response<pb::PurgeRetiredResponse>, Status> {
        let limit = check_limit(request.into_inner().limit)?;
        let (permit, store) = (self.slots.writable_everywhere().await?, self.store.clone());
        let deleted = permit.complete(async move { store.purge_retired(limit).await }).await??;
        Ok(Response::new(pb::PurgeRetiredResponse { deleted }))
    }

    async fn named_by_done_keys(&self, request: Request<pb::PasteIds>) -> Result<Response<pb::PasteIds>, Status> {
        let raw = request.into_inner().paste_ids;
        if raw.len() > MAX_PAGE as usize {
            return Err(Status::invalid_argument("at most 10000 paste ids per call"));
        }
        // An id of another shard's slot refuses the batch: the caller's slot
        // map is wrong, and an answer of "not named" would be a guess.
        let ids = raw.iter().map(|raw| Ok(convert::paste_id(raw)?)).collect::<Result<Vec<_>, Status>>()?;
        for id in &ids {
            self.slots.readable(id.slot()).await?;
        }
        let named = self.store.named_by_done_keys(&ids).await?;
        Ok(Response::new(pb::PasteIds { paste_ids: named.iter().map(ToString::to_string).collect() }))
    }

    async fn list_slot(
        &self,
        request: Request<pb::ListSlotKeysRequest>,
    ) -> Result<Response<pb::ListSlotKeysResponse>, Status> {
        let request = request.into_inner();
        let limit = check_limit(request.limit)?;
        let slot =
            u8::try_from(request.slot).map(Slot).map_err(|_| Status::invalid_argument("slot must be 0 to 255"))?;
        self.slots.readable(slot).await?;
        let after = if request.after_paste_id.is_empty() {
            None
        } else {
            Some((convert::paste_id(&request.after_paste_id)?, key(&request.after_key)?))
        };
        let keys = self.store.list_slot(slot, after.as_ref().map(|(id, key)| (id, key)), limit).await?;
        Ok(Response::new(pb::ListSlotKeysResponse { keys: keys.into_iter().map(convert::slot_key_to_pb).collect() }))
    }

    async fn describe(
        &self,
        _request: Request<shard_pb::DescribeRequest>,
    ) -> Result<Response<shard_pb::ShardDescription>, Status> {
        let now = to_millis(self.store.clock().now());
        let description = self.slots.description(now).await;
        Ok(Response::new(shard_slots::with_lost_commits(description, self.store.lost_commits())))
    }
}
