use pastebin_keys::{KeyRecord, NewKey};
use pastebin_pastes::NewPaste;
use pastebin_proto::colocated::v1::{self as pb, colocated_create_client::ColocatedCreateClient};
use pastebin_runtime::grpc::{CallError, Deadline, Malformed, ShardChannel};
use tokio::time::Instant;

/// What a colocated commit answered, as the gateway follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// Both rows are committed.
    Both,
    /// The key was there; nothing was written.
    Existing(KeyRecord),
    /// Run the saga for this key: it searches first.
    SearchFirst,
    /// The minted id was taken; nothing was written.
    IdTaken,
}

/// A colocated shard's one-commit create, as the gateway calls it.
#[derive(Clone)]
pub struct ColocatedClient {
    inner: ColocatedCreateClient<ShardChannel>,
    deadline: Deadline,
}

fn bad_reply(malformed: Malformed) -> CallError {
    malformed.in_reply_from("colocated shard")
}

impl ColocatedClient {
    /// A client over `channel`, the same one its key and paste clients use.
    pub fn new(channel: impl Into<ShardChannel>) -> Self {
        Self { inner: ColocatedCreateClient::new(channel.into()), deadline: Deadline::default() }
    }

    /// The same shard, with every call carrying `deadline`.
    pub fn with_deadline(&self, deadline: Instant) -> Self {
        Self { inner: self.inner.clone(), deadline: Deadline::at(deadline) }
    }

    pub async fn commit(&self, new: &NewKey, paste: &NewPaste) -> Result<Committed, CallError> {
        let request = pb::CommitRequest {
            key: Some(pastebin_keys::wire::begin_request(new)),
            paste: Some(pastebin_pastes::wire::insert_request(paste)),
        };
        let reply = match self.inner.clone().commit(self.deadline.request(request)).await {
            Ok(reply) => reply.into_inner(),
            Err(status) if status.code() == tonic::Code::Aborted => return Ok(Committed::IdTaken),
            Err(status) => return Err(status.into()),
        };
        match reply.outcome.ok_or_else(|| bad_reply(Malformed("no outcome".into())))? {
            pb::commit_response::Outcome::Committed(_) => Ok(Committed::Both),
            pb::commit_response::Outcome::Existing(raw) => {
                Ok(Committed::Existing(pastebin_keys::wire::record_from_pb(raw).map_err(bad_reply)?))
            }
            pb::commit_response::Outcome::SearchFirst(_) => Ok(Committed::SearchFirst),
        }
    }
}
