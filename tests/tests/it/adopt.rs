//! Adopting instead of duplicating after a K loss
//! (docs/design.md#adopting-after-a-k-loss), on real processes: K forgets a
//! key it answered 201 for (its row deleted, as a failover to a stale
//! standby loses it), and a K shard started with
//! `--may-have-lost-commits-since` makes the retry find and adopt the paste
//! instead of minting a second one, under a new delete token. Another
//! request under the lost key is a 409; a paste deleted since is answered
//! as the deleted paste; a P shard that cannot be searched makes the create
//! 503 before anything is put; without the flag nothing is searched; and the
//! mode shows in `Describe`, `ctl stats`, `/readyz` and the log.

use std::time::Duration;

use pastebin_core::{IdempotencyKey, KeyState, ManualClock};
use pastebin_tests::{
    api::{self, Answer},
    cluster::{execute, run_to_exit, Cluster, ClusterOptions, Process},
    postgres::fresh_database_url,
};
use reqwest::{header, StatusCode};

use crate::{
    operators::ctl,
    reshard::{ctl_reshard, move_args},
};

/// A time inside the search-first window: an hour ago.
fn an_hour_ago() -> String {
    (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339()
}

/// One K shard and `paste_shards` P shards; K in the search-first mode when `search_first`.
async fn start(paste_shards: usize, search_first: bool) -> Cluster {
    let env = if search_first { in_the_mode() } else { Vec::new() };
    Cluster::start(ClusterOptions { paste_shards, env, ..Default::default() }).await
}

fn in_the_mode() -> Vec<(String, String)> {
    vec![("PASTEBIN_MAY_HAVE_LOST_COMMITS_SINCE".to_owned(), an_hour_ago())]
}

/// A fresh key whose slot the P shard `index` of two owns (0: slots 0 to 127, 1: 128 to 255).
pub(crate) fn key_on_paste_shard(index: u8) -> String {
    loop {
        let key = api::new_key();
        if IdempotencyKey::parse(&key).unwrap().slot().0 / 128 == index {
            return key;
        }
    }
}

/// K loses the key's record, as a failover to a standby that had not received it does.
async fn k_loses(cluster: &Cluster, key: &str) {
    let deleted = execute(&cluster.key_database_urls[0], "DELETE FROM idempotency_keys WHERE key = $1", key).await;
    assert_eq!(deleted, 1, "the key was on K");
}

async fn created(http: &str, key: &str, content: &str) -> Answer {
    let answer = api::create(http, Some(key), content).await.expect("the gateway answers");
    assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    answer
}

fn field(answer: &Answer, name: &str) -> String {
    answer.json()[name].as_str().unwrap_or_else(|| panic!("no {name} in {}", answer.body)).to_owned()
}

async fn delete(cluster: &Cluster, id: &str, token: &str) -> StatusCode {
    let request = reqwest::Client::new()
        .delete(format!("{}/api/v1/pastes/{id}", cluster.http))
        .header(header::AUTHORIZATION, format!("Bearer {token}"));
    request.send().await.expect("the gateway answers").status()
}

#[tokio::test]
async fn a_retry_of_a_key_k_lost_adopts_its_paste_under_a_new_token() {
    let cluster = start(2, true).await;
    let lost = cluster.key_client(0).lost_commits().await.expect("K describes itself");
    assert!(lost.is_some_and(|lost| lost.search_first(chrono::Utc::now())), "K says it searches first");
    let (_, stats, _) = ctl(&cluster, &["stats"]).await;
    let searching = format!("search first: {} may have lost commits since", cluster.key_addresses[0]);
    assert!(stats.contains(&searching), "operators see the mode: {stats}");
    let fresh = created(&cluster.http, &api::new_key(), "a key K never lost").await;
    assert!(fresh.json().get("adopted").is_none(), "a paste that was not adopted does not say so: {}", fresh.body);

    let key = api::new_key();
    let first = created(&cluster.http, &key, "made before K lost its key").await;
    k_loses(&cluster, &key).await;
    let retry = created(&cluster.http, &key, "made before K lost its key").await;
    assert_eq!(field(&retry, "id"), field(&first, "id"), "the retry names the paste its first create made");
    assert_eq!(retry.json()["adopted"], true, "{}", retry.body);
    assert_eq!(retry.headers.get("paste-adopted").map(|v| v.to_str().unwrap()), Some("true"));
    assert!(
        retry.headers.get("idempotent-replayed").is_none(),
        "the adopting answer is not byte-identical to the first"
    );
    assert_ne!(field(&retry, "delete_token"), field(&first, "delete_token"), "the lost 201's token is not shown again");
    assert_eq!(cluster.live_pastes().await, 2, "no second paste for the lost key");
    let metrics = reqwest::get(format!("{}/metrics", cluster.gateway_admin())).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("pastebin_creates_total{outcome=\"adopted\"} 1"), "the adoption is counted: {metrics}");

    let replay = created(&cluster.http, &key, "made before K lost its key").await;
    assert_eq!(replay.body, retry.body, "later retries replay the adopted answer byte for byte");
    assert_eq!(replay.headers.get("idempotent-replayed").map(|v| v.to_str().unwrap()), Some("true"));
    let id = field(&first, "id");
    assert_eq!(delete(&cluster, &id, &field(&first, "delete_token")).await, StatusCode::FORBIDDEN, "the old token");
    assert_eq!(delete(&cluster, &id, &field(&retry, "delete_token")).await, StatusCode::NO_CONTENT, "the new token");
}

#[tokio::test]
async fn a_lost_key_sent_with_another_request_is_a_conflict_and_its_paste_stays_the_keys() {
    let cluster = start(1, true).await;
    let key = api::new_key();
    let first = created(&cluster.http, &key, "the first request").await;
    k_loses(&cluster, &key).await;
    let other = api::create(&cluster.http, Some(&key), "another request").await.expect("the gateway answers");
    assert_eq!(other.status, StatusCode::CONFLICT, "as for any key reused for another request: {}", other.body);
    let retry = created(&cluster.http, &key, "the first request").await;
    assert_eq!(field(&retry, "id"), field(&first, "id"), "the key still names its first paste");
    assert_eq!(retry.json()["adopted"], true);
    assert_eq!(cluster.live_pastes().await, 1, "the conflicting request made nothing");
}

#[tokio::test]
async fn a_lost_key_whose_paste_was_deleted_answers_the_deleted_paste_and_mints_none() {
    let cluster = start(1, true).await;
    let key = api::new_key();
    let first = created(&cluster.http, &key, "deleted before K lost its key").await;
    let id = field(&first, "id");
    assert_eq!(delete(&cluster, &id, &field(&first, "delete_token")).await, StatusCode::NO_CONTENT);
    k_loses(&cluster, &key).await;
    let retry = created(&cluster.http, &key, "deleted before K lost its key").await;
    assert_eq!(field(&retry, "id"), id, "the key answers as its first life would have");
    assert_eq!(retry.json()["adopted"], true);
    assert_eq!(api::get(&cluster.http, &id).await.status, StatusCode::NOT_FOUND, "and the paste stays deleted");
    assert_eq!(cluster.live_pastes().await, 0, "no new paste was minted");
}

#[tokio::test]
async fn a_paste_shard_that_cannot_be_searched_makes_the_create_503_before_anything_is_put() {
    let mut cluster = start(2, true).await;
    cluster.pastes[0].kill().await;
    let key = key_on_paste_shard(0);
    let answer = api::create(&cluster.http, Some(&key), "searched for").await.expect("the gateway answers");
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{}", answer.body);
    assert!(answer.headers.contains_key(header::RETRY_AFTER), "a 503 says when to retry");
    let parsed = IdempotencyKey::parse(&key).unwrap();
    let pending = cluster.key_client(0).get(&parsed).await.unwrap().expect("K began the key");
    let objects = cluster.object_store().await;
    assert!(objects.get(pending.paste_id.as_str()).await.unwrap().is_none(), "the search comes before the PUT");
    // Only the key's own shard is searched: a key of the other one creates at once.
    created(&cluster.http, &key_on_paste_shard(1), "not searched for on the dead shard").await;

    cluster.pastes[0].restart(&[], &["paste-service"]).await;
    let mut answer = api::create(&cluster.http, Some(&key), "searched for").await.expect("the gateway answers");
    for _ in 0..200 {
        if answer.status == StatusCode::CREATED {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        answer = api::create(&cluster.http, Some(&key), "searched for").await.expect("the gateway answers");
    }
    assert_eq!(answer.status, StatusCode::CREATED, "once the shard answers, the create goes on: {}", answer.body);
    assert!(answer.json().get("adopted").is_none(), "nothing was there to adopt");
    assert_eq!(field(&answer, "id"), pending.paste_id.to_string(), "the pending record is rolled forward");
}

#[tokio::test]
async fn a_key_shard_not_told_it_lost_commits_searches_nothing() {
    let cluster = start(2, false).await;
    assert_eq!(cluster.key_client(0).lost_commits().await.expect("K describes itself"), None);
    let key = api::new_key();
    let first = created(&cluster.http, &key, "made before K lost its key").await;
    k_loses(&cluster, &key).await;
    let retry = created(&cluster.http, &key, "made before K lost its key").await;
    assert_ne!(field(&retry, "id"), field(&first, "id"), "without the flag the retry mints a second paste");
    assert_eq!(cluster.live_pastes().await, 2);
}

#[tokio::test]
async fn retries_racing_on_a_lost_key_adopt_it_once_and_answer_alike() {
    let cluster = start(2, true).await;
    let key = api::new_key();
    let first = created(&cluster.http, &key, "raced for after K lost its key").await;
    k_loses(&cluster, &key).await;
    let retries = (0..4).map(|_| api::create(&cluster.http, Some(&key), "raced for after K lost its key"));
    let answers = futures::future::join_all(retries).await;
    let bodies: std::collections::HashSet<String> = answers
        .into_iter()
        .map(|answer| answer.expect("the gateway answers"))
        .filter(|answer| answer.status == StatusCode::CREATED)
        .map(|answer| answer.body)
        .collect();
    // A loser of K's unique key may answer 503 (retry); every 201 is the one adopted answer.
    assert!(bodies.len() <= 1, "racing retries answered different bodies: {bodies:?}");
    let replay = created(&cluster.http, &key, "raced for after K lost its key").await;
    if let Some(body) = bodies.iter().next() {
        assert_eq!(&replay.body, body, "the race's answer is the key's answer");
    }
    assert_eq!(field(&replay, "id"), field(&first, "id"));
    assert_eq!(replay.json()["adopted"], true);
    assert_eq!(cluster.live_pastes().await, 1, "one paste for the key");
    assert_eq!(delete(&cluster, &field(&first, "id"), &field(&replay, "delete_token")).await, StatusCode::NO_CONTENT);
}

/// A K shard on a fresh database with its admin listener, in the mode since `since`.
async fn key_shard_that_may_have_lost_commits_since(since: &str) -> Process {
    let database_url = fresh_database_url().await;
    let args = ["key-service", "--database-url", &database_url, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"];
    let args = args.iter().map(|a| a.to_string()).chain(["--may-have-lost-commits-since".into(), since.into()]);
    Process::start(args.collect(), Vec::new(), &["key-service", "admin"]).await
}

async fn search_first_in_readyz(shard: &Process) -> serde_json::Value {
    let url = format!("http://{}/readyz", shard.address("admin"));
    let ready: serde_json::Value = reqwest::get(url).await.unwrap().json().await.unwrap();
    assert_eq!(ready["status"], "ready", "the mode is reported, never a reason to stop: {ready}");
    ready["search_first"].clone()
}

#[tokio::test]
async fn the_mode_is_shown_runs_a_day_past_the_start_and_refuses_a_time_it_cannot_read() {
    let started = chrono::Utc::now();
    let shard = key_shard_that_may_have_lost_commits_since("2026-12-01T10:00:00+01:00").await;
    let mode = search_first_in_readyz(&shard).await;
    assert_eq!(mode["may_have_lost_commits_since"], "2026-12-01T09:00:00Z", "{mode}");
    assert_eq!(mode["active"], true, "{mode}");
    assert!(shard.logs().contains("this key shard may have lost commits"), "{}", shard.logs());

    // A restore from a backup 27 h old: every key up to the restore may be
    // lost, so the search runs for a day and an hour from the shard's start.
    let backup = (chrono::Utc::now() - chrono::Duration::hours(27)).to_rfc3339();
    let shard = key_shard_that_may_have_lost_commits_since(&backup).await;
    let mode = search_first_in_readyz(&shard).await;
    assert_eq!(mode["active"], true, "{mode}");
    let until = chrono::DateTime::parse_from_rfc3339(mode["until"].as_str().unwrap()).unwrap();
    assert!(until >= started + chrono::Duration::hours(26) - chrono::Duration::seconds(1), "{mode}");

    let args = ["key-service", "--database-url", "sqlite::memory:", "--may-have-lost-commits-since", "yesterday"];
    let refused = run_to_exit(&args).await;
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("is not an RFC 3339 time such as 2026-12-01T10:00:00Z"), "{said}");
}

#[tokio::test]
async fn a_gateway_dead_between_the_new_token_and_the_adoption_leaves_what_the_sweeper_and_a_retry_finish() {
    let failpoints = Some("after_token_rotated".to_owned());
    let mut cluster = Cluster::start(ClusterOptions { env: in_the_mode(), failpoints, ..Default::default() }).await;
    let key = api::new_key();
    let first = created(&cluster.http, &key, "adopted across a crash").await;
    k_loses(&cluster, &key).await;
    let crashed = api::create(&cluster.http, Some(&key), "adopted across a crash").await;
    assert!(crashed.is_err(), "the gateway died between the token and the adoption");
    assert!(cluster.gateway.wait_exit(Duration::from_secs(10)).await.is_some_and(|status| !status.success()));
    let parsed = IdempotencyKey::parse(&key).unwrap();
    let pending = cluster.key_client(0).get(&parsed).await.unwrap().expect("the retry's begin committed");
    assert_eq!(pending.state, KeyState::Pending);
    assert_ne!(pending.paste_id.to_string(), field(&first, "id"), "K does not know the adoption");

    // A minute later the sweeper finds no row for the pending id: it fences it and aborts the key.
    cluster.age_pending_keys(Duration::from_secs(61)).await;
    let clock = ManualClock::starting_at(chrono::Utc::now());
    clock.advance(Duration::from_secs(61));
    let report = cluster.sweeper(clock).await.recover_stale().await;
    assert_eq!((report.aborted, report.marked_done), (1, 0), "{report:?}");

    cluster.restart_gateway("").await;
    let retry = created(&cluster.http, &key, "adopted across a crash").await;
    assert_eq!(field(&retry, "id"), field(&first, "id"), "the restarted key adopts the same paste");
    assert_eq!(retry.json()["adopted"], true);
    assert_eq!(cluster.live_pastes().await, 1);
    assert_eq!(delete(&cluster, &field(&first, "id"), &field(&retry, "delete_token")).await, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn over_grpc_the_adopted_answer_says_so() {
    use pastebin_proto::api::v1::{paste_api_client::PasteApiClient, CreatePasteRequest};
    let cluster = start(1, true).await;
    let mut api = PasteApiClient::connect(cluster.grpc.clone()).await.expect("connect to the gateway's gRPC");
    let key = api::new_key();
    let request = || CreatePasteRequest { request_id: key.clone(), content: "over gRPC".into(), ..Default::default() };
    let first = api.create_paste(request()).await.expect("create").into_inner();
    assert!(!first.adopted);
    k_loses(&cluster, &key).await;
    let retry = api.create_paste(request()).await.expect("the retry").into_inner();
    assert!(retry.adopted && !retry.replayed, "adopted, not a byte-identical replay");
    assert_eq!(retry.id, first.id);
    assert_ne!(retry.delete_token, first.delete_token);
    let replay = api.create_paste(request()).await.expect("the replay").into_inner();
    assert!(replay.adopted && replay.replayed);
    assert_eq!(replay.delete_token, retry.delete_token);
}

#[tokio::test]
async fn a_paste_made_longer_ago_than_the_key_retention_is_not_adopted() {
    let cluster = start(1, true).await;
    let key = api::new_key();
    let first = created(&cluster.http, &key, "made 26 hours ago").await;
    let aged = "UPDATE pastes SET created_at = created_at - 93600000 WHERE id = $1";
    assert_eq!(execute(&cluster.paste_database_urls[0], aged, &field(&first, "id")).await, 1);
    // As retention would have: the key is gone, by contract free for a new paste.
    k_loses(&cluster, &key).await;
    let again = created(&cluster.http, &key, "a new paste under a retired key").await;
    assert_ne!(field(&again, "id"), field(&first, "id"), "a retired key's reuse makes a new paste");
    assert!(again.json().get("adopted").is_none(), "{}", again.body);
    assert_eq!(cluster.live_pastes().await, 2);
}

#[tokio::test]
async fn pastebin_up_restored_with_an_older_key_database_adopts_too() {
    use sqlx::Connection;
    let data = tempfile::tempdir().expect("temp dir");
    let mut args: Vec<String> = ["up", "--data-dir", data.path().to_str().unwrap()].map(String::from).to_vec();
    for flag in ["--http", "--grpc", "--admin"] {
        args.extend([flag.to_owned(), "127.0.0.1:0".to_owned()]);
    }
    args.extend(["--may-have-lost-commits-since".to_owned(), an_hour_ago()]);
    let up = Process::start(args, Vec::new(), &["gateway-http", "admin"]).await;
    let http = format!("http://{}", up.address("gateway-http"));
    let key = api::new_key();
    let first = created(&http, &key, "restored").await;
    // As a restore of keys.db from before this create would leave it.
    let keys = format!("sqlite://{}", data.path().join("keys.db").display());
    let mut conn = sqlx::SqliteConnection::connect(&keys).await.expect("open keys.db");
    let deleted = sqlx::query("DELETE FROM idempotency_keys WHERE key = $1").bind(&key).execute(&mut conn).await;
    assert_eq!(deleted.expect("delete the key").rows_affected(), 1);
    drop(conn);

    let retry = created(&http, &key, "restored").await;
    assert_eq!(field(&retry, "id"), field(&first, "id"));
    assert_eq!(retry.json()["adopted"], true);
    let ready: serde_json::Value =
        reqwest::get(format!("http://{}/readyz", up.address("admin"))).await.unwrap().json().await.unwrap();
    assert_eq!(ready["search_first"]["active"], true, "{ready}");
}

#[tokio::test]
async fn a_paste_whose_slot_moved_to_another_shard_is_found_there_and_adopted() {
    let options = ClusterOptions { empty_paste_shards: 1, env: in_the_mode(), ..Default::default() };
    let cluster = Cluster::start(options).await;
    let key = key_on_paste_shard(1);
    let first = created(&cluster.http, &key, "moved with its slot").await;
    let p = &cluster.paste_addresses;
    let (moved, said) = ctl_reshard(&cluster, &move_args("paste", &p[0], &p[1], "128-255"), "").await;
    assert!(moved, "{said}");
    k_loses(&cluster, &key).await;
    // The gateway's slot map still names the old shard: its refusal sends the search on.
    let retry = created(&cluster.http, &key, "moved with its slot").await;
    assert_eq!(field(&retry, "id"), field(&first, "id"), "found on the slot's new shard: {}", retry.body);
    assert_eq!(retry.json()["adopted"], true);
    assert_eq!(cluster.live_pastes().await, 1, "no second paste, on either shard");
    assert_eq!(delete(&cluster, &field(&first, "id"), &field(&retry, "delete_token")).await, StatusCode::NO_CONTENT);
}
