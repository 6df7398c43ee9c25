use std::time::Duration;

use pastebin_core::{to_millis, IdempotencyKey, PasteId, ResponseBody, Slot};
use pastebin_proto::{
    keys::v1::{self as pb, key_service_client::KeyServiceClient},
    shard::v1 as shard_pb,
};
use pastebin_runtime::grpc::{CallError, Deadline, Malformed, ShardChannel};
use pastebin_slots::shard_slots;
use tokio::time::Instant;

use crate::{convert, Adopted, AppliedVerdicts, Begun, KeyRecord, NewKey, PendingKey, PendingStats, SlotKey};

/// A K shard as the gateway, the sweeper and operators see it: domain types
/// in, domain types out, every failure classified as refused or uncertain.
#[derive(Clone)]
pub struct KeyClient {
    inner: KeyServiceClient<ShardChannel>,
    /// Kept for the shard's `grpc.health.v1`, which is beside the service.
    channel: ShardChannel,
    deadline: Deadline,
}

fn bad_reply(malformed: Malformed) -> CallError {
    malformed.in_reply_from("key service")
}

impl KeyClient {
    /// A client over `channel`: a tonic channel to a shard elsewhere, or
    /// [`GrpcServer::in_process`](pastebin_runtime::grpc::GrpcServer::in_process) for one in this process.
    pub fn new(channel: impl Into<ShardChannel>) -> Self {
        let channel = channel.into();
        Self { inner: KeyServiceClient::new(channel.clone()), channel, deadline: Deadline::default() }
    }

    /// The channel to the shard, for the services served beside K's (a
    /// colocated shard's one-commit create).
    pub fn channel(&self) -> &ShardChannel {
        &self.channel
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
        let reply = self.inner.clone().begin(self.deadline.request(convert::begin_request(new))).await?.into_inner();
        let raw = reply.record.ok_or_else(|| bad_reply(Malformed("no record".into())))?;
        let found = convert::record_from_pb(raw).map_err(bad_reply)?;
        Ok(if reply.inserted { Begun::Inserted(found) } else { Begun::Existing(found) })
    }

    pub async fn get(&self, key: &IdempotencyKey) -> Result<Option<KeyRecord>, CallError> {
        match self.inner.clone().get(self.deadline.request(pb::GetKeyRequest { key: key.canonical() })).await {
            Ok(reply) => Ok(Some(convert::record_from_pb(reply.into_inner()).map_err(bad_reply)?)),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(None),
            Err(status) => Err(status.into()),
        }
    }

    pub async fn mark_done(&self, key: &IdempotencyKey, paste_id: &PasteId) -> Result<bool, CallError> {
        let update = convert::guarded_update(key, paste_id);
        Ok(self.inner.clone().mark_done(self.deadline.request(update)).await?.into_inner().changed)
    }

    pub async fn abort(&self, key: &IdempotencyKey, paste_id: &PasteId) -> Result<bool, CallError> {
        let update = convert::guarded_update(key, paste_id);
        Ok(self.inner.clone().abort(self.deadline.request(update)).await?.into_inner().changed)
    }

    /// [`crate::KeyStore::apply_verdicts`] over gRPC, for the keys the shard
    /// owns: the keys that changed, and those it does not own (untouched).
    pub async fn apply_verdicts(
        &self,
        to: pastebin_core::KeyState,
        keys: &[(IdempotencyKey, PasteId)],
    ) -> Result<AppliedVerdicts, CallError> {
        let request = pb::ApplyVerdictsRequest {
            to: convert::state_to_pb(to).into(),
            keys: keys
                .iter()
                .map(|(key, paste_id)| pb::GuardedUpdate { key: key.canonical(), paste_id: paste_id.to_string() })
                .collect(),
        };
        let reply = self.inner.clone().apply_verdicts(self.deadline.request(request)).await?.into_inner();
        let keys = |raw: &[String]| -> Result<Vec<IdempotencyKey>, CallError> {
            raw.iter().map(|key| convert::key(key).map_err(bad_reply)).collect()
        };
        Ok(AppliedVerdicts { changed: keys(&reply.changed)?, not_owned: keys(&reply.not_owned)? })
    }

    /// See [`crate::KeyStore::adopt`].
    pub async fn adopt(&self, adopted: &Adopted) -> Result<bool, CallError> {
        let request = convert::adopt_request(adopted);
        Ok(self.inner.clone().adopt(self.deadline.request(request)).await?.into_inner().changed)
    }

    /// Since when the shard may have lost commits, if it says so.
    pub async fn lost_commits(&self) -> Result<Option<pastebin_core::LostCommits>, CallError> {
        let answer = self.inner.clone().describe(self.deadline.request(shard_pb::DescribeRequest {})).await?;
        Ok(shard_slots::described_lost_commits(answer.get_ref()))
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

    /// Pending keys older than `older_than`, judged by the shard on its own
    /// clock, after the cursor `after`.
    pub async fn list_pending(
        &self,
        older_than: Duration,
        after: Option<&PendingKey>,
        limit: u32,
    ) -> Result<Vec<PendingKey>, CallError> {
        let request = pb::ListPendingRequest {
            older_than_ms: u64::try_from(older_than.as_millis()).unwrap_or(u64::MAX),
            after_created_at_ms: after.map(|p| to_millis(p.created_at)).unwrap_or(0),
            after_key: after.map(|p| p.key.canonical()).unwrap_or_default(),
            limit,
            ..Default::default()
        };
        let reply = self.inner.clone().list_pending(self.deadline.request(request)).await?.into_inner();
        reply.keys.into_iter().map(|raw| convert::pending_from_pb(raw).map_err(bad_reply)).collect()
    }

    pub async fn pending_stats(&self) -> Result<PendingStats, CallError> {
        let reply =
            self.inner.clone().pending_stats(self.deadline.request(pb::PendingStatsRequest {})).await?.into_inner();
        Ok(convert::stats_from_pb(reply))
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

    /// Of `paste_ids` (all of this shard's slots), those a done key names.
    pub async fn named_by_done_keys(&self, paste_ids: &[PasteId]) -> Result<Vec<PasteId>, CallError> {
        let request = pb::PasteIds { paste_ids: paste_ids.iter().map(ToString::to_string).collect() };
        let reply = self.inner.clone().named_by_done_keys(self.deadline.request(request)).await?.into_inner();
        reply.paste_ids.iter().map(|id| convert::paste_id(id).map_err(bad_reply)).collect()
    }

    /// One page of the keys whose paste id is in `slot`, after `after` (the
    /// last key of the previous page).
    pub async fn list_slot(&self, slot: Slot, after: Option<&SlotKey>, limit: u32) -> Result<Vec<SlotKey>, CallError> {
        let request = pb::ListSlotKeysRequest {
            slot: u32::from(slot.0),
            after_paste_id: after.map(|k| k.paste_id.to_string()).unwrap_or_default(),
            after_key: after.map(|k| k.key.canonical()).unwrap_or_default(),
            limit,
        };
        let reply = self.inner.clone().list_slot(self.deadline.request(request)).await?.into_inner();
        reply.keys.into_iter().map(|raw| convert::slot_key_from_pb(raw).map_err(bad_reply)).collect()
    }

    /// The slot move this shard is part of (none when it is in no move),
    /// with its description and its clock, as `ctl reshard --status` reads it.
    pub async fn move_status(&self) -> Result<shard_pb::MoveStatusResponse, CallError> {
        let mut moves = shard_pb::slot_moves_client::SlotMovesClient::new(self.channel.clone());
        Ok(moves.move_status(self.deadline.request(shard_pb::MoveStatusRequest::default())).await?.into_inner())
    }

    /// What the shard says it owns (and its generation, and what it froze).
    pub async fn describe(&self) -> Result<shard_slots::Described, CallError> {
        let answer = self.inner.clone().describe(self.deadline.request(shard_pb::DescribeRequest {})).await?;
        shard_slots::described(shard_pb::ShardKind::Key, answer.get_ref())
    }

    /// The durability the shard last read of its database (`None` before it did).
    pub async fn durability(&self) -> Result<Option<pastebin_runtime::durability::Reported>, CallError> {
        let answer = self.inner.clone().describe(self.deadline.request(shard_pb::DescribeRequest {})).await?;
        Ok(shard_slots::described_durability(answer.get_ref()))
    }
}
