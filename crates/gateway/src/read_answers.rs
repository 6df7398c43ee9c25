//! How reads are answered over HTTP (docs/reader-features.md): the JSON
//! form of a paste (text as `content`, bytes as `content_base64`), and the
//! headers of `/raw` (the stored type, never sniffed, always sandboxed, an
//! attachment when asked for or when the type would render actively).

use axum::{
    http::{header, HeaderValue},
    response::{IntoResponse, Response},
};
use bytes::Bytes;

use crate::PasteView;

/// `GET /api/v1/pastes/{id}` as JSON: text as `content`, binary as
/// `content_base64`, never both; neither for `HEAD`.
#[derive(Debug, serde::Serialize)]
pub(crate) struct PasteJson<'a> {
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content_base64: Option<String>,
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
}

impl<'a> PasteJson<'a> {
    pub(crate) fn new(view: &'a PasteView, content: Option<&[u8]>) -> Self {
        use base64::Engine;
        let attributes = &view.attributes;
        let (content, content_base64) = match content {
            None => (None, None),
            Some(bytes) if attributes.is_binary() => {
                (None, Some(base64::engine::general_purpose::STANDARD.encode(bytes)))
            }
            Some(bytes) => (Some(String::from_utf8_lossy(bytes).into_owned()), None),
        };
        Self {
            id: &view.id,
            content,
            content_base64,
            created_at: &view.created_at,
            expires_at: &view.expires_at,
            size: view.size,
            media_type: attributes.media_type.as_ref().map(|t| t.as_str()),
            file_name: attributes.file_name.as_ref().map(|n| n.as_str()),
            language: attributes.language.as_ref().map(|l| l.as_str()),
            burn_after_reading: attributes.burn_after_reading,
        }
    }
}

/// A burn paste's answer must never be stored by a cache on the way.
pub(crate) fn no_store_if_burned(mut response: Response, view: &PasteView) -> Response {
    if view.attributes.burn_after_reading {
        response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// The raw answer's headers (docs/reader-features.md#binary-content): never
/// sniffed, always sandboxed, and an attachment when asked for or when the
/// type is one a browser would render actively.
pub(crate) fn raw_response(view: &PasteView, content: Bytes, download: bool) -> Response {
    let attributes = &view.attributes;
    let content_type = attributes.media_type.as_ref().map_or("text/plain; charset=utf-8", |t| t.as_str());
    let mut response = (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_str(content_type).unwrap_or(HeaderValue::from_static("application/octet-stream")),
            ),
            (header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
            (header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox")),
        ],
        content,
    )
        .into_response();
    let passive = attributes.media_type.as_ref().is_none_or(|t| t.is_passive());
    if download || !passive {
        let default_name = format!("{}.{}", view.id, if attributes.is_binary() { "bin" } else { "txt" });
        let name = attributes.file_name.as_ref().map_or(default_name.as_str(), |n| n.as_str());
        if let Ok(value) = HeaderValue::from_str(&content_disposition(name)) {
            response.headers_mut().insert(header::CONTENT_DISPOSITION, value);
        }
    }
    no_store_if_burned(response, view)
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
    fn download_names_are_quoted_safely_and_kept_exactly() {
        assert_eq!(
            content_disposition("r\u{e9}sum\u{e9} \"1\".pdf"),
            "attachment; filename=\"r_sum_ _1_.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%221%22.pdf"
        );
        assert_eq!(content_disposition("a.txt"), "attachment; filename=\"a.txt\"; filename*=UTF-8''a.txt");
    }
}
