//! The one-commit create, where one colocated shard holds both the key and
//! the paste rows of the key's slot, as docs/design.md#the-colocated-create
//! writes it:
//!
//! 1. validate and mint (id, token, expiry, 201 body), as the saga does;
//! 2. **look up** the key: a record there is followed by the saga's own
//!    rules (a done key replays or is 409; one the saga left pending or
//!    aborted is finished or restarted by the saga's steps, fence included);
//! 3. **PUT** the object, outside any transaction;
//! 4. **commit** the paste row and the key, done with its 201 body, in one
//!    transaction; a racer that lost on the key answers the winner's record;
//! 5. answer 201 with the body committed.
//!
//! No key is ever pending here, so recovery has nothing to do: a crash
//! after the PUT leaves an object no row names (the reaper's), and a commit
//! whose answer was lost is a done key that the retry replays.

use pastebin_colocated::{ColocatedClient, Committed};
use pastebin_keys::{KeyRecord, NewKey};
use pastebin_pastes::NewPaste;

use crate::{
    failpoints::{self, AFTER_COMMIT, AFTER_PUT},
    gateway::CreateAnswer,
    saga::{key_unavailable, stored_answer, Saga},
    step::{timed, within, StepError},
    ApiError, Created,
};

/// What to do after a commit that surely wrote nothing.
enum Unwritten {
    /// The key was there: its record decides.
    Follow(KeyRecord),
    RunTheSaga,
    Answer(ApiError),
}

impl Saga<'_> {
    pub(crate) async fn run_one_commit(&self, colocated: &ColocatedClient) -> Result<CreateAnswer, ApiError> {
        let known = within(self.deadline, self.keys.get(self.key())).await.map_err(key_unavailable)?;
        if let Some(record) = known {
            return self.follow(record, false).await;
        }
        let (paste_id, response_body) = self.mint();
        tracing::Span::current().record("paste_id", tracing::field::display(&paste_id));
        let created = Created::from_stored(&response_body)
            .ok_or(ApiError::Unavailable("the answer minted for this key is unreadable"))?;
        let new = NewKey { key: *self.key(), request_hash: self.request.request_hash, paste_id, response_body };
        let paste = self.new_paste(&new.paste_id, &created)?;
        self.put_for_commit(&paste).await?;
        failpoints::hit(AFTER_PUT).await;
        self.commit(colocated, new, paste).await
    }

    /// Step 3. Nothing is written anywhere yet, so every failure just
    /// answers; an object an uncertain PUT may have made is the reaper's.
    async fn put_for_commit(&self, paste: &NewPaste) -> Result<(), ApiError> {
        match self.put(&paste.id).await {
            Ok(()) => Ok(()),
            Err(StepError::StorageFull(reason)) => {
                tracing::warn!(%reason, "object PUT found no room");
                Err(ApiError::StorageFull)
            }
            Err(StepError::Refused(reason)) => {
                tracing::warn!(%reason, "object PUT refused");
                Err(ApiError::Unavailable("the object store refused the content"))
            }
            Err(StepError::Uncertain(reason) | StepError::NotExecuted(reason)) => {
                tracing::warn!(%reason, "object PUT uncertain");
                Err(ApiError::Unavailable("the object store did not answer"))
            }
        }
    }

    /// Step 4, the one commit, and what its answer says to do. Where the
    /// commit surely wrote nothing, the object just PUT is one no paste
    /// will ever hold, and goes at once.
    #[tracing::instrument(skip_all, err(level = "debug", Display))]
    async fn commit(
        &self,
        colocated: &ColocatedClient,
        new: NewKey,
        paste: NewPaste,
    ) -> Result<CreateAnswer, ApiError> {
        let committed = timed("commit", within(self.deadline, colocated.commit(&new, &paste))).await;
        let unwritten = match committed {
            Ok(Committed::Both) => {
                failpoints::hit(AFTER_COMMIT).await;
                return stored_answer(&new.response_body, false);
            }
            // An id with a row already may be a live paste's: its object stays.
            Ok(Committed::IdTaken) => return Err(ApiError::Unavailable("the paste id minted was taken; retry")),
            Err(StepError::Uncertain(reason)) => {
                tracing::warn!(%reason, "the colocated commit is uncertain: the retry replays it or creates anew");
                return Err(ApiError::Unavailable("the colocated shard did not answer"));
            }
            Ok(Committed::Existing(record)) => Unwritten::Follow(record),
            Ok(Committed::SearchFirst) => Unwritten::RunTheSaga,
            Err(StepError::NotExecuted(_)) => Unwritten::Answer(ApiError::SlotMoving),
            Err(StepError::StorageFull(_)) => Unwritten::Answer(ApiError::StorageFull),
            Err(StepError::Refused(reason)) => {
                tracing::error!(%reason, "the colocated commit was refused");
                Unwritten::Answer(ApiError::Unavailable("the colocated shard refused the create"))
            }
        };
        self.remove_object(&paste.id).await;
        match unwritten {
            Unwritten::Follow(record) => self.follow(record, false).await,
            // The shard may have lost this key's earlier life: the saga
            // searches for its paste before it makes one.
            Unwritten::RunTheSaga => self.run().await,
            Unwritten::Answer(error) => Err(error),
        }
    }
}
