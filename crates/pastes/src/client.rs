use pastebin_core::{from_millis, to_millis, DeleteToken, PasteId};
use pastebin_proto::pastes::v1::{self as pb, paste_service_client::PasteServiceClient};
use pastebin_runtime::grpc::{CallError, Deadline};
use tokio::time::Instant;
use tonic::transport::Channel;

use crate::{
    wire::{attributes_from_pb, attributes_to_pb},
    BurnClaim, DeleteOutcome, IdFate, InsertOutcome, NewPaste, PasteRow,
};

/// A P shard as its callers see it: domain types, and every failure
/// classified as refused (it did not act) or uncertain (it may have).
#[derive(Clone)]
pub struct PasteClient {
    inner: PasteServiceClient<Channel>,
    deadline: Deadline,
}

fn bad_reply(what: &str) -> CallError {
    CallError::Uncertain(tonic::Status::internal(format!("malformed reply from the paste service: {what}")))
}

fn fate(raw: i32) -> Result<IdFate, CallError> {
    match pb::IdFate::try_from(raw) {
        Ok(pb::IdFate::Live) => Ok(IdFate::Live),
        Ok(pb::IdFate::Tombstoned) => Ok(IdFate::Tombstoned),
        _ => Err(bad_reply("fate")),
    }
}

impl PasteClient {
    pub fn new(channel: Channel) -> Self {
        Self { inner: PasteServiceClient::new(channel), deadline: Deadline::default() }
    }

    /// The same shard, with every call carrying `deadline` (see [`Deadline`]).
    pub fn with_deadline(&self, deadline: Instant) -> Self {
        Self { inner: self.inner.clone(), deadline: Deadline::at(deadline) }
    }

    pub async fn insert(&self, paste: &NewPaste) -> Result<InsertOutcome, CallError> {
        let request = pb::InsertRequest {
            id: paste.id.to_string(),
            delete_token_sha256: paste.delete_token_hash.0.to_vec(),
            created_at_ms: to_millis(paste.created_at),
            expires_at_ms: to_millis(paste.expires_at),
            size: paste.size,
            content_sha256: paste.content_sha256.to_vec(),
            attributes: Some(attributes_to_pb(&paste.attributes)),
        };
        let reply = self.inner.clone().insert(self.deadline.request(request)).await?.into_inner();
        match pb::InsertOutcome::try_from(reply.outcome) {
            Ok(pb::InsertOutcome::Inserted) => Ok(InsertOutcome::Inserted),
            Ok(pb::InsertOutcome::AlreadyExists) => Ok(InsertOutcome::AlreadyExists),
            Ok(pb::InsertOutcome::Tombstoned) => Ok(InsertOutcome::Tombstoned),
            _ => Err(bad_reply("insert outcome")),
        }
    }

    pub async fn get(&self, id: &PasteId) -> Result<Option<PasteRow>, CallError> {
        match self.inner.clone().get(self.deadline.request(pb::GetRequest { id: id.to_string() })).await {
            Ok(reply) => {
                let raw = reply.into_inner();
                Ok(Some(PasteRow {
                    id: PasteId::parse(&raw.id).map_err(|_| bad_reply("id"))?,
                    created_at: from_millis(raw.created_at_ms),
                    expires_at: from_millis(raw.expires_at_ms),
                    size: raw.size,
                    content_sha256: raw.content_sha256.try_into().map_err(|_| bad_reply("content_sha256"))?,
                    attributes: attributes_from_pb(raw.attributes).map_err(|_| bad_reply("attributes"))?,
                }))
            }
            Err(status) if status.code() == tonic::Code::NotFound => Ok(None),
            Err(status) => Err(status.into()),
        }
    }

    /// Burn after reading: whether this caller won the one read (see
    /// [`crate::PasteStore::claim_burn`]). A malformed id is simply `Gone`.
    pub async fn claim_burn(&self, id: &PasteId) -> Result<BurnClaim, CallError> {
        match self.inner.clone().claim_burn(self.deadline.request(pb::GetRequest { id: id.to_string() })).await {
            Ok(reply) if reply.get_ref().claimed => Ok(BurnClaim::Claimed),
            Ok(_) => Ok(BurnClaim::Gone),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(BurnClaim::Gone),
            Err(status) => Err(status.into()),
        }
    }

    pub async fn tombstone_unless_live(&self, id: &PasteId) -> Result<IdFate, CallError> {
        let reply = self
            .inner
            .clone()
            .tombstone_unless_live(self.deadline.request(pb::TombstoneRequest { id: id.to_string() }))
            .await?;
        fate(reply.into_inner().fate)
    }

    /// What the fence would answer for `id`, without writing anything;
    /// `None` when P has never seen the id.
    pub async fn peek_fate(&self, id: &PasteId) -> Result<Option<IdFate>, CallError> {
        let reply = self.inner.clone().fate(self.deadline.request(pb::TombstoneRequest { id: id.to_string() })).await?;
        match reply.into_inner().fate {
            0 => Ok(None),
            raw => fate(raw).map(Some),
        }
    }

    pub async fn resolve_batch(&self, ids: &[PasteId]) -> Result<Vec<(PasteId, IdFate)>, CallError> {
        let request = pb::ResolveBatchRequest { ids: ids.iter().map(ToString::to_string).collect() };
        let reply = self.inner.clone().resolve_batch(self.deadline.request(request)).await?.into_inner();
        reply
            .ids
            .into_iter()
            .map(|resolved| Ok((PasteId::parse(&resolved.id).map_err(|_| bad_reply("id"))?, fate(resolved.fate)?)))
            .collect()
    }

    pub async fn delete(&self, id: &PasteId, token: &DeleteToken) -> Result<DeleteOutcome, CallError> {
        let request = pb::DeleteRequest { id: id.to_string(), delete_token: token.expose().to_owned() };
        match self.inner.clone().delete(self.deadline.request(request)).await {
            Ok(_) => Ok(DeleteOutcome::Deleted),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(DeleteOutcome::NotFound),
            Err(status) if status.code() == tonic::Code::PermissionDenied => Ok(DeleteOutcome::WrongToken),
            Err(status) => Err(status.into()),
        }
    }

    pub async fn purge_expired(&self, limit: u32) -> Result<Vec<PasteId>, CallError> {
        let reply = self
            .inner
            .clone()
            .purge_expired(self.deadline.request(pb::PurgeExpiredRequest { limit }))
            .await?
            .into_inner();
        reply.ids.iter().map(|id| PasteId::parse(id).map_err(|_| bad_reply("id"))).collect()
    }

    pub async fn purge_tombstones(&self, min_age: std::time::Duration, limit: u32) -> Result<u64, CallError> {
        let request = pb::PurgeTombstonesRequest { min_age_seconds: min_age.as_secs(), limit };
        Ok(self.inner.clone().purge_tombstones(self.deadline.request(request)).await?.into_inner().deleted)
    }
}
