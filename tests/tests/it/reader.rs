//! The reader features on real deployments: burn after reading, binary
//! content, downloads, highlighted pages and the QR code, with the create
//! contract (one paste per key, the stored 201, 409 on another request under
//! the same key) holding for every new field. Run against PostgreSQL shards
//! with a SeaweedFS S3 bucket, and against `pastebin up` (the embedded default:
//! SQLite shards and a local object directory), as real processes.

use std::sync::Arc;

use pastebin_proto::api::v1::{self as pb, paste_api_client::PasteApiClient};
use pastebin_tests::cluster::{Cluster, ClusterOptions, Process, HIGHLIGHT_BUDGET_FOR_TESTS};
use reqwest::{header, Client, Method, StatusCode};
use serde_json::{json, Value};
use tokio::sync::Barrier;

fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// Every byte value, plus invalid UTF-8 and a NUL: nothing here survives a
/// text round trip by accident.
fn binary_sample() -> Vec<u8> {
    let mut bytes: Vec<u8> = (0..=255u8).collect();
    bytes.extend_from_slice(&[0xff, 0xfe, 0x00, 0xc3, 0x28, b'\n', b'\r']);
    bytes.repeat(17)
}

/// `pastebin up` on a fresh data directory, on ports the OS picks.
struct Embedded {
    _process: Process,
    _dir: tempfile::TempDir,
    http: String,
}

/// `up_flags`: `--colocated`, or none.
async fn embedded(up_flags: &[&str]) -> Embedded {
    let dir = tempfile::tempdir().unwrap();
    let args = ["up", "--data-dir", dir.path().to_str().unwrap()]
        .into_iter()
        .chain(up_flags.iter().copied())
        .chain(["--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--admin", "127.0.0.1:0"])
        .map(str::to_owned)
        .collect();
    let (name, value) = HIGHLIGHT_BUDGET_FOR_TESTS;
    let process = Process::start(args, vec![(name.into(), value.into())], &["gateway-http"]).await;
    let http = format!("http://{}", process.address("gateway-http"));
    Embedded { _process: process, _dir: dir, http }
}

/// `POST /api/v1/pastes` with a raw body of `content_type` and `query`.
async fn create_raw(base: &str, key: &str, content_type: &str, query: &str, body: Vec<u8>) -> (StatusCode, String) {
    let response = Client::new()
        .post(format!("{base}/api/v1/pastes{query}"))
        .header("Idempotency-Key", key)
        .header(header::CONTENT_TYPE, content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    (response.status(), response.text().await.unwrap())
}

async fn create_json(base: &str, key: &str, body: Value) -> (StatusCode, String) {
    let response = Client::new()
        .post(format!("{base}/api/v1/pastes"))
        .header("Idempotency-Key", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    (response.status(), response.text().await.unwrap())
}

fn id_of(body: &str) -> String {
    serde_json::from_str::<Value>(body).unwrap()["id"].as_str().expect("a 201 has an id").to_owned()
}

/// As a browser asks: `GET /{id}` answers the page, not the raw text curl gets.
async fn fetch(method: Method, url: String) -> reqwest::Response {
    let browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
    Client::new().request(method, url).header(header::ACCEPT, browser).send().await.unwrap()
}

/// A binary paste comes back byte for byte from `/raw`, as base64 in the
/// JSON API, with its type; the download carries the file name.
async fn binary_round_trip(base: &str) {
    let bytes = binary_sample();
    let (status, body) =
        create_raw(base, &new_key(), "image/png", "?file_name=r%C3%A9sum%C3%A9%20scan.png", bytes.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = id_of(&body);

    let raw = fetch(Method::GET, format!("{base}/raw/{id}")).await;
    assert_eq!(raw.status(), StatusCode::OK);
    assert_eq!(raw.headers()[header::CONTENT_TYPE], "image/png");
    assert_eq!(raw.headers()[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(raw.headers()[header::CONTENT_SECURITY_POLICY], "sandbox");
    assert!(raw.headers().get(header::CONTENT_DISPOSITION).is_none(), "a PNG is shown inline");
    assert_eq!(raw.bytes().await.unwrap().as_ref(), bytes.as_slice(), "byte-exact");

    let json: Value = fetch(Method::GET, format!("{base}/api/v1/pastes/{id}")).await.json().await.unwrap();
    use base64::Engine;
    let decoded = base64::engine::general_purpose::STANDARD.decode(json["content_base64"].as_str().unwrap()).unwrap();
    assert_eq!(decoded, bytes);
    assert_eq!((json["media_type"].as_str(), json["size"].as_u64()), (Some("image/png"), Some(bytes.len() as u64)));
    assert!(json.get("content").is_none());

    let download = fetch(Method::GET, format!("{base}/raw/{id}?download")).await;
    assert_eq!(
        download.headers()[header::CONTENT_DISPOSITION],
        "attachment; filename=\"r_sum_ scan.png\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20scan.png"
    );
    assert_eq!(download.bytes().await.unwrap().as_ref(), bytes.as_slice());

    let page = fetch(Method::GET, format!("{base}/{id}")).await.text().await.unwrap();
    assert!(page.contains(&format!("href=\"/raw/{id}?download\"")), "{page}");
    assert!(page.contains(&format!("<img class=\"inline\" src=\"/raw/{id}\"")), "{page}");
    assert!(page.contains(&format!("{} bytes", bytes.len())) && page.contains("image/png"), "{page}");
}

/// Exactly one of 32 concurrent readers (API and raw, mixed) gets the
/// content; the rest get the one 404 body; the page and HEAD never burn; a
/// replay of the create still answers the same 201.
async fn burn_after_reading(base: &str) {
    let key = new_key();
    let request = json!({ "content": "the secret", "burn_after_reading": true });
    let (status, created) = create_json(base, &key, request.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = id_of(&created);

    for _ in 0..2 {
        let page = fetch(Method::GET, format!("{base}/{id}")).await;
        assert_eq!(page.status(), StatusCode::OK);
        let page = page.text().await.unwrap();
        assert!(page.contains("This paste will be deleted when you view it"), "{page}");
        assert!(!page.contains("the secret"), "the page never shows (or burns) the content on GET");
    }
    for url in [format!("{base}/raw/{id}"), format!("{base}/api/v1/pastes/{id}")] {
        assert_eq!(fetch(Method::HEAD, url).await.status(), StatusCode::OK, "HEAD never burns");
    }

    let barrier = Arc::new(Barrier::new(32));
    let readers: Vec<_> = (0..32)
        .map(|i| {
            let barrier = barrier.clone();
            let url = if i % 2 == 0 { format!("{base}/raw/{id}") } else { format!("{base}/api/v1/pastes/{id}") };
            tokio::spawn(async move {
                barrier.wait().await;
                let response = fetch(Method::GET, url).await;
                let status = response.status();
                let cache = response.headers().get(header::CACHE_CONTROL).cloned();
                (status, cache, response.text().await.unwrap())
            })
        })
        .collect();
    let mut winners = Vec::new();
    for reader in readers {
        let (status, cache, body) = reader.await.unwrap();
        match status {
            StatusCode::OK => winners.push((cache, body)),
            StatusCode::NOT_FOUND => assert!(body.contains("not_found"), "{body}"),
            other => panic!("a reader got {other}: {body}"),
        }
    }
    assert_eq!(winners.len(), 1, "exactly one reader gets the content");
    let (cache, body) = &winners[0];
    assert!(body.contains("the secret"), "{body}");
    assert_eq!(cache.as_ref().map(|v| v.to_str().unwrap()), Some("no-store"));

    for url in [format!("{base}/{id}"), format!("{base}/raw/{id}")] {
        assert_eq!(fetch(Method::GET, url).await.status(), StatusCode::NOT_FOUND, "burned means gone");
    }
    let (status, replay) = create_json(base, &key, request).await;
    assert_eq!((status, replay), (StatusCode::CREATED, created), "the key made one paste; the replay is the same 201");
}

/// The page's button (`POST /{id}`) is the one read of a burn paste.
async fn burn_from_the_page(base: &str) {
    let (_, created) = create_raw(base, &new_key(), "text/plain", "?burn_after_reading=true", b"once".to_vec()).await;
    let id = id_of(&created);
    let first = fetch(Method::POST, format!("{base}/{id}")).await;
    assert_eq!(first.status(), StatusCode::OK);
    let page = first.text().await.unwrap();
    assert!(page.contains("once") && page.contains("burned after reading"), "{page}");
    assert_eq!(fetch(Method::POST, format!("{base}/{id}")).await.status(), StatusCode::NOT_FOUND);
}

/// Each new field is part of the request: changing only it under the same
/// key is a 409, and nothing new is stored.
async fn only_a_new_field_differs_is_a_conflict(base: &str) {
    let json_variants = [
        json!({ "content": "x", "language": "python" }),
        json!({ "content": "x", "burn_after_reading": true }),
        json!({ "content": "x", "file_name": "other.rs" }),
    ];
    let key = new_key();
    let base_request = json!({ "content": "x", "language": "rust", "file_name": "main.rs" });
    let (status, created) = create_json(base, &key, base_request.clone()).await;
    assert_eq!(status, StatusCode::CREATED);
    for variant in json_variants {
        let (status, body) = create_json(base, &key, variant.clone()).await;
        assert_eq!(status, StatusCode::CONFLICT, "{variant}: {body}");
    }
    assert_eq!(create_json(base, &key, base_request).await, (StatusCode::CREATED, created));

    let key = new_key();
    let bytes = binary_sample();
    let (status, _) = create_raw(base, &key, "application/pdf", "", bytes.clone()).await;
    assert_eq!(status, StatusCode::CREATED);
    let mut changed = bytes.clone();
    changed[0] ^= 1;
    for (content_type, query, body) in [
        ("image/png", "", bytes.clone()),
        ("application/pdf", "?file_name=a.pdf", bytes.clone()),
        ("application/pdf", "?burn_after_reading=true", bytes.clone()),
        ("application/pdf", "", changed),
    ] {
        let (status, answer) = create_raw(base, &key, content_type, query, body).await;
        assert_eq!(status, StatusCode::CONFLICT, "{content_type}{query}: {answer}");
    }
    // A PDF is rendered actively by browsers: /raw serves it as an attachment.
    let (_, replay) = create_raw(base, &key, "application/pdf", "", bytes).await;
    let raw = fetch(Method::GET, format!("{base}/raw/{}", id_of(&replay))).await;
    assert!(raw.headers()[header::CONTENT_DISPOSITION].to_str().unwrap().starts_with("attachment;"));
}

/// Highlighting on the server with classes, the theme CSS, the QR code.
async fn highlighted_page_and_qr_code(base: &str) {
    let (_, created) =
        create_json(base, &new_key(), json!({ "content": "fn main() { println!(\"<hi>\"); }\n", "language": "rust" }))
            .await;
    let id = id_of(&created);
    for _ in 0..2 {
        let page = fetch(Method::GET, format!("{base}/{id}")).await.text().await.unwrap();
        assert!(page.contains("class=\"hl-"), "{page}");
        assert!(page.contains("&lt;hi&gt;") && !page.contains("<hi>"), "{page}");
    }
    let css = fetch(Method::GET, format!("{base}/assets/highlight.css")).await.text().await.unwrap();
    assert!(css.contains(":root[data-theme=dark] .hl-"));
    let qr = fetch(Method::GET, format!("{base}/{id}/qr.svg")).await;
    assert_eq!(qr.headers()[header::CONTENT_TYPE], "image/svg+xml");
    assert!(qr.text().await.unwrap().starts_with("<?xml"));
}

/// A deleted paste's cached page is gone at once on this gateway.
async fn a_delete_drops_the_cached_page(base: &str) {
    let (_, created) = create_json(base, &new_key(), json!({ "content": "cached", "language": "rust" })).await;
    let created: Value = serde_json::from_str(&created).unwrap();
    let id = created["id"].as_str().unwrap();
    assert_eq!(fetch(Method::GET, format!("{base}/{id}")).await.status(), StatusCode::OK);
    let deleted = Client::new()
        .delete(format!("{base}/api/v1/pastes/{id}"))
        .bearer_auth(created["delete_token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
    assert_eq!(fetch(Method::GET, format!("{base}/{id}")).await.status(), StatusCode::NOT_FOUND);
}

/// Bad attributes are a 400 and store nothing.
async fn bad_attributes_are_refused(base: &str) {
    for (query, body) in
        [("?file_name=a%2Fb", "x"), ("?language=%3Cscript%3E", "x"), ("?burn_after_reading=maybe", "x")]
    {
        let (status, answer) = create_raw(base, &new_key(), "text/plain", query, body.into()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {answer}");
    }
    let (status, _) = create_raw(base, &new_key(), "text/plain", "", vec![0xff, 0xfe]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "text must be UTF-8");
    let (status, _) = create_raw(base, &new_key(), "multipart/form-data; boundary=x", "", b"--x--".to_vec()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reader_features_on_postgres_and_s3() {
    every_reader_feature(&Cluster::start(ClusterOptions::default()).await).await;
}

/// The same on one colocated shard, where each create is one commit
/// (docs/design.md#the-colocated-create): reads, burns and deletes are P's
/// own calls, served by it unchanged.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reader_features_on_a_colocated_shard() {
    every_reader_feature(&Cluster::start(ClusterOptions { colocated: true, ..ClusterOptions::default() }).await).await;
}

async fn every_reader_feature(cluster: &Cluster) {
    let base = cluster.http.as_str();
    binary_round_trip(base).await;
    burn_after_reading(base).await;
    burn_from_the_page(base).await;
    only_a_new_field_differs_is_a_conflict(base).await;
    highlighted_page_and_qr_code(base).await;
    a_delete_drops_the_cached_page(base).await;
    bad_attributes_are_refused(base).await;
    let live_before = cluster.live_pastes().await;
    grpc_binary_and_burn(&cluster.grpc).await;
    assert_eq!(cluster.live_pastes().await, live_before + 1, "gRPC: one binary paste left; the burned one is gone");
    for server in [&cluster.http, &cluster.grpc.replace("http://", "grpc://")] {
        the_client_pastes_a_binary_file_once(server, base).await;
    }
}

/// The command-line client's binary save, over HTTP or gRPC: the bytes as
/// they are, with their type and name; saving the same file again is the
/// journal's "already pasted", not a second paste.
async fn the_client_pastes_a_binary_file_once(server: &str, http: &str) {
    use pastebin_client::{Body, Choices, How, Save, Subject};
    let state = tempfile::tempdir().unwrap();
    let client = pastebin_client::Client::new(server, state.path()).unwrap();
    let body = Body::Binary { media_type: "image/gif".into(), bytes: binary_sample() };
    let save = || Save {
        subject: Subject::named("tiny.gif"),
        content: body.clone(),
        choices: Choices { file_name: Some("tiny.gif".into()), ..Choices::default() },
        expires_in_seconds: Some(3_600),
        force_new: false,
        seal: None,
    };
    let first = client.paste(save()).await.unwrap();
    assert_eq!(first.how, How::Created);
    let again = client.paste(save()).await.unwrap();
    assert_eq!((again.how, again.answer.id.as_str()), (How::AlreadyPasted, first.answer.id.as_str()));
    let raw = fetch(Method::GET, format!("{http}/raw/{}", first.answer.id)).await;
    assert_eq!(raw.headers()[header::CONTENT_TYPE], "image/gif");
    assert_eq!(raw.bytes().await.unwrap().as_ref(), binary_sample().as_slice(), "{server}: byte-exact");
    let download = fetch(Method::GET, format!("{http}/raw/{}?download", first.answer.id)).await;
    assert!(download.headers()[header::CONTENT_DISPOSITION].to_str().unwrap().contains("filename=\"tiny.gif\""));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reader_features_on_the_embedded_default() {
    for flags in [&[][..], &["--colocated"]] {
        let up = embedded(flags).await;
        binary_round_trip(&up.http).await;
        burn_after_reading(&up.http).await;
        only_a_new_field_differs_is_a_conflict(&up.http).await;
    }
}

/// gRPC: `data` + `media_type` round-trip byte-exact; `content` and `data`
/// together are refused; a burn paste is read once.
async fn grpc_binary_and_burn(grpc: &str) {
    let mut client = PasteApiClient::connect(grpc.to_owned()).await.unwrap();
    let bytes = binary_sample();
    let request = pb::CreatePasteRequest {
        request_id: new_key(),
        data: bytes.clone(),
        media_type: Some("application/x-thing".into()),
        file_name: Some("thing.bin".into()),
        ..Default::default()
    };
    let created = client.create_paste(request.clone()).await.unwrap().into_inner();
    let replay = client.create_paste(request.clone()).await.unwrap().into_inner();
    assert_eq!((replay.id.as_str(), replay.replayed), (created.id.as_str(), true));
    let conflict = pb::CreatePasteRequest { media_type: Some("application/y".into()), ..request.clone() };
    assert_eq!(client.create_paste(conflict).await.unwrap_err().code(), tonic::Code::FailedPrecondition);
    let paste = client.get_paste(pb::GetPasteRequest { id: created.id }).await.unwrap().into_inner();
    assert_eq!(paste.data, bytes);
    assert_eq!((paste.content.as_str(), paste.media_type.as_deref()), ("", Some("application/x-thing")));

    let both = pb::CreatePasteRequest { request_id: new_key(), content: "text".into(), ..request };
    assert_eq!(client.create_paste(both).await.unwrap_err().code(), tonic::Code::InvalidArgument);

    let burn = pb::CreatePasteRequest {
        request_id: new_key(),
        content: "grpc secret".into(),
        burn_after_reading: true,
        ..Default::default()
    };
    let id = client.create_paste(burn).await.unwrap().into_inner().id;
    let first = client.get_paste(pb::GetPasteRequest { id: id.clone() }).await.unwrap().into_inner();
    assert_eq!((first.content.as_str(), first.burn_after_reading), ("grpc secret", true));
    assert_eq!(client.get_paste(pb::GetPasteRequest { id }).await.unwrap_err().code(), tonic::Code::NotFound);
}
