//! Server-rendered HTML for browsers: the new-paste page, a paste, the
//! delete form and its outcomes. Every piece of paste content and every id
//! goes through [`escape`]. The pages load only the gateway's own
//! [`STYLE`] and [`APP_JS`] (see [`CSP`]): no inline script, no inline style,
//! nothing from elsewhere, so a paste that contains markup can only ever be
//! text.

use crate::PasteView;

/// Sent with every HTML page. Scripts and styles only from this origin (the
/// two assets below), `fetch` only to this origin, forms post only here.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
     img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// `/assets/style.css`: the one stylesheet of every page.
pub(crate) const STYLE: &str = include_str!("assets/style.css");

/// `/assets/app.js`: the new-paste page's save logic (one idempotency key
/// per save, kept in `sessionStorage` until a 201) and the copy buttons.
pub(crate) const APP_JS: &str = include_str!("assets/app.js");

/// Escapes text for HTML element content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            other => out.push(other),
        }
    }
    out
}

/// The frame every page shares. `title` is escaped here; `main` is HTML the
/// caller built (with its own escaping); `script` adds the app script.
fn layout(title: &str, main: &str, script: bool) -> String {
    let script = if script { "<script src=\"/assets/app.js\" defer></script>" } else { "" };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"referrer\" content=\"no-referrer\">\
         <title>{title} · pastebin</title><link rel=\"stylesheet\" href=\"/assets/style.css\">{script}</head>\
         <body><header class=\"bar\"><a class=\"brand\" href=\"/\">pastebin</a>\
         <a class=\"new\" href=\"/\">New paste</a></header><main>{main}</main>\
         <footer>Links are shareable; anyone with the link can read the paste. \
         <a href=\"/api/v1/openapi.json\">HTTP API</a></footer></body></html>",
        title = escape(title)
    )
}

/// The expiry choices the new-paste page offers (all within the range of docs/design.md#expiry).
const EXPIRY_CHOICES: &[(u64, &str)] =
    &[(3_600, "1 hour"), (86_400, "1 day"), (604_800, "1 week"), (2_592_000, "30 days"), (31_536_000, "1 year")];

/// `/`: the new-paste form. Saving needs the script (it owns the
/// idempotency key); the `noscript` text says how to save without it.
pub(crate) fn new_paste(public_url: &str, max_bytes: usize) -> String {
    let options: String = EXPIRY_CHOICES
        .iter()
        .map(|(seconds, label)| {
            let selected = if *seconds == 2_592_000 { " selected" } else { "" };
            format!("<option value=\"{seconds}\"{selected}>{label}</option>")
        })
        .collect();
    let main = format!(
        "<section id=\"compose\"><h1>New paste</h1>\
         <noscript><p class=\"notice\">Saving from this page needs JavaScript. Without it, use the API: \
         <code>curl -H \"Idempotency-Key: $(uuidgen)\" --data-binary @file {api}</code></p></noscript>\
         <form id=\"new-paste\" data-max-bytes=\"{max_bytes}\">\
         <label for=\"content\">Text</label>\
         <textarea id=\"content\" name=\"content\" rows=\"18\" spellcheck=\"false\" required autofocus></textarea>\
         <div class=\"row\"><label for=\"expiry\">Expires after</label>\
         <select id=\"expiry\" name=\"expires_in_seconds\">{options}</select>\
         <button type=\"submit\" id=\"save\">Save paste</button></div>\
         <p id=\"status\" class=\"status\" role=\"status\" aria-live=\"polite\"></p></form></section>\
         <section id=\"created\" hidden><h1>Saved</h1>\
         <p class=\"meta\">Expires <span id=\"created-expires\"></span>.</p>\
         <label for=\"share-url\">Share link</label>\
         <div class=\"copy\"><input id=\"share-url\" readonly><button type=\"button\" data-copy=\"share-url\">Copy</button></div>\
         <label for=\"raw-url\">Raw link</label>\
         <div class=\"copy\"><input id=\"raw-url\" readonly><button type=\"button\" data-copy=\"raw-url\">Copy</button></div>\
         <div class=\"warning\"><label for=\"delete-token\">Delete token</label>\
         <div class=\"copy\"><input id=\"delete-token\" readonly><button type=\"button\" data-copy=\"delete-token\">Copy</button></div>\
         <p><strong>This token is shown once and will not be shown again.</strong> Keep it somewhere safe: \
         it is the only way to delete this paste.</p></div>\
         <p class=\"actions\"><a id=\"view-link\" href=\"/\">View the paste</a> · <a href=\"/\">New paste</a></p></section>",
        api = escape(&format!("{public_url}/api/v1/pastes")),
    );
    layout("New paste", &main, true)
}

/// `/{id}`: the paste as numbered lines. An ordered list numbers them
/// without putting the numbers into copied text; lines wrap. Works without
/// JavaScript.
pub(crate) fn paste(paste: &PasteView) -> String {
    let id = escape(&paste.id);
    let body = paste.content.strip_suffix('\n').unwrap_or(&paste.content);
    let lines: String =
        body.split('\n').map(|line| format!("<li>{}</li>", escape(line.strip_suffix('\r').unwrap_or(line)))).collect();
    let main = format!(
        "<h1>Paste <code>{id}</code></h1>\
         <p class=\"meta\">{size} bytes · created {created} · expires {expires} · \
         <a href=\"/raw/{id}\">raw</a> · <a href=\"/{id}/delete\">delete</a></p>\
         <ol class=\"code\">{lines}</ol>",
        size = paste.size,
        created = escape(&paste.created_at),
        expires = escape(&paste.expires_at),
    );
    layout(&format!("Paste {}", paste.id), &main, false)
}

/// `/{id}/delete`: a plain form (no script needed) that posts the token.
/// `problem` is shown above it after a wrong token.
pub(crate) fn delete_form(raw_id: &str, problem: Option<&str>) -> String {
    let id = escape(raw_id);
    let problem = problem.map(|p| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(p))).unwrap_or_default();
    let main = format!(
        "<h1>Delete paste <code>{id}</code></h1>{problem}\
         <form method=\"post\" action=\"/{id}/delete\" class=\"delete\">\
         <label for=\"token\">Delete token (shown once when the paste was saved)</label>\
         <input id=\"token\" name=\"token\" autocomplete=\"off\" spellcheck=\"false\" required>\
         <div class=\"row\"><button type=\"submit\" class=\"danger\">Delete permanently</button>\
         <a href=\"/{id}\">Cancel</a></div></form>"
    );
    layout(&format!("Delete paste {raw_id}"), &main, false)
}

pub(crate) fn deleted(id: &str) -> String {
    let main = format!(
        "<h1>Deleted</h1><p>Paste <code>{}</code> is deleted. Its links now answer “not found”.</p>\
         <p><a href=\"/\">New paste</a></p>",
        escape(id)
    );
    layout("Deleted", &main, false)
}

pub(crate) fn not_found() -> String {
    layout("Not found", "<h1>Not found</h1><p>There is no paste here. It may have expired or been deleted.</p>", false)
}

pub(crate) fn bad_request(message: &str) -> String {
    layout("Bad request", &format!("<h1>Bad request</h1><p>{}</p>", escape(message)), false)
}

/// A 503: the service could not answer now. Nothing was lost; try again.
pub(crate) fn unavailable(message: &str) -> String {
    layout(
        "Try again shortly",
        &format!("<h1>Try again shortly</h1><p>{}</p><p>Reload this page in a moment.</p>", escape(message)),
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(content: &str) -> PasteView {
        PasteView {
            id: "00abc".into(),
            content: content.into(),
            created_at: "t".into(),
            expires_at: "t".into(),
            size: 1,
        }
    }

    #[test]
    fn content_is_escaped() {
        let page = paste(&view("<script>alert('x')</script> & \"q\""));
        assert!(!page.contains("<script"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"));
    }

    #[test]
    fn one_list_item_per_line() {
        let page = paste(&view("a\r\n\nb\n"));
        assert!(page.contains("<ol class=\"code\"><li>a</li><li></li><li>b</li></ol>"), "{page}");
    }

    #[test]
    fn ids_and_messages_are_escaped_in_every_page() {
        for page in [delete_form("<i>", Some("<b>")), deleted("<i>"), bad_request("<i>"), unavailable("<i>")] {
            assert!(!page.contains("<i>") && !page.contains("<b>"), "{page}");
        }
    }

    #[test]
    fn pages_have_no_inline_script_or_style() {
        for page in [new_paste("http://x", 10), paste(&view("x")), delete_form("x", None), not_found()] {
            assert!(!page.contains("<script>") && !page.contains("<style") && !page.contains(" style="), "{page}");
        }
    }
}
