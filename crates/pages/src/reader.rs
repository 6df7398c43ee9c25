//! What the HTML page of a paste shows, decided here so the page code only
//! formats (docs/reader-features.md): a burn paste shows a notice and never
//! its content on `GET`; a binary paste shows its size and type; a text
//! paste shows its highlighted lines, rendered once per paste (the reveal
//! included, concurrent first views sharing one render: [`crate::rendered`]),
//! or its plain lines, escaped as the page is written.

use std::{
    sync::{Arc, Weak},
    time::{Duration, Instant},
};

use bytes::Bytes;
use pastebin_gateway::{ApiError, PasteView, ReadPaste};
use pastebin_runtime::metrics as names;

use crate::{
    highlight::{self, Grammar, PlainBlocks},
    rendered::{Flight, Joined, Render},
    Pages,
};

/// How much longer than the render's own budget a page waits for it before
/// showing plain text: bounds the wait when the blocking pool is busy.
const QUEUE_ALLOWANCE: Duration = Duration::from_secs(1);

/// Where a render waits before it starts, in builds with failpoints: a
/// `sleep:` here holds a render so tests can stage concurrent views and
/// clients that hang up (docs/testing.md#failpoints).
pub const BEFORE_PAGE_RENDER: &str = "before_page_render";

/// The body of a paste's page.
pub(crate) enum PageContent {
    /// A burn-after-reading paste, not read: the page offers to read it.
    BurnUnread(PasteView),
    /// A binary paste: described, linked, never inlined as text.
    Binary(PasteView),
    /// A text paste and its lines.
    Text { view: PasteView, lines: Lines },
    /// A sealed paste: its page without it, for the script to open
    /// (docs/reader-features.md#sealed-pastes). Never read here, so never
    /// burned here either: the script asks first.
    Sealed(PasteView),
}

/// A text paste's lines as the page writes them, block by block.
pub(crate) enum Lines {
    /// Highlighted `<li>` items, as rendered (shared with the cache).
    Highlighted(Arc<[Bytes]>),
    /// The paste's text, escaped into `<li>` items as the page is written.
    Plain(Bytes),
}

impl Lines {
    /// The `<li>` items, about [`highlight::BLOCK_BYTES`] at a time.
    pub(crate) fn blocks(self) -> Box<dyn Iterator<Item = Bytes> + Send> {
        match self {
            Self::Highlighted(blocks) => Box::new((0..blocks.len()).map(move |at| blocks[at].clone())),
            Self::Plain(text) => Box::new(PlainBlocks::new(text)),
        }
    }

    fn of(render: Render, content: Bytes) -> Self {
        match render {
            Render::Highlighted(blocks) => Self::Highlighted(blocks),
            Render::Plain => Self::Plain(content),
        }
    }
}

impl Pages {
    /// `GET /{id}`: never burns (link previewers fetch pages).
    pub(crate) async fn page(&self, raw_id: &str) -> Result<PageContent, ApiError> {
        let view = self.gateway.describe(raw_id).await?;
        if view.attributes.sealed {
            return Ok(PageContent::Sealed(view));
        }
        if view.attributes.burn_after_reading {
            return Ok(PageContent::BurnUnread(view));
        }
        self.shown(view).await
    }

    /// `POST /{id}`: the button of a burn notice. Reads, and so burns, a
    /// burn paste, whose render is its own (nobody may see it again). Any
    /// other paste is shown as its `GET` shows it, from the same render.
    /// A binary paste is never read here (a page cannot hand over its
    /// bytes): its burn notice links the download instead.
    pub(crate) async fn reveal(&self, raw_id: &str) -> Result<PageContent, ApiError> {
        metrics::counter!(names::PAGE_REVEALS).increment(1);
        let view = self.gateway.describe(raw_id).await?;
        if view.attributes.sealed {
            return Ok(PageContent::Sealed(view));
        }
        if view.attributes.is_binary() {
            return Ok(if view.attributes.burn_after_reading {
                PageContent::BurnUnread(view)
            } else {
                PageContent::Binary(view)
            });
        }
        if !view.attributes.burn_after_reading {
            return self.shown(view).await;
        }
        let read = self.gateway.get(raw_id).await?;
        let lines = self.lines(&read).await;
        Ok(PageContent::Text { view: read.view, lines })
    }

    /// A paste that is not a burn paste, from its cached render when there is one.
    async fn shown(&self, view: PasteView) -> Result<PageContent, ApiError> {
        if view.attributes.is_binary() {
            return Ok(PageContent::Binary(view));
        }
        if let Some(Render::Highlighted(blocks)) = self.rendered.get(&view.id) {
            return Ok(PageContent::Text { view, lines: Lines::Highlighted(blocks) });
        }
        let read = self.gateway.get(&view.id).await?;
        let lines = self.lines(&read).await;
        Ok(PageContent::Text { view: read.view, lines })
    }

    /// The lines of a text paste: plain without a grammar; else its render,
    /// cached, in progress for another view, or started here; plain text
    /// if the page cannot wait for it.
    async fn lines(&self, read: &ReadPaste) -> Lines {
        let content = read.content.clone();
        let attributes = &read.view.attributes;
        let language = attributes.language.as_ref().map(|l| l.as_str());
        let extension = attributes.file_name.as_ref().and_then(|n| n.extension());
        let Some(grammar) = highlight::grammar_for(&String::from_utf8_lossy(&content), language, extension) else {
            return Lines::Plain(content);
        };
        let flight = if attributes.burn_after_reading {
            let flight = Flight::new();
            self.start_render(read, grammar, Arc::downgrade(&flight), false);
            flight
        } else {
            match self.rendered.join(&read.view.id) {
                Joined::Cached(render) => return Lines::of(render, content),
                Joined::Waiting(flight) => flight,
                Joined::Leading(flight) => {
                    self.start_render(read, grammar, Arc::downgrade(&flight), true);
                    flight
                }
            }
        };
        match tokio::time::timeout(self.settings.highlight_budget + QUEUE_ALLOWANCE, flight.answer()).await {
            Ok(Some(render)) => Lines::of(render, content),
            _ => Lines::Plain(content),
        }
    }

    /// Highlights on the blocking pool, so a slow grammar never holds up the
    /// async workers. The render holds its flight weakly: it stops as soon
    /// as no view waits for it. With `keep`, what it finishes is cached by
    /// id, even when it ran out of budget (then as plain text): each paste
    /// costs at most one render per gateway, however often it is viewed.
    fn start_render(&self, read: &ReadPaste, grammar: Grammar, flight: Weak<Flight>, keep: bool) {
        let (content, id) = (read.content.clone(), read.view.id.clone());
        let (rendered, budget) = (self.rendered.clone(), self.settings.highlight_budget);
        tokio::spawn(async move {
            pastebin_runtime::failpoints::hit(BEFORE_PAGE_RENDER).await;
            let rendering = tokio::task::spawn_blocking(move || {
                let render = render(&String::from_utf8_lossy(&content), grammar, &flight, budget);
                if keep {
                    rendered.finish(&id, &flight, render);
                } else if let Some(flight) = flight.upgrade() {
                    flight.answer_with(render);
                }
            });
            if let Err(error) = rendering.await {
                tracing::warn!(%error, "a page render failed; the page shows plain text");
            }
        });
    }
}

/// One render, counted by how it ended: `highlighted`, `out_of_time` (its
/// budget ran out, or the grammar failed) or `abandoned` (nobody waited any more).
fn render(text: &str, grammar: Grammar, flight: &Weak<Flight>, budget: Duration) -> Render {
    let deadline = Instant::now() + budget;
    let abandoned = || flight.strong_count() == 0;
    let stop = || abandoned() || Instant::now() > deadline;
    let (render, outcome) = match highlight::highlight(text, grammar, &stop) {
        Some(blocks) => (Render::Highlighted(blocks.into()), "highlighted"),
        None if abandoned() => (Render::Plain, "abandoned"),
        None => (Render::Plain, "out_of_time"),
    };
    metrics::counter!(names::PAGE_RENDERS, "outcome" => outcome).increment(1);
    render
}
