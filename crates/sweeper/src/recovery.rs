//! Recovery of stale pending keys (docs/design.md#sweeper): each pending key
//! older than the threshold goes through the fence
//! ([`pastebin_shards::recover_batch`]), which reads P for its paste id first:
//! - a paste row holds the id → the key is marked done (guarded);
//! - no row → the id is tombstoned, then the key is aborted (guarded);
//! - P unreachable or erroring → the key stays pending and is counted.

use std::collections::BTreeMap;

use futures::future::OptionFuture;
use pastebin_core::IdempotencyKey;
use pastebin_keys::{KeyClient, PendingKey};
use pastebin_runtime::grpc::CallError;
use pastebin_shards::Decision;
use tracing::Instrument;

use crate::Sweeper;

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
    /// Listed keys of slots another K shard owns (the stale copies a shard
    /// keeps in a resharding window): never fenced, never updated here; their
    /// owner's pass decides them.
    pub not_owned: u64,
}

impl RecoveryReport {
    fn count(&mut self, decision: &Decision) {
        match decision {
            Decision::MarkedDone => self.marked_done += 1,
            Decision::Aborted => self.aborted += 1,
            Decision::AlreadyResolved => self.already_resolved += 1,
            _ => self.skipped_unreachable += 1,
        }
    }
}

impl Sweeper {
    /// One pass over every K shard's stale pendings, oldest first.
    pub async fn recover_stale(&self) -> RecoveryReport {
        let mut report = RecoveryReport::default();
        for (shard, keys) in self.slot_map().key_shards().iter().enumerate() {
            self.recover_shard(shard, keys, &mut report).await;
        }
        report
    }

    async fn recover_shard(&self, shard: usize, keys: &KeyClient, report: &mut RecoveryReport) {
        // Pages follow a cursor, so they never overlap: the next page is
        // listed (a read on K) while this one is recovered (P, then K's
        // guarded writes), which takes the listing off the critical path.
        let mut listing = self.list_page(keys, None).await;
        loop {
            let page = match listing {
                Ok(page) => page,
                Err(error) => {
                    tracing::warn!(%error, "cannot list pending keys on a key shard; next round");
                    report.key_shards_unreachable += 1;
                    return;
                }
            };
            report.examined += page.len() as u64;
            // A short page is the last one: nothing to list after it.
            let cursor = page.last().cloned().filter(|_| page.len() == self.settings.batch_size as usize);
            let next = OptionFuture::from(cursor.as_ref().map(|cursor| self.list_page(keys, Some(cursor))));
            let owned = self.owned_by(shard, page, report);
            let (decisions, next) = tokio::join!(self.recover_page(keys, owned), next);
            decisions.iter().for_each(|decision| report.count(decision));
            match next {
                Some(next) => listing = next,
                None => return,
            }
        }
    }

    /// The keys of `page` whose slot `shard` owns in the slot map. The others
    /// are stale copies of moved slots (docs/operations.md, "Changing the slot
    /// map"): fencing them would tombstone ids on another shard's behalf, and
    /// one of them in a batch used to make K refuse the shard's own verdicts.
    fn owned_by(&self, shard: usize, page: Vec<PendingKey>, report: &mut RecoveryReport) -> Vec<PendingKey> {
        let slots = self.slot_map();
        let (owned, foreign): (Vec<_>, Vec<_>) =
            page.into_iter().partition(|pending| slots.key_shard_index(pending.key.slot()) == shard);
        report.not_owned += foreign.len() as u64;
        owned
    }

    /// Up to a batch of stale pendings after `cursor`. K judges "older than
    /// the threshold" on its own clock, the one that stamped the keys: this
    /// host's clock never decides (docs/design.md#clock).
    async fn list_page(&self, keys: &KeyClient, cursor: Option<&PendingKey>) -> Result<Vec<PendingKey>, CallError> {
        let keys = keys.with_deadline(self.deadline());
        keys.list_pending(self.settings.recovery_threshold, cursor, self.settings.batch_size).await
    }

    /// One page's keys, through the fence of each key's P shard, all P shards at once.
    async fn recover_page(&self, keys: &KeyClient, page: Vec<PendingKey>) -> Vec<Decision> {
        if !page.is_empty() {
            pastebin_runtime::failpoints::hit(pastebin_runtime::failpoints::MID_RECOVERY).await;
        }
        let mut by_paste_shard: BTreeMap<usize, Vec<PendingKey>> = BTreeMap::new();
        for pending in page {
            by_paste_shard.entry(self.slot_map().paste_shard_index(pending.paste_id.slot())).or_default().push(pending);
        }
        let keys = &keys.with_deadline(self.deadline());
        let batches = by_paste_shard.into_iter().map(|(shard, batch)| {
            let pastes = self.slot_map().paste_shards()[shard].with_deadline(self.deadline());
            async move {
                pastebin_shards::recover_batch(keys, &pastes, &batch)
                    .instrument(tracing::info_span!("recover", paste_shard = shard))
                    .await
            }
        });
        futures::future::join_all(batches).await.into_iter().flatten().collect()
    }

    /// Recovers one key now, with the same rules (the operator's `recover`).
    /// With `dry_run`, P is only read — no tombstone, no update — and the
    /// decision says what would happen.
    pub async fn recover_key(&self, key: &IdempotencyKey, dry_run: bool) -> Decision {
        pastebin_shards::recover_key(&self.slot_map(), key, dry_run, self.deadline()).await
    }
}
