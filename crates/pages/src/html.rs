//! Server-rendered HTML for browsers: the new-paste page, a paste, the
//! delete form and its outcomes. Every piece of paste content and every id
//! goes through [`escape`]. The pages load only the gateway's own
//! [`STYLE`], [`APP_JS`] and the sealed pastes' scripts
//! ([`crate::sealed_page`]) (see [`CSP`]): no inline script, no inline
//! style, nothing from elsewhere, so a paste that contains markup can only
//! ever be text.

use pastebin_gateway::PasteView;

use bytes::Bytes;

use crate::reader::{Lines, PageContent};

/// Sent with every HTML page. Scripts and styles only from this origin (the
/// two assets below), `fetch` only to this origin, forms post only here.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
     img-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// `/assets/style.css`: the one stylesheet of every page.
pub(crate) const STYLE: &str = include_str!("assets/style.css");

/// `/assets/app.js`: the new-paste page's save logic (one idempotency key
/// per save, kept in `sessionStorage` until a 201) and the copy buttons.
pub(crate) const APP_JS: &str = include_str!("assets/app.js");

/// `/assets/theme.js`: light or dark (see [`pastebin_runtime::THEME_JS`]).
pub(crate) const THEME_JS: &str = pastebin_runtime::THEME_JS;

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
    format!("{}{main}{LAYOUT_END}", layout_start(title, script))
}

/// The frame up to the page's `<main>` content.
fn layout_start(title: &str, script: bool) -> String {
    let script = if script {
        "<script src=\"/assets/app.js\" defer></script><script src=\"/assets/qr.js\" defer></script>\
         <script src=\"/assets/sealed.js\" defer></script>"
    } else {
        ""
    };
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"referrer\" content=\"no-referrer\">\
         <title>{title} · pastebin</title><link rel=\"stylesheet\" href=\"/assets/style.css\">\
         <link rel=\"stylesheet\" href=\"/assets/highlight.css\"><script src=\"/assets/theme.js\"></script>{script}</head>\
         <body><header class=\"bar\"><a class=\"brand\" href=\"/\">pastebin</a>\
         <nav><button type=\"button\" id=\"theme-toggle\" class=\"quiet\" hidden>Dark mode</button>\
         <a class=\"new\" href=\"/\">New paste</a></nav></header><main>",
        title = escape(title)
    )
}

/// The frame after the page's `<main>` content.
const LAYOUT_END: &str = "</main><footer>Links are shareable; anyone with the link can read the paste. \
     <a href=\"/api/v1/openapi.json\">HTTP API</a></footer></body></html>";

/// A page as it is written: whole, or a text paste's page around its lines,
/// which are written block by block as the client reads (never the whole
/// page in memory: a large paste's page is many times its size).
pub(crate) struct Page {
    start: String,
    lines: Option<Lines>,
    end: String,
}

impl From<String> for Page {
    fn from(whole: String) -> Self {
        Self { start: whole, lines: None, end: String::new() }
    }
}

impl Page {
    /// The page's bytes in the order they are written.
    pub(crate) fn blocks(self) -> impl Iterator<Item = Bytes> + Send {
        let lines = self.lines.map(Lines::blocks).into_iter().flatten();
        std::iter::once(Bytes::from(self.start)).chain(lines).chain(std::iter::once(Bytes::from(self.end)))
    }

    #[cfg(test)]
    pub(crate) fn whole(self) -> String {
        self.blocks().map(|block| String::from_utf8(block.to_vec()).expect("pages are UTF-8")).collect()
    }
}

/// A lifetime in words for the expiry menu: `10 minutes`, `1 hour`,
/// `30 days`, `1 year`, `never`.
pub(crate) fn lifetime_words(seconds: u64) -> String {
    if seconds == 365 * 86_400 {
        return "1 year".into();
    }
    let short = pastebin_core::lifetime_label(seconds);
    let (number, unit) = short.split_at(short.find(|c: char| !c.is_ascii_digit()).unwrap_or(short.len()));
    let unit = match unit {
        "m" => "minute",
        "h" => "hour",
        "d" => "day",
        "w" => "week",
        "s" => "second",
        _ => return short,
    };
    let plural = if number == "1" { "" } else { "s" };
    format!("{number} {unit}{plural}")
}

/// A size in words: `1 MiB`, `512 KiB`, `100 bytes`.
pub(crate) fn size_words(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b.is_multiple_of(1 << 20) => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b.is_multiple_of(1 << 10) => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// What the new-paste form depends on.
pub(crate) struct NewPasteForm<'a> {
    pub(crate) public_url: &'a str,
    pub(crate) max_bytes: usize,
    pub(crate) expiry: &'a pastebin_core::ExpiryPolicy,
    /// A private instance (`--require-create-token`): the form asks for a token.
    pub(crate) token_required: bool,
}

/// `/`: the new-paste form. Saving needs the script (it owns the
/// idempotency key); the `noscript` text says how to save without it. The
/// expiry menu offers exactly the operator's choices (`expiry`), and the
/// size limit is said before anyone pastes. On a private instance the form
/// asks for a create token first and says why (docs/security.md#create-tokens).
pub(crate) fn new_paste(form: &NewPasteForm<'_>) -> String {
    let NewPasteForm { public_url, max_bytes, expiry, token_required } = *form;
    let options: String = expiry
        .offered()
        .into_iter()
        .map(|seconds| {
            let selected = if seconds == expiry.default_seconds() { " selected" } else { "" };
            format!("<option value=\"{seconds}\"{selected}>{}</option>", lifetime_words(seconds))
        })
        .collect();
    let main = format!(
        "<section id=\"compose\"><h1>New paste</h1>\
         <noscript><p class=\"notice\">Saving from this page needs JavaScript. Without it, use the API: \
         <code>curl -H \"Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)\" --data-binary @file {api}</code></p></noscript>\
         <p class=\"meta\" id=\"size-limit\">Up to {size} per paste.</p>\
         <form id=\"new-paste\" data-max-bytes=\"{max_bytes}\">{token}\
         <label for=\"content\">Text</label>\
         <textarea id=\"content\" name=\"content\" rows=\"18\" spellcheck=\"false\" autofocus></textarea>\
         <div id=\"drop-zone\" class=\"drop\"><label for=\"file\">…or a file (pick one or drop it here)</label>\
         <input type=\"file\" id=\"file\" name=\"file\"><p id=\"file-chosen\" class=\"meta\"></p></div>\
         <div class=\"row\"><label for=\"language\">Language</label>\
         <input id=\"language\" name=\"language\" class=\"short\" list=\"languages\" \
         placeholder=\"e.g. Rust (optional)\" maxlength=\"64\" autocomplete=\"off\">{languages}\
         <label for=\"expiry\">Expires after</label>\
         <select id=\"expiry\" name=\"expires_in_seconds\">{options}</select>\
         <label class=\"check\"><input type=\"checkbox\" id=\"burn\" name=\"burn_after_reading\"> Burn after reading</label>\
         <button type=\"submit\" id=\"save\">Save paste</button></div>{seal}\
         <p id=\"status\" class=\"status\" role=\"status\" aria-live=\"polite\"></p></form></section>\
         <section id=\"created\" hidden><h1>Saved</h1>\
         <p class=\"meta\">Expires <time id=\"created-expires\" data-relative></time>.</p>\
         <figure class=\"qr\"><img id=\"qr\" alt=\"QR code of the share link\" width=\"164\" height=\"164\">\
         <figcaption>Scan to open the share link on a phone.</figcaption></figure>\
         <label for=\"share-url\">Share link</label>\
         <div class=\"copy\"><input id=\"share-url\" readonly><button type=\"button\" data-copy=\"share-url\">Copy</button></div>\
         <label for=\"raw-url\">Raw link</label>\
         <div class=\"copy\"><input id=\"raw-url\" readonly><button type=\"button\" data-copy=\"raw-url\">Copy</button></div>\
         <div class=\"warning\"><label for=\"delete-token\">Delete token</label>\
         <div class=\"copy\"><input id=\"delete-token\" readonly><button type=\"button\" data-copy=\"delete-token\">Copy</button></div>\
         <p><strong>This token is shown once and will not be shown again.</strong> Keep it somewhere safe: \
         it is the only way to delete this paste. The address bar already shows the paste's link; \
         reloading or leaving this page shows the paste without its token.</p></div>\
         <p class=\"actions\"><a id=\"view-link\" href=\"/\">View the paste</a> · <a href=\"/\">New paste</a></p></section>",
        api = escape(&format!("{public_url}/api/v1/pastes")),
        languages = language_list(),
        seal = crate::sealed_page::compose_choice(),
        size = size_words(max_bytes),
        token = if token_required { create_token_box() } else { String::new() },
    );
    layout("New paste", &main, true)
}

/// The create-token field of a private instance's form. The script keeps
/// the token in this browser's storage for this site (its origin) only, so
/// it is typed once, and never puts it in a link.
fn create_token_box() -> String {
    "<div id=\"create-token-box\" class=\"notice\">\
     <p>This pastebin is private: saving needs a <strong>create token</strong> from its operator \
     (<code>pastebin ctl tokens add</code>). Anyone can read a paste they have the link to.</p>\
     <label for=\"create-token\">Create token</label>\
     <div class=\"copy\"><input id=\"create-token\" name=\"create_token\" type=\"password\" required \
     autocomplete=\"off\" spellcheck=\"false\"><button type=\"button\" id=\"forget-token\">Forget</button></div>\
     <p class=\"meta\">Kept in this browser for this site only, so you type it once; never sent anywhere \
     but this site's saves, never put in a link. “Forget” removes it from this browser.</p></div>"
        .to_owned()
}

/// The `<datalist>` of the languages the highlighter knows: suggestions
/// beside free text (an unknown language is plain text, never an error).
fn language_list() -> String {
    let options: String =
        crate::highlight::LANGUAGES.iter().map(|name| format!("<option value=\"{}\">", escape(name))).collect();
    format!("<datalist id=\"languages\">{options}</datalist>")
}

/// `/{id}`: the paste. Text as numbered lines (an ordered list numbers
/// them without putting the numbers into copied text; lines wrap); a binary
/// paste as its size, type and a download link (raster images inline); a
/// burn paste as a notice with a button, never its content. `revealed`: this
/// answer is the burn's one read. `public_url` makes the link to share.
/// Works without JavaScript; with it, the copy buttons and relative times.
pub(crate) fn paste(content: PageContent, revealed: bool, public_url: &str) -> Page {
    let view = match &content {
        PageContent::BurnUnread(view)
        | PageContent::Binary(view)
        | PageContent::Text { view, .. }
        | PageContent::Sealed(view) => view,
    };
    let id = escape(&view.id);
    let burned = if revealed && view.attributes.burn_after_reading {
        "<p class=\"notice burned\" role=\"status\">This paste was burned after reading: it is deleted now, \
         and this is the only time it is shown. Copy what you need before you leave.</p>"
    } else {
        ""
    };
    let share = share_bar(view, revealed, public_url, matches!(content, PageContent::Text { .. }));
    let heading = format!("<h1>Paste <code>{id}</code></h1>{meta}{burned}{share}", meta = meta(view));
    let title = format!("Paste {}", view.id);
    match content {
        // Its own heading: nothing of it shows before the script opens it.
        PageContent::Sealed(view) => layout(&title, &crate::sealed_page::page_main(&view, public_url), true).into(),
        PageContent::BurnUnread(view) => layout(&title, &(heading + &burn_notice(&view)), true).into(),
        PageContent::Binary(view) => layout(&title, &(heading + &binary(&view, revealed)), true).into(),
        PageContent::Text { lines, .. } => Page {
            start: format!("{}{heading}<ol class=\"code\">", layout_start(&title, true)),
            lines: Some(lines),
            end: format!("</ol>{LAYOUT_END}"),
        },
    }
}

/// Size, type, times and links. A burn paste offers no raw or download link
/// here: those read it, and the notice below says so first.
fn meta(view: &PasteView) -> String {
    let id = escape(&view.id);
    let attributes = &view.attributes;
    let mut parts = vec![format!("{} bytes", view.size)];
    if let Some(media_type) = &attributes.media_type {
        parts.push(escape(media_type.as_str()));
    }
    if let Some(language) = &attributes.language {
        parts.push(escape(language.as_str()));
    }
    parts.push(format!("created {}", time(&view.created_at)));
    parts.push(expiry(view));
    if !attributes.burn_after_reading {
        parts.push(format!("<a href=\"/raw/{id}\">raw</a>"));
        parts.push(format!("<a id=\"download\" href=\"/raw/{id}?download\">download</a>"));
    }
    parts.push(format!("<a href=\"/{id}/delete\">delete</a>"));
    parts.push(report_link(view));
    format!("<p class=\"meta\">{}</p>", parts.join(" · "))
}

/// When the paste expires, in words for one that never does (its expiry is
/// the far-future "never" time, docs/configuration.md#expiry-policy).
pub(crate) fn expiry(view: &PasteView) -> String {
    if view.never_expires() {
        "never expires".into()
    } else {
        format!("expires {}", time(&view.expires_at))
    }
}

/// The link to the paste's report form (docs/operations.md#reports-and-takedowns),
/// on every paste's page, sealed or not.
pub(crate) fn report_link(view: &PasteView) -> String {
    format!("<a id=\"report\" href=\"/{}/report\">report</a>", escape(&view.id))
}

/// A time as its exact UTC value, which the script turns into "in 3 days"
/// or "5 minutes ago", keeping the exact time on hover (`title`).
pub(crate) fn time(rfc3339: &str) -> String {
    let exact = rfc3339.replacen('T', " ", 1).replace('Z', " UTC");
    format!(
        "<time datetime=\"{iso}\" title=\"{exact}\" data-relative>{exact}</time>",
        iso = escape(rfc3339),
        exact = escape(&exact)
    )
}

/// What a reader shares the paste with: its link with a copy button, the
/// link as a QR code (behind a disclosure, so it loads when asked for) and,
/// for text, a button that copies the content. A burned paste has no link
/// left to share, only its content to copy. The buttons need the script
/// and stay hidden without it.
fn share_bar(view: &PasteView, revealed: bool, public_url: &str, text: bool) -> String {
    let id = escape(&view.id);
    let copy_content = if text {
        "<button type=\"button\" id=\"copy-content\" data-needs-script hidden>Copy content</button>"
    } else {
        ""
    };
    if revealed && view.attributes.burn_after_reading {
        return format!("<div class=\"share\" id=\"share\">{copy_content}</div>");
    }
    format!(
        "<div class=\"share\" id=\"share\"><div class=\"copy\">\
         <input id=\"page-url\" aria-label=\"Link to this paste\" readonly value=\"{url}/{id}\">\
         <button type=\"button\" data-copy=\"page-url\" data-needs-script hidden>Copy link</button>{copy_content}</div>\
         <details class=\"qr\"><summary>QR code</summary><img id=\"page-qr\" src=\"/{id}/qr.svg\" \
         alt=\"QR code of the link to this paste\" width=\"164\" height=\"164\" loading=\"lazy\"></details></div>",
        url = escape(public_url),
    )
}

/// A burn paste seen by `GET`: link previewers and chat unfurlers fetch
/// links, so only a deliberate click (a `POST`, or the download) reads it.
fn burn_notice(view: &PasteView) -> String {
    let id = escape(&view.id);
    let action = if view.attributes.is_binary() {
        format!(
            "<a class=\"button danger\" id=\"reveal\" href=\"/raw/{id}?download\">Download it (this deletes it)</a>"
        )
    } else {
        format!(
            "<form method=\"post\" action=\"/{id}\"><button type=\"submit\" id=\"reveal\" class=\"danger\">\
             Show it (this deletes it)</button></form>"
        )
    };
    format!(
        "<div class=\"notice burn\" id=\"burn-notice\"><p><strong>This paste will be deleted when you view it.</strong> \
         Only one person can ever read it.</p>{action}</div>"
    )
}

fn binary(view: &PasteView, revealed: bool) -> String {
    let id = escape(&view.id);
    let name = view.attributes.file_name.as_ref().map_or("Binary file", |n| n.as_str());
    let image = view
        .attributes
        .media_type
        .as_ref()
        .filter(|t| t.is_inline_image() && !revealed)
        .map(|_| format!("<img class=\"inline\" src=\"/raw/{id}\" alt=\"{}\">", escape(name)))
        .unwrap_or_default();
    let download = if revealed {
        // The burn already happened; the bytes cannot be fetched again.
        String::new()
    } else {
        format!("<p><a class=\"button\" href=\"/raw/{id}?download\">Download</a></p>")
    };
    format!("<div class=\"file\"><p><strong>{}</strong></p>{download}{image}</div>", escape(name))
}

/// The share link as an SVG QR code (plain shapes, no script or style, so it
/// is safe as an `<img>` under the page's CSP). `None` if the link is too long
/// for a QR code.
pub(crate) fn qr_svg(link: &str) -> Option<String> {
    let code = qrcode::QrCode::new(link.as_bytes()).ok()?;
    Some(
        code.render::<qrcode::render::svg::Color<'_>>()
            .min_dimensions(164, 164)
            .dark_color(qrcode::render::svg::Color("#000"))
            .light_color(qrcode::render::svg::Color("#fff"))
            .build(),
    )
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

/// `/{id}/report`: a plain form (no script needed) that posts a reason
/// and an optional note. `problem` is shown above it after a refusal.
pub(crate) fn report_form(raw_id: &str, problem: Option<&str>) -> String {
    use pastebin_core::ReportReason;
    let id = escape(raw_id);
    let problem = problem.map(|p| format!("<p class=\"error\" role=\"alert\">{}</p>", escape(p))).unwrap_or_default();
    let reasons: String = ReportReason::ALL
        .iter()
        .map(|reason| {
            let words = match reason {
                ReportReason::Spam => "Spam",
                ReportReason::Malware => "Malware",
                ReportReason::Illegal => "Illegal content",
                ReportReason::PersonalData => "Someone's personal data",
                ReportReason::Other => "Something else",
            };
            format!("<option value=\"{}\">{words}</option>", reason.as_str())
        })
        .collect();
    let main = format!(
        "<h1>Report paste <code>{id}</code></h1>{problem}\
         <p>Tell the operator of this site what is wrong with this paste.</p>\
         <form method=\"post\" action=\"/{id}/report\" class=\"report\">\
         <label for=\"reason\">Reason</label><select id=\"reason\" name=\"reason\">{reasons}</select>\
         <label for=\"note\">Note (optional, up to {max} characters)</label>\
         <p class=\"meta\" id=\"note-hint\">If you give a link, leave out the part after <code>#</code>: \
         it is the key of an encrypted paste, and the operator is not sent it. Anything that \
         looks like a key is removed from the note.</p>\
         <textarea id=\"note\" name=\"note\" rows=\"4\" maxlength=\"{max}\" \
         aria-describedby=\"note-hint\"></textarea>\
         <div class=\"row\"><button type=\"submit\" id=\"send-report\">Send report</button>\
         <a href=\"/{id}\">Cancel</a></div></form>",
        max = pastebin_core::MAX_REPORT_NOTE_CHARS,
    );
    layout(&format!("Report paste {raw_id}"), &main, false)
}

pub(crate) fn report_received(id: &str) -> String {
    let main = format!(
        "<h1>Report received</h1><p id=\"report-received\">Thank you. The operator will look at paste \
         <code>{}</code>.</p><p><a href=\"/\">New paste</a></p>",
        escape(id)
    );
    layout("Report received", &main, false)
}

/// A 410: the operator took the paste down, and says why.
pub(crate) fn removed(reason: &str) -> String {
    let main = format!(
        "<h1>Removed</h1><p id=\"removed\">This paste was removed by the operator: {}</p>\
         <p><a href=\"/\">New paste</a></p>",
        escape(reason)
    );
    layout("Removed", &main, false)
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

    use pastebin_core::{FileName, MediaType, PasteAttributes};

    fn described(attributes: PasteAttributes) -> PasteView {
        PasteView {
            id: "00abc".into(),
            created_at: "2026-12-01T05:58:46Z".into(),
            expires_at: "2026-12-31T05:58:46Z".into(),
            size: 1,
            attributes,
        }
    }

    fn view(content: &str) -> PageContent {
        let lines = Lines::Plain(Bytes::copy_from_slice(content.as_bytes()));
        PageContent::Text { view: described(PasteAttributes::default()), lines }
    }

    #[test]
    fn content_is_escaped() {
        let page = paste(view("<script>alert('x')</script> & \"q\""), false, "http://x").whole();
        assert!(!page.contains("<script>alert"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"));
    }

    #[test]
    fn a_paste_page_shares_its_link_qr_code_and_content_with_exact_times_on_hover() {
        let page = paste(view("x"), false, "https://paste.example").whole();
        assert!(page.contains("value=\"https://paste.example/00abc\""), "{page}");
        assert!(page.contains("data-copy=\"page-url\"") && page.contains("id=\"copy-content\""), "{page}");
        assert!(page.contains("src=\"/00abc/qr.svg\""), "{page}");
        assert!(page.contains("<script src=\"/assets/app.js\" defer>"), "{page}");
        let time = "<time datetime=\"2026-12-31T05:58:46Z\" title=\"2026-12-31 05:58:46 UTC\" data-relative>";
        assert!(page.contains(time), "{page}");
    }

    #[test]
    fn a_burned_paste_offers_its_content_to_copy_but_no_dead_link() {
        let attributes = PasteAttributes { burn_after_reading: true, ..Default::default() };
        let lines = Lines::Plain(Bytes::from_static(b"secret"));
        let page = paste(PageContent::Text { view: described(attributes), lines }, true, "http://x").whole();
        assert!(page.contains("id=\"copy-content\""), "{page}");
        assert!(!page.contains("page-url") && !page.contains("qr.svg"), "{page}");
    }

    fn new_paste_page(token_required: bool) -> String {
        let expiry = pastebin_core::ExpiryPolicy::default();
        new_paste(&NewPasteForm { public_url: "http://x", max_bytes: 10, expiry: &expiry, token_required })
    }

    #[test]
    fn a_private_instance_s_form_asks_for_a_create_token_and_says_why() {
        let page = new_paste_page(true);
        assert!(page.contains("id=\"create-token\" name=\"create_token\" type=\"password\" required"), "{page}");
        assert!(page.contains("This pastebin is private"), "{page}");
        assert!(!new_paste_page(false).contains("create-token"), "an open instance asks for nothing");
    }

    #[test]
    fn the_language_box_suggests_the_highlighters_languages() {
        let page = new_paste_page(false);
        assert!(page.contains("list=\"languages\"") && page.contains("<datalist id=\"languages\">"), "{page}");
        assert!(page.contains("<option value=\"Rust\">"), "{page}");
    }

    #[test]
    fn one_list_item_per_line() {
        let page = paste(view("a\r\n\nb\n"), false, "http://x").whole();
        assert!(page.contains("<ol class=\"code\"><li>a</li><li></li><li>b</li></ol>"), "{page}");
    }

    #[test]
    fn a_sealed_burn_paste_shows_a_notice_and_no_reading_link() {
        let attributes = PasteAttributes { burn_after_reading: true, ..Default::default() };
        let page = paste(PageContent::BurnUnread(described(attributes)), false, "http://x").whole();
        assert!(page.contains("will be deleted when you view it"), "{page}");
        assert!(page.contains("method=\"post\" action=\"/00abc\""), "{page}");
        assert!(!page.contains("/raw/00abc"), "{page}");
    }

    #[test]
    fn a_binary_paste_shows_its_name_a_download_link_and_an_inline_image() {
        let attributes = PasteAttributes {
            media_type: Some(MediaType::parse("image/png").unwrap()),
            file_name: Some(FileName::parse("<cat>.png").unwrap()),
            ..Default::default()
        };
        let page = paste(PageContent::Binary(described(attributes)), false, "http://x").whole();
        assert!(page.contains("href=\"/raw/00abc?download\""), "{page}");
        assert!(page.contains("<img class=\"inline\" src=\"/raw/00abc\""), "{page}");
        assert!(page.contains("&lt;cat&gt;.png") && page.contains("image/png"), "{page}");
    }

    #[test]
    fn the_qr_code_is_a_plain_svg() {
        let svg = qr_svg("http://127.0.0.1:8080/0A1234567890ab").expect("fits");
        assert!(svg.contains("<svg") && !svg.contains("<script") && !svg.contains("style="), "{svg}");
    }

    #[test]
    fn ids_and_messages_are_escaped_in_every_page() {
        for page in [delete_form("<i>", Some("<b>")), deleted("<i>"), bad_request("<i>"), unavailable("<i>")] {
            assert!(!page.contains("<i>") && !page.contains("<b>"), "{page}");
        }
    }

    #[test]
    fn pages_have_no_inline_script_or_style() {
        for page in [
            new_paste_page(false),
            new_paste_page(true),
            paste(view("x"), false, "http://x").whole(),
            delete_form("x", None),
            not_found(),
        ] {
            assert!(!page.contains("<script>") && !page.contains("<style") && !page.contains(" style="), "{page}");
        }
    }
}
