//! Highlighted paste bodies, cached by id, one render per paste
//! (docs/reader-features.md#caching).
//!
//! An id's content never changes, so a render can be reused until the paste
//! goes away. Every page view still reads the row on P first, so an expired,
//! deleted or burned paste is a 404 at once on every gateway whatever this
//! cache holds; a delete through this gateway also drops its entry at once
//! (a render still running then may put it back; it is never shown, and
//! eviction removes it). Burn-after-reading pastes are never put in.
//! Bounded by the bytes it holds, not by a count.
//!
//! Concurrent first views of a paste share one render (a [`Flight`]): the
//! first starts it, the others wait for its answer. The render holds only a
//! weak reference to its flight, so once every view waiting for it has gone
//! (clients that hung up, pages that stopped waiting) it sees that and stops.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError, Weak},
};

use bytes::Bytes;
use quick_cache::{sync::Cache, Weighter};

/// The most rendered HTML kept, in bytes.
const CAPACITY_BYTES: u64 = 32 * 1024 * 1024;
/// A guess at how many entries fit, for the cache's sizing only.
const ESTIMATED_ENTRIES: usize = 4_096;

/// What rendering a paste came to.
#[derive(Clone)]
pub(crate) enum Render {
    /// Highlighted `<li>` items, in the blocks a page writes one at a time.
    Highlighted(Arc<[Bytes]>),
    /// Its render ran out of time (or the grammar failed): the page shows
    /// plain text, and it is not tried again (repeated views must not be a
    /// way to burn CPU).
    Plain,
}

#[derive(Clone)]
struct ByLength;

impl Weighter<String, Render> for ByLength {
    fn weight(&self, id: &String, render: &Render) -> u64 {
        let html = match render {
            Render::Highlighted(blocks) => blocks.iter().map(Bytes::len).sum(),
            Render::Plain => 0,
        };
        (id.len() + html) as u64
    }
}

/// One render in progress, shared by every view waiting for it.
pub(crate) struct Flight {
    answer: tokio::sync::watch::Sender<Option<Render>>,
}

impl Flight {
    /// A flight of its own, shared with no other view (a burn paste's one read).
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self { answer: tokio::sync::watch::Sender::new(None) })
    }

    /// Hands the render's answer to every view waiting for it.
    pub(crate) fn answer_with(&self, render: Render) {
        self.answer.send_replace(Some(render));
    }

    /// The render's answer, once it has one.
    pub(crate) async fn answer(&self) -> Option<Render> {
        let mut answers = self.answer.subscribe();
        let answer = answers.wait_for(Option::is_some).await.ok()?;
        answer.clone()
    }
}

/// Where a view stands with a paste's render.
pub(crate) enum Joined {
    /// Rendered before.
    Cached(Render),
    /// Another view started the render: wait for its answer.
    Waiting(Arc<Flight>),
    /// This view starts the render: run it with a weak reference to the
    /// flight, end it with [`RenderedPages::finish`], and wait like the others.
    Leading(Arc<Flight>),
}

pub(crate) struct RenderedPages {
    cache: Cache<String, Render, ByLength>,
    /// Renders in progress by id. Only weak references: the views waiting
    /// hold the flight, and a flight nobody holds is an abandoned render.
    flights: Mutex<HashMap<String, Weak<Flight>>>,
}

impl Default for RenderedPages {
    fn default() -> Self {
        Self { cache: Cache::with_weighter(ESTIMATED_ENTRIES, CAPACITY_BYTES, ByLength), flights: Mutex::default() }
    }
}

impl RenderedPages {
    pub(crate) fn get(&self, id: &str) -> Option<Render> {
        self.cache.get(id)
    }

    /// The cached render, or the render in progress, or a new flight for
    /// this view to lead. Under the flights' lock, like [`Self::finish`], so
    /// that no view can miss both the cache and a flight that is ending.
    pub(crate) fn join(&self, id: &str) -> Joined {
        let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(render) = self.cache.get(id) {
            return Joined::Cached(render);
        }
        if let Some(flight) = flights.get(id).and_then(Weak::upgrade) {
            return Joined::Waiting(flight);
        }
        let flight = Flight::new();
        flights.insert(id.to_owned(), Arc::downgrade(&flight));
        Joined::Leading(flight)
    }

    /// Ends a render: keeps `render` (unless nobody waited for it any more,
    /// then it may be cut short), ends the flight and gives its views the answer.
    pub(crate) fn finish(&self, id: &str, flight: &Weak<Flight>, render: Render) {
        let waiting = flight.upgrade();
        {
            let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
            if waiting.is_some() {
                self.cache.insert(id.to_owned(), render.clone());
            }
            // A later view may have started a new flight after this one was abandoned.
            if flights.get(id).is_some_and(|current| current.ptr_eq(flight)) {
                flights.remove(id);
            }
        }
        if let Some(flight) = waiting {
            flight.answer_with(render);
        }
    }

    pub(crate) fn forget(&self, id: &str) {
        self.cache.remove(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(html: &'static str) -> Render {
        Render::Highlighted(vec![Bytes::from_static(html.as_bytes())].into())
    }

    #[tokio::test]
    async fn concurrent_views_share_one_flight_and_its_answer() {
        let pages = RenderedPages::default();
        let Joined::Leading(leader) = pages.join("a") else { panic!("the first view leads") };
        let Joined::Waiting(waiter) = pages.join("a") else { panic!("the second view waits") };
        assert!(Arc::ptr_eq(&leader, &waiter));
        pages.finish("a", &Arc::downgrade(&leader), rendered("<li>x</li>"));
        assert!(matches!(waiter.answer().await, Some(Render::Highlighted(_))));
        assert!(matches!(pages.join("a"), Joined::Cached(_)), "later views find it cached");
    }

    #[test]
    fn a_flight_nobody_waits_for_is_abandoned_and_not_kept() {
        let pages = RenderedPages::default();
        let Joined::Leading(leader) = pages.join("a") else { panic!("the first view leads") };
        let render = Arc::downgrade(&leader);
        drop(leader);
        assert_eq!(render.strong_count(), 0, "the render can see that nobody waits");
        let Joined::Leading(next) = pages.join("a") else { panic!("a new view starts again") };
        pages.finish("a", &render, rendered("<li>cut short</li>"));
        assert!(pages.get("a").is_none(), "an abandoned render is not kept");
        assert!(matches!(pages.join("a"), Joined::Waiting(_)), "the new flight is still in progress");
        drop(next);
    }
}
