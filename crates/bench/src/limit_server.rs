//! The HTTP layer's own limit, the peer every create and read figure of
//! `pastebin up` is set against (BENCHMARKS.md, round 5): an axum server on
//! the same runtime that reads each create's whole body and parses its JSON,
//! as the gateway does, then answers one fixed 201; and answers every
//! `GET /raw/{id}` with one 1 KiB body held in memory. No key, no row, no
//! object, no fsync: what `pastebin up` costs beyond it is the product's.

use anyhow::Context;
use axum::{
    body::Bytes,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Router,
};

use crate::args::LimitServerArgs;

/// The one answer to every create: a 201 body shaped like the product's.
const FIXED_201: &str = concat!(
    r#"{"id":"00AAAAAAAAAAAA","url":"http://127.0.0.1/00AAAAAAAAAAAA","#,
    r#""raw_url":"http://127.0.0.1/raw/00AAAAAAAAAAAA","expires_at":"2027-01-01T00:00:00Z","#,
    r#""delete_token":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}"#
);

/// The one answer to every read: 1 KiB, as the read figures' pastes.
static RAW: [u8; 1024] = [b'x'; 1024];

async fn create(body: Bytes) -> Response {
    match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(_) => (StatusCode::CREATED, [(header::CONTENT_TYPE, "application/json")], FIXED_201).into_response(),
        Err(_) => StatusCode::BAD_REQUEST.into_response(),
    }
}

async fn raw() -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], Bytes::from_static(&RAW)).into_response()
}

pub async fn run(args: LimitServerArgs) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(args.http).await?;
    println!("limit server listening on http://{}", listener.local_addr()?);
    let app = Router::new().route("/api/v1/pastes", post(create)).route("/raw/{id}", get(raw));
    axum::serve(listener, app)
        .with_graceful_shutdown(pastebin_runtime::shutdown_signal())
        .await
        .context("limit server failed")
}
