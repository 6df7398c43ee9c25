//! The gateway's read cache and conditional GETs, on real processes: a
//! delete takes effect at once on the gateway that did it, and within the
//! documented bound (`LIVE_FOR`, 750 ms) on another gateway; an `ETag`
//! answers `If-None-Match` with 304 only while the paste exists.

use std::time::Duration;

use pastebin_tests::{
    api::{create, get, new_key},
    cluster::{Cluster, ClusterOptions},
};
use reqwest::{Client, StatusCode};

async fn delete(http: &str, id: &str, token: &str) -> StatusCode {
    Client::new().delete(format!("{http}/api/v1/pastes/{id}")).bearer_auth(token).send().await.unwrap().status()
}

async fn status(url: String) -> StatusCode {
    Client::new().get(url).send().await.unwrap().status()
}

#[tokio::test]
async fn the_cache_never_serves_a_deleted_paste_on_the_gateway_that_deleted_it() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let other = cluster.another_gateway(&cluster.s3, "").await;
    let other_http = format!("http://{}", other.address("gateway-http"));
    let created = create(&cluster.http, Some(&new_key()), "cached, then deleted").await.unwrap().json();
    let (id, token) = (created["id"].as_str().unwrap(), created["delete_token"].as_str().unwrap());
    // Both gateways now hold it, confirmed live this very moment.
    for http in [&cluster.http, &other_http] {
        for _ in 0..3 {
            assert_eq!(get(http, id).await.status, StatusCode::OK);
            assert_eq!(status(format!("{http}/raw/{id}")).await, StatusCode::OK);
        }
    }
    assert_eq!(delete(&cluster.http, id, token).await, StatusCode::NO_CONTENT);
    assert_eq!(get(&cluster.http, id).await.status, StatusCode::NOT_FOUND, "JSON, at once, on the deleting gateway");
    assert_eq!(status(format!("{}/raw/{id}", cluster.http)).await, StatusCode::NOT_FOUND);
    assert_eq!(status(format!("{}/{id}", cluster.http)).await, StatusCode::NOT_FOUND);
    // The other gateway re-asks P once its entry is older than LIVE_FOR.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(get(&other_http, id).await.status, StatusCode::NOT_FOUND, "past the bound on another gateway");
    assert_eq!(status(format!("{other_http}/raw/{id}")).await, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn an_etag_answers_if_none_match_with_304_while_the_paste_exists() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let created = create(&cluster.http, Some(&new_key()), "tagged").await.unwrap().json();
    let (id, token) = (created["id"].as_str().unwrap(), created["delete_token"].as_str().unwrap());
    let client = Client::new();
    for (url, representation) in
        [(format!("{}/raw/{id}", cluster.http), "raw"), (format!("{}/api/v1/pastes/{id}", cluster.http), "json")]
    {
        let first = client.get(&url).send().await.unwrap();
        assert_eq!(first.status(), StatusCode::OK);
        let tag = first.headers()["etag"].to_str().unwrap().to_owned();
        assert_eq!(tag, format!("\"{id}.{representation}\""));
        assert_eq!(first.headers()["cache-control"], "no-cache");
        let again = client.get(&url).header("If-None-Match", &tag).send().await.unwrap();
        assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
        assert_eq!(again.headers()["etag"].to_str().unwrap(), tag);
        assert!(again.text().await.unwrap().is_empty());
        let other = client.get(&url).header("If-None-Match", "\"something-else\"").send().await.unwrap();
        assert_eq!(other.status(), StatusCode::OK);
    }
    assert_eq!(delete(&cluster.http, id, token).await, StatusCode::NO_CONTENT);
    let gone = client.get(format!("{}/raw/{id}", cluster.http)).header("If-None-Match", "*").send().await.unwrap();
    assert_eq!(gone.status(), StatusCode::NOT_FOUND, "a deleted paste is never 304");
}

/// A burn-after-reading paste never enters the read cache and never gets an
/// `ETag`: even a client sending `If-None-Match: *` gets the content once,
/// and the next read is a 404, not a copy (docs/design.md#burn-after-reading).
#[tokio::test]
async fn a_burn_paste_is_never_cached_and_never_answered_304() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let client = Client::new();
    let created: serde_json::Value = client
        .post(format!("{}/api/v1/pastes", cluster.http))
        .header("Idempotency-Key", new_key())
        .json(&serde_json::json!({ "content": "read me once", "burn_after_reading": true }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap();
    let raw = format!("{}/raw/{id}", cluster.http);
    let described = client.head(&raw).header("If-None-Match", "*").send().await.unwrap();
    assert_eq!(described.status(), StatusCode::OK, "HEAD neither burns nor answers 304");
    assert!(described.headers().get("etag").is_none());
    let read = client.get(&raw).header("If-None-Match", "*").send().await.unwrap();
    assert_eq!(read.status(), StatusCode::OK, "the one read carries the content");
    assert!(read.headers().get("etag").is_none());
    assert_eq!(read.headers()["cache-control"], "no-store");
    assert_eq!(read.text().await.unwrap(), "read me once");
    for url in [raw, format!("{}/api/v1/pastes/{id}", cluster.http)] {
        assert_eq!(status(url).await, StatusCode::NOT_FOUND, "burned: nothing kept to serve");
    }
}

/// An uncertain delete (P tombstoned the row, then its answer was lost) is
/// answered 503, and the gateway forgets its copy all the same: it never
/// serves a paste that a retried DELETE calls gone.
#[tokio::test]
async fn an_uncertain_delete_forgets_the_cached_copy() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let created = create(&cluster.http, Some(&new_key()), "deleted, answer lost").await.unwrap().json();
    let (id, token) = (created["id"].as_str().unwrap(), created["delete_token"].as_str().unwrap());
    // P now dies right after it commits a tombstone, before it answers.
    cluster.pastes[0].restart(&[("PASTEBIN_FAILPOINTS", "after_p_delete")], &["paste-service"]).await;
    for _ in 0..3 {
        assert_eq!(get(&cluster.http, id).await.status, StatusCode::OK, "cached and confirmed live");
    }
    assert_eq!(delete(&cluster.http, id, token).await, StatusCode::SERVICE_UNAVAILABLE, "the answer was lost");
    assert_ne!(get(&cluster.http, id).await.status, StatusCode::OK, "JSON: the cached copy is forgotten");
    assert_ne!(status(format!("{}/raw/{id}", cluster.http)).await, StatusCode::OK, "raw: forgotten too");

    cluster.pastes[0].restart(&[("PASTEBIN_FAILPOINTS", "")], &["paste-service"]).await;
    assert_eq!(delete(&cluster.http, id, token).await, StatusCode::NOT_FOUND, "the delete had taken effect");
    assert_eq!(get(&cluster.http, id).await.status, StatusCode::NOT_FOUND);
}
