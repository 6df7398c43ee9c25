//! The create saga, step by step as SPEC §4 writes it:
//!
//! 1. validate and mint (id, token, expiry, 201 body): no commit yet;
//! 2. **K begin**: insert the key as pending, or act on what is there;
//! 3. **PUT** the object, outside any transaction;
//! 4. **P insert** the paste row;
//! 5. **K done**, guarded;
//! 6. answer 201 with the stored body.
//!
//! A definite failure compensates by aborting (tombstone on P first, then the
//! guarded abort on K). An uncertain one leaves the key pending and answers
//! 503: the client's retry with the same key, or the sweeper, finishes it.
//! Nothing here ever deletes a paste: a pending key whose paste exists is
//! finished, not undone.

use std::future::Future;

use pastebin_core::{DeleteToken, IdempotencyKey, KeyState, PasteId, ResponseBody};
use pastebin_keys::{Begun, KeyClient, KeyRecord, NewKey};
use pastebin_objects::ObjectError;
use pastebin_pastes::{IdFate, InsertOutcome, NewPaste, PasteClient};
use pastebin_runtime::grpc::CallError;
use sha2::{Digest, Sha256};
use tokio::time::Instant;
use tracing::Instrument;

use crate::{
    failpoints::{self, AFTER_DONE, AFTER_K_BEGIN, AFTER_PUT, AFTER_P_INSERT, BEFORE_DONE},
    gateway::{CreateAnswer, ValidCreate},
    ApiError, Created, Gateway,
};

/// A failed step, split the way the saga must treat it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepError {
    /// The other side answered: it did not act. Compensating is safe.
    #[error("refused: {0}")]
    Refused(String),
    /// Timeout or no answer: it may have acted. Only waiting is safe.
    #[error("uncertain: {0}")]
    Uncertain(String),
}

impl From<CallError> for StepError {
    fn from(error: CallError) -> Self {
        match error {
            CallError::Refused(status) => Self::Refused(status.message().to_owned()),
            CallError::Uncertain(status) => Self::Uncertain(status.message().to_owned()),
        }
    }
}

impl From<ObjectError> for StepError {
    fn from(error: ObjectError) -> Self {
        match error {
            ObjectError::Refused(message) => Self::Refused(message),
            ObjectError::Uncertain(message) => Self::Uncertain(message),
        }
    }
}

/// Runs one call against the request's deadline; running out of time is
/// uncertain, never refused.
pub(crate) async fn within<T, E: Into<StepError>>(
    deadline: Instant,
    call: impl Future<Output = Result<T, E>>,
) -> Result<T, StepError> {
    match tokio::time::timeout_at(deadline, call).await {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(StepError::Uncertain("deadline exceeded".into())),
    }
}

/// Records how long one saga step took, whatever its outcome.
async fn timed<T>(step: &'static str, call: impl Future<Output = T>) -> T {
    let started = std::time::Instant::now();
    let result = call.await;
    metrics::histogram!(pastebin_runtime::metrics::SAGA_STEP_SECONDS, "step" => step)
        .record(started.elapsed().as_secs_f64());
    result
}

/// How many times a create re-reads its key after losing a guarded update
/// to another executor before answering 503.
const MAX_REREADS: usize = 3;

/// One create in flight: its request, its deadline and the shards its slot maps to.
struct Saga<'a> {
    gateway: &'a Gateway,
    request: &'a ValidCreate,
    deadline: Instant,
    keys: KeyClient,
    pastes: PasteClient,
}

fn key_unavailable(error: StepError) -> ApiError {
    tracing::warn!(%error, "key service call failed");
    ApiError::Unavailable("the key service is unavailable")
}

impl Gateway {
    pub(crate) async fn run_create(&self, request: ValidCreate) -> Result<CreateAnswer, ApiError> {
        let slot = request.key.slot();
        let deadline = Instant::now() + self.inner.settings.request_budget;
        let saga = Saga {
            gateway: self,
            request: &request,
            deadline,
            keys: self.inner.slots.key_shard(slot).with_deadline(deadline),
            pastes: self.inner.slots.paste_shard(slot).with_deadline(deadline),
        };
        let span = tracing::info_span!("create", key = %request.key, slot = %slot, paste_id = tracing::field::Empty);
        saga.run().instrument(span).await
    }
}

impl Saga<'_> {
    fn key(&self) -> &IdempotencyKey {
        &self.request.key
    }

    /// Step 1: a fresh paste id in the key's slot, a delete token, and the
    /// 201 body that will be stored and, once done, shown.
    fn mint(&self) -> (PasteId, ResponseBody) {
        let id = PasteId::mint(self.key().slot());
        let expires_at = self.gateway.inner.clock.now() + self.request.expiry.duration();
        let created = Created::new(&id, &self.gateway.inner.settings.public_url, expires_at, &DeleteToken::generate());
        (id, created.to_stored())
    }

    async fn run(&self) -> Result<CreateAnswer, ApiError> {
        let (paste_id, response_body) = self.mint();
        let mut record = self.begin(paste_id, response_body).await?;
        failpoints::hit(AFTER_K_BEGIN).await;
        for _ in 0..MAX_REREADS {
            if record.request_hash != self.request.request_hash {
                return Err(ApiError::KeyConflict);
            }
            match record.state {
                KeyState::Done => return answer(&record, true),
                KeyState::Pending => return self.roll_forward(&record).await,
                KeyState::Aborted => {
                    let (paste_id, response_body) = self.mint();
                    let restarted = within(
                        self.deadline,
                        self.keys.restart(self.key(), &record.paste_id, &paste_id, &response_body),
                    )
                    .await
                    .map_err(key_unavailable)?;
                    if restarted {
                        record = KeyRecord { paste_id, response_body, state: KeyState::Pending, ..record };
                        return self.roll_forward(&record).await;
                    }
                    record = self.reread().await?;
                }
            }
        }
        Err(ApiError::Unavailable("the key is contended"))
    }

    /// Step 2, K commit: begin. A lost race returns the winner's record,
    /// which the caller then follows like any existing key.
    #[tracing::instrument(skip_all, err(Display))]
    async fn begin(&self, paste_id: PasteId, response_body: ResponseBody) -> Result<KeyRecord, ApiError> {
        let new = NewKey { key: *self.key(), request_hash: self.request.request_hash, paste_id, response_body };
        match timed("k_begin", within(self.deadline, self.keys.begin(&new))).await.map_err(key_unavailable)? {
            Begun::Inserted(record) | Begun::Existing(record) => Ok(record),
        }
    }

    async fn reread(&self) -> Result<KeyRecord, ApiError> {
        within(self.deadline, self.keys.get(self.key()))
            .await
            .map_err(key_unavailable)?
            .ok_or(ApiError::Unavailable("the key vanished; retry"))
    }

    /// Steps 3 to 6 for a pending record, with the stored id and body: every
    /// step is safe to repeat, so a fresh create and a retry that finds its
    /// key pending run the very same code.
    async fn roll_forward(&self, record: &KeyRecord) -> Result<CreateAnswer, ApiError> {
        tracing::Span::current().record("paste_id", tracing::field::display(&record.paste_id));
        let created = Created::from_stored(&record.response_body)
            .ok_or(ApiError::Unavailable("the stored answer for this key is unreadable"))?;
        let paste_exists = match self.put(&record.paste_id).await {
            Ok(()) => {
                failpoints::hit(AFTER_PUT).await;
                self.insert(&record.paste_id, &created).await?
            }
            Err(StepError::Refused(reason)) => {
                tracing::warn!(%reason, "object PUT refused; aborting the key");
                self.abort(&record.paste_id).await?
            }
            Err(StepError::Uncertain(reason)) => {
                tracing::warn!(%reason, "object PUT uncertain; the key stays pending");
                return Err(ApiError::Unavailable("the object store did not answer"));
            }
        };
        if !paste_exists {
            return Err(ApiError::Unavailable("this attempt was aborted"));
        }
        failpoints::hit(AFTER_P_INSERT).await;
        failpoints::hit(BEFORE_DONE).await;
        self.mark_done(record).await?;
        failpoints::hit(AFTER_DONE).await;
        answer(record, false)
    }

    /// Step 3: PUT the content, create-only. "Already there" is success: the
    /// request hash matched, so it is the same bytes.
    #[tracing::instrument(skip_all, err(Display))]
    async fn put(&self, paste_id: &PasteId) -> Result<(), StepError> {
        let put = self.gateway.inner.objects.put(paste_id.as_str(), self.request.content.clone());
        timed("put", within(self.deadline, put)).await.map(drop)
    }

    /// Step 4, P commit: insert the paste row. Returns whether the paste
    /// exists afterwards (false: this attempt is aborted).
    #[tracing::instrument(skip_all, err(Display))]
    async fn insert(&self, paste_id: &PasteId, created: &Created) -> Result<bool, ApiError> {
        let expires_at =
            created.expires_at().ok_or(ApiError::Unavailable("the stored answer for this key is unreadable"))?;
        let paste = NewPaste {
            id: paste_id.clone(),
            delete_token_hash: DeleteToken::presented(&created.delete_token).hash(),
            created_at: self.gateway.inner.clock.now(),
            expires_at,
            size: self.request.content.len() as u64,
            content_sha256: Sha256::digest(&self.request.content).into(),
            // The request hash covers these, so a rolled-forward retry
            // carries the very attributes the first attempt minted for.
            attributes: self.request.attributes.clone(),
        };
        match timed("p_insert", within(self.deadline, self.pastes.insert(&paste))).await {
            Ok(InsertOutcome::Inserted | InsertOutcome::AlreadyExists) => Ok(true),
            Ok(InsertOutcome::Tombstoned) => {
                // The fence is already up, so recording the abort is safe; it
                // lets the client's retry restart the key at once.
                let _ = within(self.deadline, self.keys.abort(self.key(), paste_id)).await;
                Ok(false)
            }
            Err(StepError::Refused(reason)) => {
                tracing::error!(%reason, "paste insert refused; aborting the key");
                self.abort(paste_id).await
            }
            Err(StepError::Uncertain(reason)) => {
                tracing::warn!(%reason, "paste insert uncertain; the key stays pending");
                Err(ApiError::Unavailable("the paste service did not answer"))
            }
        }
    }

    /// The compensation. First the fence: tombstone the id on P unless a
    /// paste holds it. If a paste holds it, the right action is done, not
    /// abort (returns true). Only behind the tombstone is the key aborted.
    /// If P cannot be read the key stays pending: never abort blind.
    #[tracing::instrument(skip_all, err(Display))]
    async fn abort(&self, paste_id: &PasteId) -> Result<bool, ApiError> {
        match within(self.deadline, self.pastes.tombstone_unless_live(paste_id)).await {
            Ok(IdFate::Live) => Ok(true),
            Ok(IdFate::Tombstoned) => {
                within(self.deadline, self.keys.abort(self.key(), paste_id)).await.map_err(key_unavailable)?;
                Ok(false)
            }
            Err(error) => {
                tracing::warn!(%error, "cannot reach the paste service to abort; the key stays pending");
                Err(ApiError::Unavailable("the paste service did not answer"))
            }
        }
    }

    /// Step 5, K commit: done, guarded by state and paste id. Losing the
    /// guard means another executor moved the key: re-read and accept only a
    /// done key for this same paste. Failing here never touches the paste.
    #[tracing::instrument(skip_all, err(Display))]
    async fn mark_done(&self, record: &KeyRecord) -> Result<(), ApiError> {
        let changed = timed("k_done", within(self.deadline, self.keys.mark_done(self.key(), &record.paste_id)))
            .await
            .map_err(key_unavailable)?;
        if changed {
            return Ok(());
        }
        let now = self.reread().await?;
        if now.state == KeyState::Done && now.paste_id == record.paste_id {
            Ok(())
        } else {
            Err(ApiError::Unavailable("the key moved on during this attempt"))
        }
    }
}

/// Step 6: the stored body, exactly as stored.
fn answer(record: &KeyRecord, replayed: bool) -> Result<CreateAnswer, ApiError> {
    let created = Created::from_stored(&record.response_body)
        .ok_or(ApiError::Unavailable("the stored answer for this key is unreadable"))?;
    Ok(CreateAnswer { body: record.response_body.clone(), created, replayed })
}
