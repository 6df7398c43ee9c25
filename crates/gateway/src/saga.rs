//! The create saga, step by step as docs/design.md#saga writes it:
//!
//! 1. validate and mint (id, token, expiry, 201 body): no commit yet;
//! 2. **K begin**: insert the key as pending, or act on what is there;
//! 3. **PUT** the object, outside any transaction;
//! 4. **P insert** the paste row;
//! 5. **K done**, guarded;
//! 6. answer 201 with the stored body.
//!
//! While K may have lost commits, a key it has not finished first searches
//! its slot's P shard for a paste an erased earlier life of the key made,
//! and adopts it instead of making a second (docs/design.md#adopting-after-a-k-loss).
//!
//! A definite failure compensates by aborting (tombstone on P first, then the
//! guarded abort on K). An uncertain one leaves the key pending and answers
//! 503: the client's retry with the same key, or the sweeper, finishes it.
//! Nothing here ever deletes a paste: a pending key whose paste exists is
//! finished, not undone.

use chrono::{DateTime, Utc};
use pastebin_core::{DeleteToken, IdempotencyKey, KeyState, PasteId, PasteOrigin, ResponseBody};
use pastebin_keys::{Adopted, Begun, KeyClient, KeyRecord, NewKey};
use pastebin_pastes::{IdFate, InsertOutcome, KeyedPaste, NewPaste, PasteClient, PasteRead};
use pastebin_shards::{fence, FenceError, Fenced};
use sha2::{Digest, Sha256};
use tokio::time::Instant;
use tracing::Instrument;

use crate::{
    failpoints::{self, AFTER_DONE, AFTER_K_BEGIN, AFTER_PUT, AFTER_P_INSERT, AFTER_TOKEN_ROTATED, BEFORE_DONE},
    gateway::{CreateAnswer, ValidCreate},
    step::{timed, within, FollowMoves, StepError},
    ApiError, Created, Gateway,
};

/// How many times a create re-reads its key after losing a guarded update
/// to another executor before answering 503.
const MAX_REREADS: usize = 3;

/// One create in flight: its request, its deadline and the shards its slot maps to.
pub(crate) struct Saga<'a> {
    gateway: &'a Gateway,
    pub(crate) request: &'a ValidCreate,
    pub(crate) deadline: Instant,
    pub(crate) keys: KeyClient,
    pastes: PasteClient,
}

pub(crate) fn key_unavailable(error: StepError) -> ApiError {
    match &error {
        StepError::NotExecuted(reason) => {
            tracing::debug!(%reason, "key service: the slot is moving");
            return ApiError::SlotMoving;
        }
        StepError::StorageFull(reason) => {
            // Nothing was written: the key is as it was before this call.
            tracing::warn!(%reason, "the key service's storage is full");
            return ApiError::StorageFull;
        }
        StepError::Refused(_) | StepError::Uncertain(_) => {}
    }
    tracing::warn!(%error, "key service call failed");
    ApiError::Unavailable("the key service is unavailable")
}

fn paste_unreachable(error: &dyn std::fmt::Display) -> Result<bool, ApiError> {
    tracing::warn!(%error, "cannot reach the paste service to abort; the key stays pending");
    Err(ApiError::Unavailable("the paste service did not answer"))
}

impl Gateway {
    /// Runs the saga; while the key's slot is moving between shards (a step
    /// answered "not executed"), discovers the slot map again and runs it
    /// again, within the same budget: every step is safe to repeat, and the
    /// refused one did not happen (docs/design.md#moving-slots).
    pub(crate) async fn run_create(&self, request: ValidCreate) -> Result<CreateAnswer, ApiError> {
        let slot = request.key.slot();
        let deadline = Instant::now() + self.inner.settings.request_budget;
        // The key itself is a credential for 25 h (a replay returns the delete
        // token), so logs carry only its short hash (docs/design.md#identifiers).
        let span = tracing::info_span!(
            "create",
            key_hash = %request.key.short_hash(),
            slot = %slot,
            paste_id = tracing::field::Empty
        );
        let mut moves = FollowMoves::new();
        loop {
            let slots = self.slots()?;
            let saga = Saga {
                gateway: self,
                request: &request,
                deadline,
                keys: slots.key_shard(slot).with_deadline(deadline),
                pastes: slots.paste_shard(slot).with_deadline(deadline),
            };
            // Where one shard holds both kinds of the slot, the create is
            // one commit there (docs/design.md#the-colocated-create).
            let colocated = slots.colocated_shard(slot).filter(|_| self.inner.settings.one_commit_creates);
            let created = match colocated {
                Some(colocated) => {
                    saga.run_one_commit(&colocated.with_deadline(deadline)).instrument(span.clone()).await
                }
                None => saga.run().instrument(span.clone()).await,
            };
            // A step's refusal is logged at DEBUG where it happens; the
            // create's own outcome once here: a refusal the saga follows is
            // no error, and only a failure the client sees as 5xx is one.
            match created {
                Err(ApiError::SlotMoving) if moves.again(&self.inner.slots, deadline).await => {
                    tracing::info!(parent: &span, "the key's slot moved or is moving: following it");
                }
                answer => {
                    if let Err(error) = &answer {
                        if error.http_status().is_server_error() {
                            tracing::error!(parent: &span, %error, "create failed");
                        }
                    }
                    return answer;
                }
            }
        }
    }
}

impl Saga<'_> {
    pub(crate) fn key(&self) -> &IdempotencyKey {
        &self.request.key
    }

    /// Step 1: a fresh paste id in the key's slot, a delete token, and the
    /// 201 body that will be stored and, once done, shown.
    pub(crate) fn mint(&self) -> (PasteId, ResponseBody) {
        let inner = &self.gateway.inner;
        let id = inner.minter.paste_id(self.key().slot());
        let expires_at = self.request.expiry.expires_at(inner.clock.now());
        let created = Created::new(&id, &inner.settings.public_url, expires_at, &inner.minter.delete_token());
        (id, created.to_stored())
    }

    pub(crate) async fn run(&self) -> Result<CreateAnswer, ApiError> {
        let (paste_id, response_body) = self.mint();
        let begun = self.begin(paste_id, response_body).await?;
        failpoints::hit(AFTER_K_BEGIN).await;
        match begun {
            Begun::Inserted(record) => self.follow(record, true).await,
            Begun::Existing(record) => self.follow(record, false).await,
        }
    }

    /// What the key's record says to do: replay a done key, 409 another
    /// body, finish a pending one, restart an aborted one. `fresh`: this
    /// attempt inserted the record just now.
    pub(crate) async fn follow(&self, mut record: KeyRecord, fresh: bool) -> Result<CreateAnswer, ApiError> {
        for _ in 0..MAX_REREADS {
            if record.request_hash != self.request.request_hash {
                return Err(ApiError::KeyConflict);
            }
            match record.state {
                KeyState::Done => return answer(&record, true),
                KeyState::Pending => {
                    if !fresh {
                        self.refuse_if_taken_down(&record.paste_id).await?;
                    }
                    return self.finish_pending(&record).await;
                }
                KeyState::Aborted => {
                    self.refuse_if_taken_down(&record.paste_id).await?;
                    let (paste_id, response_body) = self.mint();
                    let restarted = within(
                        self.deadline,
                        self.keys.restart(self.key(), &record.paste_id, &paste_id, &response_body),
                    )
                    .await
                    .map_err(key_unavailable)?;
                    if restarted {
                        record = KeyRecord { paste_id, response_body, state: KeyState::Pending, ..record };
                        return self.finish_pending(&record).await;
                    }
                    record = self.reread().await?;
                }
            }
        }
        Err(ApiError::Unavailable("the key is contended"))
    }

    /// Step 2, K commit: begin. A lost race returns the winner's record,
    /// which the caller then follows like any existing key.
    #[tracing::instrument(skip_all, err(level = "debug", Display))]
    async fn begin(&self, paste_id: PasteId, response_body: ResponseBody) -> Result<Begun, ApiError> {
        let new = NewKey { key: *self.key(), request_hash: self.request.request_hash, paste_id, response_body };
        timed("k_begin", within(self.deadline, self.keys.begin(&new))).await.map_err(key_unavailable)
    }

    /// A takedown's tombstone wins over a retry (docs/design.md#takedowns-and-retries):
    /// when the id this key names was taken down by an operator, a retry of
    /// the pending or aborted key answers what a read of that id answers,
    /// 410 with the reason, instead of storing the content again and, once
    /// the fence has aborted the key, publishing it under a new id. Asked
    /// before anything is written; if P cannot say, 503 (never go on blind).
    /// A key seen for the first time just now needs no asking: its id is new.
    async fn refuse_if_taken_down(&self, id: &PasteId) -> Result<(), ApiError> {
        match within(self.deadline, self.pastes.read(id)).await {
            Ok(PasteRead::RemovedByOperator { reason }) => Err(ApiError::Removed { reason }),
            Ok(PasteRead::Live(_) | PasteRead::Missing) => Ok(()),
            Err(StepError::NotExecuted(_)) => Err(ApiError::SlotMoving),
            Err(error) => {
                tracing::warn!(%error, "cannot ask the paste service whether this key's paste was taken down");
                Err(ApiError::Unavailable("the paste service did not answer"))
            }
        }
    }

    async fn reread(&self) -> Result<KeyRecord, ApiError> {
        within(self.deadline, self.keys.get(self.key()))
            .await
            .map_err(key_unavailable)?
            .ok_or(ApiError::Unavailable("the key vanished; retry"))
    }

    /// A pending record goes forward, unless K may have lost an earlier
    /// life of its key: then P is searched first, and a paste that life
    /// made is adopted instead of making a second one.
    async fn finish_pending(&self, record: &KeyRecord) -> Result<CreateAnswer, ApiError> {
        if record.search_first {
            if let Some(found) = self.search_for_earlier_life(record).await? {
                return self.adopt(record, found).await;
            }
        }
        self.roll_forward(record).await
    }

    /// Asks the key's P shard for the pastes made under this key. Every
    /// life of a key mints its ids in the key's slot, and a slot's rows move
    /// together, so the paste of an erased life is on the shard that owns
    /// the slot now, the one this create inserts into. If it does not
    /// answer, the create is 503: a search that did not complete must never
    /// lead to a second paste.
    #[tracing::instrument(skip_all, err(level = "debug", Display))]
    async fn search_for_earlier_life(&self, record: &KeyRecord) -> Result<Option<KeyedPaste>, ApiError> {
        let key_hash = self.key().hash();
        let found = match timed("p_search", within(self.deadline, self.pastes.find_by_key(&key_hash))).await {
            Ok(found) => found,
            Err(StepError::NotExecuted(_)) => return Err(ApiError::SlotMoving),
            Err(error) => {
                tracing::warn!(%error, "the paste shard could not be searched; nothing is minted");
                return Err(ApiError::Unavailable(
                    "the paste service could not be searched for this key's earlier paste",
                ));
            }
        };
        Ok(earlier_life(&record.paste_id, found, self.gateway.inner.clock.now()))
    }

    /// Rebuilds the record a K loss erased around `found`: the paste's
    /// delete token becomes this pending record's (the lost 201's token
    /// cannot be shown again), then one guarded update makes the key done
    /// with the paste and the request hash its create carried. Every
    /// attempt on this record carries the same token, so attempts racing
    /// here rotate to the same hash, and K's guard lets exactly one adopt.
    #[tracing::instrument(skip_all, fields(adopted = %found.id), err(level = "debug", Display))]
    async fn adopt(&self, record: &KeyRecord, found: KeyedPaste) -> Result<CreateAnswer, ApiError> {
        let pending = Created::from_stored(&record.response_body)
            .ok_or(ApiError::Unavailable("the stored answer for this key is unreadable"))?;
        let token = DeleteToken::presented(&pending.delete_token);
        if found.fate == IdFate::Live {
            self.rotate_delete_token(&found.id, &token).await?;
            failpoints::hit(AFTER_TOKEN_ROTATED).await;
        }
        // A paste that died since (deleted, expired, burned) is adopted too:
        // the key answers as its first life would, and its id reads 404.
        let created = Created::new(&found.id, &self.gateway.inner.settings.public_url, found.expires_at, &token);
        let adopted = Adopted {
            key: *self.key(),
            pending_paste_id: record.paste_id.clone(),
            paste_id: found.id,
            request_hash: found.request_hash,
            response_body: Created { adopted: true, ..created }.to_stored(),
        };
        let changed =
            timed("k_adopt", within(self.deadline, self.keys.adopt(&adopted))).await.map_err(key_unavailable)?;
        let now = if changed {
            tracing::warn!(paste_id = %adopted.paste_id, "adopted the paste an erased earlier life of this key made");
            KeyRecord {
                paste_id: adopted.paste_id,
                request_hash: adopted.request_hash,
                response_body: adopted.response_body,
                state: KeyState::Done,
                search_first: false,
                ..record.clone()
            }
        } else {
            self.reread().await?
        };
        if now.request_hash != self.request.request_hash {
            return Err(ApiError::KeyConflict);
        }
        match now.state {
            KeyState::Done => answer(&now, !changed),
            _ => Err(ApiError::Unavailable("the key moved on during this attempt")),
        }
    }

    /// The adopted paste's token, guarded by the key hash its row carries.
    async fn rotate_delete_token(&self, id: &PasteId, token: &DeleteToken) -> Result<(), ApiError> {
        let (key_hash, token_hash) = (self.key().hash(), token.hash());
        let rotated = within(self.deadline, self.pastes.rotate_delete_token(id, &key_hash, &token_hash));
        match timed("p_rotate_token", rotated).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(ApiError::Unavailable("the paste this key made changed while it was adopted; retry")),
            Err(StepError::NotExecuted(_)) => Err(ApiError::SlotMoving),
            Err(StepError::StorageFull(_)) => Err(ApiError::StorageFull),
            Err(error) => {
                tracing::warn!(%error, "cannot rotate the adopted paste's delete token; the key stays pending");
                Err(ApiError::Unavailable("the paste service did not answer"))
            }
        }
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
            Err(StepError::StorageFull(reason)) => {
                tracing::warn!(%reason, "object PUT found no room; aborting the key");
                self.abort_for_lack_of_room(&record.paste_id).await?
            }
            Err(StepError::Uncertain(reason) | StepError::NotExecuted(reason)) => {
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
    #[tracing::instrument(skip_all, err(level = "debug", Display))]
    pub(crate) async fn put(&self, paste_id: &PasteId) -> Result<(), StepError> {
        let put = self.gateway.inner.objects.put(paste_id.as_str(), self.request.content.clone());
        timed("put", within(self.deadline, put)).await.map(drop)
    }

    /// Step 4, P commit: insert the paste row. Returns whether the paste
    /// exists afterwards (false: this attempt is aborted).
    #[tracing::instrument(skip_all, err(level = "debug", Display))]
    async fn insert(&self, paste_id: &PasteId, created: &Created) -> Result<bool, ApiError> {
        let paste = self.new_paste(paste_id, created)?;
        match timed("p_insert", within(self.deadline, self.pastes.insert(&paste))).await {
            Ok(InsertOutcome::Inserted | InsertOutcome::AlreadyExists) => Ok(true),
            Ok(InsertOutcome::Tombstoned) => {
                // The fence is already up, so recording the abort is safe; it
                // lets the client's retry restart the key at once. Going
                // through the fence again costs one idempotent call on P and
                // keeps every abort of a key behind the one rule.
                let _ = self.abort(paste_id).await;
                Ok(false)
            }
            Err(StepError::Refused(reason)) => {
                tracing::error!(%reason, "paste insert refused; aborting the key");
                self.abort(paste_id).await
            }
            Err(StepError::StorageFull(reason)) => {
                tracing::warn!(%reason, "paste insert found no room; aborting the key");
                self.abort_for_lack_of_room(paste_id).await
            }
            Err(StepError::Uncertain(reason)) => {
                tracing::warn!(%reason, "paste insert uncertain; the key stays pending");
                Err(ApiError::Unavailable("the paste service did not answer"))
            }
            Err(StepError::NotExecuted(reason)) => {
                tracing::debug!(%reason, "paste service: the slot is moving; the key stays pending");
                Err(ApiError::SlotMoving)
            }
        }
    }

    /// The paste row of `paste_id`, whose 201 is `created`.
    pub(crate) fn new_paste(&self, paste_id: &PasteId, created: &Created) -> Result<NewPaste, ApiError> {
        let expires_at =
            created.expires_at().ok_or(ApiError::Unavailable("the stored answer for this key is unreadable"))?;
        Ok(NewPaste {
            id: paste_id.clone(),
            delete_token_hash: DeleteToken::presented(&created.delete_token).hash(),
            created_at: self.gateway.inner.clock.now(),
            expires_at,
            size: self.request.content.len() as u64,
            content_sha256: Sha256::digest(&self.request.content).into(),
            // The request hash covers these, so a rolled-forward retry
            // carries the very attributes the first attempt minted for.
            attributes: self.request.attributes.clone(),
            // What a search after a K loss finds the paste by.
            origin: Some(PasteOrigin { key_hash: self.key().hash(), request_hash: self.request.request_hash }),
        })
    }

    /// The compensation: the fence (docs/design.md#fence). P tombstones the
    /// id unless a paste holds it; if a paste holds it, the right action is
    /// done, not abort (returns true). Only behind the tombstone is the key
    /// aborted. If P cannot be read the key stays pending: never abort blind.
    /// Behind the tombstone no paste can ever hold the id, so its object, if
    /// this create's PUT made one, is garbage: it is removed now rather than
    /// by the reaper an hour later (a full disk wants its space back).
    #[tracing::instrument(skip_all, err(level = "debug", Display))]
    async fn abort(&self, paste_id: &PasteId) -> Result<bool, ApiError> {
        let fenced =
            tokio::time::timeout_at(self.deadline, fence(&self.keys, &self.pastes, self.key(), paste_id)).await;
        match fenced {
            Ok(Ok(Fenced::Live)) => Ok(true),
            Ok(Ok(Fenced::Aborted { .. })) => {
                self.remove_object(paste_id).await;
                Ok(false)
            }
            Ok(Err(FenceError::KeyShard(error))) => Err(key_unavailable(error.into())),
            Ok(Err(FenceError::PasteShard(pastebin_runtime::grpc::CallError::NotExecuted(_)))) => {
                Err(ApiError::SlotMoving)
            }
            Ok(Err(FenceError::PasteShard(error))) if error.is_storage_full() => {
                tracing::warn!(%error, "the paste service has no room for the fence; the key stays pending");
                Err(ApiError::StorageFull)
            }
            Ok(Err(FenceError::PasteShard(error))) => paste_unreachable(&error),
            Err(_) => paste_unreachable(&"deadline exceeded"),
        }
    }

    /// A step that found no room did not happen, so the key is aborted
    /// behind the fence, and the client hears that the storage is full; its
    /// retry with the same key restarts the key once there is room. Returns
    /// true when a paste holds the id after all (then it is finished).
    async fn abort_for_lack_of_room(&self, paste_id: &PasteId) -> Result<bool, ApiError> {
        if self.abort(paste_id).await? {
            return Ok(true);
        }
        Err(ApiError::StorageFull)
    }

    /// Deletes the object of an id no paste can hold (fenced, or never
    /// committed), within the request's budget. A failure leaves it to the
    /// object reaper, which deletes what no live paste holds.
    pub(crate) async fn remove_object(&self, paste_id: &PasteId) {
        let objects = &self.gateway.inner.objects;
        if let Err(error) = within(self.deadline, objects.delete(paste_id.as_str())).await {
            tracing::warn!(%error, "an object no paste holds was not deleted; the reaper will remove it");
        }
    }

    /// Step 5, K commit: done, guarded by state and paste id. Losing the
    /// guard means another executor moved the key: re-read and accept only a
    /// done key for this same paste. Failing here never touches the paste.
    #[tracing::instrument(skip_all, err(level = "debug", Display))]
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

/// Which of the pastes made under this key the record should name: none
/// when one is the record's own (this life already made its paste), else
/// the oldest live one, else the oldest that died. A paste made more than
/// the key retention before `now` is never a lost life: its key may have
/// been retired by contract and reused for a new paste. Every attempt sorts
/// the same rows the same way, so racing attempts pick the same paste.
fn earlier_life(own: &PasteId, found: Vec<KeyedPaste>, now: DateTime<Utc>) -> Option<KeyedPaste> {
    if found.iter().any(|paste| &paste.id == own) {
        return None;
    }
    let retired_before = pastebin_core::saturating_ago(now, pastebin_core::KEY_RETENTION);
    let mut lost: Vec<KeyedPaste> = found.into_iter().filter(|paste| paste.created_at > retired_before).collect();
    lost.sort_by_key(|paste| (paste.fate != IdFate::Live, paste.created_at, paste.id.to_string()));
    lost.into_iter().next()
}

/// Step 6: the stored body, exactly as stored.
fn answer(record: &KeyRecord, replayed: bool) -> Result<CreateAnswer, ApiError> {
    stored_answer(&record.response_body, replayed)
}

/// A create's answer: `body`, as stored with its key.
pub(crate) fn stored_answer(body: &ResponseBody, replayed: bool) -> Result<CreateAnswer, ApiError> {
    let created =
        Created::from_stored(body).ok_or(ApiError::Unavailable("the stored answer for this key is unreadable"))?;
    Ok(CreateAnswer { body: body.clone(), created, replayed })
}

#[cfg(test)]
mod tests {
    use pastebin_core::{from_millis, RequestHash, Slot};

    use super::*;

    fn keyed(fate: IdFate, created_ms: i64) -> KeyedPaste {
        KeyedPaste {
            id: PasteId::mint(Slot(7)),
            fate,
            request_hash: RequestHash([1; 32]),
            created_at: from_millis(created_ms),
            expires_at: from_millis(created_ms + 60_000),
        }
    }

    /// A moment a day after the pastes above were made: all within the key retention.
    fn now() -> DateTime<Utc> {
        from_millis(24 * 3600 * 1000)
    }

    #[test]
    fn the_oldest_live_paste_of_an_earlier_life_is_adopted_before_any_dead_one() {
        let own = PasteId::mint(Slot(7));
        let (dead, young, old) = (keyed(IdFate::Tombstoned, 1), keyed(IdFate::Live, 3), keyed(IdFate::Live, 2));
        let chosen = earlier_life(&own, vec![dead.clone(), young, old.clone()], now());
        assert_eq!(chosen, Some(old));
        assert_eq!(earlier_life(&own, vec![dead.clone()], now()), Some(dead));
        assert_eq!(earlier_life(&own, Vec::new(), now()), None);
    }

    #[test]
    fn a_life_that_already_made_its_paste_adopts_nothing() {
        let mine = keyed(IdFate::Live, 5);
        assert_eq!(earlier_life(&mine.id.clone(), vec![keyed(IdFate::Live, 1), mine], now()), None);
    }

    #[test]
    fn a_paste_older_than_the_key_retention_is_a_retired_life_not_a_lost_one() {
        let own = PasteId::mint(Slot(7));
        let (retired, lost) = (keyed(IdFate::Live, 1), keyed(IdFate::Live, 3_600_001));
        let a_day_and_two_hours_later = from_millis(26 * 3600 * 1000);
        assert_eq!(earlier_life(&own, vec![retired.clone(), lost.clone()], a_day_and_two_hours_later), Some(lost));
        assert_eq!(earlier_life(&own, vec![retired], a_day_and_two_hours_later), None);
    }
}
