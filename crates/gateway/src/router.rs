//! The HTTP API's router (docs/api.md): which route reaches which handler of
//! [`crate::http`], and the layers of the public listener. The browser's
//! pages are routed by pastebin-pages; the binary merges both routers and
//! hands them to [`crate::serve_http`]. Every route of either is described
//! in the OpenAPI document at [`OPENAPI_PATH`] (`openapi.json` beside this
//! file), and a test in pastebin-pages keeps the document and both routers
//! in step.

use axum::{
    body::Body,
    extract::Path,
    http::{header, HeaderValue},
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use tower_http::set_header::SetResponseHeaderLayer;

use crate::{error::ErrorLine, http, ApiError, Gateway};

/// The published contract of the public listener, served as is.
pub const OPENAPI: &str = include_str!("openapi.json");
const OPENAPI_PATH: &str = "/api/v1/openapi.json";

/// Every route of this router, in the OpenAPI document's path syntax (which axum shares).
pub const API_ROUTES: [&str; 7] = [
    "/healthz",
    OPENAPI_PATH,
    "/api/v1/limits",
    "/api/v1/pastes",
    "/api/v1/pastes/{id}",
    "/api/v1/pastes/{id}/reports",
    "/raw/{id}",
];

/// The API: JSON for programs, `text/plain` and raw bytes for curl. Paths
/// nobody routes are the JSON 404.
pub fn api_router(gateway: Gateway) -> Router {
    let [healthz_path, openapi_path, limits, pastes, paste, reports, raw] = API_ROUTES;
    Router::new()
        .route(healthz_path, get(healthz))
        .route(openapi_path, get(openapi))
        .route(limits, get(http::limits))
        .route(pastes, axum::routing::post(http::create))
        .route(paste, get(http::get_json).delete(http::delete))
        .route(reports, axum::routing::post(http::report))
        .route(raw, get(http::get_raw))
        .route_layer(axum::middleware::from_fn(traced))
        .fallback(|| async { ApiError::NotFound })
        .with_state(gateway)
}

/// `routes` as the public listener serves them: the listener's limits
/// (pastebin_edge::http), every refusal in the JSON envelope (or one line
/// of text for a client that asks for `text/plain`), and `nosniff` on every
/// answer (docs/design.md#edge).
/// Every request is logged and counted last, with the status the client sees
/// ([`crate::access_log`]).
pub(crate) fn public_router(routes: Router, limits: &pastebin_edge::http::HttpLimits) -> Router {
    pastebin_edge::http::limited(routes, limits)
        .layer(axum::middleware::from_fn(error_answers))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(axum::middleware::from_fn(crate::access_log::access_log))
}

/// Every error in the form the client reads: the JSON envelope (or a
/// page's HTML), or for an `Accept: text/plain` client (curl in a terminal)
/// its one line of text, with the same status and headers
/// (docs/api.md#status-codes-and-error-codes).
async fn error_answers(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let text = http::wants_text(request.headers());
    let response = error_envelope(next.run(request).await);
    if text {
        as_error_line(response)
    } else {
        response
    }
}

/// A refusal made by a layer or by the router itself (405, 408, 503) comes
/// with no body of ours; it gets the same envelope as a handler's error,
/// keeping its headers (`Allow`, `Retry-After`).
fn error_envelope(response: Response) -> Response {
    if response.headers().contains_key(header::CONTENT_TYPE) {
        return response;
    }
    let Some(error) = ApiError::from_bare_status(response.status()) else {
        return response;
    };
    let (parts, _) = response.into_parts();
    let mut enveloped = error.into_response();
    for (name, value) in &parts.headers {
        enveloped.headers_mut().entry(name).or_insert_with(|| value.clone());
    }
    enveloped
}

/// An error answer's body replaced by its [`ErrorLine`]; any other answer as it is.
fn as_error_line(response: Response) -> Response {
    let Some(ErrorLine(line)) = response.extensions().get::<ErrorLine>().cloned() else {
        return response;
    };
    let (mut parts, _) = response.into_parts();
    parts.headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(line))
}

/// Runs each request in a span named by its route (never by a paste id),
/// joined to the caller's trace when it sent a `traceparent`, and leaves the
/// route's template on the answer for the access log. A route layer, so
/// that every router of the public listener names its spans alike.
pub async fn traced(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    use tracing::Instrument;
    let matched = request.extensions().get::<axum::extract::MatchedPath>().cloned();
    let route = matched.as_ref().map_or("", |route| route.as_str());
    let span = pastebin_runtime::telemetry::server_span(&format!("{} {route}", request.method()), request.headers());
    let mut response = next.run(request).instrument(span).await;
    if let Some(matched) = matched {
        response.extensions_mut().insert(matched);
    }
    response
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

/// The client as the edge listener named it (pastebin_edge::http), for
/// the limits counted per client address: none when the router is driven
/// some other way.
pub struct ClientAddress(pub Option<std::net::IpAddr>);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ClientAddress {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut ::http::request::Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self(parts.extensions.get::<pastebin_edge::http::Client>().map(|client| client.address)))
    }
}

/// The `{id}` of a paste route. A segment that is not even UTF-8 is just
/// another malformed id: it becomes "" and so the same 404 as any missing
/// paste, never axum's 400 for a bad path.
pub struct PasteIdParam(pub String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for PasteIdParam {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut ::http::request::Parts, state: &S) -> Result<Self, Self::Rejection> {
        let id = Path::<String>::from_request_parts(parts, state).await.map(|Path(id)| id).unwrap_or_default();
        Ok(Self(id))
    }
}
