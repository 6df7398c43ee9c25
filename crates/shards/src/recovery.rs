//! The fence, in one place (docs/design.md#fence): a pending key may be
//! aborted only behind a tombstone of its paste id on P. P is asked first
//! and tombstones the id unless a paste holds it; a live paste means the key
//! is finished (done), never aborted; an id P cannot answer for leaves the
//! key pending, because a blind abort frees the key while its paste commit
//! may be about to land, and the client's retry then mints a second paste
//! (docs/design.md#forbidden-undo).
//!
//! The saga's compensation ([`fence`]), the sweeper's rounds
//! ([`recover_batch`]) and the operator's one-key recovery ([`recover_key`])
//! all go through here. Recovery and the object reaper fence through
//! [`fence_batch`], which never tombstones an id that a done key names
//! (docs/design.md#never-amplify-a-loss).

use std::collections::{HashMap, HashSet};

use pastebin_core::{IdempotencyKey, KeyState, PasteId};
use pastebin_keys::{KeyClient, PendingKey};
use pastebin_pastes::{IdFate, PasteClient};
use pastebin_runtime::grpc::CallError;
use tokio::time::Instant;

use crate::SlotMap;

/// What the fence did with one pending key's paste id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fenced {
    /// A paste holds the id: the key must be finished, never aborted.
    Live,
    /// The id is tombstoned and the key's guarded abort ran; `changed` is
    /// false when another executor had resolved the key first.
    Aborted { changed: bool },
}

/// Why the fence could not finish. Either way the key is not aborted by
/// this call, and stays pending unless someone else resolves it.
#[derive(Debug, thiserror::Error)]
pub enum FenceError {
    /// P did not answer: nothing may be aborted (never abort blind).
    #[error("paste shard unreachable: {0}")]
    PasteShard(CallError),
    /// The tombstone is up but K did not take the abort; the next round, or
    /// the client's retry, finishes it.
    #[error("key shard: {0}")]
    KeyShard(CallError),
}

/// What recovery did (or, for a dry run, would do) with one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    MarkedDone,
    Aborted,
    /// Not pending (any more): nothing to do.
    NotPending(KeyState),
    /// Another executor changed the key first.
    AlreadyResolved,
    /// P (or K) could not be read or written: the key stays pending.
    LeftPending(String),
    NoSuchKey,
}

/// The fence for one key: tombstone `paste_id` on P unless a paste holds
/// it, and only behind that tombstone abort `key` on K (guarded by state and
/// paste id, so a racing executor can only make it a no-op).
pub async fn fence(
    keys: &KeyClient,
    pastes: &PasteClient,
    key: &IdempotencyKey,
    paste_id: &PasteId,
) -> Result<Fenced, FenceError> {
    let fate = pastes.tombstone_unless_live(paste_id).await.map_err(FenceError::PasteShard)?;
    behind_fence(keys, key, paste_id, fate).await
}

/// The K half of the fence, given P's answer for the id (from
/// `TombstoneUnlessLive` or `ResolveBatch`, which tombstone as they answer).
async fn behind_fence(
    keys: &KeyClient,
    key: &IdempotencyKey,
    paste_id: &PasteId,
    fate: IdFate,
) -> Result<Fenced, FenceError> {
    match fate {
        IdFate::Live => Ok(Fenced::Live),
        IdFate::Tombstoned => {
            let changed = keys.abort(key, paste_id).await.map_err(FenceError::KeyShard)?;
            Ok(Fenced::Aborted { changed })
        }
    }
}

/// What [`fence_batch`] did with a batch of ids.
#[derive(Debug, Default)]
pub struct BatchFence {
    /// Each fenced id's fate, as `ResolveBatch` answered it.
    pub fates: HashMap<PasteId, IdFate>,
    /// Ids P has no row for although a done key names them: lost pastes
    /// (an unsafe failover or restore of P), left unfenced so `ctl repair`
    /// can rebuild them.
    pub lost: HashSet<PasteId>,
    /// Ids of slots a move has frozen on P: left untouched, for a later round.
    pub waiting: HashSet<PasteId>,
}

/// The fence for many ids, all of `keys`'s slots and of `pastes`'s, that
/// never amplifies a loss: P is read first; an id it has no row for is
/// tombstoned only after K says no done key names it. The product answered
/// 201 for an id a done key names, so P lacking its row means P lost it, and
/// a tombstone (then the reaper deleting its object, the only copy left)
/// would make the loss permanent (docs/design.md#never-amplify-a-loss).
pub async fn fence_batch(keys: &KeyClient, pastes: &PasteClient, ids: &[PasteId]) -> Result<BatchFence, FenceError> {
    let seen = pastes.peek_batch(ids).await.map_err(FenceError::PasteShard)?;
    let unseen: Vec<PasteId> = seen.into_iter().filter(|(_, fate)| fate.is_none()).map(|(id, _)| id).collect();
    let lost: HashSet<PasteId> = if unseen.is_empty() {
        HashSet::new()
    } else {
        keys.named_by_done_keys(&unseen).await.map_err(FenceError::KeyShard)?.into_iter().collect()
    };
    for id in &lost {
        tracing::warn!(paste_id = %id, "a done key names this paste id but its paste shard has no row: a lost paste, \
            left unfenced; run `pastebin ctl reconcile`, then `pastebin ctl repair`");
    }
    metrics::counter!(pastebin_runtime::metrics::LOST_PASTES_SPARED).increment(lost.len() as u64);
    let fence: Vec<PasteId> = ids.iter().filter(|id| !lost.contains(*id)).cloned().collect();
    if fence.is_empty() {
        return Ok(BatchFence { lost, ..BatchFence::default() });
    }
    let resolved = pastes.resolve_batch(&fence).await.map_err(FenceError::PasteShard)?;
    Ok(BatchFence {
        fates: resolved.fates.into_iter().collect(),
        lost,
        waiting: resolved.waiting.into_iter().collect(),
    })
}

/// The decision for a pending key whose paste id a done key names while P
/// has no row for it: never fenced, never aborted.
fn lost_paste() -> Decision {
    Decision::LeftPending("a done key names this paste id but the paste shard has no row: run `ctl reconcile`".into())
}

/// The decision for a pending key whose paste id the fence did not answer.
fn unanswered(waiting: &HashSet<PasteId>, paste_id: &PasteId) -> Decision {
    Decision::LeftPending(if waiting.contains(paste_id) {
        "a slot move froze this paste id's slot on its paste shard: next round".into()
    } else {
        "the paste shard did not answer for this id".into()
    })
}

/// Recovery of one stale pending key: the batch fence for its one id, then
/// a live paste's key marked done (guarded).
async fn recover(keys: &KeyClient, pastes: &PasteClient, key: &IdempotencyKey, paste_id: &PasteId) -> Decision {
    let fenced = match fence_batch(keys, pastes, std::slice::from_ref(paste_id)).await {
        Ok(batch) if batch.lost.contains(paste_id) => return lost_paste(),
        Ok(batch) => match batch.fates.get(paste_id) {
            Some(&fate) => behind_fence(keys, key, paste_id, fate).await,
            None => return unanswered(&batch.waiting, paste_id),
        },
        Err(error) => Err(error),
    };
    settle(keys, key, paste_id, fenced).await
}

/// Recovery of stale pending keys whose ids all live on the P shard
/// `pastes`: one `ResolveBatch` fences every id in one round trip, then the
/// verdicts are applied to K as one guarded statement per kind.
/// Returns one decision per key, in no order.
pub async fn recover_batch(keys: &KeyClient, pastes: &PasteClient, batch: &[PendingKey]) -> Vec<Decision> {
    let ids: Vec<PasteId> = batch.iter().map(|pending| pending.paste_id.clone()).collect();
    let BatchFence { fates, lost, waiting } = match fence_batch(keys, pastes, &ids).await {
        Ok(fenced) => fenced,
        Err(error) => {
            tracing::warn!(%error, keys = batch.len(), "cannot fence; leaving the keys pending");
            return vec![Decision::LeftPending(error.to_string()); batch.len()];
        }
    };
    // One guarded statement on K per verdict kind, both at once (docs/performance.md,
    // "Recovery in batches"): each row still changes only if it is pending
    // with that paste id, as `settle` would decide it alone.
    let verdict_kinds = [
        (IdFate::Live, KeyState::Done, Decision::MarkedDone),
        (IdFate::Tombstoned, KeyState::Aborted, Decision::Aborted),
    ]
    .map(|(fate, to, decided)| {
        let verdicts: Vec<(IdempotencyKey, PasteId)> = batch
            .iter()
            .filter(|pending| fates.get(&pending.paste_id) == Some(&fate))
            .map(|pending| (pending.key, pending.paste_id.clone()))
            .collect();
        apply_verdicts(keys, to, verdicts, decided)
    });
    let mut decisions: Vec<Decision> = futures::future::join_all(verdict_kinds).await.into_iter().flatten().collect();
    decisions.extend(batch.iter().filter(|pending| !fates.contains_key(&pending.paste_id)).map(|pending| {
        if lost.contains(&pending.paste_id) {
            lost_paste()
        } else {
            unanswered(&waiting, &pending.paste_id)
        }
    }));
    decisions
}

/// One verdict kind applied to K as one guarded statement: `decided` for
/// each key it changed, "left pending" for a key the shard says it does not
/// own (its owner's sweep decides it) or has frozen for a move (next
/// round), "already resolved" for the others.
async fn apply_verdicts(
    keys: &KeyClient,
    to: KeyState,
    verdicts: Vec<(IdempotencyKey, PasteId)>,
    decided: Decision,
) -> Vec<Decision> {
    if verdicts.is_empty() {
        return Vec::new();
    }
    match keys.apply_verdicts(to, &verdicts).await {
        Ok(applied) => {
            let mut decisions = vec![decided; applied.changed.len()];
            decisions.extend(std::iter::repeat_n(
                Decision::LeftPending("the key shard does not own this key's slot, or a move froze it".into()),
                applied.not_owned.len(),
            ));
            decisions.resize(verdicts.len(), Decision::AlreadyResolved);
            decisions
        }
        Err(error) => {
            tracing::warn!(%error, keys = verdicts.len(), "key shard refused the verdicts; next round");
            vec![Decision::LeftPending(format!("key shard: {error}")); verdicts.len()]
        }
    }
}

/// Recovers one key now, by the same rules, whatever its age (the
/// operator's `recover`); every call carries `deadline`. With `dry_run`, P
/// is only read (no tombstone, no update) and the decision says what would
/// happen.
pub async fn recover_key(slots: &SlotMap, key: &IdempotencyKey, dry_run: bool, deadline: Instant) -> Decision {
    let keys = slots.key_shard(key.slot()).with_deadline(deadline);
    let record = match keys.get(key).await {
        Ok(Some(record)) => record,
        Ok(None) => return Decision::NoSuchKey,
        Err(error) => return Decision::LeftPending(format!("key shard unreachable: {error}")),
    };
    if record.state != KeyState::Pending {
        return Decision::NotPending(record.state);
    }
    let pastes = slots.paste_shard(record.paste_id.slot()).with_deadline(deadline);
    if dry_run {
        predict(&pastes, &record.paste_id).await
    } else {
        recover(&keys, &pastes, key, &record.paste_id).await
    }
}

/// The fence's answer, read without writing: an id P never saw would be
/// tombstoned, so its key would be aborted.
async fn predict(pastes: &PasteClient, paste_id: &PasteId) -> Decision {
    match pastes.peek_fate(paste_id).await {
        Ok(Some(IdFate::Live)) => Decision::MarkedDone,
        Ok(Some(IdFate::Tombstoned) | None) => Decision::Aborted,
        Err(error) => Decision::LeftPending(format!("paste shard unreachable: {error}")),
    }
}

/// The fence's outcome as a recovery decision; a live paste's key is marked
/// done here, guarded by state and paste id.
async fn settle(
    keys: &KeyClient,
    key: &IdempotencyKey,
    paste_id: &PasteId,
    fenced: Result<Fenced, FenceError>,
) -> Decision {
    let outcome = match fenced {
        Ok(Fenced::Live) => keys.mark_done(key, paste_id).await.map(|changed| (changed, Decision::MarkedDone)),
        Ok(Fenced::Aborted { changed }) => Ok((changed, Decision::Aborted)),
        Err(FenceError::PasteShard(error)) => {
            return Decision::LeftPending(format!("paste shard unreachable: {error}"))
        }
        Err(FenceError::KeyShard(error)) => Err(error),
    };
    match outcome {
        Ok((true, decision)) => decision,
        Ok((false, _)) => Decision::AlreadyResolved,
        Err(error) => {
            tracing::warn!(%error, "key shard refused the update; next round");
            Decision::LeftPending(format!("key shard: {error}"))
        }
    }
}
