//! A store that ignores `If-None-Match: *` is refused (docs/design.md#create-only-put).
//!
//! The store that ignores it is the real SeaweedFS behind a proxy that drops the header on
//! the way in, which is what SeaweedFS before 3.97 did on its own: it answers 200 to the
//! second write and overwrites. The same proxy passing the header is the control, so a
//! refusal here is the header's absence and nothing else the proxy does.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http::header::{CONTENT_LENGTH, IF_NONE_MATCH, TRANSFER_ENCODING};
use pastebin_objects::{CheckedS3Store, CreateOnlyError, ObjectError, ObjectStore, S3Settings, S3Store};
use pastebin_tests::cluster::run_to_exit;
use pastebin_tests::s3::fresh_bucket;

#[derive(Clone)]
struct Upstream {
    endpoint: String,
    client: reqwest::Client,
    drop_if_none_match: bool,
}

/// An HTTP proxy to `endpoint` on a port of its own; returns its endpoint.
async fn proxy(endpoint: &str, drop_if_none_match: bool) -> String {
    let upstream = Upstream { endpoint: endpoint.to_owned(), client: reqwest::Client::new(), drop_if_none_match };
    let app = axum::Router::new().fallback(forward).with_state(upstream);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}")
}

async fn forward(State(upstream): State<Upstream>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut headers = parts.headers;
    // reqwest sets these itself for the body it sends.
    for name in [CONTENT_LENGTH, TRANSFER_ENCODING] {
        headers.remove(name);
    }
    if upstream.drop_if_none_match {
        headers.remove(IF_NONE_MATCH);
    }
    let body = axum::body::to_bytes(body, 16 << 20).await.expect("a test body fits");
    let answer = upstream
        .client
        .request(parts.method, format!("{}{path}", upstream.endpoint))
        .headers(headers)
        .body(body)
        .send()
        .await
        .expect("SeaweedFS answers the proxy");
    let mut response = Response::builder().status(answer.status());
    for (name, value) in answer.headers() {
        if name != TRANSFER_ENCODING && name != CONTENT_LENGTH {
            response = response.header(name, value);
        }
    }
    response.body(Body::from(answer.bytes().await.expect("SeaweedFS's answer body"))).unwrap()
}

/// A fresh bucket on the suite's SeaweedFS, reached through the proxy.
async fn bucket_behind_proxy(drop_if_none_match: bool) -> (S3Settings, S3Settings) {
    let direct = fresh_bucket().await;
    let mut proxied = direct.clone();
    proxied.endpoint = Some(proxy(direct.endpoint.as_deref().unwrap(), drop_if_none_match).await);
    (direct, proxied)
}

#[tokio::test]
async fn the_probe_passes_on_seaweedfs_and_through_a_proxy_that_keeps_the_header() {
    let (direct, proxied) = bucket_behind_proxy(false).await;
    S3Store::connect(direct).await.unwrap().probe_create_only().await.expect("SeaweedFS refuses the second write");
    S3Store::connect(proxied).await.unwrap().probe_create_only().await.expect("the proxy alone changes nothing");
}

#[tokio::test]
async fn the_probe_finds_a_store_that_overwrites() {
    let (_, proxied) = bucket_behind_proxy(true).await;
    let probe = S3Store::connect(proxied).await.unwrap().probe_create_only().await;
    assert!(matches!(probe, Err(CreateOnlyError::Ignored { .. })), "{probe:?}");
}

#[tokio::test]
async fn no_paste_is_written_to_a_store_that_overwrites() {
    let (direct, proxied) = bucket_behind_proxy(true).await;
    let checked = CheckedS3Store::new(S3Store::connect(proxied).await.unwrap());
    let put = checked.put("AB0123456789xy", Bytes::from_static(b"never stored")).await;
    let Err(ObjectError::Refused(why)) = put else { panic!("{put:?}") };
    assert!(why.contains("If-None-Match"), "{why}");
    let direct: Arc<dyn ObjectStore> = Arc::new(S3Store::connect(direct).await.unwrap());
    assert_eq!(direct.get("AB0123456789xy").await.unwrap(), None, "the paste's PUT was never sent");
}

#[tokio::test]
async fn a_gateway_on_a_store_that_overwrites_exits_at_start_naming_the_missing_conditional_write() {
    let (_, proxied) = bucket_behind_proxy(true).await;
    let endpoint = proxied.endpoint.unwrap();
    // Nothing listens at these shards: the store is judged before any shard is asked.
    let args = [
        "gateway",
        "--key-shards",
        "http://127.0.0.1:9",
        "--paste-shards",
        "http://127.0.0.1:9",
        "--http",
        "127.0.0.1:0",
        "--grpc",
        "127.0.0.1:0",
        "--s3-bucket",
        &proxied.bucket,
        "--s3-endpoint",
        &endpoint,
        "--s3-path-style",
    ];
    let exit = run_to_exit(&args).await;
    let stderr = String::from_utf8_lossy(&exit.stderr);
    assert!(!exit.status.success(), "the gateway must not start: {stderr}");
    for needle in ["If-None-Match", "does not honour conditional writes", "SeaweedFS 3.97 or later", &endpoint] {
        assert!(stderr.contains(needle), "{needle:?} is not in:\n{stderr}");
    }
}
