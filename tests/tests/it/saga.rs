//! The create saga end to end, on real processes: K and P shards on their own
//! PostgreSQL databases, the gateway on a SeaweedFS S3 bucket, gRPC between them.
//! Crashes are real: a failpoint aborts the gateway process mid-saga.

use std::time::Duration;

use pastebin_core::{IdempotencyKey, KeyState, PasteId};
use pastebin_tests::{
    api::{contention_env, create, create_within, get, new_key},
    cluster::{Cluster, ClusterOptions},
};
use reqwest::{Client, StatusCode};

#[tokio::test]
async fn creates_reads_and_replays_byte_identically() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let key = new_key();
    let first = create(&cluster.http, Some(&key), "hello, saga").await.unwrap();
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert!(first.headers.get("idempotent-replayed").is_none());
    let created = first.json();
    let id = created["id"].as_str().unwrap();
    assert_eq!(
        PasteId::parse(id).unwrap().slot(),
        IdempotencyKey::parse(&key).unwrap().slot(),
        "the id prefix encodes the key's slot"
    );
    assert_eq!(first.headers["location"], format!("{}/api/v1/pastes/{id}", cluster.http).as_str());
    assert_eq!(created["url"], format!("{}/{id}", cluster.http));
    assert_eq!(created["delete_token"].as_str().unwrap().len(), 43);

    let read = get(&cluster.http, id).await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.json()["content"], "hello, saga");
    assert_eq!(read.json()["size"], 11);

    // The same key (in another spelling) and the same body: the stored 201, byte for byte.
    let replay = create(&cluster.http, Some(&key.to_uppercase()), "hello, saga").await.unwrap();
    assert_eq!(replay.status, StatusCode::CREATED);
    assert_eq!(replay.body, first.body);
    assert_eq!(replay.headers["idempotent-replayed"], "true");
    assert_eq!(cluster.live_pastes().await, 1);

    // The text representation replays byte-identically too.
    let text = |key: String| {
        Client::new()
            .post(format!("{}/api/v1/pastes", cluster.http))
            .header("Idempotency-Key", key)
            .header("Accept", "text/plain")
            .body("plain text paste")
            .send()
    };
    let text_key = new_key();
    let one = text(text_key.clone()).await.unwrap();
    assert_eq!(one.status(), StatusCode::CREATED);
    let one = one.text().await.unwrap();
    let two = text(text_key).await.unwrap().text().await.unwrap();
    assert_eq!(one, two);
    let lines: Vec<&str> = one.lines().collect();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with(&format!("{}/", cluster.http)));
    assert_eq!(cluster.live_pastes().await, 2);
}

#[tokio::test]
async fn missing_or_malformed_keys_are_rejected_and_store_nothing() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    for key in [None, Some(""), Some("not-a-uuid"), Some("6f9619ff-8b86-d011-b42d-00c04fc964f")] {
        let answer = create(&cluster.http, key, "x").await.unwrap();
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "key {key:?}");
        assert_eq!(answer.json()["error"]["code"], "invalid_idempotency_key");
    }
    assert_eq!(cluster.key_rows().await, 0);
    assert_eq!(cluster.live_pastes().await, 0);
}

#[tokio::test]
async fn same_key_with_another_request_is_a_conflict_and_creates_nothing() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let key = new_key();
    let first = create(&cluster.http, Some(&key), "original").await.unwrap();
    assert_eq!(first.status, StatusCode::CREATED);
    let other = create(&cluster.http, Some(&key), "something else").await.unwrap();
    assert_eq!(other.status, StatusCode::CONFLICT);
    assert_eq!(other.json()["error"]["code"], "idempotency_key_conflict");
    assert!(!other.body.contains(first.json()["delete_token"].as_str().unwrap()));
    assert_eq!(cluster.live_pastes().await, 1);
    assert_eq!(cluster.key_rows().await, 1);
    // The original is untouched and still replays.
    assert_eq!(create(&cluster.http, Some(&key), "original").await.unwrap().body, first.body);
}

#[tokio::test]
async fn sixty_four_concurrent_creates_with_one_key_make_one_paste() {
    // Every attempt is admitted: this is contention on one key, not load
    // shedding (shedding.rs) nor one address's fair share (edge.rs), so the
    // shedding limit and the per-client caps are above the 64. And every
    // attempt may take as long as a saturated machine needs: the budget is
    // the test's own, not the 2 s a deployment answers within.
    let budget = Duration::from_secs(120);
    let cluster = Cluster::start(ClusterOptions { env: contention_env(budget), ..ClusterOptions::default() }).await;
    let key = new_key();
    let attempts = (0..64).map(|_| create_within(&cluster.http, Some(&key), "contended", budget));
    let answers = futures::future::join_all(attempts).await;
    let bodies: Vec<String> = answers
        .into_iter()
        .map(|a| {
            let a = a.unwrap();
            assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);
            a.body
        })
        .collect();
    assert!(bodies.iter().all(|b| b == &bodies[0]), "all 64 answers are the same paste");
    assert_eq!(cluster.live_pastes().await, 1);
}

/// Creates with `failpoint` armed so the gateway process dies there, restarts
/// it clean, retries with the same key, and checks exactly one live paste
/// exists — the one whose id the first attempt stored, when it got that far.
async fn crash_then_retry(failpoint: &str) {
    let mut cluster =
        Cluster::start(ClusterOptions { failpoints: Some(failpoint.to_owned()), ..Default::default() }).await;
    let key = new_key();
    let crashed = create(&cluster.http, Some(&key), "survives crashes").await;
    assert!(crashed.is_err(), "{failpoint}: the gateway died instead of answering");
    let status = cluster.gateway.wait_exit(Duration::from_secs(10)).await;
    assert!(status.is_some_and(|s| !s.success()), "{failpoint}: the gateway process ended abnormally");

    let parsed_key = IdempotencyKey::parse(&key).unwrap();
    let stored = cluster.key_client(0).get(&parsed_key).await.unwrap().expect("K begin committed before the crash");
    let expected_state = if failpoint == "after_done" { KeyState::Done } else { KeyState::Pending };
    assert_eq!(stored.state, expected_state, "{failpoint}");

    cluster.restart_gateway("").await;
    let retry = create(&cluster.http, Some(&key), "survives crashes").await.unwrap();
    assert_eq!(retry.status, StatusCode::CREATED, "{failpoint}: {}", retry.body);
    assert_eq!(retry.json()["id"], stored.paste_id.to_string(), "{failpoint}: the retry finished the stored saga");
    assert_eq!(cluster.live_pastes().await, 1, "{failpoint}");
    let read = get(&cluster.http, stored.paste_id.as_str()).await;
    assert_eq!(read.json()["content"], "survives crashes");
    let done = cluster.key_client(0).get(&parsed_key).await.unwrap().unwrap();
    assert_eq!(done.state, KeyState::Done);
}

#[tokio::test]
async fn crash_after_k_begin() {
    crash_then_retry("after_k_begin").await;
}

#[tokio::test]
async fn crash_after_put() {
    crash_then_retry("after_put").await;
}

#[tokio::test]
async fn crash_after_p_insert() {
    crash_then_retry("after_p_insert").await;
}

#[tokio::test]
async fn crash_before_done() {
    crash_then_retry("before_done").await;
}

#[tokio::test]
async fn crash_after_done_before_the_answer() {
    crash_then_retry("after_done").await;
}

#[tokio::test]
async fn paste_service_down_leaves_the_key_pending_then_the_retry_finishes_it() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    cluster.pastes[0].kill().await;
    let key = new_key();
    let down = create(&cluster.http, Some(&key), "waiting for P").await.unwrap();
    assert_eq!(down.status, StatusCode::SERVICE_UNAVAILABLE, "{}", down.body);
    assert_eq!(down.headers["retry-after"], "1");
    assert_eq!(down.json()["error"]["code"], "unavailable");
    let parsed_key = IdempotencyKey::parse(&key).unwrap();
    let pending = cluster.key_client(0).get(&parsed_key).await.unwrap().unwrap();
    assert_eq!(pending.state, KeyState::Pending, "never abort what cannot be seen");

    cluster.pastes[0].restart(&[], &["paste-service"]).await;
    let retry = create(&cluster.http, Some(&key), "waiting for P").await.unwrap();
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.body);
    assert_eq!(retry.json()["id"], pending.paste_id.to_string());
    assert_eq!(cluster.live_pastes().await, 1);
}

#[tokio::test]
async fn object_store_down_answers_503_and_creates_no_paste() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", dead.local_addr().unwrap());
    drop(dead);
    let cluster = Cluster::start(ClusterOptions { s3_endpoint: Some(endpoint), ..Default::default() }).await;
    let key = new_key();
    let answer = create(&cluster.http, Some(&key), "no bucket").await.unwrap();
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{}", answer.body);
    assert_eq!(answer.headers["retry-after"], "1");
    assert_eq!(cluster.live_pastes().await, 0);
    // An unreachable store is uncertain, not a refusal: the key waits for a retry or the sweeper.
    let stored = cluster.key_client(0).get(&IdempotencyKey::parse(&key).unwrap()).await.unwrap().unwrap();
    assert_eq!(stored.state, KeyState::Pending);
}

#[tokio::test]
async fn the_gateway_exports_create_outcomes_and_step_durations() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let key = new_key();
    create(&cluster.http, Some(&key), "measured").await.unwrap();
    create(&cluster.http, Some(&key), "measured").await.unwrap();
    create(&cluster.http, Some(&key), "a conflict").await.unwrap();
    let metrics = Client::new().get(format!("{}/metrics", cluster.gateway_admin())).send().await.unwrap();
    let text = metrics.text().await.unwrap();
    for expected in [
        "pastebin_creates_total{outcome=\"created\"} 1",
        "pastebin_creates_total{outcome=\"replayed\"} 1",
        "pastebin_creates_total{outcome=\"conflict\"} 1",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    for step in ["k_begin", "put", "p_insert", "k_done", "create"] {
        let bucket = format!("pastebin_saga_step_duration_seconds_bucket{{step=\"{step}\",le=\"2\"}}");
        assert!(text.contains(&bucket), "missing {bucket:?}");
    }
}
