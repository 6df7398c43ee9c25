//! Highlighted paste bodies, cached by id (docs/reader-features.md#caching).
//!
//! An id's content never changes, so a render can be reused until the paste
//! goes away. Every page view still reads the row on P first, so an expired,
//! deleted or burned paste is a 404 at once on every gateway whatever this
//! cache holds; a delete through this gateway also drops its entry at once
//! (a render still running then may put it back; it is never shown, and
//! eviction removes it). Burn-after-reading pastes are never put in.
//! Bounded by the bytes it holds, not by a count.

use std::sync::Arc;

use quick_cache::{sync::Cache, Weighter};

/// The most rendered HTML kept, in bytes.
const CAPACITY_BYTES: u64 = 32 * 1024 * 1024;
/// A guess at how many entries fit, for the cache's sizing only.
const ESTIMATED_ENTRIES: usize = 4_096;

#[derive(Clone)]
struct ByLength;

impl Weighter<String, Arc<str>> for ByLength {
    fn weight(&self, id: &String, html: &Arc<str>) -> u64 {
        (id.len() + html.len()) as u64
    }
}

pub(crate) struct RenderedPages {
    cache: Cache<String, Arc<str>, ByLength>,
}

impl Default for RenderedPages {
    fn default() -> Self {
        Self { cache: Cache::with_weighter(ESTIMATED_ENTRIES, CAPACITY_BYTES, ByLength) }
    }
}

impl RenderedPages {
    pub(crate) fn get(&self, id: &str) -> Option<Arc<str>> {
        self.cache.get(id)
    }

    pub(crate) fn keep(&self, id: &str, html: Arc<str>) {
        self.cache.insert(id.to_owned(), html);
    }

    pub(crate) fn forget(&self, id: &str) {
        self.cache.remove(id);
    }
}
