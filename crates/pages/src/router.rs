//! The pages' router: which route reaches which page, and the headers every
//! page carries. The binary merges it with the gateway's API router; the
//! OpenAPI document (pastebin-gateway) describes both, and a test below
//! keeps the three in step.

use axum::{
    body::Body,
    extract::{rejection::FormRejection, Path, State},
    http::{header, HeaderMap, HeaderValue, Method, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Form, Router,
};
use pastebin_gateway::{
    ApiError, ClientAddress, Delete, ErrorLine, Gateway, PasteIdParam, Report, WithinRate, RETRY_AFTER_SECONDS,
};
use serde::Deserialize;

use crate::{highlight, html, PageSettings, Pages};

/// Every route of this router, in the OpenAPI document's path syntax (which axum shares).
pub const PAGE_ROUTES: [&str; 6] = ["/", "/assets/{name}", "/{id}", "/{id}/delete", "/{id}/report", "/{id}/qr.svg"];

/// The browser's pages, read through `gateway`.
pub fn page_router(gateway: Gateway, settings: PageSettings) -> Router {
    let [home, assets, page, delete_page, report_page, qr] = PAGE_ROUTES;
    Router::new()
        .route(home, get(new_paste_page))
        .route(assets, get(asset))
        .route(page, get(shared_link).post(reveal_page))
        .route(delete_page, get(delete_form).post(delete_from_form))
        .route(report_page, get(report_form).post(report_from_form))
        .route(qr, get(qr_code))
        .route_layer(axum::middleware::from_fn(pastebin_gateway::traced))
        .with_state(Pages::new(gateway, settings))
}

/// The page's own stylesheets and scripts: the only things the CSP lets a
/// page load.
async fn asset(Path(name): Path<String>) -> Result<Response, ApiError> {
    let (content_type, body) = match name.as_str() {
        "app.js" => ("text/javascript; charset=utf-8", html::APP_JS),
        "theme.js" => ("text/javascript; charset=utf-8", html::THEME_JS),
        "sealed.js" => ("text/javascript; charset=utf-8", crate::sealed_page::SEALED_JS),
        "qr.js" => ("text/javascript; charset=utf-8", crate::sealed_page::QR_JS),
        "style.css" => ("text/css; charset=utf-8", html::STYLE),
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

/// An HTML answer with the headers every page carries: the CSP, no MIME
/// sniffing, no caching (a page can show a paste that is deleted later),
/// and `Retry-After` on a 503 like the JSON API.
fn page_response(status: StatusCode, page: impl Into<html::Page>) -> Response {
    let blocks = page.into().blocks().map(Ok::<_, std::convert::Infallible>);
    let body = Body::from_stream(futures::stream::iter(blocks));
    let mut response = (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(html::CSP));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
    }
    response
}

/// The HTML page for a failed read or delete, which answers an
/// `Accept: text/plain` client as one line of text instead.
fn error_page(error: &ApiError) -> Response {
    let page = match error {
        ApiError::NotFound => page_response(StatusCode::NOT_FOUND, html::not_found()),
        ApiError::Removed { reason } => page_response(StatusCode::GONE, html::removed(reason)),
        ApiError::Unavailable(_) => {
            page_response(StatusCode::SERVICE_UNAVAILABLE, html::unavailable(&error.to_string()))
        }
        other => page_response(other.http_status(), html::bad_request(&other.to_string())),
    };
    let mut page = with_error_line(page, &error.to_string());
    if let ApiError::RateLimited { retry_after_seconds, .. } = error {
        page.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(*retry_after_seconds));
    }
    page
}

fn with_error_line(mut page: Response, message: &str) -> Response {
    page.extensions_mut().insert(ErrorLine::of(message));
    page
}

async fn new_paste_page(State(pages): State<Pages>) -> Response {
    let settings = pages.gateway.settings();
    let form = html::NewPasteForm {
        public_url: &settings.public_url,
        max_bytes: settings.max_content_bytes,
        expiry: &settings.expiry,
        token_required: pages.gateway.requires_create_token(),
    };
    page_response(StatusCode::OK, html::new_paste(&form))
}

/// `GET /{id}`, the share link: the page for a browser (an `Accept` that
/// asks for HTML); for anything else (curl's `*/*`, wget, none) the
/// gateway's raw answer, so `curl <link>` prints the text
/// (docs/api.md#read). Either way the answer varies with `Accept`.
async fn shared_link(
    State(pages): State<Pages>,
    method: Method,
    ClientAddress(client): ClientAddress,
    PasteIdParam(id): PasteIdParam,
    headers: HeaderMap,
) -> Response {
    let mut response = if pastebin_gateway::accepts_html(&headers) {
        get_page(State(pages), PasteIdParam(id)).await
    } else {
        pastebin_gateway::shared_link_raw(&pages.gateway, client, &method, &id, &headers).await
    };
    response.headers_mut().insert(header::VARY, HeaderValue::from_static("accept"));
    response
}

/// `GET /{id}`: never burns; a burn paste shows a notice and a button.
async fn get_page(State(pages): State<Pages>, PasteIdParam(id): PasteIdParam) -> Response {
    match pages.page(&id).await {
        Ok(content) => page_response(StatusCode::OK, html::paste(content, false, &pages.gateway.settings().public_url)),
        Err(error) => error_page(&error),
    }
}

/// `POST /{id}`: the notice's button. Reads the paste, burning a burn paste.
async fn reveal_page(State(pages): State<Pages>, PasteIdParam(id): PasteIdParam) -> Response {
    match pages.reveal(&id).await {
        Ok(content) => page_response(StatusCode::OK, html::paste(content, true, &pages.gateway.settings().public_url)),
        Err(error) => error_page(&error),
    }
}

/// `/{id}/qr.svg`: the share link as a QR code, for reading on a phone.
/// Only well-formed ids: it encodes this gateway's link, never arbitrary text.
async fn qr_code(State(pages): State<Pages>, PasteIdParam(id): PasteIdParam) -> Result<Response, ApiError> {
    let id = pastebin_core::PasteId::parse(&id).map_err(|_| ApiError::NotFound)?;
    let svg = html::qr_svg(&format!("{}/{id}", pages.gateway.settings().public_url)).ok_or(ApiError::NotFound)?;
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
async fn delete_form(State(pages): State<Pages>, PasteIdParam(id): PasteIdParam) -> Response {
    match pages.gateway.describe(&id).await {
        Ok(paste) => page_response(StatusCode::OK, html::delete_form(&paste.id, None)),
        Err(error) => error_page(&error),
    }
}

/// The delete form's fields. The token is the paste's only credential:
/// `Debug` never prints it.
#[derive(Deserialize)]
struct DeleteFormFields {
    token: String,
}

impl std::fmt::Debug for DeleteFormFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeleteFormFields").field("token", &"<redacted>").finish()
    }
}

/// The delete form's POST: the same delete as `DELETE /api/v1/pastes/{id}`,
/// answered with a page, so deleting works with JavaScript off.
async fn delete_from_form(
    State(pages): State<Pages>,
    admitted: Result<WithinRate<Delete>, ApiError>,
    PasteIdParam(id): PasteIdParam,
    form: Result<Form<DeleteFormFields>, FormRejection>,
) -> Response {
    if let Err(refusal) = admitted {
        return error_page(&refusal);
    }
    let Ok(Form(fields)) = form else {
        const NO_TOKEN: &str = "the form must send a delete token";
        return with_error_line(page_response(StatusCode::BAD_REQUEST, html::bad_request(NO_TOKEN)), NO_TOKEN);
    };
    match pages.gateway.delete(&id, fields.token.trim()).await {
        Ok(()) => page_response(StatusCode::OK, html::deleted(&id)),
        Err(ApiError::WrongToken) => with_error_line(
            page_response(
                StatusCode::FORBIDDEN,
                html::delete_form(&id, Some("That token does not match this paste. Nothing was deleted.")),
            ),
            &ApiError::WrongToken.to_string(),
        ),
        Err(error) => error_page(&error),
    }
}

/// The report form, for a paste that exists (describing never burns).
async fn report_form(State(pages): State<Pages>, PasteIdParam(id): PasteIdParam) -> Response {
    match pages.gateway.describe(&id).await {
        Ok(paste) => page_response(StatusCode::OK, html::report_form(&paste.id, None)),
        Err(error) => error_page(&error),
    }
}

#[derive(Debug, Deserialize)]
struct ReportFormFields {
    reason: String,
    note: Option<String>,
}

/// The report form's POST: the same report as `POST /api/v1/pastes/{id}/reports`,
/// answered with a page, so reporting works with JavaScript off.
async fn report_from_form(
    State(pages): State<Pages>,
    admitted: Result<WithinRate<Report>, ApiError>,
    PasteIdParam(id): PasteIdParam,
    form: Result<Form<ReportFormFields>, FormRejection>,
) -> Response {
    if let Err(refusal) = admitted {
        return error_page(&refusal);
    }
    let Ok(Form(fields)) = form else {
        const NO_REASON: &str = "the form must send a reason";
        return with_error_line(
            page_response(StatusCode::BAD_REQUEST, html::report_form(&id, Some(NO_REASON))),
            NO_REASON,
        );
    };
    match pages.gateway.report(&id, &fields.reason, fields.note.as_deref()).await {
        Ok(_) => page_response(StatusCode::OK, html::report_received(&id)),
        Err(ApiError::InvalidRequest(problem)) => {
            with_error_line(page_response(StatusCode::BAD_REQUEST, html::report_form(&id, Some(&problem))), &problem)
        }
        Err(error) => error_page(&error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The public listener serves exactly the paths the published document
    /// lists: the API router's and this one's, nothing else.
    #[test]
    fn every_route_is_documented_and_every_documented_path_is_routed() {
        let document: serde_json::Value =
            serde_json::from_str(pastebin_gateway::OPENAPI).expect("openapi.json is JSON");
        let mut documented: Vec<&str> =
            document["paths"].as_object().expect("the document has paths").keys().map(String::as_str).collect();
        let mut routed: Vec<&str> = pastebin_gateway::API_ROUTES.iter().chain(&PAGE_ROUTES).copied().collect();
        documented.sort_unstable();
        routed.sort_unstable();
        assert_eq!(routed, documented);
        assert_eq!(document["openapi"].as_str().map(|v| v.starts_with("3.1")), Some(true));
    }

    #[test]
    fn the_delete_forms_debug_never_prints_the_token() {
        let token = pastebin_core::random_secret();
        let fields = DeleteFormFields { token: token.clone() };
        let printed = format!("{fields:?}");
        assert!(!printed.contains(&token) && printed.contains("redacted"), "{printed}");
    }
}
