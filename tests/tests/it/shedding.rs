//! Load shedding (docs/design.md#edge): past `--creates-in-flight-per-shard`
//! a create is refused at once with 503 + `Retry-After`, not queued behind
//! the creates already in flight, and nothing is written for it.

use std::time::Duration;

use pastebin_core::IdempotencyKey;
use pastebin_keys::KeyClient;
use pastebin_tests::{
    api::{create, new_key},
    cluster::Process,
};
use reqwest::{header, StatusCode};

/// What the failpoint logs while it holds a saga (crates/runtime/src/failpoints.rs).
const HOLDING: &str = "failpoint: holding the saga";

fn up_args(data: &std::path::Path) -> Vec<String> {
    let mut args: Vec<String> = ["up", "--data-dir", data.to_str().expect("UTF-8 temp dir")].map(String::from).to_vec();
    for flag in ["--http", "--grpc", "--admin"] {
        args.extend([flag.to_string(), "127.0.0.1:0".to_string()]);
    }
    args.extend(["--creates-in-flight-per-shard".to_string(), "1".to_string()]);
    args
}

/// Waits until the process logged that a saga is held at its failpoint.
async fn until_held(up: &Process) {
    for _ in 0..1000 {
        if up.logs().contains(HOLDING) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no saga was held; the log:\n{}", up.logs());
}

/// One create is held right after K's begin (its place on the only K shard
/// taken); a second create on that shard is answered 503 + `Retry-After`
/// while the first is still held: refused, not queued. Once the first has
/// finished, the shard takes creates again and the refused key was never
/// recorded on K; its retry creates the paste.
#[tokio::test]
async fn a_create_past_the_shard_limit_is_refused_at_once_while_the_first_is_held() {
    let data = tempfile::tempdir().expect("temp dir");
    let hold = vec![("PASTEBIN_FAILPOINTS".to_owned(), "after_k_begin=sleep:1500".to_owned())];
    let up = Process::start(up_args(data.path()), hold, &["gateway-http", "key-service"]).await;
    let http = format!("http://{}", up.address("gateway-http"));

    let held = tokio::spawn({
        let http = http.clone();
        async move { create(&http, Some(&new_key()), "held in its saga").await.expect("the held create is answered") }
    });
    until_held(&up).await;

    let refused_key = new_key();
    let refused = create(&http, Some(&refused_key), "one too many").await.expect("the gateway answers");
    assert!(!held.is_finished(), "the refusal came while the first create was still held");
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "{}", refused.body);
    let retry_after = refused.headers.get(header::RETRY_AFTER).expect("a shed create says when to retry");
    assert!(retry_after.to_str().unwrap().parse::<u64>().is_ok_and(|s| s >= 1), "{retry_after:?}");
    assert_eq!(refused.json()["error"]["code"], "unavailable", "{}", refused.body);

    assert!(refused.json()["error"]["message"].as_str().unwrap().contains("in flight"), "{}", refused.body);
    let keys = KeyClient::new(pastebin_shards::channel(up.address("key-service"), None).unwrap());
    let refused_key = IdempotencyKey::parse(&refused_key).unwrap();
    assert!(keys.get(&refused_key).await.unwrap().is_none(), "nothing was written for the refused create");

    let first = held.await.expect("the held create's task");
    assert_eq!(first.status, StatusCode::CREATED, "the held create finishes: {}", first.body);
    // The place is free again (this create is held too, but alone).
    let retried = create(&http, Some(&refused_key.canonical()), "one too many").await.expect("the gateway answers");
    assert_eq!(retried.status, StatusCode::CREATED, "{}", retried.body);
}
