//! The HTTP API (SPEC §6–7): JSON for programs, `text/plain` for curl, HTML
//! for browsers. Handlers translate HTTP onto [`Gateway`] and use `?`; the
//! mapping of errors to statuses lives in [`ApiError`].

use axum::{
    body::Body,
    extract::{Path, Query, State},
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{Html, IntoResponse, Response},
    routing::get,
    Json, Router,
};
use http_body_util::LengthLimitError;
use serde::Deserialize;

use crate::{gateway::CreateAnswer, pages, ApiError, CreateCommand, Gateway};

const IDEMPOTENCY_KEY: &str = "idempotency-key";
const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

pub(crate) fn router(gateway: Gateway) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/api/v1/pastes", axum::routing::post(create))
        .route("/api/v1/pastes/{id}", get(get_json).delete(delete))
        .route("/raw/{id}", get(get_raw))
        .route("/{id}", get(get_page))
        .fallback(|| async { ApiError::NotFound })
        .with_state(gateway)
}

async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "status": "ok" }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateJson {
    content: String,
    expires_in_seconds: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
struct CreateQuery {
    expires_in_seconds: Option<u64>,
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("application/json"))
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
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.parse::<f32>().ok())
                .unwrap_or(1.0);
            Some(q)
        })
        .fold(0.0, f32::max)
}

fn wants_text(headers: &HeaderMap) -> bool {
    accept_quality(headers, "text/plain") > accept_quality(headers, "application/json")
}

/// Reads the body with a limit, so an oversized upload is a clean 413.
async fn read_body(body: Body, limit: usize) -> Result<axum::body::Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|error| {
        let too_large = std::error::Error::source(&error).is_some_and(|source| source.is::<LengthLimitError>());
        if too_large {
            ApiError::TooLarge { limit }
        } else {
            ApiError::InvalidRequest("cannot read the request body".into())
        }
    })
}

async fn create(
    State(gateway): State<Gateway>,
    Query(query): Query<CreateQuery>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let idempotency_key = headers
        .get(IDEMPOTENCY_KEY)
        .map(|v| v.to_str().map(str::to_owned).map_err(|_| ApiError::InvalidKey("the idempotency key must be a UUID".into())))
        .transpose()?;
    let limit = gateway.settings().max_content_bytes;
    let command = if is_json(&headers) {
        // JSON escaping can make content up to six times longer on the wire.
        let raw = read_body(body, limit.saturating_mul(6).saturating_add(4096)).await?;
        let parsed: CreateJson = serde_json::from_slice(&raw)
            .map_err(|e| ApiError::InvalidRequest(format!("the body must be {{\"content\": string, \"expires_in_seconds\"?: integer}}: {e}")))?;
        CreateCommand { idempotency_key, content: parsed.content, expires_in_seconds: parsed.expires_in_seconds }
    } else {
        let raw = read_body(body, limit).await?;
        let content = String::from_utf8(raw.to_vec())
            .map_err(|_| ApiError::InvalidRequest("a text/plain body must be UTF-8".into()))?;
        CreateCommand { idempotency_key, content, expires_in_seconds: query.expires_in_seconds }
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

async fn get_json(State(gateway): State<Gateway>, Path(id): Path<String>) -> Result<Response, ApiError> {
    Ok(Json(gateway.get(&id).await?).into_response())
}

async fn get_raw(State(gateway): State<Gateway>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let paste = gateway.get(&id).await?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8"), (header::X_CONTENT_TYPE_OPTIONS, "nosniff")],
        paste.content,
    )
        .into_response())
}

async fn get_page(State(gateway): State<Gateway>, Path(id): Path<String>) -> Response {
    let (status, page) = match gateway.get(&id).await {
        Ok(paste) => (StatusCode::OK, pages::paste(&paste)),
        Err(ApiError::NotFound) => (StatusCode::NOT_FOUND, pages::not_found()),
        Err(error) => (error.http_status(), pages::error(&error)),
    };
    let mut response = (status, Html(page)).into_response();
    response.headers_mut().insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(pages::CSP));
    response
}

async fn delete(State(gateway): State<Gateway>, Path(id): Path<String>, headers: HeaderMap) -> Result<Response, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    gateway.delete(&id, token.trim()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
