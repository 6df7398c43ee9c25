use chrono::{DateTime, Utc};
use pastebin_core::{from_millis, to_millis, IdempotencyKey, PasteId, RequestHash, ResponseBody};
use pastebin_proto::keys::v1::{self as pb, key_service_client::KeyServiceClient};
use pastebin_runtime::grpc::{CallError, Deadline};
use tokio::time::Instant;
use tonic::transport::Channel;

use crate::{Begun, KeyRecord, NewKey, PendingKey, PendingStats};

/// A K shard as the gateway, the sweeper and operators see it: domain types
/// in, domain types out, every failure classified as refused or uncertain.
#[derive(Clone)]
pub struct KeyClient {
    inner: KeyServiceClient<Channel>,
    /// Kept for the shard's `grpc.health.v1`, which is beside the service.
    channel: Channel,
    deadline: Deadline,
}

fn bad_reply(what: &str) -> CallError {
    CallError::Uncertain(tonic::Status::internal(format!("malformed reply from the key service: {what}")))
}

fn record(raw: pb::KeyRecord) -> Result<KeyRecord, CallError> {
    let state = match pb::KeyState::try_from(raw.state) {
        Ok(pb::KeyState::Pending) => pastebin_core::KeyState::Pending,
        Ok(pb::KeyState::Done) => pastebin_core::KeyState::Done,
        Ok(pb::KeyState::Aborted) => pastebin_core::KeyState::Aborted,
        _ => return Err(bad_reply("state")),
    };
    Ok(KeyRecord {
        key: IdempotencyKey::parse(&raw.key).map_err(|_| bad_reply("key"))?,
        request_hash: RequestHash(raw.request_hash.try_into().map_err(|_| bad_reply("request_hash"))?),
        paste_id: PasteId::parse(&raw.paste_id).map_err(|_| bad_reply("paste_id"))?,
        state,
        response_body: ResponseBody::new(String::from_utf8(raw.response_body).map_err(|_| bad_reply("body"))?),
        created_at: from_millis(raw.created_at_ms),
        retain_until: from_millis(raw.retain_until_ms),
    })
}

impl KeyClient {
    pub fn new(channel: Channel) -> Self {
        Self { inner: KeyServiceClient::new(channel.clone()), channel, deadline: Deadline::default() }
    }

    /// Whether the shard can work now: it answers and says it serves (it
    /// does not while its database is unreachable).
    pub async fn check_serving(&self) -> Result<(), String> {
        pastebin_runtime::grpc::check_serving(self.channel.clone()).await
    }

    /// The same shard, with every call carrying `deadline` (see [`Deadline`]).
    pub fn with_deadline(&self, deadline: Instant) -> Self {
        Self { inner: self.inner.clone(), channel: self.channel.clone(), deadline: Deadline::at(deadline) }
    }

    pub async fn begin(&self, new: &NewKey) -> Result<Begun, CallError> {
        let reply = self
            .inner
            .clone()
            .begin(self.deadline.request(pb::BeginRequest {
                key: new.key.canonical(),
                request_hash: new.request_hash.0.to_vec(),
                paste_id: new.paste_id.to_string(),
                response_body: new.response_body.expose().as_bytes().to_vec(),
            }))
            .await?
            .into_inner();
        let found = record(reply.record.ok_or_else(|| bad_reply("no record"))?)?;
        Ok(if reply.inserted { Begun::Inserted(found) } else { Begun::Existing(found) })
    }

    pub async fn get(&self, key: &IdempotencyKey) -> Result<Option<KeyRecord>, CallError> {
        match self.inner.clone().get(self.deadline.request(pb::GetKeyRequest { key: key.canonical() })).await {
            Ok(reply) => Ok(Some(record(reply.into_inner())?)),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(None),
            Err(status) => Err(status.into()),
        }
    }

    pub async fn mark_done(&self, key: &IdempotencyKey, paste_id: &PasteId) -> Result<bool, CallError> {
        let update = pb::GuardedUpdate { key: key.canonical(), paste_id: paste_id.to_string() };
        Ok(self.inner.clone().mark_done(self.deadline.request(update)).await?.into_inner().changed)
    }

    pub async fn abort(&self, key: &IdempotencyKey, paste_id: &PasteId) -> Result<bool, CallError> {
        let update = pb::GuardedUpdate { key: key.canonical(), paste_id: paste_id.to_string() };
        Ok(self.inner.clone().abort(self.deadline.request(update)).await?.into_inner().changed)
    }

    pub async fn restart(
        &self,
        key: &IdempotencyKey,
        aborted_paste_id: &PasteId,
        paste_id: &PasteId,
        response_body: &ResponseBody,
    ) -> Result<bool, CallError> {
        let request = pb::RestartRequest {
            key: key.canonical(),
            aborted_paste_id: aborted_paste_id.to_string(),
            paste_id: paste_id.to_string(),
            response_body: response_body.expose().as_bytes().to_vec(),
        };
        Ok(self.inner.clone().restart(self.deadline.request(request)).await?.into_inner().changed)
    }

    pub async fn list_pending(
        &self,
        created_before: DateTime<Utc>,
        after: Option<&PendingKey>,
        limit: u32,
    ) -> Result<Vec<PendingKey>, CallError> {
        let request = pb::ListPendingRequest {
            created_before_ms: to_millis(created_before),
            after_created_at_ms: after.map(|p| to_millis(p.created_at)).unwrap_or(0),
            after_key: after.map(|p| p.key.canonical()).unwrap_or_default(),
            limit,
        };
        let reply = self.inner.clone().list_pending(self.deadline.request(request)).await?.into_inner();
        reply
            .keys
            .into_iter()
            .map(|raw| {
                Ok(PendingKey {
                    key: IdempotencyKey::parse(&raw.key).map_err(|_| bad_reply("key"))?,
                    paste_id: PasteId::parse(&raw.paste_id).map_err(|_| bad_reply("paste_id"))?,
                    created_at: from_millis(raw.created_at_ms),
                })
            })
            .collect()
    }

    pub async fn pending_stats(&self) -> Result<PendingStats, CallError> {
        let reply =
            self.inner.clone().pending_stats(self.deadline.request(pb::PendingStatsRequest {})).await?.into_inner();
        Ok(PendingStats {
            pending: reply.pending,
            oldest_created_at: (reply.oldest_created_at_ms != 0).then(|| from_millis(reply.oldest_created_at_ms)),
            older_than_2s: reply.older_than_2s,
            older_than_60s: reply.older_than_60s,
            now: from_millis(reply.now_ms),
        })
    }

    pub async fn purge_retired(&self, limit: u32) -> Result<u64, CallError> {
        Ok(self
            .inner
            .clone()
            .purge_retired(self.deadline.request(pb::PurgeRetiredRequest { limit }))
            .await?
            .into_inner()
            .deleted)
    }
}
