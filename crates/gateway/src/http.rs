//! The HTTP API's handlers (docs/design.md#read-and-delete, #status-codes):
//! JSON for programs, `text/plain` for curl. Handlers translate HTTP onto
//! [`Gateway`] and use `?`; the mapping of errors to statuses lives in
//! [`ApiError`]. The routes that reach them are in [`crate::router`]; the
//! browser's pages are another crate's (pastebin-pages).

use std::net::{IpAddr, SocketAddr};

use axum::{
    body::Body,
    extract::{connect_info::ConnectInfo, rejection::QueryRejection, Query, State},
    http::{header, HeaderMap, HeaderValue, Method, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, LengthLimitError};
use serde::Deserialize;

use crate::{
    gateway::CreateAnswer,
    read_answers::{no_store_if_burned, raw_response, PasteJson},
    router::PasteIdParam,
    ApiError, CreateCommand, Gateway, PasteView, ReadPaste,
};

const IDEMPOTENCY_KEY: &str = "idempotency-key";
const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";
/// Stands for a bad `?expires_in_seconds=`; step 1 rejects it as `invalid_expiry`.
const OUT_OF_RANGE_EXPIRY: u64 = u64::MAX;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateJson {
    content: String,
    /// Any JSON value, so that a bad one (`"1h"`, `-5`, `1.5`) is reported as
    /// `invalid_expiry` like a bad `?expires_in_seconds=`, not as a bad body.
    expires_in_seconds: Option<serde_json::Value>,
    language: Option<String>,
    burn_after_reading: Option<bool>,
    file_name: Option<String>,
}

impl CreateJson {
    /// Decodes a JSON create body; anything that is not one is `invalid_request`.
    fn decode(raw: &[u8]) -> Result<Self, ApiError> {
        serde_json::from_slice(raw).map_err(|e| {
            ApiError::InvalidRequest(format!(
                "the body must be {{\"content\": string, \"expires_in_seconds\"?: integer, \"language\"?: string, \
                 \"burn_after_reading\"?: boolean, \"file_name\"?: string}}: {e}"
            ))
        })
    }

    /// The body's expiry: absent or `null` is none; anything that is not a
    /// whole number of seconds is out of range (step 1 says `invalid_expiry`).
    fn expiry(&self) -> Option<u64> {
        self.expires_in_seconds
            .as_ref()
            .filter(|value| !value.is_null())
            .map(|value| value.as_u64().unwrap_or(OUT_OF_RANGE_EXPIRY))
    }
}

fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    crate::admission::bearer_token(headers.get(header::AUTHORIZATION)?.to_str().ok()?)
}

/// The one `Idempotency-Key` header. Two of them are a client bug that must
/// not be resolved by guessing which one was meant.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(ApiError::InvalidKey("send exactly one Idempotency-Key header".into()));
    }
    first
        .map(|v| {
            v.to_str().map(str::to_owned).map_err(|_| ApiError::InvalidKey("the idempotency key must be a UUID".into()))
        })
        .transpose()
}

/// The client's address as the rate limit counts it: the socket peer, or
/// what a trusted proxy says in `X-Forwarded-For`.
fn client_address(gateway: &Gateway, peer: Option<IpAddr>, headers: &HeaderMap) -> Option<IpAddr> {
    let forwarded: Vec<&str> =
        headers.get_all("x-forwarded-for").iter().filter_map(|value| value.to_str().ok()).collect();
    peer.map(|peer| crate::admission::client_address(peer, &forwarded, &gateway.settings().trusted_proxies))
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct CreateQuery {
    expires_in_seconds: Option<u64>,
}

/// The reader attributes as query parameters: documented for raw bodies;
/// with a JSON body they apply where the body leaves a field out.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct AttributeQuery {
    language: Option<String>,
    burn_after_reading: Option<bool>,
    file_name: Option<String>,
}

/// What a create's body is, by its `Content-Type`.
#[derive(Debug, PartialEq, Eq)]
enum BodyKind {
    Json,
    /// UTF-8 text: `text/plain`, no type, or curl's default form type.
    Text,
    /// Any bytes, stored with this media type.
    Binary(String),
}

fn body_kind(headers: &HeaderMap) -> Result<BodyKind, ApiError> {
    let Some(raw) = headers.get(header::CONTENT_TYPE) else {
        return Ok(BodyKind::Text);
    };
    let raw = raw.to_str().map_err(|_| ApiError::InvalidRequest("Content-Type must be ASCII".into()))?;
    let essence = raw.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    Ok(match essence.as_str() {
        "application/json" => BodyKind::Json,
        "" | "text/plain" | "application/x-www-form-urlencoded" => BodyKind::Text,
        "multipart/form-data" => {
            return Err(ApiError::InvalidRequest(
                "send a file as the raw request body with its own Content-Type, not as a form".into(),
            ))
        }
        _ => BodyKind::Binary(raw.to_owned()),
    })
}

/// The quality a client's `Accept` gives `media_type` (exact match only; 0 if absent).
fn accept_quality(headers: &HeaderMap, media_type: &str) -> f32 {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return 0.0;
    };
    accept
        .split(',')
        .filter_map(|item| {
            let mut parts = item.split(';');
            let name = parts.next()?.trim();
            if !name.eq_ignore_ascii_case(media_type) {
                return None;
            }
            let q =
                parts.filter_map(|p| p.trim().strip_prefix("q=")).find_map(|q| q.parse::<f32>().ok()).unwrap_or(1.0);
            Some(q)
        })
        .fold(0.0, f32::max)
}

fn wants_text(headers: &HeaderMap) -> bool {
    accept_quality(headers, "text/plain") > accept_quality(headers, "application/json")
}

/// How much of an oversized upload is read and thrown away before its 413.
/// Beyond this the connection is simply closed (and the client may see a
/// reset instead of the 413): nobody sends 16 MiB to a 1 MiB limit by mistake.
const DRAIN_LIMIT: usize = 16 * 1024 * 1024;

/// Reads the body up to `limit` bytes. An oversized body is drained (up to
/// [`DRAIN_LIMIT`]) before the 413 is answered: a server that answers and
/// closes with request bytes still unread makes the kernel reset the
/// connection, and the client sees a broken pipe instead of its 413.
async fn read_body(mut body: Body, headers: &HeaderMap, limit: usize) -> Result<Bytes, ApiError> {
    // A declared length past what would be drained is refused before a byte is read.
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|length| length > DRAIN_LIMIT as u64) {
        return Err(ApiError::TooLarge { limit });
    }
    let mut collected = BytesMut::new();
    let mut received: usize = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            let source = std::error::Error::source(&error);
            if source.is_some_and(|source| source.is::<LengthLimitError>()) {
                ApiError::TooLarge { limit }
            } else if source.is_some_and(|source| source.is::<tower_http::timeout::TimeoutError>()) {
                ApiError::RequestTimeout
            } else {
                ApiError::InvalidRequest("cannot read the request body".into())
            }
        })?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers carry no content
        };
        received = received.saturating_add(data.len());
        if received <= limit {
            collected.extend_from_slice(&data);
        } else if received > DRAIN_LIMIT {
            break;
        }
    }
    if received > limit {
        return Err(ApiError::TooLarge { limit });
    }
    Ok(collected.freeze())
}

pub(crate) async fn create(
    State(gateway): State<Gateway>,
    Peer(peer): Peer,
    query: Result<Query<CreateQuery>, QueryRejection>,
    attributes: Result<Query<AttributeQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    gateway.admit_create(client_address(&gateway, peer, &headers), bearer_token(&headers))?;
    // A malformed or out-of-range query value is the client's mistake
    // whatever the body is (a JSON body's own expiry wins, but a bad query
    // value is never silently ignored). It is passed on as an out-of-range
    // expiry so that step 1 reports it in its own order: key, size, expiry.
    let query_expiry = match query {
        Ok(Query(CreateQuery { expires_in_seconds: Some(seconds) }))
            if pastebin_core::Expiry::from_seconds(Some(seconds)).is_err() =>
        {
            Err(())
        }
        Ok(Query(query)) => Ok(query.expires_in_seconds),
        Err(_) => Err(()),
    };
    let idempotency_key = idempotency_key(&headers)?;
    // Like a bad expiry, a bad attribute in the query is never ignored.
    let Query(attributes) =
        attributes.map_err(|e| ApiError::InvalidRequest(format!("language, burn_after_reading or file_name: {e}")))?;
    let limit = gateway.settings().max_content_bytes;
    let kind = body_kind(&headers)?;
    let command = if kind == BodyKind::Json {
        // JSON escaping can make content up to six times longer on the wire.
        let raw = read_body(body, &headers, limit.saturating_mul(6).saturating_add(4096)).await?;
        let parsed = CreateJson::decode(&raw)?;
        // The body's own expiry wins; the query parameter (documented for raw
        // bodies) applies when the body leaves it out.
        let expires_in_seconds = match query_expiry {
            Ok(from_query) => parsed.expiry().or(from_query),
            Err(()) => Some(OUT_OF_RANGE_EXPIRY),
        };
        CreateCommand {
            idempotency_key,
            content: parsed.content.into_bytes(),
            expires_in_seconds,
            media_type: None,
            file_name: parsed.file_name.or(attributes.file_name),
            language: parsed.language.or(attributes.language),
            burn_after_reading: parsed.burn_after_reading.or(attributes.burn_after_reading).unwrap_or(false),
        }
    } else {
        let content = read_body(body, &headers, limit).await?.to_vec();
        let media_type = match kind {
            BodyKind::Binary(media_type) => Some(media_type),
            BodyKind::Json | BodyKind::Text => None,
        };
        CreateCommand {
            idempotency_key,
            content,
            expires_in_seconds: query_expiry.unwrap_or(Some(OUT_OF_RANGE_EXPIRY)),
            media_type,
            file_name: attributes.file_name,
            language: attributes.language,
            burn_after_reading: attributes.burn_after_reading.unwrap_or(false),
        }
    };
    let answer = gateway.create(command).await?;
    Ok(created_response(&gateway, &answer, wants_text(&headers)))
}

/// The 201: the stored body as stored (or its text form), `Location`, and
/// `Idempotent-Replayed: true` on a replay. Byte-identical across replays.
fn created_response(gateway: &Gateway, answer: &CreateAnswer, text: bool) -> Response {
    let (content_type, body) = if text {
        ("text/plain; charset=utf-8", answer.created.to_text())
    } else {
        ("application/json", answer.body.expose().to_owned())
    };
    // The body holds the delete token: no cache, shared or private, may keep it.
    let mut response =
        (StatusCode::CREATED, [(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-store")], body)
            .into_response();
    let location = format!("{}/api/v1/pastes/{}", gateway.settings().public_url, answer.created.id);
    if let Ok(location) = HeaderValue::from_str(&location) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    if answer.replayed {
        response.headers_mut().insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

/// `GET` reads (and burns a burn paste); `HEAD` only describes, never burns.
pub(crate) async fn get_json(
    State(gateway): State<Gateway>,
    method: Method,
    PasteIdParam(id): PasteIdParam,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if method == Method::HEAD {
        let view = gateway.describe(&id).await?;
        return Ok(revalidated(&headers, &view, "json", || Json(PasteJson::new(&view, None)).into_response()));
    }
    let read = gateway.get(&id).await?;
    Ok(revalidated(&headers, &read.view, "json", || {
        Json(PasteJson::new(&read.view, Some(&read.content))).into_response()
    }))
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct RawQuery {
    /// Present (any value, even empty): answer as a download.
    download: Option<String>,
}

/// `/raw/{id}`: the exact bytes with the stored type. `HEAD` never burns.
pub(crate) async fn get_raw(
    State(gateway): State<Gateway>,
    method: Method,
    PasteIdParam(id): PasteIdParam,
    query: Result<Query<RawQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let download = query.is_ok_and(|Query(q)| q.download.is_some());
    let representation = if download { "download" } else { "raw" };
    if method == Method::HEAD {
        let view = gateway.describe(&id).await?;
        return Ok(revalidated(&headers, &view, representation, || raw_response(&view, Bytes::new(), download)));
    }
    let ReadPaste { view, content } = gateway.get(&id).await?;
    Ok(revalidated(&headers, &view, representation, || raw_response(&view, content, download)))
}

/// A read's answer with its entity tag, or a 304 when the client holds it.
/// A burn-after-reading paste gets neither: its one read must carry the
/// content, and nothing may keep it (docs/design.md#burn-after-reading).
fn revalidated(
    headers: &HeaderMap,
    view: &PasteView,
    representation: &str,
    full: impl FnOnce() -> Response,
) -> Response {
    if view.attributes.burn_after_reading {
        return no_store_if_burned(full(), view);
    }
    unless_matched(headers, entity_tag(&view.id, representation), full)
}

/// A paste's entity tag per representation. The content under an id never
/// changes (docs/design.md#caching), so the id names the bytes.
fn entity_tag(id: &str, representation: &str) -> HeaderValue {
    HeaderValue::from_str(&format!("\"{id}.{representation}\"")).expect("a paste id is base62: a valid header value")
}

/// Whether `If-None-Match` names `tag` (or is `*`). Weak tags compare equal
/// to strong ones, as RFC 9110 asks for `If-None-Match`.
fn matches_tag(headers: &HeaderMap, tag: &HeaderValue) -> bool {
    let Ok(tag) = tag.to_str() else { return false };
    headers.get_all(header::IF_NONE_MATCH).iter().filter_map(|value| value.to_str().ok()).any(|value| {
        value.split(',').map(str::trim).any(|candidate| candidate == "*" || candidate.trim_start_matches("W/") == tag)
    })
}

/// 304 with the tag when the client already holds this representation (the
/// paste was just found live, so a deleted paste is a 404, never a 304);
/// otherwise `full` with the tag. Either way clients must revalidate
/// (`no-cache`): a paste can be deleted.
fn unless_matched(headers: &HeaderMap, tag: HeaderValue, full: impl FnOnce() -> Response) -> Response {
    let mut response = if matches_tag(headers, &tag) { StatusCode::NOT_MODIFIED.into_response() } else { full() };
    response.headers_mut().insert(header::ETAG, tag);
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

pub(crate) async fn delete(
    State(gateway): State<Gateway>,
    PasteIdParam(id): PasteIdParam,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    gateway.delete(&id, bearer_token(&headers).unwrap_or("")).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// The socket peer, as the edge listener records it (none when the router
/// is driven some other way).
pub(crate) struct Peer(Option<IpAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Peer {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(parts.extensions.get::<ConnectInfo<SocketAddr>>().map(|info| info.0.ip())))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    // Fuzzing of the request parsers (docs/testing.md#fuzzing): any input is
    // answered, never a panic; `PROPTEST_CASES` makes a longer campaign.
    proptest! {
        #[test]
        fn any_accept_header_has_a_quality_in_range(accept in ".{0,80}", media in "(text/plain|application/json)") {
            let mut headers = HeaderMap::new();
            if let Ok(value) = HeaderValue::from_str(&accept) {
                headers.insert(header::ACCEPT, value);
            }
            let quality = accept_quality(&headers, &media);
            prop_assert!(quality.is_nan() || quality >= 0.0);
            let _ = wants_text(&headers);
        }

        #[test]
        fn any_json_body_decodes_or_is_invalid_request(raw in proptest::collection::vec(any::<u8>(), 0..128)) {
            if let Err(error) = CreateJson::decode(&raw) {
                prop_assert_eq!(error.code(), "invalid_request");
            }
        }

        #[test]
        fn any_json_expiry_is_a_number_of_seconds_or_out_of_range(content in ".{0,20}", expiry in any::<Option<i128>>()) {
            let body = serde_json::json!({ "content": content, "expires_in_seconds": expiry.map(|e| e.to_string()) });
            let raw = serde_json::to_vec(&body).unwrap();
            let parsed = CreateJson::decode(&raw).unwrap();
            prop_assert_eq!(parsed.expiry().is_some(), expiry.is_some(), "a string expiry is never ignored");
            let number = format!(r#"{{"content": "x", "expires_in_seconds": {}}}"#, expiry.unwrap_or(0));
            if let Ok(parsed) = CreateJson::decode(number.as_bytes()) {
                let expected = u64::try_from(expiry.unwrap_or(0)).unwrap_or(OUT_OF_RANGE_EXPIRY);
                prop_assert_eq!(parsed.expiry(), Some(expected));
            }
        }

        #[test]
        fn any_idempotency_key_headers_give_one_key_or_a_400(values in proptest::collection::vec(".{0,40}", 0..3)) {
            let mut headers = HeaderMap::new();
            for value in &values {
                if let Ok(value) = HeaderValue::from_str(value) {
                    headers.append(IDEMPOTENCY_KEY, value);
                }
            }
            match idempotency_key(&headers) {
                Ok(key) => prop_assert!(headers.get_all(IDEMPOTENCY_KEY).iter().count() <= 1 && key.is_some() == headers.contains_key(IDEMPOTENCY_KEY)),
                Err(error) => prop_assert_eq!(error.code(), "invalid_idempotency_key"),
            }
        }
    }

    #[test]
    fn a_string_or_negative_expiry_in_a_json_body_is_out_of_range() {
        for body in
            [r#"{"content": "x", "expires_in_seconds": "60"}"#, r#"{"content": "x", "expires_in_seconds": -60}"#]
        {
            assert_eq!(CreateJson::decode(body.as_bytes()).unwrap().expiry(), Some(OUT_OF_RANGE_EXPIRY), "{body}");
        }
        let absent = CreateJson::decode(br#"{"content": "x", "expires_in_seconds": null}"#).unwrap();
        assert_eq!(absent.expiry(), None);
    }

    #[test]
    fn the_content_type_picks_text_json_or_binary() {
        let kind = |value: Option<&'static str>| {
            let mut headers = HeaderMap::new();
            if let Some(value) = value {
                headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            }
            body_kind(&headers)
        };
        assert_eq!(kind(None).unwrap(), BodyKind::Text);
        assert_eq!(kind(Some("application/x-www-form-urlencoded")).unwrap(), BodyKind::Text);
        assert_eq!(kind(Some("Application/JSON; charset=utf-8")).unwrap(), BodyKind::Json);
        assert_eq!(kind(Some("image/png")).unwrap(), BodyKind::Binary("image/png".into()));
        assert!(kind(Some("multipart/form-data; boundary=x")).is_err());
    }

    #[test]
    fn if_none_match_matches_the_tag_in_a_list_weak_or_star() {
        let tag = entity_tag("4Zk3bY0c9QpLmN", "raw");
        let mut headers = HeaderMap::new();
        assert!(!matches_tag(&headers, &tag));
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("\"other\", W/\"4Zk3bY0c9QpLmN.raw\""));
        assert!(matches_tag(&headers, &tag));
        assert!(!matches_tag(&headers, &entity_tag("4Zk3bY0c9QpLmN", "json")));
        headers.insert(header::IF_NONE_MATCH, HeaderValue::from_static("*"));
        assert!(matches_tag(&headers, &tag));
    }

    #[test]
    fn accept_prefers_the_higher_quality() {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json;q=0.5, text/plain"));
        assert!(wants_text(&headers));
        headers.insert(header::ACCEPT, HeaderValue::from_static("text/plain;q=0.1, application/json"));
        assert!(!wants_text(&headers));
    }
}
