//! The HTTP API's handlers (docs/design.md#read-and-delete, #status-codes):
//! JSON for programs, `text/plain` for curl. Handlers translate HTTP onto
//! [`Gateway`] and use `?`; the mapping of errors to statuses lives in
//! [`ApiError`]. The routes that reach them are in [`crate::router`]; the
//! browser's pages are another crate's (pastebin-pages), which hands a
//! share link that does not ask for HTML to [`shared_link_raw`].

use axum::{
    body::Body,
    extract::{rejection::QueryRejection, Query, State},
    http::{header, HeaderMap, HeaderValue, Method, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde::Deserialize;

use crate::{
    admission::{Delete, Report, WithinRate},
    create_request::{self, bearer_token, AdmittedCreate},
    gateway::{CreateAnswer, HeldRead, Reader},
    read_answers::{json_response, no_store_if_burned, raw_response, PasteJson},
    router::{ClientAddress, PasteIdParam},
    ApiError, Gateway, PasteView, ReadPaste,
};
use pastebin_edge::answer_budget::HeldAnswer;

const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";
/// On a 201 for a paste found and adopted after the key service lost the
/// key's record: the delete token is new (docs/api.md#adopted-pastes).
const PASTE_ADOPTED: &str = "paste-adopted";
/// On every read of a sealed paste (docs/api.md#sealed-pastes).
const PASTE_SEALED: &str = "paste-sealed";

/// The quality a client's `Accept` gives `media_type` (exact match only; 0 if absent).
pub(crate) fn accept_quality(headers: &HeaderMap, media_type: &str) -> f32 {
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

pub fn wants_text(headers: &HeaderMap) -> bool {
    accept_quality(headers, "text/plain") > accept_quality(headers, "application/json")
}

/// Whether a client asks for a page: browsers name `text/html` (or XHTML);
/// curl (`*/*`), wget and scripts do not.
pub fn accepts_html(headers: &HeaderMap) -> bool {
    accept_quality(headers, "text/html") > 0.0 || accept_quality(headers, "application/xhtml+xml") > 0.0
}

/// `POST /api/v1/pastes`: admitted from its headers alone
/// ([`AdmittedCreate`]), then its body is read within what was reserved for
/// it, then the saga runs.
pub(crate) async fn create(
    State(gateway): State<Gateway>,
    admitted: Result<AdmittedCreate, ApiError>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let admitted = match admitted {
        Ok(admitted) => admitted,
        Err(refusal) => {
            let expects_continue = headers.get(header::EXPECT).is_some_and(|v| v.as_bytes().starts_with(b"100"));
            return Err(create_request::refused_create(refusal, expects_continue, body).await);
        }
    };
    let raw = create_request::read_body(body, admitted.wire_limit()).await?;
    let answer = gateway.create(admitted.command(&raw)?).await?;
    Ok(created_response(&gateway, &answer, admitted.wants_text()))
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
    if answer.created.adopted {
        response.headers_mut().insert(PASTE_ADOPTED, HeaderValue::from_static("true"));
    }
    response
}

/// `GET` reads (and burns a burn paste); `HEAD` only describes, never burns.
pub(crate) async fn get_json(
    State(gateway): State<Gateway>,
    method: Method,
    ClientAddress(client): ClientAddress,
    PasteIdParam(id): PasteIdParam,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    if method == Method::HEAD {
        let view = gateway.describe(&id).await?;
        return Ok(revalidated(&headers, &view, "json", || Json(PasteJson::new(&view)).into_response()));
    }
    let HeldRead { read: ReadPaste { view, content }, held } = gateway.read_for(reader(client), &id).await?;
    Ok(holding(held, revalidated(&headers, &view, "json", || json_response(&view, content))))
}

/// An answer for `client` over this listener.
fn reader(client: Option<std::net::IpAddr>) -> Reader {
    Reader { protocol: pastebin_edge::refusals::Protocol::Http, client }
}

/// `response` carrying what it holds of the answer budget, for the
/// listener to hold until its body is dropped (pastebin_edge::answer_budget).
fn holding(held: HeldAnswer, mut response: Response) -> Response {
    response.extensions_mut().insert(held);
    response
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
    ClientAddress(client): ClientAddress,
    PasteIdParam(id): PasteIdParam,
    query: Result<Query<RawQuery>, QueryRejection>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let download = query.is_ok_and(|Query(q)| q.download.is_some());
    raw_answer(&gateway, reader(client), &method, &id, download, &headers, Sealing::BurnsOnRead).await
}

/// Whether a read of the raw bytes may burn a burn-after-reading paste.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Sealing {
    /// `/raw/{id}`: reading it is the explicit read that burns.
    BurnsOnRead,
    /// The share link: previewers and scripts fetch it, so a burn paste
    /// stays sealed until its explicit read.
    StaysSealed,
}

async fn raw_answer(
    gateway: &Gateway,
    reader: Reader,
    method: &Method,
    id: &str,
    download: bool,
    headers: &HeaderMap,
    sealing: Sealing,
) -> Result<Response, ApiError> {
    let representation = if download { "download" } else { "raw" };
    if method == Method::HEAD {
        let view = gateway.describe(id).await?;
        return Ok(revalidated(headers, &view, representation, || raw_response(&view, None, download)));
    }
    let HeldRead { read: ReadPaste { view, content }, held } = match sealing {
        Sealing::BurnsOnRead => gateway.read_for(reader, id).await?,
        Sealing::StaysSealed => gateway.read_unsealed(reader, id).await?,
    };
    Ok(holding(held, revalidated(headers, &view, representation, || raw_response(&view, Some(content), download))))
}

/// `GET /{id}`, the share link, for a client whose `Accept` does not ask
/// for HTML (curl's `*/*`, wget, none): the raw answer of `/raw/{id}`, so
/// that `curl <link>` prints the text (docs/api.md#read), except that a burn
/// paste stays sealed. The page router answers browsers; either way the
/// answer varies with `Accept`.
pub async fn shared_link_raw(
    gateway: &Gateway,
    client: Option<std::net::IpAddr>,
    method: &Method,
    id: &str,
    headers: &HeaderMap,
) -> Response {
    raw_answer(gateway, reader(client), method, id, false, headers, Sealing::StaysSealed).await.into_response()
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
    let mut response = if view.attributes.burn_after_reading {
        no_store_if_burned(full(), view)
    } else {
        unless_matched(headers, entity_tag(&view.id, representation), full)
    };
    if view.attributes.sealed {
        // Says so before a read: a client without the key need not read
        // (and burn) what it cannot open (docs/api.md#sealed-pastes).
        response.headers_mut().insert(PASTE_SEALED, HeaderValue::from_static("true"));
    }
    response
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
    _: WithinRate<Delete>,
    PasteIdParam(id): PasteIdParam,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    gateway.delete(&id, bearer_token(&headers).unwrap_or("")).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `POST /api/v1/pastes/{id}/reports`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReportJson {
    reason: String,
    note: Option<String>,
}

/// `POST /api/v1/pastes/{id}/reports`: a reader's report, stored on the
/// paste's row (docs/api.md#report), 201 once it is. The report rate is
/// spent before the body is read.
pub(crate) async fn report(
    State(gateway): State<Gateway>,
    _: WithinRate<Report>,
    PasteIdParam(id): PasteIdParam,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let report: ReportJson = serde_json::from_slice(&body).map_err(|e| {
        ApiError::InvalidRequest(format!(
            "the body must be {{\"reason\": \"spam\"|\"malware\"|\"illegal\"|\"personal-data\"|\"other\",              \"note\"?: string}}: {e}"
        ))
    })?;
    gateway.report(&id, &report.reason, report.note.as_deref()).await?;
    let answer = serde_json::json!({ "id": id, "reason": report.reason, "status": "received" });
    Ok((StatusCode::CREATED, Json(answer)).into_response())
}

/// `GET /api/v1/limits`: what this instance accepts (docs/api.md#limits).
pub(crate) async fn limits(State(gateway): State<Gateway>) -> Json<pastebin_core::PublishedLimits> {
    Json(gateway.limits())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::create_request::{
        body_kind, idempotency_key, BodyKind, CreateJson, IDEMPOTENCY_KEY, OUT_OF_RANGE_EXPIRY,
    };
    use pastebin_core::IdempotencyKey;

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
                Ok(key) => prop_assert!(headers.get_all(IDEMPOTENCY_KEY).iter().count() == 1 && IdempotencyKey::parse(&key).is_ok()),
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
        assert_eq!(kind(Some("application/vnd.pastebin.sealed+json")).unwrap(), BodyKind::Sealed);
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
