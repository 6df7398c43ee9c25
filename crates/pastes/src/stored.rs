//! What shard P holds, for the operator's eyes: `pastebin_live_pastes` and
//! `pastebin_stored_bytes` (docs/operations.md#what-the-instance-holds).
//! Counted from the database when the shard starts and every minute, so
//! deletes, expiry and slot moves show at the next count; each insert adds
//! to them at once in between.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use pastebin_runtime::metrics as names;

use crate::PasteStore;

/// How often the totals are counted again from the rows.
const RECOUNT_EVERY: Duration = Duration::from_secs(60);

/// Live paste rows and their content bytes, as last counted plus inserts since.
#[derive(Debug, Default)]
pub(crate) struct StoredTotals {
    pastes: AtomicU64,
    bytes: AtomicU64,
}

impl StoredTotals {
    /// One paste of `size` bytes inserted.
    pub(crate) fn inserted(&self, size: u64) {
        let pastes = self.pastes.fetch_add(1, Ordering::Relaxed) + 1;
        let bytes = self.bytes.fetch_add(size, Ordering::Relaxed).saturating_add(size);
        export(pastes, bytes);
    }

    fn counted(&self, pastes: u64, bytes: u64) {
        self.pastes.store(pastes, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
        export(pastes, bytes);
    }
}

fn export(pastes: u64, bytes: u64) {
    metrics::gauge!(names::LIVE_PASTES).set(pastes as f64);
    metrics::gauge!(names::STORED_BYTES).set(bytes as f64);
}

/// Counts `store`'s totals now and then every [`RECOUNT_EVERY`], for as long
/// as the shard runs. A count that fails is logged and tried at the next.
pub(crate) async fn keep_counting(store: PasteStore, totals: Arc<StoredTotals>) {
    loop {
        match store.count_stored().await {
            Ok((pastes, bytes)) => totals.counted(pastes, bytes),
            Err(error) => tracing::warn!(%error, "cannot count the stored pastes"),
        }
        tokio::time::sleep(RECOUNT_EVERY).await;
    }
}
