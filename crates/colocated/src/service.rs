use pastebin_proto::colocated::v1::{self as pb, colocated_create_server::ColocatedCreateServer};
use pastebin_runtime::grpc::store_status;
use pastebin_slots::shard_slots::ShardSlots;
use tonic::{Request, Response, Status};

use crate::{ColocatedStore, Commit, CommitError};

/// The colocated create over gRPC. Validates every field before touching
/// storage, so bad input is INVALID_ARGUMENT and writes nothing; a key whose
/// slot is outside `slots` is FAILED_PRECONDITION, like every call of the
/// key service beside it.
pub struct ColocatedService {
    store: ColocatedStore,
    slots: ShardSlots,
}

impl ColocatedService {
    pub fn new(store: ColocatedStore, slots: ShardSlots) -> Self {
        Self { store, slots }
    }

    pub fn into_server(self) -> ColocatedCreateServer<Self> {
        ColocatedCreateServer::new(self)
    }
}

impl From<CommitError> for Status {
    fn from(error: CommitError) -> Self {
        match error {
            // Definite: nothing was written, and the caller's retry mints anew.
            CommitError::IdTaken => Status::aborted(error.to_string()),
            _ => store_status(&error),
        }
    }
}

#[tonic::async_trait]
impl pb::colocated_create_server::ColocatedCreate for ColocatedService {
    async fn commit(&self, request: Request<pb::CommitRequest>) -> Result<Response<pb::CommitResponse>, Status> {
        let request = request.into_inner();
        let new =
            pastebin_keys::wire::new_key(request.key.ok_or_else(|| Status::invalid_argument("key is required"))?)?;
        let paste = pastebin_pastes::wire::new_paste(
            request.paste.ok_or_else(|| Status::invalid_argument("paste is required"))?,
        )?;
        if paste.id != new.paste_id {
            return Err(Status::invalid_argument("paste.id must be the key's paste_id"));
        }
        let (permit, store) = (self.slots.writable([&new.key]).await?, self.store.clone());
        let outcome = match permit.complete(async move { store.commit(&new, &paste).await }).await?? {
            Commit::Committed => pb::commit_response::Outcome::Committed(pb::Committed {}),
            Commit::Existing(record) => {
                pb::commit_response::Outcome::Existing(pastebin_keys::wire::record_to_pb(record))
            }
            Commit::SearchFirst => pb::commit_response::Outcome::SearchFirst(pb::SearchFirst {}),
        };
        Ok(Response::new(pb::CommitResponse { outcome: Some(outcome) }))
    }
}
