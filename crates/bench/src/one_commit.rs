//! The one-commit baseline (figure 3): the seed-000 design, for comparison
//! only. The same HTTP create API as the gateway, but the key row and the
//! paste row live in ONE PostgreSQL database and are written in ONE
//! transaction, after the object PUT (never inside a transaction, as in the
//! saga). The schema is the product's own migrations, run side by side in
//! one database, so both designs pay for the same rows and indexes.
//!
//! Not a product: no GET, no DELETE, no sweeper. A create whose key exists
//! answers the stored body (a replay) or 409; the object it PUT first is an
//! orphan, as an aborted saga's would be.

use std::sync::Arc;

use anyhow::Context;
use axum::{
    extract::State,
    http::{header, HeaderMap, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    Json, Router,
};
use bytes::Bytes;
use pastebin_core::{CreateRequest, DeleteToken, Expiry, IdempotencyKey, PasteId};
use pastebin_objects::ObjectStore;
use sha2::{Digest, Sha256};
use sqlx::{AnyPool, Row};

use crate::args::OneCommitArgs;

const KEYS_SCHEMA: &str = include_str!("../../../migrations/keys/20261129000001_idempotency_keys.sql");
const PASTES_SCHEMA: &str = include_str!("../../../migrations/pastes/20261129000001_pastes.sql");
const RETENTION_MS: i64 = 25 * 3600 * 1000;
const MAX_CONTENT_BYTES: usize = 1024 * 1024;

#[derive(Clone)]
struct OneCommit {
    pool: AnyPool,
    objects: Arc<dyn ObjectStore>,
    public_url: String,
}

#[derive(serde::Deserialize)]
struct CreateBody {
    content: String,
    expires_in_seconds: Option<u64>,
}

fn error(status: StatusCode, code: &str) -> Response {
    (status, Json(serde_json::json!({ "error": { "code": code, "message": code } }))).into_response()
}

fn created(body: String, id: &str, public_url: &str, replayed: bool) -> Response {
    let mut response = (StatusCode::CREATED, [(header::CONTENT_TYPE, "application/json")], body).into_response();
    if let Ok(location) = HeaderValue::from_str(&format!("{public_url}/{id}")) {
        response.headers_mut().insert(header::LOCATION, location);
    }
    if replayed {
        response.headers_mut().insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    response
}

async fn create(State(app): State<OneCommit>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(key) =
        headers.get("idempotency-key").and_then(|v| v.to_str().ok()).and_then(|v| IdempotencyKey::parse(v).ok())
    else {
        return error(StatusCode::BAD_REQUEST, "invalid_idempotency_key");
    };
    let Ok(request) = serde_json::from_slice::<CreateBody>(&body) else {
        return error(StatusCode::BAD_REQUEST, "invalid_body");
    };
    if request.content.len() > MAX_CONTENT_BYTES {
        return error(StatusCode::PAYLOAD_TOO_LARGE, "too_large");
    }
    let Ok(expiry) = Expiry::from_seconds(request.expires_in_seconds) else {
        return error(StatusCode::BAD_REQUEST, "invalid_expiry");
    };
    match app.create(key, request.content, expiry).await {
        Ok(response) => response,
        Err(e) => {
            tracing::warn!(error = %e, "one-commit create failed");
            error(StatusCode::SERVICE_UNAVAILABLE, "unavailable")
        }
    }
}

impl OneCommit {
    async fn create(&self, key: IdempotencyKey, content: String, expiry: Expiry) -> anyhow::Result<Response> {
        let content = Bytes::from(content);
        let request_hash = CreateRequest::text(&content, expiry.seconds()).hash().to_hex();
        let id = PasteId::mint(key.slot());
        let token = DeleteToken::generate();
        let now = chrono::Utc::now();
        let expires_at = expiry.expires_at(now);
        let body = serde_json::json!({
            "id": id.as_str(),
            "url": format!("{}/{id}", self.public_url),
            "raw_url": format!("{}/raw/{id}", self.public_url),
            "expires_at": expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "delete_token": token.expose(),
        })
        .to_string();

        self.objects.put(id.as_str(), content.clone()).await?;

        let now_ms = now.timestamp_millis();
        let mut tx = self.pool.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO idempotency_keys (key, request_hash, paste_id, state, response_body, created_at, retain_until)
             VALUES ($1, $2, $3, 'done', $4, $5, $6) ON CONFLICT (key) DO NOTHING",
        )
        .bind(key.canonical())
        .bind(&request_hash)
        .bind(id.as_str())
        .bind(&body)
        .bind(now_ms)
        .bind(now_ms + RETENTION_MS)
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        if !inserted {
            tx.rollback().await?;
            let row = sqlx::query("SELECT request_hash, paste_id, response_body FROM idempotency_keys WHERE key = $1")
                .bind(key.canonical())
                .fetch_one(&self.pool)
                .await?;
            if row.try_get::<String, _>("request_hash")? != request_hash {
                return Ok(error(StatusCode::CONFLICT, "idempotency_key_reused"));
            }
            let paste_id: String = row.try_get("paste_id")?;
            return Ok(created(row.try_get("response_body")?, &paste_id, &self.public_url, true));
        }
        sqlx::query(
            "INSERT INTO pastes (id, state, created_at, delete_token_sha256, expires_at, size, content_sha256)
             VALUES ($1, 'live', $2, $3, $4, $5, $6)",
        )
        .bind(id.as_str())
        .bind(now_ms)
        .bind(token.hash().to_hex())
        .bind(expires_at.timestamp_millis())
        .bind(content.len() as i64)
        .bind(hex::encode(Sha256::digest(&content)))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(created(body, id.as_str(), &self.public_url, false))
    }
}

/// Creates both tables (the product's own migrations) unless they exist.
async fn ensure_schema(pool: &AnyPool) -> anyhow::Result<()> {
    use sqlx::Executor;
    let exists: Option<String> =
        sqlx::query("SELECT CAST(to_regclass('idempotency_keys') AS TEXT) AS t").fetch_one(pool).await?.try_get("t")?;
    if exists.is_none() {
        pool.execute(KEYS_SCHEMA).await.context("cannot create idempotency_keys")?;
        pool.execute(PASTES_SCHEMA).await.context("cannot create pastes")?;
    }
    Ok(())
}

pub async fn run(args: OneCommitArgs) -> anyhow::Result<()> {
    sqlx::any::install_default_drivers();
    let pool = sqlx::any::AnyPoolOptions::new()
        .max_connections(args.db_connections)
        .acquire_timeout(std::time::Duration::from_secs(5))
        .connect(&args.database_url)
        .await
        .context("cannot connect to the one-commit database")?;
    ensure_schema(&pool).await?;
    let objects = crate::steps::open_objects(&args.objects).await?;
    let listener = tokio::net::TcpListener::bind(args.http).await?;
    let public_url = format!("http://{}", listener.local_addr()?);
    tracing::info!(address = %listener.local_addr()?, "one-commit baseline listening");
    println!("one-commit baseline listening on {public_url}");
    let app = Router::new().route("/api/v1/pastes", post(create)).with_state(OneCommit { pool, objects, public_url });
    axum::serve(listener, app)
        .with_graceful_shutdown(pastebin_runtime::shutdown_signal())
        .await
        .context("one-commit server failed")
}
