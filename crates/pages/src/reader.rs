//! What the HTML page of a paste shows, decided here so the page code only
//! formats (docs/reader-features.md): a burn paste shows a notice and never
//! its content on `GET`; a binary paste shows its size and type; a text
//! paste shows its highlighted lines, from the cache when this gateway has
//! rendered it before.

use std::{sync::Arc, time::Duration};

use bytes::Bytes;

use pastebin_gateway::{ApiError, PasteView, ReadPaste};

use crate::{highlight, Pages};

/// How much longer than the render's own budget a page waits for it before
/// showing plain text: bounds the wait when the blocking pool is busy.
const QUEUE_ALLOWANCE: Duration = Duration::from_secs(1);

/// The body of a paste's page.
pub(crate) enum PageContent {
    /// A burn-after-reading paste, not read: the page offers to read it.
    Sealed(PasteView),
    /// A binary paste: described, linked, never inlined as text.
    Binary(PasteView),
    /// A text paste's lines as `<li>` items (escaped, maybe highlighted).
    Text { view: PasteView, lines: Arc<str> },
}

impl Pages {
    /// `GET /{id}`: never burns (link previewers fetch pages).
    pub(crate) async fn page(&self, raw_id: &str) -> Result<PageContent, ApiError> {
        let view = self.gateway.describe(raw_id).await?;
        if view.attributes.burn_after_reading {
            return Ok(PageContent::Sealed(view));
        }
        if view.attributes.is_binary() {
            return Ok(PageContent::Binary(view));
        }
        if let Some(lines) = self.rendered.get(&view.id) {
            return Ok(PageContent::Text { view, lines });
        }
        let read = self.gateway.get(raw_id).await?;
        let lines = self.render(&read, true).await;
        Ok(PageContent::Text { view: read.view, lines })
    }

    /// `POST /{id}`: the button on a sealed page. Reads, and so burns, a
    /// burn paste; the render is never cached (nobody may see it again).
    /// A binary paste is never read here (a page cannot hand over its
    /// bytes): its sealed page links the download instead.
    pub(crate) async fn reveal(&self, raw_id: &str) -> Result<PageContent, ApiError> {
        let view = self.gateway.describe(raw_id).await?;
        if view.attributes.is_binary() {
            return Ok(if view.attributes.burn_after_reading {
                PageContent::Sealed(view)
            } else {
                PageContent::Binary(view)
            });
        }
        let read = self.gateway.get(raw_id).await?;
        let lines = self.render(&read, false).await;
        Ok(PageContent::Text { view: read.view, lines })
    }

    /// Highlights on the blocking pool, so a slow grammar never holds up the
    /// async workers; plain text if the page cannot wait for it. With
    /// `keep`, the render is cached by id when it finishes, even if the page
    /// stopped waiting and even when it ran out of budget (then as plain
    /// text): each paste costs at most one render per gateway, however often
    /// it is viewed.
    async fn render(&self, read: &ReadPaste, keep: bool) -> Arc<str> {
        let budget = self.settings.highlight_budget;
        let content: Bytes = read.content.clone();
        let id = read.view.id.clone();
        let language = read.view.attributes.language.as_ref().map(|l| l.as_str().to_owned());
        let extension = read.view.attributes.file_name.as_ref().and_then(|n| n.extension().map(str::to_owned));
        let rendered = self.rendered.clone();
        let work = tokio::task::spawn_blocking(move || {
            let text = String::from_utf8_lossy(&content);
            let lines: Arc<str> =
                highlight::render_lines(&text, language.as_deref(), extension.as_deref(), budget).into();
            if keep {
                rendered.keep(&id, lines.clone());
            }
            lines
        });
        match tokio::time::timeout(budget + QUEUE_ALLOWANCE, work).await {
            Ok(Ok(lines)) => lines,
            _ => highlight::plain_lines(&String::from_utf8_lossy(&read.content)).into(),
        }
    }
}
