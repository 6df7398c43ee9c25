use pastebin_core::{DeleteToken, DeleteTokenHash, KeyHash, PasteId, Slot};
use pastebin_proto::{
    pastes::v1::{self as pb, paste_service_client::PasteServiceClient},
    shard::v1 as shard_pb,
};
use pastebin_runtime::grpc::{CallError, Deadline, Malformed, ShardChannel};
use pastebin_slots::shard_slots;
use tokio::time::Instant;

use crate::{
    convert, BurnClaim, DeleteOutcome, DismissOutcome, Dismissal, IdFate, InsertOutcome, KeyedPaste, NewPaste,
    PasteRead, PasteRow, ReportOrder, ReportedPaste, SlotRow, TakedownOutcome,
};

/// What [`PasteClient::resolve_batch`] answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedBatch {
    /// Each fenced id's fate.
    pub fates: Vec<(PasteId, IdFate)>,
    /// The ids of slots a move has frozen: untouched, to be asked again.
    pub waiting: Vec<PasteId>,
}

/// A P shard as its callers see it: domain types, and every failure
/// classified as refused (it did not act) or uncertain (it may have).
#[derive(Clone)]
pub struct PasteClient {
    inner: PasteServiceClient<ShardChannel>,
    /// Kept for the shard's `grpc.health.v1`, which is beside the service.
    channel: ShardChannel,
    deadline: Deadline,
}

fn bad_reply(malformed: Malformed) -> CallError {
    malformed.in_reply_from("paste service")
}

/// A fence's answer, which is always live or tombstoned.
fn fate(raw: i32) -> Result<IdFate, CallError> {
    convert::fate_from_pb(raw).and_then(|fate| fate.ok_or_else(|| Malformed("fate".into()))).map_err(bad_reply)
}

impl PasteClient {
    /// A client over `channel`: a tonic channel to a shard elsewhere, or
    /// [`GrpcServer::in_process`](pastebin_runtime::grpc::GrpcServer::in_process) for one in this process.
    pub fn new(channel: impl Into<ShardChannel>) -> Self {
        let channel = channel.into();
        Self { inner: PasteServiceClient::new(channel.clone()), channel, deadline: Deadline::default() }
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

    pub async fn insert(&self, paste: &NewPaste) -> Result<InsertOutcome, CallError> {
        let request = convert::insert_request(paste);
        let reply = self.inner.clone().insert(self.deadline.request(request)).await?.into_inner();
        convert::outcome_from_pb(reply).map_err(bad_reply)
    }

    pub async fn get(&self, id: &PasteId) -> Result<Option<PasteRow>, CallError> {
        Ok(match self.read(id).await? {
            PasteRead::Live(row) => Some(row),
            PasteRead::RemovedByOperator { .. } | PasteRead::Missing => None,
        })
    }

    /// What a reader finds: the live paste, a takedown's reason, or nothing.
    pub async fn read(&self, id: &PasteId) -> Result<PasteRead, CallError> {
        match self.inner.clone().get(self.deadline.request(pb::GetRequest { id: id.to_string() })).await {
            Ok(reply) => Ok(PasteRead::Live(convert::paste_from_pb(reply.into_inner()).map_err(bad_reply)?)),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(match convert::removed_reason(&status) {
                Some(reason) => PasteRead::RemovedByOperator { reason },
                None => PasteRead::Missing,
            }),
            Err(status) => Err(status.into()),
        }
    }

    /// See [`crate::PasteStore::take_down`]; `operator` names who asked, for the audit log.
    pub async fn take_down(&self, id: &PasteId, reason: &str, operator: &str) -> Result<TakedownOutcome, CallError> {
        let request =
            pb::TakeDownRequest { id: id.to_string(), reason: reason.to_owned(), operator: operator.to_owned() };
        let reply = self.inner.clone().take_down(self.deadline.request(request)).await?.into_inner();
        convert::takedown_from_pb(reply.outcome).map_err(bad_reply)
    }

    /// A reader's report; `None` when there is no live paste to report.
    pub async fn report(&self, id: &PasteId, reason: &str, note: Option<&str>) -> Result<Option<u64>, CallError> {
        let request =
            pb::ReportRequest { id: id.to_string(), reason: reason.to_owned(), note: note.unwrap_or("").to_owned() };
        match self.inner.clone().report(self.deadline.request(request)).await {
            Ok(reply) => Ok(Some(reply.into_inner().report_count)),
            Err(status) if status.code() == tonic::Code::NotFound => Ok(None),
            Err(status) => Err(status.into()),
        }
    }

    /// Up to `limit` reported live pastes in `order`, and the shard's open reports.
    pub async fn reports(&self, order: ReportOrder, limit: u32) -> Result<(Vec<ReportedPaste>, u64), CallError> {
        let order = match order {
            ReportOrder::Newest => pb::ReportOrder::Newest,
            ReportOrder::Most => pb::ReportOrder::Most,
        };
        let request = pb::ListReportsRequest { order: order.into(), limit };
        let reply = self.inner.clone().list_reports(self.deadline.request(request)).await?.into_inner();
        let pastes = reply.pastes.into_iter().map(|raw| convert::reported_from_pb(raw).map_err(bad_reply));
        Ok((pastes.collect::<Result<_, _>>()?, reply.open_reports))
    }

    /// An operator's dismissal of a paste's report (see
    /// [`crate::PasteStore::dismiss_report`]); `operator` as in [`Self::take_down`].
    pub async fn dismiss_report(
        &self,
        id: &PasteId,
        which: Dismissal,
        operator: &str,
    ) -> Result<DismissOutcome, CallError> {
        let request = pb::DismissReportRequest {
            id: id.to_string(),
            number: convert::dismissal_to_pb(which),
            operator: operator.to_owned(),
        };
        let reply = self.inner.clone().dismiss_report(self.deadline.request(request)).await?.into_inner();
        convert::dismissed_from_pb(reply).map_err(bad_reply)
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
        convert::fate_from_pb(reply.into_inner().fate).map_err(bad_reply)
    }

    /// The fence for many ids: each one's fate, but for the ids of a slot a
    /// move has frozen, which are left untouched ([`ResolvedBatch::waiting`]).
    pub async fn resolve_batch(&self, ids: &[PasteId]) -> Result<ResolvedBatch, CallError> {
        let request = pb::ResolveBatchRequest { ids: ids.iter().map(ToString::to_string).collect() };
        let reply = self.inner.clone().resolve_batch(self.deadline.request(request)).await?.into_inner();
        let fates = reply
            .ids
            .into_iter()
            .map(|resolved| Ok((convert::id(&resolved.id).map_err(bad_reply)?, fate(resolved.fate)?)))
            .collect::<Result<_, CallError>>()?;
        let waiting =
            reply.waiting.iter().map(|id| convert::id(id).map_err(bad_reply)).collect::<Result<_, CallError>>()?;
        Ok(ResolvedBatch { fates, waiting })
    }

    /// [`Self::peek_fate`] for many ids in one round trip, writing nothing.
    pub async fn peek_batch(&self, ids: &[PasteId]) -> Result<Vec<(PasteId, Option<IdFate>)>, CallError> {
        let request = pb::ResolveBatchRequest { ids: ids.iter().map(ToString::to_string).collect() };
        let reply = self.inner.clone().peek_batch(self.deadline.request(request)).await?.into_inner();
        reply
            .ids
            .into_iter()
            .map(|seen| {
                let id = convert::id(&seen.id).map_err(bad_reply)?;
                Ok((id, convert::fate_from_pb(seen.fate).map_err(bad_reply)?))
            })
            .collect()
    }

    /// One page of the rows of `slot`, after the id `after`.
    pub async fn list_slot(&self, slot: Slot, after: Option<&PasteId>, limit: u32) -> Result<Vec<SlotRow>, CallError> {
        let request = pb::ListSlotRowsRequest {
            slot: u32::from(slot.0),
            after_id: after.map(ToString::to_string).unwrap_or_default(),
            limit,
        };
        let reply = self.inner.clone().list_slot(self.deadline.request(request)).await?.into_inner();
        reply.rows.into_iter().map(|raw| convert::slot_row_from_pb(raw).map_err(bad_reply)).collect()
    }

    /// The rows whose create carried `key_hash`, newest first (at most 8),
    /// of the slots this shard owns.
    pub async fn find_by_key(&self, key_hash: &KeyHash) -> Result<Vec<KeyedPaste>, CallError> {
        let request = pb::FindByKeyRequest { key_sha256: key_hash.0.to_vec() };
        let reply = self.inner.clone().find_by_key(self.deadline.request(request)).await?.into_inner();
        reply.pastes.into_iter().map(|raw| convert::keyed_from_pb(raw).map_err(bad_reply)).collect()
    }

    /// See [`crate::PasteStore::rotate_delete_token`].
    pub async fn rotate_delete_token(
        &self,
        id: &PasteId,
        key_hash: &KeyHash,
        token_hash: &DeleteTokenHash,
    ) -> Result<bool, CallError> {
        let request = pb::RotateDeleteTokenRequest {
            id: id.to_string(),
            key_sha256: key_hash.0.to_vec(),
            delete_token_sha256: token_hash.0.to_vec(),
        };
        Ok(self.inner.clone().rotate_delete_token(self.deadline.request(request)).await?.into_inner().rotated)
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
        reply.ids.iter().map(|id| convert::id(id).map_err(bad_reply)).collect()
    }

    pub async fn purge_tombstones(&self, min_age: std::time::Duration, limit: u32) -> Result<u64, CallError> {
        let request = pb::PurgeTombstonesRequest { min_age_seconds: min_age.as_secs(), limit };
        Ok(self.inner.clone().purge_tombstones(self.deadline.request(request)).await?.into_inner().deleted)
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
        shard_slots::described(shard_pb::ShardKind::Paste, answer.get_ref())
    }

    /// The durability the shard last read of its database (`None` before it did).
    pub async fn durability(&self) -> Result<Option<pastebin_runtime::durability::Reported>, CallError> {
        let answer = self.inner.clone().describe(self.deadline.request(shard_pb::DescribeRequest {})).await?;
        Ok(shard_slots::described_durability(answer.get_ref()))
    }
}
