//! The HTTP API (SPEC §6–7): JSON for programs, `text/plain` for curl, HTML
//! for browsers. Handlers translate HTTP onto [`Gateway`] and use `?`; the
//! mapping of errors to statuses lives in [`ApiError`]. Every route served
//! here is described in the OpenAPI document at [`OPENAPI_PATH`]
//! (`openapi.json` beside this file), and a test keeps the two in step.

use axum::{
    body::Body,
    extract::{
        rejection::{FormRejection, QueryRejection},
        Path, Query, State,
    },
    http::{header, HeaderMap, HeaderValue, Method, StatusCode},
    response::{Html, IntoResponse, Response},
    routing::get,
    Form, Json, Router,
};
use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, LengthLimitError};
use serde::Deserialize;

use crate::{
    error::RETRY_AFTER_SECONDS,
    gateway::CreateAnswer,
    highlight, pages,
    read_answers::{no_store_if_burned, raw_response, PasteJson},
    ApiError, CreateCommand, Gateway, ReadPaste,
};

const IDEMPOTENCY_KEY: &str = "idempotency-key";
const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";
/// Stands for a bad `?expires_in_seconds=`; step 1 rejects it as `invalid_expiry`.
const OUT_OF_RANGE_EXPIRY: u64 = u64::MAX;

/// The published contract of this router, served as is.
const OPENAPI: &str = include_str!("openapi.json");
const OPENAPI_PATH: &str = "/api/v1/openapi.json";

/// Every route, in the OpenAPI document's path syntax (which axum shares).
/// The unit test below checks this list against the document's `paths`.
const ROUTES: [&str; 10] = [
    "/",
    "/healthz",
    "/assets/{name}",
    OPENAPI_PATH,
    "/api/v1/pastes",
    "/api/v1/pastes/{id}",
    "/raw/{id}",
    "/{id}",
    "/{id}/delete",
    "/{id}/qr.svg",
];

pub(crate) fn router(gateway: Gateway) -> Router {
    let [home, healthz_path, assets, openapi_path, pastes, paste, raw, page, delete_page, qr] = ROUTES;
    Router::new()
        .route(home, get(new_paste_page))
        .route(healthz_path, get(healthz))
        .route(assets, get(asset))
        .route(openapi_path, get(openapi))
        .route(pastes, axum::routing::post(create))
        .route(paste, get(get_json).delete(delete))
        .route(raw, get(get_raw))
        .route(page, get(get_page).post(reveal_page))
        .route(delete_page, get(delete_form).post(delete_from_form))
        .route(qr, get(qr_code))
        .fallback(|| async { ApiError::NotFound })
        .with_state(gateway)
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// The page's own stylesheets and scripts: the only things the CSP lets a
/// page load.
async fn asset(Path(name): Path<String>) -> Result<Response, ApiError> {
    let (content_type, body) = match name.as_str() {
        "app.js" => ("text/javascript; charset=utf-8", pages::APP_JS),
        "theme.js" => ("text/javascript; charset=utf-8", pages::THEME_JS),
        "style.css" => ("text/css; charset=utf-8", pages::STYLE),
        "highlight.css" => ("text/css; charset=utf-8", highlight::THEME_CSS.as_str()),
        _ => return Err(ApiError::NotFound),
    };
    Ok((
        [
            (header::CONTENT_TYPE, content_type),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        body,
    )
        .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateJson {
    content: String,
    expires_in_seconds: Option<u64>,
    language: Option<String>,
    burn_after_reading: Option<bool>,
    file_name: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct CreateQuery {
    expires_in_seconds: Option<u64>,
}

/// The reader attributes as query parameters: documented for raw bodies;
/// with a JSON body they apply where the body leaves a field out.
#[derive(Debug, Default, Deserialize)]
struct AttributeQuery {
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
async fn read_body(mut body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let mut collected = BytesMut::new();
    let mut received: usize = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            let too_large = std::error::Error::source(&error).is_some_and(|source| source.is::<LengthLimitError>());
            if too_large {
                ApiError::TooLarge { limit }
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

async fn create(
    State(gateway): State<Gateway>,
    query: Result<Query<CreateQuery>, QueryRejection>,
    attributes: Result<Query<AttributeQuery>, QueryRejection>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
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
    let idempotency_key = headers
        .get(IDEMPOTENCY_KEY)
        .map(|v| {
            v.to_str().map(str::to_owned).map_err(|_| ApiError::InvalidKey("the idempotency key must be a UUID".into()))
        })
        .transpose()?;
    // Like a bad expiry, a bad attribute in the query is never ignored.
    let Query(attributes) =
        attributes.map_err(|e| ApiError::InvalidRequest(format!("language, burn_after_reading or file_name: {e}")))?;
    let limit = gateway.settings().max_content_bytes;
    let kind = body_kind(&headers)?;
    let command = if kind == BodyKind::Json {
        // JSON escaping can make content up to six times longer on the wire.
        let raw = read_body(body, limit.saturating_mul(6).saturating_add(4096)).await?;
        let parsed: CreateJson = serde_json::from_slice(&raw).map_err(|e| {
            ApiError::InvalidRequest(format!(
                "the body must be {{\"content\": string, \"expires_in_seconds\"?: integer, \"language\"?: string, \
                 \"burn_after_reading\"?: boolean, \"file_name\"?: string}}: {e}"
            ))
        })?;
        // The body's own expiry wins; the query parameter (documented for raw
        // bodies) applies when the body leaves it out.
        let expires_in_seconds = match query_expiry {
            Ok(from_query) => parsed.expires_in_seconds.or(from_query),
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
        let content = read_body(body, limit).await?.to_vec();
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
    let mut response = (StatusCode::CREATED, [(header::CONTENT_TYPE, content_type)], body).into_response();
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
async fn get_json(
    State(gateway): State<Gateway>,
    method: Method,
    PasteIdParam(id): PasteIdParam,
) -> Result<Response, ApiError> {
    if method == Method::HEAD {
        let view = gateway.describe(&id).await?;
        return Ok(no_store_if_burned(Json(PasteJson::new(&view, None)).into_response(), &view));
    }
    let read = gateway.get(&id).await?;
    let response = Json(PasteJson::new(&read.view, Some(&read.content))).into_response();
    Ok(no_store_if_burned(response, &read.view))
}

#[derive(Debug, Default, Deserialize)]
struct RawQuery {
    /// Present (any value, even empty): answer as a download.
    download: Option<String>,
}

/// `/raw/{id}`: the exact bytes with the stored type. `HEAD` never burns.
async fn get_raw(
    State(gateway): State<Gateway>,
    method: Method,
    PasteIdParam(id): PasteIdParam,
    query: Result<Query<RawQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let download = query.is_ok_and(|Query(q)| q.download.is_some());
    if method == Method::HEAD {
        let view = gateway.describe(&id).await?;
        return Ok(raw_response(&view, Bytes::new(), download));
    }
    let ReadPaste { view, content } = gateway.get(&id).await?;
    Ok(raw_response(&view, content, download))
}

async fn delete(
    State(gateway): State<Gateway>,
    PasteIdParam(id): PasteIdParam,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    gateway.delete(&id, token.trim()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

// ---- HTML pages -------------------------------------------------------

/// An HTML answer with the headers every page carries: the CSP, no MIME
/// sniffing, no caching (a page can show a paste that is deleted later),
/// and `Retry-After` on a 503 like the JSON API.
fn html(status: StatusCode, page: String) -> Response {
    let mut response = (status, Html(page)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(pages::CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    }
    response
}

/// The HTML page for a failed read or delete.
fn html_error(error: &ApiError) -> Response {
    match error {
        ApiError::NotFound => html(StatusCode::NOT_FOUND, pages::not_found()),
        ApiError::Unavailable(_) => html(StatusCode::SERVICE_UNAVAILABLE, pages::unavailable(&error.to_string())),
        other => html(other.http_status(), pages::bad_request(&other.to_string())),
    }
}

async fn new_paste_page(State(gateway): State<Gateway>) -> Response {
    let settings = gateway.settings();
    html(StatusCode::OK, pages::new_paste(&settings.public_url, settings.max_content_bytes))
}

/// `GET /{id}`: never burns; a burn paste shows a notice and a button.
async fn get_page(State(gateway): State<Gateway>, PasteIdParam(id): PasteIdParam) -> Response {
    match gateway.page(&id).await {
        Ok(content) => html(StatusCode::OK, pages::paste(&content, false)),
        Err(error) => html_error(&error),
    }
}

/// `POST /{id}`: the notice's button. Reads the paste, burning a burn paste.
async fn reveal_page(State(gateway): State<Gateway>, PasteIdParam(id): PasteIdParam) -> Response {
    match gateway.reveal(&id).await {
        Ok(content) => html(StatusCode::OK, pages::paste(&content, true)),
        Err(error) => html_error(&error),
    }
}

/// `/{id}/qr.svg`: the share link as a QR code, for reading on a phone.
/// Only well-formed ids: it encodes this gateway's link, never arbitrary text.
async fn qr_code(State(gateway): State<Gateway>, PasteIdParam(id): PasteIdParam) -> Result<Response, ApiError> {
    let id = pastebin_core::PasteId::parse(&id).map_err(|_| ApiError::NotFound)?;
    let svg = pages::qr_svg(&format!("{}/{id}", gateway.settings().public_url)).ok_or(ApiError::NotFound)?;
    Ok((
        [
            (header::CONTENT_TYPE, "image/svg+xml"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CONTENT_SECURITY_POLICY, "default-src 'none'"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        svg,
    )
        .into_response())
}

/// The delete form, for a paste that exists (so a mistyped link says so
/// before anyone hunts for a token). Describing never burns.
async fn delete_form(State(gateway): State<Gateway>, PasteIdParam(id): PasteIdParam) -> Response {
    match gateway.describe(&id).await {
        Ok(paste) => html(StatusCode::OK, pages::delete_form(&paste.id, None)),
        Err(error) => html_error(&error),
    }
}

#[derive(Debug, Deserialize)]
struct DeleteFormFields {
    token: String,
}

/// The delete form's POST: the same delete as `DELETE /api/v1/pastes/{id}`,
/// answered with a page, so deleting works with JavaScript off.
async fn delete_from_form(
    State(gateway): State<Gateway>,
    PasteIdParam(id): PasteIdParam,
    form: Result<Form<DeleteFormFields>, FormRejection>,
) -> Response {
    let Ok(Form(fields)) = form else {
        return html(StatusCode::BAD_REQUEST, pages::bad_request("the form must send a delete token"));
    };
    match gateway.delete(&id, fields.token.trim()).await {
        Ok(()) => html(StatusCode::OK, pages::deleted(&id)),
        Err(ApiError::WrongToken) => html(
            StatusCode::FORBIDDEN,
            pages::delete_form(&id, Some("That token does not match this paste. Nothing was deleted.")),
        ),
        Err(error) => html_error(&error),
    }
}

/// The `{id}` of a paste route. A segment that is not even UTF-8 is just
/// another malformed id: it becomes "" and so the same 404 as any missing
/// paste, never axum's 400 for a bad path.
struct PasteIdParam(String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for PasteIdParam {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        let id = Path::<String>::from_request_parts(parts, state).await.map(|Path(id)| id).unwrap_or_default();
        Ok(Self(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The router serves exactly the paths the published document lists.
    #[test]
    fn every_route_is_documented_and_every_documented_path_is_routed() {
        let document: serde_json::Value = serde_json::from_str(OPENAPI).expect("openapi.json is JSON");
        let mut documented: Vec<&str> =
            document["paths"].as_object().expect("the document has paths").keys().map(String::as_str).collect();
        let mut routed = ROUTES.to_vec();
        documented.sort_unstable();
        routed.sort_unstable();
        assert_eq!(routed, documented);
        assert_eq!(document["openapi"].as_str().map(|v| v.starts_with("3.1")), Some(true));
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
    fn accept_prefers_the_higher_quality() {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_static("application/json;q=0.5, text/plain"));
        assert!(wants_text(&headers));
        headers.insert(header::ACCEPT, HeaderValue::from_static("text/plain;q=0.1, application/json"));
        assert!(!wants_text(&headers));
    }
}
