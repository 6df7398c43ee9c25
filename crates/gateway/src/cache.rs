//! The gateway's read cache (docs/design.md#caching): pastes by id, bounded
//! by the bytes they hold.
//!
//! A paste's content and metadata under an id never change (ids are never
//! reused: docs/design.md#identifiers), so only whether the paste still
//! exists can go stale. That bit is re-read from P when an entry was last
//! confirmed more than [`LIVE_FOR`] ago, so a delete or expiry on another
//! gateway takes effect here within that bound. Expiry is also checked on
//! every hit against this gateway's clock, and a delete through this gateway
//! drops the entry before the delete answers; a read that was already in
//! flight then cannot put it back (see [`ReadCache::keep`]).
//! Burn-after-reading pastes must never be kept (docs/design.md#burn-after-reading).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::Duration,
};

use chrono::{DateTime, Utc};
use pastebin_core::PasteId;
use quick_cache::{sync::Cache, Weighter};
// The runtime's clock (the system's, outside tests), so that a simulated
// clock moves the confirmation window too.
use tokio::time::Instant;

use crate::ReadPaste;

/// How long P's "live" answer is trusted: the bound on how late another
/// gateway's delete takes effect here.
pub const LIVE_FOR: Duration = Duration::from_millis(750);
/// How long a delete through this gateway is remembered: longer than any
/// read can be in flight (the 2 s budget).
const REMEMBER_DELETES: Duration = Duration::from_secs(10);
/// Deletes remembered before the old ones are pruned.
const DELETES_BEFORE_PRUNING: usize = 1024;
/// Bytes an entry costs beyond its content (ids, times, the entry itself).
const ENTRY_OVERHEAD: u64 = 256;
/// A guess at the average entry, for the cache's sizing only.
const TYPICAL_ENTRY: u64 = 4 * 1024;

/// A paste as the cache holds it.
pub(crate) struct CachedPaste {
    pub(crate) paste: ReadPaste,
    pub(crate) expires_at: DateTime<Utc>,
    /// When P last said the paste was live (the read's start, to be safe).
    confirmed_at: Instant,
}

/// What the cache knows of an id.
pub(crate) enum Lookup {
    /// Cached and confirmed live within [`LIVE_FOR`]: serve it.
    Fresh(ReadPaste),
    /// Cached, but P must confirm it is still live before it is served.
    Unconfirmed(Arc<CachedPaste>),
    Miss,
}

#[derive(Clone)]
struct ByBytes;

impl Weighter<PasteId, Arc<CachedPaste>> for ByBytes {
    fn weight(&self, _id: &PasteId, paste: &Arc<CachedPaste>) -> u64 {
        paste.paste.content.len() as u64 + ENTRY_OVERHEAD
    }
}

pub(crate) struct ReadCache {
    entries: Option<Cache<PasteId, Arc<CachedPaste>, ByBytes>>,
    /// Ids deleted (or found gone) here, and when.
    deletes: Mutex<HashMap<PasteId, Instant>>,
}

impl ReadCache {
    /// A cache of at most `capacity_bytes`; 0 turns caching off.
    pub(crate) fn new(capacity_bytes: u64) -> Self {
        let entries = (capacity_bytes > 0).then(|| {
            let estimated = (capacity_bytes / TYPICAL_ENTRY).max(16) as usize;
            Cache::with_weighter(estimated, capacity_bytes, ByBytes)
        });
        Self { entries, deletes: Mutex::default() }
    }

    pub(crate) fn lookup(&self, id: &PasteId, now: DateTime<Utc>) -> Lookup {
        let Some(paste) = self.entries.as_ref().and_then(|entries| entries.get(id)) else {
            return Lookup::Miss;
        };
        if now >= paste.expires_at {
            self.forget(id);
            return Lookup::Miss;
        }
        if paste.confirmed_at.elapsed() < LIVE_FOR {
            Lookup::Fresh(paste.paste.clone())
        } else {
            Lookup::Unconfirmed(paste)
        }
    }

    /// Keeps `paste`, which P said was live in a read that started at
    /// `read_started`, unless this gateway deleted the id since then: the
    /// check and the insert hold the same lock as [`Self::forget`]. A
    /// burn-after-reading paste is never kept: each read of one must reach P
    /// to claim it (docs/design.md#burn-after-reading).
    pub(crate) fn keep(&self, paste: ReadPaste, expires_at: DateTime<Utc>, read_started: Instant) {
        if paste.view.attributes.burn_after_reading {
            return;
        }
        let (Some(entries), Ok(id)) = (&self.entries, PasteId::parse(&paste.view.id)) else { return };
        let deletes = self.deletes.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if deletes.get(&id).is_some_and(|deleted| *deleted >= read_started) {
            return;
        }
        entries.insert(id, Arc::new(CachedPaste { paste, expires_at, confirmed_at: read_started }));
    }

    /// The id is gone (deleted here, or P no longer has it live): drop it
    /// now, and refuse reads already in flight that would put it back.
    pub(crate) fn forget(&self, id: &PasteId) {
        let Some(entries) = &self.entries else { return };
        let mut deletes = self.deletes.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if deletes.len() >= DELETES_BEFORE_PRUNING {
            deletes.retain(|_, at| at.elapsed() < REMEMBER_DELETES);
        }
        deletes.insert(id.clone(), Instant::now());
        entries.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use pastebin_core::PasteAttributes;

    use super::*;
    use crate::PasteView;

    fn read(id: &str, burn_after_reading: bool) -> ReadPaste {
        let attributes = PasteAttributes { burn_after_reading, ..PasteAttributes::default() };
        let view =
            PasteView { id: id.to_owned(), created_at: String::new(), expires_at: String::new(), size: 1, attributes };
        ReadPaste { view, content: bytes::Bytes::from_static(b"x") }
    }

    #[test]
    fn a_burn_paste_is_never_kept() {
        let cache = ReadCache::new(1024 * 1024);
        let (now, later) = (Utc::now(), Utc::now() + chrono::Duration::hours(1));
        let (burn, plain) = (PasteId::mint(pastebin_core::Slot(1)), PasteId::mint(pastebin_core::Slot(1)));
        cache.keep(read(burn.as_str(), true), later, Instant::now());
        assert!(matches!(cache.lookup(&burn, now), Lookup::Miss));
        cache.keep(read(plain.as_str(), false), later, Instant::now());
        assert!(matches!(cache.lookup(&plain, now), Lookup::Fresh(_)));
    }
}
