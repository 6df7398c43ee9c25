//! Two attempts of one key overlapping on two gateways: the race the saga's
//! own fence exists for (docs/design.md#fence). The model finds it
//! (crates/model, `Flaw::SagaAbortsWithoutFence`); before this test, a
//! mutant of `Saga::abort` that skipped the fence survived the whole suite.
//!
//! Attempt A, on the first gateway, begins the key and is held after its
//! PUT. Attempt B, on a second gateway whose bucket does not exist (so its
//! PUT is definitely refused), finds the key pending and compensates. Then
//! A's P insert goes on. With the fence, B's abort tombstoned the id first:
//! A's insert is refused and the client's retry restarts the key, one paste
//! in all. Without it, B aborts the key under A's landing insert and the
//! retry mints a second paste.

use std::time::Duration;

use pastebin_core::{IdempotencyKey, KeyState, PasteId};
use pastebin_objects::S3Settings;
use pastebin_tests::{
    api::{create, new_key},
    cluster::{Cluster, ClusterOptions},
};
use reqwest::StatusCode;

const CONTENT: &str = "two attempts, one paste";

/// Waits until the key is pending on K (attempt A has begun it) and returns its id.
async fn begun(cluster: &Cluster, key: &str) -> PasteId {
    let keys = cluster.key_client(0);
    let key = IdempotencyKey::parse(key).unwrap();
    loop {
        if let Some(record) = keys.get(&key).await.unwrap() {
            assert_eq!(record.state, KeyState::Pending);
            return record.paste_id;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn an_attempt_that_aborts_while_another_inserts_never_leads_to_a_second_paste() {
    let cluster =
        Cluster::start(ClusterOptions { failpoints: Some("after_put=sleep:1200".into()), ..Default::default() }).await;
    let refusing_bucket = S3Settings { bucket: "no-such-bucket".into(), ..cluster.s3.clone() };
    let refusing = cluster.another_gateway(&refusing_bucket, "").await;
    let refusing_http = format!("http://{}", refusing.address("gateway-http"));
    let key = new_key();

    let held = tokio::spawn({
        let (http, key) = (cluster.http.clone(), key.clone());
        async move { create(&http, Some(&key), CONTENT).await.unwrap() }
    });
    let first_id = begun(&cluster, &key).await;
    let refused = create(&refusing_http, Some(&key), CONTENT).await.unwrap();
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "B's PUT is refused: {}", refused.body);
    let held = held.await.unwrap();
    assert_eq!(held.status, StatusCode::SERVICE_UNAVAILABLE, "A's attempt was aborted under it: {}", held.body);
    assert!(
        !held.body.contains("did not answer"),
        "A's insert must reach P after B's abort for this test to mean anything: {}",
        held.body
    );

    let retry = create(&cluster.http, Some(&key), CONTENT).await.unwrap();
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.body);
    assert_ne!(retry.json()["id"], first_id.to_string(), "the retry restarted the aborted key");
    assert_eq!(cluster.live_pastes().await, 1, "one key, one paste: the aborted id never went live");
    let pastes = cluster.paste_client(0);
    assert!(pastes.get(&first_id).await.unwrap().is_none(), "the aborted attempt's id is dead on P");
}
