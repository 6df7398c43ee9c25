//! No id is shown to a client before K's done committed
//! (docs/design.md#saga, step 6). The paste row is in, then K goes away
//! before the done: the answer is 503, never a 201 naming a key that is
//! still pending; the retry, with K back, finishes the same paste.

use std::time::Duration;

use pastebin_core::{IdempotencyKey, KeyState};
use pastebin_tests::{
    api::{create, new_key},
    cluster::{Cluster, ClusterOptions},
};
use reqwest::StatusCode;

const CONTENT: &str = "shown only once done";

#[tokio::test]
async fn a_create_whose_done_fails_answers_503_and_its_retry_finishes_the_same_paste() {
    let mut cluster =
        Cluster::start(ClusterOptions { failpoints: Some("before_done=sleep:1200".into()), ..Default::default() })
            .await;
    let key = new_key();
    let held = tokio::spawn({
        let (http, key) = (cluster.http.clone(), key.clone());
        async move { create(&http, Some(&key), CONTENT).await.unwrap() }
    });
    // Wait until the paste row is in: the gateway is now held before done.
    let (keys, pastes) = (cluster.key_client(0), cluster.paste_client(0));
    let parsed_key = IdempotencyKey::parse(&key).unwrap();
    let paste_id = loop {
        if let Some(record) = keys.get(&parsed_key).await.unwrap() {
            if pastes.get(&record.paste_id).await.unwrap().is_some() {
                break record.paste_id;
            }
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    cluster.keys[0].kill().await;

    let held = held.await.unwrap();
    assert_eq!(held.status, StatusCode::SERVICE_UNAVAILABLE, "no 201 before done committed: {}", held.body);
    assert!(!held.body.contains(paste_id.as_str()), "the id is not shown");

    cluster.keys[0].restart(&[], &["key-service"]).await;
    let stored = cluster.key_client(0).get(&parsed_key).await.unwrap().unwrap();
    assert_eq!((stored.state, &stored.paste_id), (KeyState::Pending, &paste_id), "done never committed");
    let retry = create(&cluster.http, Some(&key), CONTENT).await.unwrap();
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.body);
    assert_eq!(retry.json()["id"], paste_id.to_string(), "the retry finished the same paste");
    assert_eq!(cluster.live_pastes().await, 1);
}
