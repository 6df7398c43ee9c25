//! The admin listener's routes. The dashboard ships its own script and
//! stylesheet from this listener (no CDN) under a strict Content Security
//! Policy: no inline script or style, no other origin.

use axum::{
    extract::State,
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Redirect, Response},
    routing::get,
    Json, Router,
};

use crate::AdminState;

const DASHBOARD_HTML: &str = include_str!("assets/dashboard.html");
const DASHBOARD_JS: &str = include_str!("assets/dashboard.js");
const DASHBOARD_CSS: &str = include_str!("assets/dashboard.css");
/// A small icon, so the browser's automatic favicon request finds one.
const FAVICON_SVG: &str = r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect width="16" height="16" rx="3" fill="#c2410c"/><path d="M4 11V5h5a2 2 0 0 1 0 4H4" fill="none" stroke="#fff" stroke-width="2"/></svg>"##;

/// Everything the page needs comes from here; nothing runs inline.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The admin listener: `GET /healthz` (alive), `GET /readyz` (able to work),
/// `GET /metrics`, and with a sweeper, `GET /dashboard` (page, `app.js`,
/// `app.css`, `theme.js`, `status.json`).
pub fn router(state: AdminState) -> Router {
    Router::new()
        .route("/", get(|| async { Redirect::to("/dashboard") }))
        .route("/healthz", get(|| async { Json(serde_json::json!({ "status": "ok" })) }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/dashboard", get(dashboard))
        .route("/dashboard/status.json", get(status))
        .route("/dashboard/app.js", get(|| async { asset("text/javascript; charset=utf-8", DASHBOARD_JS) }))
        .route("/dashboard/app.css", get(|| async { asset("text/css; charset=utf-8", DASHBOARD_CSS) }))
        .route(
            "/dashboard/theme.js",
            get(|| async { asset("text/javascript; charset=utf-8", pastebin_runtime::THEME_JS) }),
        )
        .route("/dashboard/favicon.svg", get(|| async { asset("image/svg+xml", FAVICON_SVG) }))
        .with_state(state)
}

/// 200 while every required readiness check of the process passes, else
/// 503; both name each check and why it fails, and say `degraded` while an
/// advisory one fails (docs/deployment.md#readiness).
async fn readyz() -> Response {
    use pastebin_runtime::readiness;
    let checks = readiness::process().checks();
    let ready = readiness::all_pass(&checks);
    let status = match (ready, readiness::degraded(&checks)) {
        (false, _) => "not ready",
        (true, true) => "degraded",
        (true, false) => "ready",
    };
    let mut body = serde_json::json!({
        "status": status,
        "checks": checks
            .iter()
            .map(|(name, check)| (name.to_string(), check.outcome.as_ref().err().map_or("ok", String::as_str).into()))
            .collect::<serde_json::Map<String, serde_json::Value>>(),
    });
    // A shard's durability is reported, never a reason to be not ready:
    // commits work; what a failover would lose is the operator's call.
    if let Some(durability) = pastebin_runtime::durability::current() {
        body["durability"] = serde_json::json!({
            "kind": durability.kind(),
            "detail": durability.to_string(),
            "commits_survive_server_loss": durability.survives_server_loss(),
        });
    }
    // Nor is the search-first mode: creates work, each asking P first.
    if let Some(lost) = pastebin_runtime::durability::lost_commits() {
        let until = lost.search_first_until();
        body["search_first"] = serde_json::json!({
            "may_have_lost_commits_since": lost.since.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "until": until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "active": lost.search_first(chrono::Utc::now()),
        });
    }
    let code = if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    let mut response = (code, Json(body)).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

async fn metrics(State(state): State<AdminState>) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], state.render_metrics()).into_response()
}

fn no_dashboard() -> Response {
    (StatusCode::NOT_FOUND, "this process runs no sweeper: its admin listener serves /metrics only\n").into_response()
}

async fn dashboard(State(state): State<AdminState>) -> Response {
    if !state.has_sweeper() {
        return no_dashboard();
    }
    protected(asset("text/html; charset=utf-8", DASHBOARD_HTML))
}

async fn status(State(state): State<AdminState>) -> Response {
    if !state.has_sweeper() {
        return no_dashboard();
    }
    let mut response = Json(state.status()).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    protected(response)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
    response.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    protected(response)
}

fn protected(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    response
}
