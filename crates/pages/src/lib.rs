//! The browser's pages (docs/reader-features.md): the new-paste form, a
//! paste's page, the delete form and its outcomes, the QR code and the
//! pages' own assets.
//!
//! Built on the gateway's read API alone ([`Gateway::describe`],
//! [`Gateway::get`], [`Gateway::delete`]), never the reverse: the gateway
//! knows nothing of HTML, highlighting or QR codes. A request enters through
//! [`router`], [`reader`] decides what a paste's page shows, [`highlight`]
//! renders its text (kept by id in [`rendered`]), and [`html`] formats every
//! page; a sealed paste's page, which the server cannot fill, comes from
//! [`sealed_page`] with the script that opens it in the browser. The binary merges [`page_router`] with the gateway's API router on
//! the public listener.

mod highlight;
mod html;
mod reader;
mod rendered;
mod router;
mod sealed_page;

use std::{sync::Arc, time::Duration};

use pastebin_gateway::Gateway;

pub use highlight::TIME_BUDGET;
pub use router::{page_router, PAGE_ROUTES};

/// What an operator configures about the pages.
#[derive(Debug, Clone)]
pub struct PageSettings {
    /// How long highlighting one paste may run before its page shows plain
    /// text (docs/reader-features.md#highlighting; default [`TIME_BUDGET`]).
    pub highlight_budget: Duration,
}

impl Default for PageSettings {
    fn default() -> Self {
        Self { highlight_budget: TIME_BUDGET }
    }
}

/// The pages' state: the gateway they read through, and their renders.
/// Cheap to clone.
#[derive(Clone)]
pub(crate) struct Pages {
    gateway: Gateway,
    rendered: Arc<rendered::RenderedPages>,
    settings: Arc<PageSettings>,
}

/// The pages' handlers reach the gateway's extractors (a rate spent before a form is read).
impl axum::extract::FromRef<Pages> for Gateway {
    fn from_ref(pages: &Pages) -> Self {
        pages.gateway.clone()
    }
}

impl Pages {
    /// The renders forget a paste the moment it is deleted through `gateway`.
    fn new(gateway: Gateway, settings: PageSettings) -> Self {
        let rendered = Arc::new(rendered::RenderedPages::default());
        let forgetting = rendered.clone();
        gateway.on_delete(move |id| forgetting.forget(id));
        Self { gateway, rendered, settings: Arc::new(settings) }
    }
}
