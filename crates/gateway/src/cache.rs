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
    collections::{HashMap, VecDeque},
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
/// The most deletes remembered at once, whatever the traffic: past it the
/// oldest is dropped and its time becomes the log's horizon.
const MAX_REMEMBERED_DELETES: usize = 16 * 1024;
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
    deletes: Mutex<DeleteLog>,
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
        if deletes.gone_since(&id, read_started) {
            return;
        }
        entries.insert(id, Arc::new(CachedPaste { paste, expires_at, confirmed_at: read_started }));
    }

    /// P no longer has the id live (a 404, an expiry): drop the entry, and
    /// if there was one, refuse reads already in flight that would put it
    /// back. An id that was not cached is not remembered: a flood of 404s
    /// for random ids costs nothing here, and a read in flight for it was
    /// confirmed at its start, so it is served no longer than [`LIVE_FOR`],
    /// the bound every other gateway keeps.
    pub(crate) fn forget(&self, id: &PasteId) {
        let Some(entries) = &self.entries else { return };
        let mut deletes = self.deletes.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if entries.remove(id).is_some() {
            deletes.record(id.clone(), Instant::now());
        }
    }

    /// This gateway deleted the id (or may have: an uncertain delete): drop
    /// it and refuse every read in flight that would put it back, cached or
    /// not, so the delete takes effect here at once.
    pub(crate) fn forget_deleted(&self, id: &PasteId) {
        let Some(entries) = &self.entries else { return };
        let mut deletes = self.deletes.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        entries.remove(id);
        deletes.record(id.clone(), Instant::now());
    }
}

/// Ids forgotten here and when, oldest first, each kept [`REMEMBER_DELETES`]:
/// O(1) amortized per record (each entry is pruned once, from the front)
/// and never more than [`MAX_REMEMBERED_DELETES`]. An entry dropped early
/// moves the horizon: no read that started before it may keep anything, so
/// a full log costs cache fills, never a stale answer.
#[derive(Default)]
struct DeleteLog {
    at: HashMap<PasteId, Instant>,
    order: VecDeque<(Instant, PasteId)>,
    horizon: Option<Instant>,
}

impl DeleteLog {
    fn record(&mut self, id: PasteId, now: Instant) {
        while let Some((at, _)) = self.order.front() {
            let expired = now.duration_since(*at) >= REMEMBER_DELETES;
            if !expired && self.order.len() < MAX_REMEMBERED_DELETES {
                break;
            }
            let Some((at, old)) = self.order.pop_front() else { break };
            if !expired {
                self.horizon = Some(self.horizon.map_or(at, |horizon| horizon.max(at)));
            }
            // A later record of the same id has its own entry further back.
            if self.at.get(&old) == Some(&at) {
                self.at.remove(&old);
            }
        }
        self.at.insert(id.clone(), now);
        self.order.push_back((now, id));
    }

    /// Whether a read that started at `read_started` may have missed a
    /// forget of `id`.
    fn gone_since(&self, id: &PasteId, read_started: Instant) -> bool {
        self.horizon.is_some_and(|horizon| read_started <= horizon)
            || self.at.get(id).is_some_and(|forgotten| *forgotten >= read_started)
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.order.len()
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

    fn cache_with(id: &PasteId) -> ReadCache {
        let cache = ReadCache::new(1024 * 1024);
        cache.keep(read(id.as_str(), false), Utc::now() + chrono::Duration::hours(1), Instant::now());
        cache
    }

    fn remembered(cache: &ReadCache) -> usize {
        cache.deletes.lock().unwrap().len()
    }

    #[test]
    fn a_404_for_an_id_that_was_not_cached_is_not_remembered() {
        let cache = cache_with(&PasteId::mint(pastebin_core::Slot(1)));
        for _ in 0..10_000 {
            cache.forget(&PasteId::mint(pastebin_core::Slot(2)));
        }
        assert_eq!(remembered(&cache), 0);
    }

    #[test]
    fn a_forget_of_a_cached_id_refuses_the_read_in_flight() {
        let id = PasteId::mint(pastebin_core::Slot(1));
        let cache = cache_with(&id);
        let in_flight = Instant::now();
        cache.forget(&id);
        assert_eq!(remembered(&cache), 1);
        cache.keep(read(id.as_str(), false), Utc::now() + chrono::Duration::hours(1), in_flight);
        assert!(matches!(cache.lookup(&id, Utc::now()), Lookup::Miss), "not put back");
    }

    #[test]
    fn a_delete_here_refuses_the_read_in_flight_even_uncached() {
        let cache = ReadCache::new(1024 * 1024);
        let id = PasteId::mint(pastebin_core::Slot(1));
        let in_flight = Instant::now();
        cache.forget_deleted(&id);
        cache.keep(read(id.as_str(), false), Utc::now() + chrono::Duration::hours(1), in_flight);
        assert!(matches!(cache.lookup(&id, Utc::now()), Lookup::Miss));
    }

    #[test]
    fn a_full_delete_log_stays_bounded_and_never_lets_a_stale_read_back() {
        let cache = ReadCache::new(1024 * 1024);
        let first = PasteId::mint(pastebin_core::Slot(1));
        let in_flight = Instant::now();
        cache.forget_deleted(&first);
        for _ in 0..MAX_REMEMBERED_DELETES + 100 {
            cache.forget_deleted(&PasteId::mint(pastebin_core::Slot(3)));
        }
        assert_eq!(remembered(&cache), MAX_REMEMBERED_DELETES);
        cache.keep(read(first.as_str(), false), Utc::now() + chrono::Duration::hours(1), in_flight);
        assert!(matches!(cache.lookup(&first, Utc::now()), Lookup::Miss), "the horizon refuses it");
    }
}
