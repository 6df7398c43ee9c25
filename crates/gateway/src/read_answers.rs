//! How reads are answered over HTTP (docs/reader-features.md): the JSON
//! form of a paste (text as `content`, bytes as `content_base64`), and the
//! headers of `/raw` (the stored type, never sniffed, always sandboxed, an
//! attachment when asked for or when the type would render actively). Both
//! bodies are streams of chunks made as the client reads them
//! (docs/design.md#edge): a slow reader holds one chunk, never a copy of
//! the whole answer.

use std::convert::Infallible;

use axum::{
    body::Body,
    http::{header, HeaderValue},
    response::{IntoResponse, Response},
};
use bytes::Bytes;

use crate::PasteView;

/// The content bytes in one chunk of an answer: small enough that a
/// connection holds tens of KiB, large enough to cost few writes. A
/// multiple of 3, so that each chunk of base64 stands alone.
const CHUNK_BYTES: usize = 16 * 1024 + 2;

/// A paste's metadata in its JSON form: the whole answer to `HEAD`, and the
/// part of `GET`'s answer before its content.
#[derive(Debug, serde::Serialize)]
pub(crate) struct PasteJson<'a> {
    id: &'a str,
    created_at: &'a str,
    expires_at: &'a str,
    size: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    media_type: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    file_name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    language: Option<&'a str>,
    burn_after_reading: bool,
    /// Present (and true) only on a sealed paste: `content_base64` is its envelope.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    sealed: bool,
}

impl<'a> PasteJson<'a> {
    pub(crate) fn new(view: &'a PasteView) -> Self {
        let attributes = &view.attributes;
        Self {
            id: &view.id,
            created_at: &view.created_at,
            expires_at: &view.expires_at,
            size: view.size,
            media_type: attributes.media_type.as_ref().map(|t| t.as_str()),
            file_name: attributes.file_name.as_ref().map(|n| n.as_str()),
            language: attributes.language.as_ref().map(|l| l.as_str()),
            burn_after_reading: attributes.burn_after_reading,
            sealed: attributes.sealed,
        }
    }
}

/// `GET /api/v1/pastes/{id}`: the metadata, then text as `content` or
/// binary as `content_base64`, escaped or encoded chunk by chunk as the
/// client reads (the content last, so that the fields before it are the
/// `HEAD` answer's).
pub(crate) fn json_response(view: &PasteView, content: Bytes) -> Response {
    let metadata = serde_json::to_vec(&PasteJson::new(view)).expect("the metadata is strings, numbers and booleans");
    let field = if view.attributes.is_binary() { "content_base64" } else { "content" };
    // `{...}` becomes `{...,"content":"`: the object stays open for the content.
    let mut head = metadata;
    head.pop();
    head.extend_from_slice(format!(",\"{field}\":\"").as_bytes());
    let content = if view.attributes.is_binary() {
        ContentChunks::Base64 { bytes: content, at: 0 }
    } else {
        ContentChunks::Text { text: utf8(content), at: 0 }
    };
    let pieces = std::iter::once(Bytes::from(head)).chain(content).chain(std::iter::once(Bytes::from_static(b"\"}")));
    let body = Body::from_stream(futures::stream::iter(pieces.map(Ok::<_, Infallible>)));
    ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response()
}

/// Text as it is, or with any byte that is not UTF-8 replaced (the JSON
/// read has always been lossy there; a text paste is UTF-8 when stored).
fn utf8(content: Bytes) -> Bytes {
    match String::from_utf8_lossy(&content) {
        std::borrow::Cow::Borrowed(_) => content,
        std::borrow::Cow::Owned(repaired) => Bytes::from(repaired),
    }
}

/// A paste's content as the JSON answer's chunks, each made when asked for.
enum ContentChunks {
    /// UTF-8 text, escaped as a JSON string's inside, cut at characters.
    Text { text: Bytes, at: usize },
    /// Any bytes, as base64 (each chunk a whole number of 3-byte groups).
    Base64 { bytes: Bytes, at: usize },
}

impl Iterator for ContentChunks {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        use base64::Engine;
        match self {
            Self::Text { text, at } => {
                let text = std::str::from_utf8(text).expect("made UTF-8 by `utf8`");
                let rest = text.get(*at..).filter(|rest| !rest.is_empty())?;
                let mut end = CHUNK_BYTES.min(rest.len());
                while !rest.is_char_boundary(end) {
                    end -= 1;
                }
                *at += end;
                let quoted = serde_json::to_string(&rest[..end]).expect("a string always serializes");
                Some(Bytes::from(quoted[1..quoted.len() - 1].to_owned()))
            }
            Self::Base64 { bytes, at } => {
                let rest = bytes.get(*at..).filter(|rest| !rest.is_empty())?;
                let end = CHUNK_BYTES.min(rest.len());
                *at += end;
                Some(Bytes::from(base64::engine::general_purpose::STANDARD.encode(&rest[..end])))
            }
        }
    }
}

/// The exact bytes as the body of a `/raw` answer, in chunks that share the
/// content's memory (a slice of `Bytes` is not a copy), with its length.
fn raw_body(content: Bytes) -> (HeaderValue, Body) {
    let length = HeaderValue::from(content.len());
    let chunks = (0..content.len())
        .step_by(CHUNK_BYTES)
        .map(move |start| Ok::<_, Infallible>(content.slice(start..(start + CHUNK_BYTES).min(content.len()))));
    (length, Body::from_stream(futures::stream::iter(chunks)))
}

/// A burn paste's answer must never be stored by a cache on the way.
pub(crate) fn no_store_if_burned(mut response: Response, view: &PasteView) -> Response {
    if view.attributes.burn_after_reading {
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// The raw answer's headers (docs/reader-features.md#binary-content): never
/// sniffed, always sandboxed, and for a type a browser would render or run
/// (script, HTML, SVG, XML, PDF, anything unknown) neither that type nor
/// inline: [`served_type`] and an attachment. `nosniff` and `sandbox` alone
/// do not stop `<script src="/raw/{id}">` on a page with an injection; a
/// script served as `text/plain` never runs. An attachment also when asked
/// for. A sealed paste's envelope is opaque bytes, whatever it holds
/// (docs/api.md#sealed-pastes). `None` is `HEAD`'s answer: the headers alone.
pub(crate) fn raw_response(view: &PasteView, content: Option<Bytes>, download: bool) -> Response {
    let attributes = &view.attributes;
    let passive = !attributes.sealed && attributes.media_type.as_ref().is_none_or(|t| t.is_passive());
    let content_type = match &attributes.media_type {
        _ if attributes.sealed => HeaderValue::from_static(OCTET_STREAM),
        None => HeaderValue::from_static(TEXT),
        Some(stored) if passive => {
            HeaderValue::from_str(stored.as_str()).unwrap_or(HeaderValue::from_static(OCTET_STREAM))
        }
        Some(stored) => HeaderValue::from_static(served_type(stored.essence())),
    };
    let headers = [
        (header::CONTENT_TYPE, content_type),
        (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox")),
    ];
    let mut response = match content {
        None => headers.into_response(),
        Some(content) => {
            let (length, body) = raw_body(content);
            (headers, [(header::CONTENT_LENGTH, length)], body).into_response()
        }
    };
    if download || !passive {
        let default_name = format!("{}.{}", view.id, if attributes.is_binary() { "bin" } else { "txt" });
        let name = attributes.file_name.as_ref().map_or(default_name.as_str(), |n| n.as_str());
        if let Ok(value) = HeaderValue::from_str(&content_disposition(name)) {
            response.headers_mut().insert(header::CONTENT_DISPOSITION, value);
        }
    }
    no_store_if_burned(response, view)
}

const TEXT: &str = "text/plain; charset=utf-8";
const OCTET_STREAM: &str = "application/octet-stream";

/// What `/raw` calls an active type instead of its own name: text a person
/// may want to read (scripts, markup, any `text/*`) as `text/plain`, which
/// no browser runs or renders; anything else as opaque bytes. The stored
/// type is still what the JSON metadata reports.
fn served_type(essence: &str) -> &'static str {
    let textual = essence.starts_with("text/")
        || essence.ends_with("+xml")
        || essence.ends_with("+json")
        || matches!(
            essence,
            "application/javascript" | "application/ecmascript" | "application/xml" | "application/x-sh"
        );
    if textual {
        TEXT
    } else {
        OCTET_STREAM
    }
}

/// `attachment` with the file name twice (RFC 6266): an ASCII fallback for
/// old clients, and the exact name percent-encoded as UTF-8 (RFC 5987).
fn content_disposition(file_name: &str) -> String {
    let fallback: String = file_name
        .chars()
        .map(|c| if c.is_ascii_graphic() && c != '"' && c != '\\' && c != '%' || c == ' ' { c } else { '_' })
        .collect();
    let mut encoded = String::with_capacity(file_name.len() * 3);
    for byte in file_name.bytes() {
        if byte.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    format!("attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_chunks_are_cut_at_characters_and_join_into_the_escaped_string() {
        let text = "é\"\n<b>".repeat(CHUNK_BYTES / 3) + "😀";
        let chunks: Vec<Bytes> = ContentChunks::Text { text: utf8(Bytes::from(text.clone())), at: 0 }.collect();
        assert!(chunks.len() > 2, "more than one chunk");
        let joined: Vec<u8> = chunks.iter().flat_map(|chunk| chunk.to_vec()).collect();
        let quoted = format!("\"{}\"", String::from_utf8(joined).unwrap());
        assert_eq!(serde_json::from_str::<String>(&quoted).unwrap(), text);
    }

    #[test]
    fn base64_chunks_join_into_the_whole_encoding() {
        use base64::Engine;
        let bytes: Vec<u8> = (0..3 * CHUNK_BYTES + 1).map(|n| n as u8).collect();
        let chunks = ContentChunks::Base64 { bytes: Bytes::from(bytes.clone()), at: 0 };
        let joined: String = chunks.map(|chunk| String::from_utf8(chunk.to_vec()).unwrap()).collect();
        assert_eq!(joined, base64::engine::general_purpose::STANDARD.encode(&bytes));
    }

    #[test]
    fn invalid_utf8_text_is_repaired_once() {
        let chunks: Vec<Bytes> = ContentChunks::Text { text: utf8(Bytes::from_static(b"a\xffb")), at: 0 }.collect();
        assert_eq!(chunks, [Bytes::from("a\u{fffd}b")]);
    }

    #[test]
    fn active_types_are_served_as_text_or_bytes_never_as_themselves() {
        for textual in ["text/html", "text/javascript", "image/svg+xml", "application/xml", "application/javascript"] {
            assert_eq!(served_type(textual), TEXT, "{textual}");
        }
        for opaque in ["application/pdf", "application/x-shockwave-flash", "application/wasm"] {
            assert_eq!(served_type(opaque), OCTET_STREAM, "{opaque}");
        }
    }

    #[test]
    fn download_names_are_quoted_safely_and_kept_exactly() {
        assert_eq!(
            content_disposition("r\u{e9}sum\u{e9} \"1\".pdf"),
            "attachment; filename=\"r_sum_ _1_.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%221%22.pdf"
        );
        assert_eq!(content_disposition("a.txt"), "attachment; filename=\"a.txt\"; filename*=UTF-8''a.txt");
    }
}
