//! The router against a sweeper whose shards are all down: the listener
//! still answers, and says so.

use std::sync::Arc;

use axum::body::Body;
use http_body_util::BodyExt;
use pastebin_core::SystemClock;
use pastebin_keys::KeyClient;
use pastebin_pastes::PasteClient;
use pastebin_shards::{channel, Shard};
use pastebin_sweeper::{RoundReport, Sweeper, SweeperSettings};
use tower::ServiceExt;

use crate::{router, AdminState, CONTENT_SECURITY_POLICY};

/// Port 9 (discard) on loopback: nothing listens, every call fails fast.
const NOWHERE: &str = "http://127.0.0.1:9";

fn unreachable_sweeper(objects: &tempfile::TempDir) -> Sweeper {
    let every = Some(pastebin_core::SlotRange::ALL.into());
    let slots = pastebin_shards::SlotMap::new(
        vec![Shard {
            address: NOWHERE.into(),
            slots: every,
            client: KeyClient::new(channel(NOWHERE, None).unwrap()),
            colocated: false,
        }],
        vec![Shard {
            address: NOWHERE.into(),
            slots: every,
            client: PasteClient::new(channel(NOWHERE, None).unwrap()),
            colocated: false,
        }],
    )
    .unwrap();
    let objects = Arc::new(pastebin_objects::LocalDirStore::open(objects.path()).unwrap());
    Sweeper::new(slots, objects, Arc::new(SystemClock), SweeperSettings::default())
}

async fn get(state: &AdminState, path: &str) -> (u16, axum::http::HeaderMap, String) {
    let request = axum::http::Request::get(path).body(Body::empty()).unwrap();
    let response = router(state.clone()).oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    (parts.status.as_u16(), parts.headers, String::from_utf8(body.to_vec()).unwrap())
}

#[tokio::test]
async fn metrics_are_prometheus_text() {
    let state = AdminState::metrics_only();
    metrics_touch();
    let (status, headers, body) = get(&state, "/metrics").await;
    assert_eq!(status, 200);
    assert!(headers["content-type"].to_str().unwrap().starts_with("text/plain; version=0.0.4"));
    assert!(body.contains("pastebin_retired_keys_total"), "{body}");
}

fn metrics_touch() {
    metrics::counter!(pastebin_runtime::metrics::RETIRED_KEYS).increment(0);
}

#[tokio::test]
async fn without_a_sweeper_there_is_no_dashboard() {
    let state = AdminState::metrics_only();
    assert_eq!(get(&state, "/dashboard").await.0, 404);
    assert_eq!(get(&state, "/dashboard/status.json").await.0, 404);
}

#[tokio::test]
async fn dashboard_assets_are_served_under_a_strict_policy() {
    let dir = tempfile::tempdir().unwrap();
    let state = AdminState::new(unreachable_sweeper(&dir));
    let (status, headers, html) = get(&state, "/dashboard").await;
    assert_eq!(status, 200);
    assert_eq!(headers["content-security-policy"], CONTENT_SECURITY_POLICY);
    assert!(html.contains(r#"<script src="/dashboard/app.js" defer></script>"#));
    assert!(!html.contains("<script>"), "no inline script");
    assert!(!html.contains("style="), "no inline style");
    assert!(!html.contains("http://") && !html.contains("https://"), "no other origin");
    let (status, headers, js) = get(&state, "/dashboard/app.js").await;
    assert_eq!((status, headers["content-type"].to_str().unwrap()), (200, "text/javascript; charset=utf-8"));
    assert!(!js.contains("innerHTML"), "data is only ever set as text");
    assert_eq!(get(&state, "/dashboard/app.css").await.0, 200);
}

#[tokio::test]
async fn the_dashboard_has_the_dark_mode_toggle() {
    let dir = tempfile::tempdir().unwrap();
    let state = AdminState::new(unreachable_sweeper(&dir));
    let (_, _, html) = get(&state, "/dashboard").await;
    assert!(html.contains(r#"<script src="/dashboard/theme.js"></script>"#) && html.contains(r#"id="theme-toggle""#));
    let (status, headers, js) = get(&state, "/dashboard/theme.js").await;
    assert_eq!((status, headers["content-security-policy"].to_str().unwrap()), (200, CONTENT_SECURITY_POLICY));
    assert!(js.contains("localStorage") && js.contains("theme-toggle"));
    let (_, _, css) = get(&state, "/dashboard/app.css").await;
    assert!(css.contains("prefers-color-scheme: dark") && css.contains(":root[data-theme=dark]"));
}

#[tokio::test]
async fn status_reports_unreachable_shards_and_recorded_rounds() {
    let dir = tempfile::tempdir().unwrap();
    let state = AdminState::new(unreachable_sweeper(&dir));
    let (_, _, before) = get(&state, "/dashboard/status.json").await;
    let before: serde_json::Value = serde_json::from_str(&before).unwrap();
    assert_eq!(before["sampled"], false);
    assert_eq!(before["level"], serde_json::Value::Null);

    state.sample_now().await;
    let mut report = RoundReport::default();
    report.recovery.skipped_unreachable = 4;
    state.record_round(report);
    let (status, headers, body) = get(&state, "/dashboard/status.json").await;
    assert_eq!(status, 200);
    assert_eq!(headers["cache-control"], "no-store");
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["sampled"], true);
    assert_eq!(json["key_shards"][0]["reachable"], false);
    assert_eq!(json["paste_shards"][0]["reachable"], false);
    assert_eq!(json["rounds"][0]["skipped_unreachable"], 4);
    assert_eq!(json["card"].as_array().unwrap().len(), 4);
    assert_eq!(json["history"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn readyz_names_a_failed_sweeper_round_and_healthz_stays_alive() {
    let dir = tempfile::tempdir().unwrap();
    let sweeper = unreachable_sweeper(&dir);
    let state = AdminState::new(sweeper.clone());
    sweeper.round(false).await;
    let (status, headers, body) = get(&state, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(headers["cache-control"], "no-store");
    let body: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(body["status"], "not ready");
    let reason = body["checks"]["sweeper rounds"].as_str().unwrap();
    assert!(reason.contains("key shards unreachable"), "{reason}");
    let (status, _, body) = get(&state, "/healthz").await;
    assert_eq!((status, body.as_str()), (200, r#"{"status":"ok"}"#));
}
