//! The pages' part in sealed pastes (docs/reader-features.md#sealed-pastes):
//! the new-paste page's "Encrypt in the browser" choice, and the page of a
//! sealed paste, which the server sends without the paste: the script
//! (`/assets/sealed.js`) fetches the envelope, opens it with the key in the
//! link's fragment (which the server never sees) and fills the page in.
//! Until it has opened it, the page shows nothing of the paste but what is
//! missing.

use pastebin_gateway::PasteView;

use crate::html::{escape, expiry, report_link, time};

/// `/assets/sealed.js`: sealing on the new-paste page and opening on a
/// sealed paste's page, with the browser's Web Crypto and nothing else.
pub(crate) const SEALED_JS: &str = include_str!("assets/sealed.js");

/// `/assets/qr.js`: a sealed paste's link as a QR code, drawn in the page,
/// since the server never has the whole link to draw.
pub(crate) const QR_JS: &str = include_str!("assets/qr.js");

/// The new-paste page's controls for sealing, after the burn box. The
/// script shows them only where Web Crypto is there (a secure context), and
/// says why not elsewhere.
pub(crate) fn compose_choice() -> &'static str {
    "<div class=\"seal\" id=\"seal-choice\">\
     <label class=\"check\"><input type=\"checkbox\" id=\"encrypt\" name=\"encrypt\" disabled> \
     Encrypt in the browser — the server never sees the text</label>\
     <span id=\"password-row\" hidden><label for=\"seal-password\">Password (optional)</label>\
     <input type=\"password\" id=\"seal-password\" class=\"short\" autocomplete=\"new-password\"></span>\
     <p id=\"seal-unavailable\" class=\"meta\" hidden></p></div>"
}

/// A sealed paste's page: the paste's times and links (hidden until it is
/// opened), what the reader must do (the script says it), and empty places
/// for the text. `public_url` makes the link, to which the script adds the
/// fragment.
pub(crate) fn page_main(view: &PasteView, public_url: &str) -> String {
    let id = escape(&view.id);
    let burn = if view.attributes.burn_after_reading { "true" } else { "false" };
    format!(
        "<h1>Paste <code>{id}</code></h1>\
         <section id=\"sealed-paste\" data-id=\"{id}\" data-burn=\"{burn}\">\
         <noscript><p class=\"notice\">This paste is encrypted. Opening it needs JavaScript \
         (the key is in the link, never sent to the server), or <code>pastebin get</code> with the whole link.</p></noscript>\
         <p id=\"sealed-status\" class=\"status\" role=\"status\" aria-live=\"polite\"></p>\
         <div id=\"sealed-burn\" class=\"notice burn\" hidden><p><strong>This paste will be deleted when you open it.</strong> \
         Only one person can ever read it.</p><button type=\"button\" id=\"sealed-reveal\" class=\"danger\">Open it (this deletes it)</button></div>\
         <form id=\"sealed-password\" hidden><label for=\"sealed-password-input\">Password</label>\
         <input type=\"password\" id=\"sealed-password-input\" class=\"short\" autocomplete=\"off\">\
         <button type=\"submit\">Open</button></form>\
         <div id=\"sealed-opened\" hidden>\
         <p class=\"meta\">Sealed · created {created} · {expires} · \
         <a href=\"/{id}/delete\">delete</a> · {report}</p>\
         <div class=\"share\" id=\"share\"><div class=\"copy\">\
         <input id=\"page-url\" aria-label=\"Link to this paste, with its key\" readonly value=\"{url}/{id}\">\
         <button type=\"button\" data-copy=\"page-url\">Copy link</button>\
         <button type=\"button\" id=\"copy-content\">Copy content</button>\
         <button type=\"button\" id=\"sealed-download\">Download</button></div>\
         <details class=\"qr\" id=\"sealed-qr-box\"><summary>QR code</summary><div id=\"sealed-qr\"></div></details></div>\
         <ol class=\"code\" id=\"sealed-lines\"></ol></div></section>",
        url = escape(public_url),
        created = time(&view.created_at),
        expires = expiry(view),
        report = report_link(view),
    )
}

#[cfg(test)]
mod tests {
    use pastebin_core::PasteAttributes;

    use super::*;

    #[test]
    fn a_sealed_page_holds_no_content_and_hides_its_links_until_opened() {
        let view = PasteView {
            id: "00abc".into(),
            created_at: "2026-12-01T05:58:46Z".into(),
            expires_at: "2026-12-31T05:58:46Z".into(),
            size: 120,
            attributes: PasteAttributes { sealed: true, burn_after_reading: true, ..Default::default() },
        };
        let page = page_main(&view, "https://paste.example");
        assert!(page.contains("data-id=\"00abc\" data-burn=\"true\""), "{page}");
        assert!(page.contains("<div id=\"sealed-opened\" hidden>"), "{page}");
        assert!(!page.contains("/raw/00abc"), "no link reads the envelope: {page}");
        assert!(page.contains("· <a id=\"report\" href=\"/00abc/report\">report</a></p>"), "{page}");
        assert!(page.contains("expires <time datetime=\"2026-12-31T05:58:46Z\""), "{page}");
    }

    #[test]
    fn a_sealed_paste_that_never_expires_says_so() {
        let view = PasteView {
            id: "00abc".into(),
            created_at: "2026-12-01T05:58:46Z".into(),
            // The "never" time as the gateway writes it (pastebin_core::never_expires_at).
            expires_at: "9999-12-31T23:59:59Z".into(),
            size: 120,
            attributes: PasteAttributes { sealed: true, ..Default::default() },
        };
        let page = page_main(&view, "https://paste.example");
        assert!(page.contains("· never expires ·") && !page.contains("9999"), "{page}");
    }
}
