//! The paste client against the real services: K and P on PostgreSQL, the
//! gateway on SeaweedFS S3, all real processes. What is checked is what a user
//! would see: one paste per save on the server, whatever was lost or crashed
//! on the way, and a journal that tells the truth about it.

use std::{
    os::unix::fs::PermissionsExt,
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use pastebin_client::{
    Choices, Client, DeleteError, Deleted, How, IntentState, PasteError, Resuming, RetryPolicy, Save, Subject,
};
use pastebin_core::{IdempotencyKey, KeyState};
use pastebin_tests::{
    api::get,
    cluster::{Cluster, ClusterOptions},
};
use reqwest::StatusCode;

/// Fast retries, so a test that waits for "left pending" does not wait long.
fn retries(attempts: u32) -> RetryPolicy {
    RetryPolicy {
        attempts,
        base_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(200),
        max_retry_after: Duration::from_secs(2),
    }
}

/// A client on `server` journaling in `state_dir`; its notices are collected.
fn client(server: &str, state_dir: &Path, attempts: u32) -> (Client, Arc<Mutex<Vec<String>>>) {
    let notices = Arc::new(Mutex::new(Vec::new()));
    let sink = notices.clone();
    let client = Client::new(server, state_dir)
        .unwrap()
        .with_timeout(Duration::from_secs(10))
        .unwrap()
        .with_retry(retries(attempts))
        .on_notice(move |notice| sink.lock().unwrap().push(notice.to_string()));
    (client, notices)
}

fn save(subject: &str, content: &str) -> Save {
    Save {
        subject: Subject::named(subject),
        content: content.into(),
        choices: Choices::default(),
        expires_in_seconds: Some(86_400),
        force_new: false,
        seal: None,
    }
}

fn pending_key(error: &PasteError) -> String {
    match error {
        PasteError::LeftPending { key, .. } => key.clone(),
        other => panic!("expected the save to be left pending, got {other}"),
    }
}

#[tokio::test]
async fn an_answer_lost_after_the_server_committed_is_adopted_by_the_next_run() {
    let mut cluster =
        Cluster::start(ClusterOptions { failpoints: Some("after_done".into()), ..Default::default() }).await;
    let state = tempfile::tempdir().unwrap();
    let (client, _) = client(&cluster.http, state.path(), 1);

    // The gateway commits the whole saga, then dies before answering.
    let lost = client.paste(save("notes.txt", "the answer is lost")).await.unwrap_err();
    let key = pending_key(&lost);
    assert!(cluster.gateway.wait_exit(Duration::from_secs(10)).await.is_some(), "the failpoint crashed the gateway");
    let stored = cluster.key_client(0).get(&IdempotencyKey::parse(&key).unwrap()).await.unwrap().unwrap();
    assert_eq!(stored.state, KeyState::Done, "the server did create the paste");
    let record = client.journal().read(&key).unwrap();
    assert!(record.is_pending(), "the client keeps the intent: {record:?}");

    cluster.restart_gateway("").await;
    let (client, _) = self::client(&cluster.http, state.path(), 3);
    let adopted = client.paste(save("notes.txt", "the answer is lost")).await.unwrap();
    assert_eq!(adopted.how, How::Adopted { replayed: true });
    assert_eq!(adopted.key.canonical(), key, "the same key was sent again");
    assert_eq!(adopted.answer.id, stored.paste_id.to_string(), "the paste the lost call made");
    assert_eq!(cluster.live_pastes().await, 1);
    assert_eq!(cluster.key_rows().await, 1);

    let again = client.paste(save("notes.txt", "the answer is lost")).await.unwrap();
    assert_eq!(again.how, How::AlreadyPasted);
    assert_eq!(again.answer.url, adopted.answer.url);
    assert_eq!(cluster.live_pastes().await, 1);
    let read = get(&cluster.http, &adopted.answer.id).await;
    assert_eq!(read.json()["content"], "the answer is lost");
}

#[tokio::test]
async fn two_runs_on_one_subject_at_once_make_one_paste() {
    // Hold every saga for a while, so the second run starts while the first
    // is in flight: without the subject lock each would mint its own key.
    let cluster =
        Cluster::start(ClusterOptions { failpoints: Some("after_k_begin=sleep:1500".into()), ..Default::default() })
            .await;
    let state = tempfile::tempdir().unwrap();
    let (one, one_notices) = client(&cluster.http, state.path(), 3);
    let (two, two_notices) = client(&cluster.http, state.path(), 3);

    let first = tokio::spawn(async move { one.paste(save("shared", "raced")).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = tokio::spawn(async move { two.paste(save("shared", "raced")).await });
    let (first, second) = (first.await.unwrap().unwrap(), second.await.unwrap().unwrap());

    assert_eq!(first.answer.id, second.answer.id);
    let mut hows = [first.how, second.how];
    hows.sort_by_key(|how| format!("{how:?}"));
    assert_eq!(hows, [How::AlreadyPasted, How::Created]);
    let waited =
        one_notices.lock().unwrap().iter().chain(two_notices.lock().unwrap().iter()).any(|n| n.contains("waiting"));
    assert!(waited, "the runs overlapped and one waited for the other");
    assert_eq!(cluster.live_pastes().await, 1);
    assert_eq!(cluster.key_rows().await, 1);
}

#[tokio::test]
async fn paste_service_down_keeps_the_intent_and_resume_finishes_it_with_the_same_key() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    cluster.pastes[0].kill().await;
    let state = tempfile::tempdir().unwrap();
    let (client, notices) = client(&cluster.http, state.path(), 2);

    let started = Instant::now();
    let down = client.paste(save("report.txt", "waiting for P")).await.unwrap_err();
    let key = pending_key(&down);
    assert!(started.elapsed() >= Duration::from_secs(1), "the 503's Retry-After: 1 was honoured");
    assert!(notices.lock().unwrap().iter().any(|n| n.contains("retrying the same key")));
    let record = client.journal().read(&key).unwrap();
    match &record.state {
        IntentState::Pending { last_error, .. } => {
            assert!(last_error.as_deref().unwrap_or_default().contains("503"), "{last_error:?}")
        }
        other => panic!("expected pending, got {other:?}"),
    }
    assert_eq!(record.attempts, 2);
    let on_k = cluster.key_client(0).get(&IdempotencyKey::parse(&key).unwrap()).await.unwrap().unwrap();
    assert_eq!(on_k.state, KeyState::Pending);

    cluster.pastes[0].restart(&[], &["paste-service"]).await;
    let resumed = client.resume(Resuming::EveryServer).await.unwrap();
    assert!(resumed.failed.is_empty(), "{:?}", resumed.failed);
    assert_eq!(resumed.finished.len(), 1);
    let finished = &resumed.finished[0];
    assert_eq!(finished.key.canonical(), key);
    assert_eq!(finished.answer.id, on_k.paste_id.to_string(), "the id K recorded before P went down");
    assert!(matches!(finished.how, How::Adopted { .. }));
    assert_eq!(cluster.live_pastes().await, 1);
    assert!(client.journal().read(&key).unwrap().answer().is_some());

    // Nothing left to resume; the same save again is the stored answer.
    assert!(client.resume(Resuming::EveryServer).await.unwrap().finished.is_empty());
    let again = client.paste(save("report.txt", "waiting for P")).await.unwrap();
    assert_eq!(again.how, How::AlreadyPasted);
    assert_eq!(cluster.live_pastes().await, 1);
}

/// A gateway that is down refuses the connection: the create never left this
/// machine, so nothing is kept pending (crates/client/README.md, "What never
/// left is not kept"), and the same paste once the gateway is back makes
/// exactly one paste. (A send that did leave stays pending: the tests above.)
#[tokio::test]
async fn a_gateway_that_is_down_keeps_nothing_pending_and_the_same_paste_later_makes_one() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    cluster.gateway.kill().await;
    let state = tempfile::tempdir().unwrap();
    let (client, _) = client(&cluster.http, state.path(), 2);

    let down = client.paste(save("draft", "nobody home")).await.unwrap_err();
    assert!(matches!(down, PasteError::NotSent { .. }), "{down}");
    assert_eq!(cluster.key_rows().await, 0, "nothing reached the server");
    assert!(client.scan().unwrap().records.is_empty(), "nothing kept pending");
    assert!(client.resume(Resuming::EveryServer).await.unwrap().finished.is_empty());

    cluster.restart_gateway("").await;
    let back = client.paste(save("draft", "nobody home")).await.unwrap();
    assert_eq!(back.how, How::Created);
    let again = client.paste(save("draft", "nobody home")).await.unwrap();
    assert_eq!((again.how, again.answer.id.as_str()), (How::AlreadyPasted, back.answer.id.as_str()));
    assert_eq!(cluster.live_pastes().await, 1);
    assert_eq!(cluster.key_rows().await, 1);
    assert_eq!(get(&cluster.http, &back.answer.id).await.json()["content"], "nobody home");
}

#[tokio::test]
async fn a_corrupt_journal_record_is_reported_by_path_and_the_rest_keeps_working() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let state = tempfile::tempdir().unwrap();
    let (client, notices) = client(&cluster.http, state.path(), 3);
    let first = client.paste(save("a.txt", "first")).await.unwrap();
    let first_bytes = std::fs::read(&first.record).unwrap();

    let corrupt = client.journal().path_of(&IdempotencyKey::new_random().canonical());
    std::fs::write(&corrupt, r#"{"version": 1, "key": "tor"#).unwrap();

    let second = client.paste(save("b.txt", "second")).await.unwrap();
    assert_eq!(second.how, How::Created);
    let reported = notices.lock().unwrap().clone();
    assert!(
        reported.iter().any(|n| n.contains(&corrupt.display().to_string()) && n.contains("corrupt")),
        "the message names the file: {reported:?}"
    );
    let again = client.paste(save("a.txt", "first")).await.unwrap();
    assert_eq!(again.how, How::AlreadyPasted);
    assert_eq!(again.answer.url, first.answer.url);

    let scan = client.scan().unwrap();
    assert_eq!(scan.records.len(), 2);
    assert_eq!(scan.problems.len(), 1);
    assert_eq!(scan.problems[0].path, corrupt);
    assert!(corrupt.exists(), "the corrupt record is left for a person to look at");
    assert_eq!(std::fs::read(&first.record).unwrap(), first_bytes, "other records are untouched");
    assert_eq!(cluster.live_pastes().await, 2);
}

#[tokio::test]
async fn delete_uses_the_stored_token_which_only_the_user_can_read() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let state = tempfile::tempdir().unwrap();
    let (client, _) = client(&cluster.http, state.path(), 3);
    let pasted = client.paste(save("secret.txt", "delete me")).await.unwrap();

    let mode = std::fs::metadata(&pasted.record).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the record holds the delete token");
    let stored = std::fs::read_to_string(&pasted.record).unwrap();
    assert!(stored.contains(&pasted.answer.delete_token));
    let dir_mode = std::fs::metadata(client.journal().intents_dir()).unwrap().permissions().mode() & 0o777;
    assert_eq!(dir_mode, 0o700, "and so does its directory");

    assert_eq!(client.delete(&pasted.answer.id).await.unwrap(), Deleted::Deleted);
    assert_eq!(get(&cluster.http, &pasted.answer.id).await.status, StatusCode::NOT_FOUND);
    assert_eq!(cluster.live_pastes().await, 0);
    assert!(matches!(client.delete(&pasted.answer.id).await, Err(DeleteError::Unknown { .. })));

    // The deleted paste is not handed out again: the same save is a new paste.
    let again = client.paste(save("secret.txt", "delete me")).await.unwrap();
    assert_eq!(again.how, How::Created);
    assert_ne!(again.answer.id, pasted.answer.id);
    assert_eq!(cluster.live_pastes().await, 1);
}

#[tokio::test]
async fn over_grpc_an_unavailable_create_is_adopted_by_the_next_run() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let grpc = cluster.grpc.replacen("http://", "grpc://", 1);
    cluster.pastes[0].kill().await;
    let state = tempfile::tempdir().unwrap();
    let (client, _) = client(&grpc, state.path(), 1);

    let down = client.paste(save("g.txt", "over gRPC")).await.unwrap_err();
    let key = pending_key(&down);
    let on_k = cluster.key_client(0).get(&IdempotencyKey::parse(&key).unwrap()).await.unwrap().unwrap();

    cluster.pastes[0].restart(&[], &["paste-service"]).await;
    let back = client.paste(save("g.txt", "over gRPC")).await.unwrap();
    assert_eq!(back.key.canonical(), key);
    assert_eq!(back.answer.id, on_k.paste_id.to_string());
    assert_eq!(cluster.live_pastes().await, 1);
    let again = client.paste(save("g.txt", "over gRPC")).await.unwrap();
    assert_eq!(again.how, How::AlreadyPasted);

    assert_eq!(client.delete(&back.answer.id).await.unwrap(), Deleted::Deleted);
    assert_eq!(cluster.live_pastes().await, 0);
}

#[tokio::test]
async fn a_refused_paste_is_not_left_pending() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let too_large = "x".repeat(1024 * 1024 + 1);
    // Over gRPC the server publishes no limits: it refuses, and the record is marked refused.
    let state = tempfile::tempdir().unwrap();
    let (over_grpc, _) = client(&cluster.grpc.replacen("http://", "grpc://", 1), state.path(), 3);
    let refused = over_grpc.paste(save("big.log", &too_large)).await.unwrap_err();
    let PasteError::Refused { key, failure, .. } = &refused else { panic!("expected a refusal, got {refused}") };
    assert!(failure.to_string().contains("content exceeds the limit"), "{failure}");
    assert!(matches!(over_grpc.journal().read(key).unwrap().state, IntentState::Rejected { .. }));
    assert!(over_grpc.resume(Resuming::EveryServer).await.unwrap().finished.is_empty(), "nothing pending to resume");
    // Over HTTP the client reads the published limits and refuses before it
    // journals or sends anything, in the server's words.
    let state = tempfile::tempdir().unwrap();
    let (over_http, _) = client(&cluster.http, state.path(), 3);
    let refused = over_http.paste(save("big.log", &too_large)).await.unwrap_err();
    assert!(matches!(refused, PasteError::OverLimit(_)), "{refused}");
    assert_eq!(refused.to_string(), "content exceeds the limit of 1048576 bytes");
    assert!(over_http.scan().unwrap().records.is_empty(), "nothing journaled");
    assert_eq!(cluster.key_rows().await, 0);
}
