//! Server-rendered HTML. Every piece of paste content goes through
//! [`escape`]; the pages load nothing from elsewhere (see [`CSP`]).

use crate::{ApiError, PasteView};

/// No scripts, no remote anything; only the inline style below.
pub(crate) const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self'";

const STYLE: &str = "body{font:16px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#1d2330}\
pre{background:#f5f6f8;border:1px solid #dde1e6;border-radius:6px;padding:1rem;overflow-x:auto;white-space:pre-wrap;word-break:break-word}\
.meta{color:#5b6472;font-size:.9rem}a{color:#0b5cad}";

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

fn layout(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{title}</title><style>{STYLE}</style></head><body>{body}</body></html>",
        title = escape(title)
    )
}

pub(crate) fn paste(paste: &PasteView) -> String {
    let id = escape(&paste.id);
    layout(
        &format!("Paste {}", paste.id),
        &format!(
            "<h1>Paste {id}</h1><p class=\"meta\">{size} bytes · created {created} · expires {expires} · \
             <a href=\"/raw/{id}\">raw</a></p><pre>{content}</pre>",
            size = paste.size,
            created = escape(&paste.created_at),
            expires = escape(&paste.expires_at),
            content = escape(&paste.content),
        ),
    )
}

pub(crate) fn not_found() -> String {
    layout("Not found", "<h1>Not found</h1><p>There is no paste here. It may have expired or been deleted.</p>")
}

pub(crate) fn error(error: &ApiError) -> String {
    layout("Unavailable", &format!("<h1>Try again shortly</h1><p>{}</p>", escape(&error.to_string())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_is_escaped() {
        let page = paste(&PasteView {
            id: "00abc".into(),
            content: "<script>alert('x')</script> & \"q\"".into(),
            created_at: "t".into(),
            expires_at: "t".into(),
            size: 1,
        });
        assert!(!page.contains("<script>"));
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"));
    }
}
