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
//! all go through here.

use std::collections::HashMap;

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

/// Recovery of one stale pending key: the fence, then a live paste's key
/// marked done (guarded).
async fn recover(keys: &KeyClient, pastes: &PasteClient, key: &IdempotencyKey, paste_id: &PasteId) -> Decision {
    settle(keys, key, paste_id, fence(keys, pastes, key, paste_id).await).await
}

/// Recovery of stale pending keys whose ids all live on the P shard
/// `pastes`: one `ResolveBatch` fences every id in one round trip, then the
/// verdicts are applied to K as one guarded statement per kind.
/// Returns one decision per key, in no order.
pub async fn recover_batch(keys: &KeyClient, pastes: &PasteClient, batch: &[PendingKey]) -> Vec<Decision> {
    let ids: Vec<PasteId> = batch.iter().map(|pending| pending.paste_id.clone()).collect();
    let fates: HashMap<PasteId, IdFate> = match pastes.resolve_batch(&ids).await {
        Ok(fates) => fates.into_iter().collect(),
        Err(error) => {
            tracing::warn!(%error, keys = batch.len(), "paste shard unreachable; leaving its keys pending");
            let reason = format!("paste shard unreachable: {error}");
            return vec![Decision::LeftPending(reason); batch.len()];
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
    let unanswered = batch.iter().filter(|pending| !fates.contains_key(&pending.paste_id)).count();
    decisions.extend(std::iter::repeat_n(
        Decision::LeftPending("the paste shard did not answer for this id".into()),
        unanswered,
    ));
    decisions
}

/// One verdict kind applied to K as one guarded statement: `decided` for
/// each key it changed, "left pending" for a key the shard says it does not
/// own (its owner's sweep decides it), "already resolved" for the others.
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
                Decision::LeftPending("the key shard does not own this key's slot".into()),
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
