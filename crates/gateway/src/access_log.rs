//! The public listeners' access log (docs/operations.md#access-log): one
//! line per HTTP request and per gRPC call at INFO, and
//! `pastebin_requests_total{route,status}`.
//! A line names the method, the route's template (`/api/v1/pastes/{id}`,
//! never the path: a paste id grants reading the paste), the status, the
//! time to the answer's headers, and for a create its key's short hash (the
//! key itself is a credential for 25 h, docs/design.md#identifiers). Nothing
//! else of the request: no address, no token, no body.

use axum::{
    extract::{MatchedPath, Request},
    http::Method,
    middleware::Next,
    response::Response,
};
use pastebin_core::IdempotencyKey;
use pastebin_runtime::metrics as names;

use crate::create_request::IDEMPOTENCY_KEY;

/// The route a request matched none of, in the log and the counter's label.
const UNMATCHED: &str = "unmatched";
/// The create route, whose lines carry the key's hash.
const CREATE_ROUTE: &str = "/api/v1/pastes";

/// Logs and counts each request once its answer's headers are ready. The
/// route is the template [`crate::traced`] left on the answer (the router
/// matches inside this layer).
pub(crate) async fn access_log(request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let method = request.method().clone();
    // Kept as sent; hashed only if this turns out to be a create.
    let key = (method == Method::POST).then(|| request.headers().get(IDEMPOTENCY_KEY).cloned()).flatten();
    let response = next.run(request).await;
    let route = response.extensions().get::<MatchedPath>().map_or(UNMATCHED, MatchedPath::as_str);
    let status = response.status().as_u16();
    let key_hash = key
        .filter(|_| route == CREATE_ROUTE)
        .and_then(|key| IdempotencyKey::parse(key.to_str().ok()?).ok())
        .map(|key| key.short_hash());
    metrics::counter!(names::REQUESTS, "route" => route.to_owned(), "status" => status.to_string()).increment(1);
    tracing::info!(
        target: "pastebin::access",
        %method,
        %route,
        status,
        duration_ms = started.elapsed().as_micros() as f64 / 1000.0,
        key_hash = key_hash.as_deref().map(tracing::field::display),
        "request"
    );
    response
}

/// Logs and counts one call of the public gRPC API as [`access_log`] does a
/// request: the route is the call's full method name, the status its gRPC
/// code (`Ok`, `Unavailable`, …), and a create's line carries its key's
/// short hash. Returns the call's result unchanged.
pub(crate) fn grpc_call<T>(
    method: &'static str,
    started: std::time::Instant,
    key: Option<&str>,
    result: Result<T, tonic::Status>,
) -> Result<T, tonic::Status> {
    let status = match &result {
        Ok(_) => tonic::Code::Ok,
        Err(status) => status.code(),
    };
    let status = format!("{status:?}");
    let key_hash = key.and_then(|key| IdempotencyKey::parse(key).ok()).map(|key| key.short_hash());
    metrics::counter!(names::REQUESTS, "route" => method, "status" => status.clone()).increment(1);
    tracing::info!(
        target: "pastebin::access",
        method = %"gRPC",
        route = %method,
        %status,
        duration_ms = started.elapsed().as_micros() as f64 / 1000.0,
        key_hash = key_hash.as_deref().map(tracing::field::display),
        "request"
    );
    result
}
