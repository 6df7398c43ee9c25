//! Key retention, paste expiry and the object reaper (docs/design.md#retention, #expiry, #object-reaper).

use std::collections::BTreeMap;

use pastebin_core::PasteId;
use pastebin_objects::ObjectError;
use pastebin_pastes::IdFate;
use pastebin_runtime::grpc::CallError;

use crate::Sweeper;

/// Batches per shard per round, so one round stays short and never holds
/// the databases for long; the rest waits for the next round.
const MAX_BATCHES_PER_ROUND: usize = 100;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReapReport {
    pub retired_keys: u64,
    pub expired_pastes: u64,
    pub reaped_objects: u64,
    pub purged_tombstones: u64,
    /// Objects kept because a done key names their id while P has no row
    /// for it: lost pastes for `ctl repair`, never reaped.
    pub lost_pastes_spared: u64,
    pub errors: u64,
}

/// What a batched delete did across the shards: rows deleted, and shards
/// where it failed (their rows wait for the next round).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Drained {
    pub(crate) deleted: u64,
    pub(crate) failures: u64,
}

impl std::ops::AddAssign for Drained {
    fn add_assign(&mut self, other: Self) {
        self.deleted += other.deleted;
        self.failures += other.failures;
    }
}

/// Logs a cleanup call that did not go through, and says whether it
/// failed. A shard in a slot move answers "not executed" to cleanup until
/// the move is done (docs/design.md#moving-slots): a pause, not a failure.
fn failed(what: &str, error: &CallError) -> bool {
    match error {
        CallError::NotExecuted(status) => {
            tracing::info!(reason = status.message(), "{what} waits for a slot move on a shard; next round");
            false
        }
        _ => {
            tracing::warn!(%error, "{what} failed on a shard; next round");
            true
        }
    }
}

impl Sweeper {
    /// An object-store call bounded by the call timeout: a store that accepts
    /// a connection and then hangs must not stall the sweeper's rounds.
    async fn object_call<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, ObjectError>>,
    ) -> Result<T, ObjectError> {
        tokio::time::timeout(self.settings.call_timeout, call)
            .await
            .unwrap_or_else(|_| Err(ObjectError::Uncertain("object store call timed out".into())))
    }

    /// Runs one shard's batched delete until a batch comes back short,
    /// at most [`MAX_BATCHES_PER_ROUND`] times; a failure waits for the next round.
    async fn drain<F: std::future::Future<Output = Result<u64, CallError>>>(
        &self,
        what: &str,
        mut batch: impl FnMut() -> F,
    ) -> Drained {
        let mut drained = Drained::default();
        for _ in 0..MAX_BATCHES_PER_ROUND {
            match batch().await {
                Ok(count) => {
                    drained.deleted += count;
                    if count < u64::from(self.settings.batch_size) {
                        break;
                    }
                }
                Err(error) => {
                    drained.failures += u64::from(failed(what, &error));
                    break;
                }
            }
        }
        drained
    }

    /// Deletes done and aborted keys past their 25 h window, in batches. K
    /// itself never deletes a pending key.
    pub async fn retire_keys(&self) -> u64 {
        self.retire_keys_drained().await.deleted
    }

    pub(crate) async fn retire_keys_drained(&self) -> Drained {
        let mut retired = Drained::default();
        for keys in self.slot_map().key_shards() {
            retired += self
                .drain("key retention", || {
                    let keys = keys.with_deadline(self.deadline());
                    async move { keys.purge_retired(self.settings.batch_size).await }
                })
                .await;
        }
        retired
    }

    /// Deletes tombstones older than the tombstone retention, in batches, so
    /// P does not keep a row for every id ever used. P refuses a retention
    /// shorter than 26 h: a tombstone must outlive every create that could
    /// still carry its id.
    pub async fn purge_tombstones(&self) -> u64 {
        self.purge_tombstones_drained().await.deleted
    }

    pub(crate) async fn purge_tombstones_drained(&self) -> Drained {
        let (retention, limit) = (self.settings.tombstone_retention, self.settings.batch_size);
        let mut purged = Drained::default();
        for pastes in self.slot_map().paste_shards() {
            purged += self
                .drain("tombstone purge", || {
                    let pastes = pastes.with_deadline(self.deadline());
                    async move { pastes.purge_tombstones(retention, limit).await }
                })
                .await;
        }
        purged
    }

    /// Tombstones expired paste rows in batches, then deletes their objects.
    /// An object whose delete fails is left to the object reaper.
    pub async fn purge_expired_pastes(&self) -> u64 {
        self.purge_expired_pastes_drained().await.deleted
    }

    pub(crate) async fn purge_expired_pastes_drained(&self) -> Drained {
        let mut purged = Drained::default();
        for pastes in self.slot_map().paste_shards() {
            for _ in 0..MAX_BATCHES_PER_ROUND {
                let ids = match pastes.with_deadline(self.deadline()).purge_expired(self.settings.batch_size).await {
                    Ok(ids) => ids,
                    Err(error) => {
                        purged.failures += u64::from(failed("paste expiry", &error));
                        break;
                    }
                };
                purged.deleted += ids.len() as u64;
                for id in &ids {
                    if let Err(error) = self.object_call(self.objects.delete(id.as_str())).await {
                        tracing::warn!(%error, paste_id = %id, "object delete failed; the reaper will retry");
                    }
                }
                if ids.len() < self.settings.batch_size as usize {
                    break;
                }
            }
        }
        purged
    }

    /// Deletes objects older than the age floor whose id holds no live paste,
    /// and only behind a tombstone: the fence runs first, so a late insert of
    /// that id can never succeed after its bytes are gone. Objects of live
    /// pastes are never touched, nor those of ids a done key names that P has
    /// no row for (lost pastes: the object is what `ctl repair` rebuilds from;
    /// docs/design.md#never-amplify-a-loss).
    pub async fn reap_orphan_objects(&self) -> ReapReport {
        let mut report = ReapReport::default();
        let old_before = pastebin_core::saturating_ago(self.clock.now(), self.settings.object_age_floor);
        let mut after: Option<String> = None;
        loop {
            let page =
                match self.object_call(self.objects.list(after.as_deref(), self.settings.batch_size as usize)).await {
                    Ok(page) => page,
                    Err(error) => {
                        tracing::warn!(%error, "cannot list objects; reaper stops for this round");
                        report.errors += 1;
                        return report;
                    }
                };
            let Some(last) = page.last() else { return report };
            after = Some(last.paste_id.clone());
            // Grouped by the K shard and the P shard of each id's slot: the
            // fence asks both.
            let slots = self.slot_map();
            let mut by_shards: BTreeMap<(usize, usize), Vec<PasteId>> = BTreeMap::new();
            for object in page.iter().filter(|o| o.created_at < old_before) {
                // Objects not named like a paste id are not ours to judge.
                if let Ok(id) = PasteId::parse(&object.paste_id) {
                    let shards = (slots.key_shard_index(id.slot()), slots.paste_shard_index(id.slot()));
                    by_shards.entry(shards).or_default().push(id);
                }
            }
            for ((key_shard, paste_shard), ids) in by_shards {
                let keys = slots.key_shards()[key_shard].with_deadline(self.deadline());
                let pastes = slots.paste_shards()[paste_shard].with_deadline(self.deadline());
                let fenced = match pastebin_shards::fence_batch(&keys, &pastes, &ids).await {
                    Ok(fenced) => fenced,
                    Err(error) => {
                        tracing::warn!(%error, key_shard, paste_shard, "cannot fence; these objects are kept");
                        report.errors += 1;
                        continue;
                    }
                };
                report.lost_pastes_spared += fenced.lost.len() as u64;
                for (id, fate) in fenced.fates {
                    if fate != IdFate::Tombstoned {
                        continue;
                    }
                    match self.object_call(self.objects.delete(id.as_str())).await {
                        Ok(()) => report.reaped_objects += 1,
                        Err(error) => {
                            tracing::warn!(%error, paste_id = %id, "object reap failed; next scan");
                            report.errors += 1;
                        }
                    }
                }
            }
        }
    }
}
