//! Recovery of stale pending keys (SPEC §5). For each pending key older than
//! the threshold, read P for its paste id first:
//! - a paste row holds the id → mark the key done (guarded);
//! - no row → the fence tombstones the id, then the key is aborted (guarded);
//! - P unreachable or erroring → leave the key pending and count it.
//!
//! Never abort what could not be seen: a blind abort frees the key while its
//! paste commit may be about to land, and the client's retry then mints a
//! second paste.

use std::collections::{BTreeMap, HashMap};

use futures::StreamExt;
use pastebin_core::{IdempotencyKey, KeyState, PasteId};
use pastebin_keys::{KeyClient, PendingKey};
use pastebin_pastes::IdFate;

use crate::Sweeper;

/// Guarded updates on K in flight at once while applying one batch.
const APPLY_CONCURRENCY: usize = 16;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Stale pending keys looked at.
    pub examined: u64,
    /// Keys whose paste existed: finished (done).
    pub marked_done: u64,
    /// Keys whose id is now tombstoned: aborted.
    pub aborted: u64,
    /// Keys another executor resolved between our read and our update.
    pub already_resolved: u64,
    /// Keys left pending because their P shard could not be read.
    pub skipped_unreachable: u64,
    /// K shards that could not be listed this round.
    pub key_shards_unreachable: u64,
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
    /// P could not be read: the key stays pending.
    LeftPending(String),
    NoSuchKey,
}

impl Sweeper {
    /// One pass over every K shard's stale pendings, oldest first.
    pub async fn recover_stale(&self) -> RecoveryReport {
        let mut report = RecoveryReport::default();
        for keys in self.slots.key_shards() {
            self.recover_shard(&keys.with_deadline(self.deadline()), &mut report).await;
        }
        report
    }

    async fn recover_shard(&self, keys: &KeyClient, report: &mut RecoveryReport) {
        let created_before = pastebin_core::saturating_ago(self.clock.now(), self.settings.recovery_threshold);
        let mut cursor: Option<PendingKey> = None;
        loop {
            let keys = keys.with_deadline(self.deadline());
            let page = match keys.list_pending(created_before, cursor.as_ref(), self.settings.batch_size).await {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(%error, "cannot list pending keys on a key shard; next round");
                    report.key_shards_unreachable += 1;
                    return;
                }
            };
            report.examined += page.len() as u64;
            let full_page = page.len() == self.settings.batch_size as usize;
            cursor = page.last().cloned();
            let mut by_paste_shard: BTreeMap<usize, Vec<PendingKey>> = BTreeMap::new();
            for pending in page {
                by_paste_shard.entry(self.slots.paste_shard_index(pending.paste_id.slot())).or_default().push(pending);
            }
            for (shard, batch) in by_paste_shard {
                self.resolve_batch(&keys, shard, &batch, report).await;
            }
            if !full_page {
                return;
            }
        }
    }

    /// Reads (and fences) a batch of ids on one P shard in one round trip,
    /// then applies each verdict to its key with a guarded update.
    async fn resolve_batch(&self, keys: &KeyClient, shard: usize, batch: &[PendingKey], report: &mut RecoveryReport) {
        let pastes = self.slots.paste_shards()[shard].with_deadline(self.deadline());
        let ids: Vec<PasteId> = batch.iter().map(|p| p.paste_id.clone()).collect();
        let fates: HashMap<PasteId, IdFate> = match pastes.resolve_batch(&ids).await {
            Ok(fates) => fates.into_iter().collect(),
            Err(error) => {
                tracing::warn!(%error, shard, keys = batch.len(), "paste shard unreachable; leaving its keys pending");
                report.skipped_unreachable += batch.len() as u64;
                return;
            }
        };
        let verdicts: Vec<(&PendingKey, IdFate)> =
            batch.iter().filter_map(|pending| Some((pending, *fates.get(&pending.paste_id)?))).collect();
        report.skipped_unreachable += (batch.len() - verdicts.len()) as u64;
        // Each verdict is its own guarded update on K; they are independent,
        // so a batch is applied several at a time instead of one commit after
        // another (BENCHMARKS.md, figure 6).
        let decisions: Vec<Decision> = futures::stream::iter(verdicts)
            .map(|(pending, fate)| apply(keys, &pending.key, &pending.paste_id, fate))
            .buffer_unordered(APPLY_CONCURRENCY)
            .collect()
            .await;
        for decision in decisions {
            match decision {
                Decision::MarkedDone => report.marked_done += 1,
                Decision::Aborted => report.aborted += 1,
                Decision::AlreadyResolved => report.already_resolved += 1,
                _ => report.skipped_unreachable += 1,
            }
        }
    }

    /// Recovers one key now, with the same rules (the operator's `recover`).
    /// With `dry_run`, P is only read — no tombstone, no update — and the
    /// decision says what would happen.
    pub async fn recover_key(&self, key: &IdempotencyKey, dry_run: bool) -> Decision {
        let keys = self.slots.key_shard(key.slot()).with_deadline(self.deadline());
        let record = match keys.get(key).await {
            Ok(Some(record)) => record,
            Ok(None) => return Decision::NoSuchKey,
            Err(error) => return Decision::LeftPending(format!("key shard unreachable: {error}")),
        };
        if record.state != KeyState::Pending {
            return Decision::NotPending(record.state);
        }
        let pastes = self.slots.paste_shard(record.paste_id.slot()).with_deadline(self.deadline());
        if dry_run {
            // The fence's answer, read without writing: an id P never saw
            // would be tombstoned, so the key would be aborted.
            return match pastes.peek_fate(&record.paste_id).await {
                Ok(Some(IdFate::Live)) => Decision::MarkedDone,
                Ok(Some(IdFate::Tombstoned) | None) => Decision::Aborted,
                Err(error) => Decision::LeftPending(format!("paste shard unreachable: {error}")),
            };
        }
        match pastes.tombstone_unless_live(&record.paste_id).await {
            Ok(fate) => apply(&keys, key, &record.paste_id, fate).await,
            Err(error) => Decision::LeftPending(format!("paste shard unreachable: {error}")),
        }
    }
}

/// The verdict of P applied to K, guarded by state and paste id so that a
/// racing gateway or sweeper can only make it a no-op.
async fn apply(keys: &KeyClient, key: &IdempotencyKey, paste_id: &PasteId, fate: IdFate) -> Decision {
    let changed = match fate {
        IdFate::Live => keys.mark_done(key, paste_id).await,
        IdFate::Tombstoned => keys.abort(key, paste_id).await,
    };
    match (changed, fate) {
        (Ok(true), IdFate::Live) => Decision::MarkedDone,
        (Ok(true), IdFate::Tombstoned) => Decision::Aborted,
        (Ok(false), _) => Decision::AlreadyResolved,
        (Err(error), _) => {
            tracing::warn!(%error, "key shard refused the update; next round");
            Decision::LeftPending(format!("key shard: {error}"))
        }
    }
}
