//! The public API as a client sees it, against a whole deployment of real
//! processes (K and P shards on PostgreSQL, a gateway on a SeaweedFS S3 bucket):
//! routing by slot, read and delete, expiry, validation limits, the gRPC
//! status mapping, secrets in logs, and clients that hang up mid-request.

use std::{collections::HashMap, collections::HashSet, time::Duration};

use futures::{stream, StreamExt};
use pastebin_core::{IdempotencyKey, KeyState, PasteId};
use pastebin_proto::api::v1::{self as pb, paste_api_client::PasteApiClient};
use pastebin_runtime::grpc::CallError;
use pastebin_tests::cluster::{execute, Cluster, ClusterOptions};
use reqwest::{header, Client, Response, StatusCode};
use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tonic::Code;
use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient, HealthCheckRequest};

const MIB: usize = 1024 * 1024;

/// A valid-looking id (slot 0) that no create ever minted.
const NEVER_CREATED: &str = "00000000000000";

fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

async fn start(key_shards: usize, paste_shards: usize) -> Cluster {
    Cluster::start(ClusterOptions { key_shards, paste_shards, ..ClusterOptions::default() }).await
}

async fn post_json(client: &Client, cluster: &Cluster, key: &str, body: &Value) -> Response {
    client
        .post(format!("{}/api/v1/pastes", cluster.http))
        .header("Idempotency-Key", key)
        .json(body)
        .send()
        .await
        .expect("POST reaches the gateway")
}

/// A raw (non-JSON) create; `query` is appended as is (e.g. `?expires_in_seconds=60`).
async fn post_text(
    client: &Client,
    cluster: &Cluster,
    key: &str,
    body: impl Into<reqwest::Body>,
    query: &str,
) -> Response {
    client
        .post(format!("{}/api/v1/pastes{query}", cluster.http))
        .header("Idempotency-Key", key)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(body)
        .send()
        .await
        .expect("POST reaches the gateway")
}

async fn get(client: &Client, url: String) -> Response {
    client.get(url).send().await.expect("GET reaches the gateway")
}

/// `GET` as a browser asks for a page: curl's `*/*` gets the raw text instead.
async fn get_page(client: &Client, url: String) -> Response {
    client.get(url).header(header::ACCEPT, BROWSER_ACCEPT).send().await.expect("GET reaches the gateway")
}

const BROWSER_ACCEPT: &str = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";

async fn delete(client: &Client, cluster: &Cluster, id: &str, authorization: Option<&str>) -> Response {
    let mut request = client.delete(format!("{}/api/v1/pastes/{id}", cluster.http));
    if let Some(value) = authorization {
        request = request.header(header::AUTHORIZATION, value);
    }
    request.send().await.expect("DELETE reaches the gateway")
}

/// The 201's JSON, after checking the status.
async fn created(response: Response, what: &str) -> Value {
    let status = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{what}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: 201 body is not JSON ({e}): {text}"))
}

/// Asserts an error status and its stable JSON code; returns the raw body.
async fn expect_error(response: Response, status: StatusCode, code: &str, what: &str) -> String {
    let got = response.status();
    let text = response.text().await.unwrap();
    assert_eq!(got, status, "{what}: {text}");
    let body: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: error body is not JSON ({e}): {text}"));
    assert_eq!(body["error"]["code"], code, "{what}: {text}");
    assert!(body["error"]["message"].is_string(), "{what}: {text}");
    text
}

fn field(body: &Value, name: &str) -> String {
    body[name].as_str().unwrap_or_else(|| panic!("no string {name:?} in {body}")).to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_key_shards_and_two_paste_shards_route_by_slot() {
    let cluster = start(2, 2).await;
    let client = Client::new();
    let (keys, pastes) =
        ([cluster.key_client(0), cluster.key_client(1)], [cluster.paste_client(0), cluster.paste_client(1)]);
    let (mut key_shards_used, mut paste_shards_used) = (HashSet::new(), HashSet::new());

    for n in 0..40 {
        let key = new_key();
        let content = format!("paste number {n} under {key}");
        let body = created(post_json(&client, &cluster, &key, &json!({ "content": content })).await, "create").await;
        let id = field(&body, "id");

        let read = get(&client, format!("{}/api/v1/pastes/{id}", cluster.http)).await;
        assert_eq!(read.status(), StatusCode::OK, "GET {id}");
        let read: Value = read.json().await.unwrap();
        assert_eq!(read["content"], content.as_str());
        assert_eq!(read["id"], id.as_str());

        let parsed_key = IdempotencyKey::parse(&key).unwrap();
        let paste_id = PasteId::parse(&id).unwrap();
        assert_eq!(paste_id.slot(), parsed_key.slot(), "the id prefix {id} encodes the key's slot");

        let key_shard = parsed_key.slot().index() * 2 / 256;
        let record = keys[key_shard].get(&parsed_key).await.unwrap().expect("the key is on its slot's K shard");
        assert_eq!(record.paste_id, paste_id);
        assert_eq!(record.state, KeyState::Done);
        let other_keys = pastebin_tests::cluster::key_table(&cluster.key_database_urls[1 - key_shard]).await;
        assert!(!other_keys.iter().any(|row| row.0 == parsed_key.canonical()), "the key is only on its own K shard");
        let refused = keys[1 - key_shard].get(&parsed_key).await;
        assert!(
            matches!(refused, Err(CallError::NotExecuted(_))),
            "the other K shard does not own the slot: {refused:?}"
        );

        let paste_shard = paste_id.slot().index() * 2 / 256;
        let row = pastes[paste_shard].get(&paste_id).await.unwrap().expect("the paste is on its prefix's P shard");
        assert_eq!(row.size, content.len() as u64);
        let other_pastes = pastebin_tests::cluster::live_ids(&cluster.paste_database_urls[1 - paste_shard]).await;
        assert!(!other_pastes.contains(&id), "the paste is only on its own P shard");
        let refused = pastes[1 - paste_shard].get(&paste_id).await;
        assert!(
            matches!(refused, Err(CallError::NotExecuted(_))),
            "the other P shard does not own the slot: {refused:?}"
        );

        key_shards_used.insert(key_shard);
        paste_shards_used.insert(paste_shard);
    }
    assert_eq!(key_shards_used.len(), 2, "40 random keys use both K shards");
    assert_eq!(paste_shards_used.len(), 2, "40 random ids use both P shards");
    assert_eq!(cluster.live_pastes().await, 40);
    assert_eq!(cluster.key_rows().await, 40);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn delete_then_again_then_wrong_token() {
    let cluster = start(1, 1).await;
    let client = Client::new();
    let missing_body = expect_error(
        get(&client, format!("{}/api/v1/pastes/{NEVER_CREATED}", cluster.http)).await,
        StatusCode::NOT_FOUND,
        "not_found",
        "GET of a never-created id",
    )
    .await;

    let first =
        created(post_json(&client, &cluster, &new_key(), &json!({ "content": "delete me" })).await, "create").await;
    let (id, token) = (field(&first, "id"), field(&first, "delete_token"));
    let response = delete(&client, &cluster, &id, Some(&format!("Bearer {token}"))).await;
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert!(response.bytes().await.unwrap().is_empty(), "a 204 has no body");

    for url in [format!("{}/api/v1/pastes/{id}", cluster.http), format!("{}/raw/{id}", cluster.http)] {
        let body = expect_error(get(&client, url.clone()).await, StatusCode::NOT_FOUND, "not_found", &url).await;
        assert_eq!(body, missing_body, "a deleted paste is the same 404 as a missing one ({url})");
    }
    let page = get_page(&client, format!("{}/{id}", cluster.http)).await;
    assert_eq!(page.status(), StatusCode::NOT_FOUND, "the HTML page of a deleted paste");

    let again = expect_error(
        delete(&client, &cluster, &id, Some(&format!("Bearer {token}"))).await,
        StatusCode::NOT_FOUND,
        "not_found",
        "delete again",
    )
    .await;
    assert_eq!(again, missing_body, "deleting twice is the same 404 body as a missing id");
    let never = expect_error(
        delete(&client, &cluster, NEVER_CREATED, Some(&format!("Bearer {token}"))).await,
        StatusCode::NOT_FOUND,
        "not_found",
        "delete of a never-created id",
    )
    .await;
    assert_eq!(never, missing_body);

    // Another paste: every wrong credential is a 403 and leaves it readable.
    let second =
        created(post_json(&client, &cluster, &new_key(), &json!({ "content": "keep me" })).await, "create").await;
    let (id2, token2) = (field(&second, "id"), field(&second, "delete_token"));
    let wrong_credentials = [
        Some("Bearer not-the-token".to_string()),
        Some(format!("Bearer {token}")), // the first paste's (valid-looking) token
        Some(format!("Bearer {}", &token2[..token2.len() - 1])),
        Some(format!("Basic {token2}")),
        Some(token2.clone()), // no scheme
        None,                 // no Authorization at all: the code reads it as an empty token
    ];
    for credential in &wrong_credentials {
        let response = delete(&client, &cluster, &id2, credential.as_deref()).await;
        let body =
            expect_error(response, StatusCode::FORBIDDEN, "wrong_delete_token", &format!("{credential:?}")).await;
        assert!(!body.contains(&token2), "a 403 never echoes the token");
        let read = get(&client, format!("{}/api/v1/pastes/{id2}", cluster.http)).await;
        assert_eq!(read.status(), StatusCode::OK, "still readable after {credential:?}");
    }
    assert_eq!(cluster.live_pastes().await, 1);

    // Malformed ids are the same 404 as a missing one, on every route.
    for bad in ["abc", "zz000000000000", "0000000000000", "000000000000000", "0000000000000-"] {
        let body = expect_error(
            get(&client, format!("{}/api/v1/pastes/{bad}", cluster.http)).await,
            StatusCode::NOT_FOUND,
            "not_found",
            bad,
        )
        .await;
        assert_eq!(body, missing_body, "GET {bad}");
        let body = expect_error(
            get(&client, format!("{}/raw/{bad}", cluster.http)).await,
            StatusCode::NOT_FOUND,
            "not_found",
            bad,
        )
        .await;
        assert_eq!(body, missing_body, "GET /raw/{bad}");
        let body = expect_error(
            delete(&client, &cluster, bad, Some(&format!("Bearer {token2}"))).await,
            StatusCode::NOT_FOUND,
            "not_found",
            bad,
        )
        .await;
        assert_eq!(body, missing_body, "DELETE {bad}");
    }

    let response = delete(&client, &cluster, &id2, Some(&format!("Bearer {token2}"))).await;
    assert_eq!(response.status(), StatusCode::NO_CONTENT);
    assert_eq!(cluster.live_pastes().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn expired_paste_is_not_found() {
    let cluster = start(1, 1).await;
    let client = Client::new();
    let missing_body =
        get(&client, format!("{}/api/v1/pastes/{NEVER_CREATED}", cluster.http)).await.text().await.unwrap();
    let missing_page = get_page(&client, format!("{}/{NEVER_CREATED}", cluster.http)).await.text().await.unwrap();

    let body =
        created(post_json(&client, &cluster, &new_key(), &json!({ "content": "short-lived" })).await, "create").await;
    let (id, token) = (field(&body, "id"), field(&body, "delete_token"));
    let page = get_page(&client, format!("{}/{id}", cluster.http)).await;
    assert_eq!(page.status(), StatusCode::OK, "readable before it expires");

    // Time passes: the row's expiry is in the past (the sweeper has not purged it yet).
    let changed = execute(&cluster.paste_database_urls[0], "UPDATE pastes SET expires_at = 0 WHERE id = $1", &id).await;
    assert_eq!(changed, 1);
    // An expiry moved by hand in P's database is news only P has: the
    // gateway's read cache asks P again once its entry is 750 ms old
    // (docs/performance.md). A real expiry is checked on every hit.
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;

    for url in [format!("{}/api/v1/pastes/{id}", cluster.http), format!("{}/raw/{id}", cluster.http)] {
        let text = expect_error(get(&client, url.clone()).await, StatusCode::NOT_FOUND, "not_found", &url).await;
        assert_eq!(text, missing_body, "an expired paste is the same 404 as a missing one ({url})");
    }
    let page = get_page(&client, format!("{}/{id}", cluster.http)).await;
    assert_eq!(page.status(), StatusCode::NOT_FOUND);
    let content_type = page.headers()[header::CONTENT_TYPE].to_str().unwrap().to_owned();
    assert!(content_type.starts_with("text/html"), "the browser 404 is HTML: {content_type}");
    let page = page.text().await.unwrap();
    assert!(!page.contains("short-lived"), "the expired content is not shown");
    assert_eq!(page, missing_page, "one HTML 404 for expired and missing");

    let text = expect_error(
        delete(&client, &cluster, &id, Some(&format!("Bearer {token}"))).await,
        StatusCode::NOT_FOUND,
        "not_found",
        "delete of an expired paste",
    )
    .await;
    assert_eq!(text, missing_body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn content_limit_is_one_mebibyte() {
    // What is checked is the limit, not speed: a mebibyte through a debug build's hashing,
    // signing and PUT can outlast the 2 s create budget on a loaded machine.
    let env = vec![("PASTEBIN_REQUEST_BUDGET_MS".to_owned(), "30000".to_owned())];
    let cluster = Cluster::start(ClusterOptions { env, ..ClusterOptions::default() }).await;
    let client = Client::new();
    let mut stored = 0;

    // Exactly the limit, as a text body and as JSON (plain, multi-byte, and
    // escape-heavy content whose JSON is six times longer than the content).
    let cases: [(&str, String, bool); 4] = [
        ("text", "a".repeat(MIB), false),
        ("json", "b".repeat(MIB), true),
        ("json, two-byte characters", "é".repeat(MIB / 2), true),
        ("json, \\u0001 escapes", "\u{1}".repeat(MIB), true),
    ];
    for (what, content, as_json) in &cases {
        assert_eq!(content.len(), MIB);
        let response = if *as_json {
            post_json(&client, &cluster, &new_key(), &json!({ "content": content })).await
        } else {
            post_text(&client, &cluster, &new_key(), content.clone(), "").await
        };
        let id = field(&created(response, what).await, "id");
        stored += 1;
        let read: Value = get(&client, format!("{}/api/v1/pastes/{id}", cluster.http)).await.json().await.unwrap();
        assert_eq!(read["size"], MIB as u64, "{what}");
        assert_eq!(read["content"].as_str().map(str::len), Some(MIB), "{what}");
        assert!(read["content"] == content.as_str(), "{what}: content round-trips");
        let raw = get(&client, format!("{}/raw/{id}", cluster.http)).await.bytes().await.unwrap();
        assert_eq!(raw.len(), MIB, "{what}: raw");
    }
    assert_eq!(cluster.live_pastes().await, stored);
    assert_eq!(cluster.key_rows().await, stored);

    // One byte over: 413, nothing stored.
    let over = [
        ("text", post_text(&client, &cluster, &new_key(), "a".repeat(MIB + 1), "").await),
        ("json", post_json(&client, &cluster, &new_key(), &json!({ "content": "b".repeat(MIB + 1) })).await),
        (
            "json, two-byte characters (fewer characters than the limit, more bytes)",
            post_json(&client, &cluster, &new_key(), &json!({ "content": format!("{}a", "é".repeat(MIB / 2)) })).await,
        ),
    ];
    for (what, response) in over {
        expect_error(response, StatusCode::PAYLOAD_TOO_LARGE, "content_too_large", what).await;
    }
    assert_eq!(cluster.key_rows().await, stored, "nothing stored for a 413");
    assert_eq!(cluster.live_pastes().await, stored, "nothing stored for a 413");

    // Bad bodies and bad keys: 400, nothing stored.
    let not_utf8 = client
        .post(format!("{}/api/v1/pastes", cluster.http))
        .header("Idempotency-Key", new_key())
        .header(header::CONTENT_TYPE, "text/plain")
        .body(vec![b'o', b'k', 0xff, 0xfe, b'!'])
        .send()
        .await
        .unwrap();
    expect_error(not_utf8, StatusCode::BAD_REQUEST, "invalid_request", "non-UTF-8 text").await;
    // A bad expiry has its own code in the body, as in the query (docs/design.md#status-codes).
    for (what, body, code) in [
        ("unknown field", json!({ "content": "x", "title": "t" }), "invalid_request"),
        ("content is a number", json!({ "content": 5 }), "invalid_request"),
        ("no content", json!({ "expires_in_seconds": 60 }), "invalid_request"),
        ("not an object", json!(["x"]), "invalid_request"),
        ("expiry is a string", json!({ "content": "x", "expires_in_seconds": "60" }), "invalid_expiry"),
        ("negative expiry", json!({ "content": "x", "expires_in_seconds": -60 }), "invalid_expiry"),
        ("fractional expiry", json!({ "content": "x", "expires_in_seconds": 60.5 }), "invalid_expiry"),
    ] {
        expect_error(post_json(&client, &cluster, &new_key(), &body).await, StatusCode::BAD_REQUEST, code, what).await;
    }
    let malformed = client
        .post(format!("{}/api/v1/pastes", cluster.http))
        .header("Idempotency-Key", new_key())
        .header(header::CONTENT_TYPE, "application/json")
        .body("{\"content\": \"x\"")
        .send()
        .await
        .unwrap();
    expect_error(malformed, StatusCode::BAD_REQUEST, "invalid_request", "truncated JSON").await;
    let no_key =
        client.post(format!("{}/api/v1/pastes", cluster.http)).json(&json!({ "content": "x" })).send().await.unwrap();
    expect_error(no_key, StatusCode::BAD_REQUEST, "invalid_idempotency_key", "no key").await;
    for bad_key in ["not-a-uuid", "", "1234"] {
        let response = post_json(&client, &cluster, bad_key, &json!({ "content": "x" })).await;
        expect_error(response, StatusCode::BAD_REQUEST, "invalid_idempotency_key", bad_key).await;
    }

    // Expiry bounds, JSON and query string.
    for seconds in [0u64, 59, 31_536_001, u64::MAX] {
        let response =
            post_json(&client, &cluster, &new_key(), &json!({ "content": "x", "expires_in_seconds": seconds })).await;
        expect_error(response, StatusCode::BAD_REQUEST, "invalid_expiry", &format!("json {seconds}")).await;
        let response = post_text(&client, &cluster, &new_key(), "x", &format!("?expires_in_seconds={seconds}")).await;
        expect_error(response, StatusCode::BAD_REQUEST, "invalid_expiry", &format!("query {seconds}")).await;
    }
    assert_eq!(cluster.key_rows().await, stored, "nothing stored for any 400");
    assert_eq!(cluster.live_pastes().await, stored, "nothing stored for any 400");

    for (seconds, as_json) in [(60i64, true), (31_536_000, true), (60, false), (31_536_000, false)] {
        let response = if as_json {
            post_json(&client, &cluster, &new_key(), &json!({ "content": "x", "expires_in_seconds": seconds })).await
        } else {
            post_text(&client, &cluster, &new_key(), "x", &format!("?expires_in_seconds={seconds}")).await
        };
        let body = created(response, &format!("expiry {seconds}")).await;
        stored += 1;
        let read: Value =
            get(&client, format!("{}/api/v1/pastes/{}", cluster.http, field(&body, "id"))).await.json().await.unwrap();
        let at = |name: &str| chrono::DateTime::parse_from_rfc3339(read[name].as_str().unwrap()).unwrap().timestamp();
        let lifetime = at("expires_at") - at("created_at");
        assert!((seconds - 1..=seconds + 1).contains(&lifetime), "expiry {seconds}: lived {lifetime} s");
        assert_eq!(read["expires_at"], body["expires_at"], "GET and the 201 agree on expires_at");
    }
    let body =
        created(post_json(&client, &cluster, &new_key(), &json!({ "content": "default" })).await, "default expiry")
            .await;
    stored += 1;
    let read: Value =
        get(&client, format!("{}/api/v1/pastes/{}", cluster.http, field(&body, "id"))).await.json().await.unwrap();
    let at = |name: &str| chrono::DateTime::parse_from_rfc3339(read[name].as_str().unwrap()).unwrap().timestamp();
    assert!((2_591_999..=2_592_001).contains(&(at("expires_at") - at("created_at"))), "default is 30 days");
    assert_eq!(cluster.key_rows().await, stored);
    assert_eq!(cluster.live_pastes().await, stored);
}

fn expect_status<T: std::fmt::Debug>(
    what: &str,
    result: Result<tonic::Response<T>, tonic::Status>,
    codes: &[Code],
) -> tonic::Status {
    match result {
        Ok(reply) => panic!("{what}: expected {codes:?}, got {reply:?}"),
        Err(status) => {
            assert!(
                codes.contains(&status.code()),
                "{what}: expected {codes:?}, got {:?}: {}",
                status.code(),
                status.message()
            );
            status
        }
    }
}

fn create_request(request_id: &str, content: &str, expires_in_seconds: Option<u64>) -> pb::CreatePasteRequest {
    pb::CreatePasteRequest {
        request_id: request_id.to_owned(),
        content: content.to_owned(),
        expires_in_seconds,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grpc_api_round_trip_and_status_mapping() {
    let cluster = start(1, 1).await;
    let mut api = PasteApiClient::connect(cluster.grpc.clone()).await.expect("connect to the gateway's gRPC");
    let too_large = &[Code::ResourceExhausted, Code::InvalidArgument];

    let channel = tonic::transport::Channel::from_shared(cluster.grpc.clone()).unwrap().connect().await.unwrap();
    let mut health = HealthClient::new(channel);
    for service in ["", "pastebin.v1.PasteApi"] {
        let reply = health.check(HealthCheckRequest { service: service.into() }).await.expect("health check");
        assert_eq!(reply.into_inner().status(), ServingStatus::Serving, "health of {service:?}");
    }

    let request_id = new_key();
    let first = api.create_paste(create_request(&request_id, "over gRPC", None)).await.expect("create").into_inner();
    assert!(!first.replayed);
    assert!(PasteId::parse(&first.id).is_ok(), "{}", first.id);
    assert!(first.url.ends_with(&first.id) && first.raw_url.ends_with(&first.id));
    assert!(!first.delete_token.is_empty());
    let replay = api
        .create_paste(create_request(&request_id.to_uppercase(), "over gRPC", None))
        .await
        .expect("replay")
        .into_inner();
    assert!(replay.replayed, "the same request_id (any case) replays");
    assert_eq!(
        (&replay.id, &replay.delete_token, &replay.expires_at),
        (&first.id, &first.delete_token, &first.expires_at)
    );

    let paste = api.get_paste(pb::GetPasteRequest { id: first.id.clone() }).await.expect("get").into_inner();
    assert_eq!(paste.content, "over gRPC");
    assert_eq!(paste.size, 9);
    assert_eq!(paste.expires_at, first.expires_at);

    // The HTTP side sees the same paste.
    let http: Value =
        get(&Client::new(), format!("{}/api/v1/pastes/{}", cluster.http, first.id)).await.json().await.unwrap();
    assert_eq!(http["content"], "over gRPC");

    let wrong = api.delete_paste(pb::DeletePasteRequest { id: first.id.clone(), delete_token: "wrong".into() }).await;
    expect_status("wrong token", wrong, &[Code::PermissionDenied]);
    let empty = api.delete_paste(pb::DeletePasteRequest { id: first.id.clone(), delete_token: String::new() }).await;
    expect_status("empty token", empty, &[Code::PermissionDenied]);
    api.get_paste(pb::GetPasteRequest { id: first.id.clone() }).await.expect("still there after wrong tokens");
    api.delete_paste(pb::DeletePasteRequest { id: first.id.clone(), delete_token: first.delete_token.clone() })
        .await
        .expect("delete with the right token");
    let again = api
        .delete_paste(pb::DeletePasteRequest { id: first.id.clone(), delete_token: first.delete_token.clone() })
        .await;
    expect_status("delete again", again, &[Code::NotFound]);
    let gone = api.get_paste(pb::GetPasteRequest { id: first.id.clone() }).await;
    expect_status("get after delete", gone, &[Code::NotFound]);

    let rows = cluster.key_rows().await;
    for bad in ["", "not-a-uuid", "00000000-0000-0000-0000-00000000000g"] {
        let result = api.create_paste(create_request(bad, "x", None)).await;
        expect_status(&format!("request_id {bad:?}"), result, &[Code::InvalidArgument]);
    }
    let conflict = api.create_paste(create_request(&request_id, "something else", None)).await;
    let status =
        expect_status("same request_id, other content", conflict, &[Code::FailedPrecondition, Code::AlreadyExists]);
    assert!(!status.message().contains(&first.delete_token), "a conflict never shows the stored answer");
    let conflict = api.create_paste(create_request(&request_id, "over gRPC", Some(60))).await;
    expect_status("same request_id, other expiry", conflict, &[Code::FailedPrecondition, Code::AlreadyExists]);
    for seconds in [0, 59, 31_536_001] {
        let result = api.create_paste(create_request(&new_key(), "x", Some(seconds))).await;
        expect_status(&format!("expiry {seconds}"), result, &[Code::InvalidArgument]);
    }
    let result = api.create_paste(create_request(&new_key(), &"a".repeat(MIB + 1), None)).await;
    expect_status("1 MiB + 1 byte", result, too_large);
    // Far over the limit, including past the server's message size limit
    // (where tonic refuses before the gateway's own check): still the status
    // docs/design.md#status-codes gives "content too large", never OUT_OF_RANGE.
    for mebibytes in [2, 8] {
        let result = api.create_paste(create_request(&new_key(), &"a".repeat(mebibytes * MIB), None)).await;
        expect_status(&format!("{mebibytes} MiB"), result, too_large);
    }
    assert_eq!(cluster.key_rows().await, rows, "nothing stored for refused creates");

    let exact = api
        .create_paste(create_request(&new_key(), &"a".repeat(MIB), Some(60)))
        .await
        .expect("exactly 1 MiB")
        .into_inner();
    let paste = api.get_paste(pb::GetPasteRequest { id: exact.id.clone() }).await.expect("get 1 MiB").into_inner();
    assert_eq!(paste.content.len(), MIB);
    for seconds in [60, 31_536_000] {
        api.create_paste(create_request(&new_key(), "x", Some(seconds)))
            .await
            .unwrap_or_else(|s| panic!("expiry {seconds}: {s:?}"));
    }

    for bad in ["", "abc", "zz000000000000", NEVER_CREATED, "0000000000000/"] {
        let result = api.get_paste(pb::GetPasteRequest { id: bad.into() }).await;
        expect_status(&format!("get {bad:?}"), result, &[Code::NotFound]);
        let result = api.delete_paste(pb::DeletePasteRequest { id: bad.into(), delete_token: "t".into() }).await;
        expect_status(&format!("delete {bad:?}"), result, &[Code::NotFound]);
    }
}

/// Every occurrence of a secret in `logs`, as `what: line` (empty if none).
fn leaks(logs: &str, secrets: &[String]) -> Vec<String> {
    logs.lines()
        .filter_map(|line| {
            secrets.iter().find(|secret| line.contains(secret.as_str())).map(|secret| format!("{secret}: {line}"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn secrets_never_reach_the_logs() {
    // Read by the cluster when it spawns its processes. Other tests in this
    // binary may spawn theirs meanwhile: at worst they log more.
    std::env::set_var("PASTEBIN_TEST_LOG", "debug");
    let cluster = start(1, 1).await;
    let client = Client::new();
    let mut secrets = Vec::new();
    let mut ids = Vec::new();

    // A JSON create, its replay, and a 409 on its key.
    let json_key = new_key();
    let response = post_json(&client, &cluster, &json_key, &json!({ "content": "json secret holder" })).await;
    let stored_json = response.text().await.unwrap();
    let first: Value = serde_json::from_str(&stored_json).unwrap();
    secrets.push(field(&first, "delete_token"));
    secrets.push(stored_json.clone());
    ids.push(field(&first, "id"));
    let replay = post_json(&client, &cluster, &json_key, &json!({ "content": "json secret holder" })).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(replay.text().await.unwrap(), stored_json, "a replay is byte-identical");
    let conflict = post_json(&client, &cluster, &json_key, &json!({ "content": "another request" })).await;
    let conflict = expect_error(conflict, StatusCode::CONFLICT, "idempotency_key_conflict", "409").await;
    assert!(!conflict.contains(&secrets[0]), "a 409 never shows the stored answer: {conflict}");

    // A text create (answered as text) and its replay.
    let text_key = new_key();
    let text_create = |accept: &'static str| {
        client
            .post(format!("{}/api/v1/pastes", cluster.http))
            .header("Idempotency-Key", text_key.clone())
            .header(header::ACCEPT, accept)
            .body("text secret holder")
            .send()
    };
    let response = text_create("text/plain").await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let text_answer = response.text().await.unwrap();
    let text_token = text_answer.lines().nth(1).expect("url, then token").to_owned();
    let replay = text_create("application/json").await.unwrap();
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let stored_text = replay.text().await.unwrap();
    let second: Value = serde_json::from_str(&stored_text).unwrap();
    assert_eq!(field(&second, "delete_token"), text_token, "the text answer carries the stored token");
    secrets.extend([text_token.clone(), stored_text]);
    ids.push(field(&second, "id"));

    // A read, a wrong-token delete and a right-token delete.
    let read = get(&client, format!("{}/api/v1/pastes/{}", cluster.http, ids[0])).await;
    assert_eq!(read.status(), StatusCode::OK);
    let wrong = delete(&client, &cluster, &ids[0], Some("Bearer wrong-token")).await;
    assert_eq!(wrong.status(), StatusCode::FORBIDDEN);
    let right = delete(&client, &cluster, &ids[1], Some(&format!("Bearer {text_token}"))).await;
    assert_eq!(right.status(), StatusCode::NO_CONTENT);

    // Over gRPC too.
    let mut api = PasteApiClient::connect(cluster.grpc.clone()).await.unwrap();
    let grpc = api.create_paste(create_request(&new_key(), "grpc secret holder", None)).await.unwrap().into_inner();
    secrets.push(grpc.delete_token.clone());
    ids.push(grpc.id.clone());
    api.delete_paste(pb::DeletePasteRequest { id: grpc.id.clone(), delete_token: grpc.delete_token.clone() })
        .await
        .unwrap();

    // Let the log readers catch up with the processes' stderr.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut processes = vec![("gateway".to_string(), cluster.gateway.logs())];
    processes.extend(cluster.keys.iter().enumerate().map(|(i, p)| (format!("key shard {i}"), p.logs())));
    processes.extend(cluster.pastes.iter().enumerate().map(|(i, p)| (format!("paste shard {i}"), p.logs())));
    for (name, logs) in &processes {
        assert!(logs.lines().count() > 3, "{name} logged (else this check proves nothing):\n{logs}");
        let found = leaks(logs, &secrets);
        assert!(found.is_empty(), "{name} logged a secret:\n{}", found.join("\n"));
    }
    // The gateway's log really covers these requests: the check could fail.
    let gateway_logs = &processes[0].1;
    assert!(
        gateway_logs.contains(&json_key) || ids.iter().any(|id| gateway_logs.contains(id.as_str())),
        "the gateway's debug log mentions the creates it served:\n{gateway_logs}"
    );
}

/// How a client gives up on a create.
#[derive(Debug, Clone, Copy)]
enum HangUp {
    /// reqwest with a timeout of a few milliseconds.
    Timeout(u64),
    /// Headers promise 1000 bytes, 10 arrive, then the connection closes.
    PartialBody,
    /// The whole request, then close without reading the answer.
    NoRead,
}

async fn hang_up(address: &str, key: &str, content: &str, how: HangUp) {
    match how {
        HangUp::Timeout(ms) => {
            let client = Client::builder().timeout(Duration::from_millis(ms)).build().unwrap();
            let _ = client
                .post(format!("http://{address}/api/v1/pastes"))
                .header("Idempotency-Key", key)
                .header(header::CONTENT_TYPE, "text/plain")
                .body(content.to_owned())
                .send()
                .await;
        }
        HangUp::PartialBody | HangUp::NoRead => {
            let Ok(mut stream) = tokio::net::TcpStream::connect(address).await else { return };
            let (length, body) = match how {
                HangUp::PartialBody => (1000, &content.as_bytes()[..10]),
                _ => (content.len(), content.as_bytes()),
            };
            let head = format!(
                "POST /api/v1/pastes HTTP/1.1\r\nHost: {address}\r\nIdempotency-Key: {key}\r\n\
                 Content-Type: text/plain\r\nContent-Length: {length}\r\n\r\n"
            );
            let _ = stream.write_all(head.as_bytes()).await;
            let _ = stream.write_all(body).await;
            let _ = stream.flush().await;
            drop(stream);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn clients_that_hang_up_do_not_wedge_anything() {
    let cluster = start(1, 1).await;
    let address = cluster.http.trim_start_matches("http://").to_owned();

    // 200 keys, 100 of them sent twice: 300 creates, each abandoned early.
    let keys: Vec<(String, String)> =
        (0..200).map(|n| (new_key(), format!("hung-up paste number {n:03} ....."))).collect();
    let mut sends = Vec::new();
    for n in 0..300usize {
        let (key, content) = keys[n % 200].clone();
        let how = match n % 3 {
            0 => HangUp::Timeout(1 + (n as u64 * 7) % 20),
            1 => HangUp::PartialBody,
            _ => HangUp::NoRead,
        };
        sends.push((key, content, how));
    }
    // Keys only ever sent with a truncated body: the gateway never saw a whole request.
    let mut only_partial: HashMap<&str, bool> = HashMap::new();
    for (key, _, how) in &sends {
        let partial = matches!(how, HangUp::PartialBody);
        only_partial.entry(key.as_str()).and_modify(|p| *p &= partial).or_insert(partial);
    }
    let tasks: Vec<_> = sends
        .iter()
        .cloned()
        .map(|(key, content, how)| {
            let address = address.clone();
            tokio::spawn(async move { hang_up(&address, &key, &content, how).await })
        })
        .collect();
    for task in tasks {
        task.await.expect("the hang-up task");
    }

    // The gateway still serves a normal client.
    let client = Client::builder().timeout(Duration::from_secs(10)).build().unwrap();
    let body = created(
        post_json(&client, &cluster, &new_key(), &json!({ "content": "after the storm" })).await,
        "normal create",
    )
    .await;
    let read = get(&client, format!("{}/api/v1/pastes/{}", cluster.http, field(&body, "id"))).await;
    assert_eq!(read.status(), StatusCode::OK);

    // Every key's own retry finishes its paste (a 503 means "still pending, retry").
    let outcomes: Vec<(String, String, String, bool)> = stream::iter(keys.clone())
        .map(|(key, content)| {
            let (client, cluster) = (&client, &cluster);
            async move {
                for _attempt in 0..10 {
                    let response = post_text(client, cluster, &key, content.clone(), "").await;
                    match response.status() {
                        StatusCode::CREATED => {
                            let replayed = response.headers().contains_key("idempotent-replayed");
                            let body: Value = response.json().await.unwrap();
                            return (key, content, field(&body, "id"), replayed);
                        }
                        StatusCode::SERVICE_UNAVAILABLE => tokio::time::sleep(Duration::from_millis(300)).await,
                        other => panic!("retry of {key}: {other} {}", response.text().await.unwrap()),
                    }
                }
                panic!("retry of {key} never got its 201");
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;

    let mut ids = HashSet::new();
    let keys_client = cluster.key_client(0);
    for (key, content, id, replayed) in &outcomes {
        assert!(ids.insert(id.clone()), "two keys got the same paste id {id}");
        if only_partial[key.as_str()] {
            assert!(!replayed, "{key} was only ever sent truncated, yet its retry was a replay");
        }
        let record = keys_client.get(&IdempotencyKey::parse(key).unwrap()).await.unwrap().expect("the key is recorded");
        assert_eq!(record.state, KeyState::Done, "{key}");
        assert_eq!(record.paste_id.as_str(), id, "{key}: K and the 201 agree");
        let read = get(&client, format!("{}/api/v1/pastes/{id}", cluster.http)).await;
        assert_eq!(read.status(), StatusCode::OK, "{key} → {id}");
        let read: Value = read.json().await.unwrap();
        assert_eq!(read["content"], content.as_str(), "{key}");
    }
    let expected = keys.len() as i64 + 1;
    assert_eq!(cluster.live_pastes().await, expected, "one paste per key: no duplicates, nothing lost");
    assert_eq!(cluster.key_rows().await, expected);
    let done = pastebin_tests::cluster::scalar(
        &cluster.key_database_urls[0],
        "SELECT COUNT(*) FROM idempotency_keys WHERE state = 'done'",
    )
    .await;
    assert_eq!(done, expected, "every key is done");
}

/// A client uploading far more than the limit must still be able to read its
/// 413: the gateway answers before reading the whole body, and if it then
/// closes the connection with unread bytes in flight the kernel resets it and
/// the client sees a broken pipe or an incomplete message instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn far_oversized_uploads_still_get_their_413() {
    let cluster = start(1, 1).await;
    let client = Client::new();
    let mut failures = Vec::new();
    for attempt in 0..20 {
        let response = client
            .post(format!("{}/api/v1/pastes", cluster.http))
            .header("Idempotency-Key", new_key())
            .header(header::CONTENT_TYPE, "text/plain")
            .body("a".repeat(3 * MIB))
            .send()
            .await;
        match response {
            Ok(response) => {
                expect_error(response, StatusCode::PAYLOAD_TOO_LARGE, "content_too_large", "3 MiB").await;
            }
            Err(error) => failures.push(format!("attempt {attempt}: {error:?}")),
        }
    }
    assert!(failures.is_empty(), "3 MiB text uploads that never saw their 413:\n{}", failures.join("\n"));
    assert_eq!(cluster.key_rows().await, 0);
}

#[tokio::test]
async fn ids_that_are_not_even_utf8_are_missing_pastes() {
    let cluster = start(1, 1).await;
    let client = Client::new();
    let missing = get(&client, format!("{}/api/v1/pastes/00000000000000", cluster.http)).await;
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    let missing_body = missing.text().await.unwrap();
    for path in ["/api/v1/pastes/%FF", "/raw/%FF%FE"] {
        let response = get(&client, format!("{}{path}", cluster.http)).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        assert_eq!(response.text().await.unwrap(), missing_body, "{path}");
    }
    let page = get_page(&client, format!("{}/%FF", cluster.http)).await;
    assert_eq!(page.status(), StatusCode::NOT_FOUND);
    assert!(page.headers()[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
    let deleted = client.delete(format!("{}/api/v1/pastes/%FF", cluster.http)).send().await.unwrap();
    assert_eq!(deleted.status(), StatusCode::NOT_FOUND);
}

/// `CreatePasteRequest` with `content` as raw bytes, to send a string that is not UTF-8.
#[derive(Clone, PartialEq, prost::Message)]
struct RawCreatePasteRequest {
    #[prost(string, tag = "1")]
    request_id: String,
    #[prost(bytes = "vec", tag = "2")]
    content: Vec<u8>,
}

#[tokio::test]
async fn grpc_content_that_is_not_utf8_is_invalid_argument_and_stores_nothing() {
    let cluster = start(1, 1).await;
    let channel = tonic::transport::Endpoint::from_shared(cluster.grpc.clone()).unwrap().connect().await.unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let request = RawCreatePasteRequest { request_id: new_key(), content: vec![0xff, 0xfe, 0x41] };
    let codec = tonic_prost::ProstCodec::<RawCreatePasteRequest, pb::CreatePasteResponse>::default();
    let path = http::uri::PathAndQuery::from_static("/pastebin.v1.PasteApi/CreatePaste");
    let status = grpc.unary(tonic::Request::new(request), path, codec).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(cluster.key_rows().await, 0);
}
