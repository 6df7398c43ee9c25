//! Logs and traces (docs/deployment.md#logs-and-traces). `--log-format json`
//! writes one JSON object per line. With
//! `OTEL_EXPORTER_OTLP_ENDPOINT` set, a create through the gateway's HTTP API
//! is one trace holding spans from the gateway (its request and the object
//! store PUT), the key service (begin and done) and the paste service (the
//! insert), exported by each real process to a small OTLP/HTTP receiver here.

use std::{
    collections::BTreeSet,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{routing::post, Json, Router};
use pastebin_proto::api::v1::{paste_api_client::PasteApiClient, CreatePasteRequest, GetPasteRequest};
use pastebin_tests::{
    api,
    cluster::{Cluster, ClusterOptions},
};
use serde_json::Value;

/// One exported span: which part sent it, its trace and its name.
#[derive(Debug, Clone)]
struct Span {
    service: String,
    trace: String,
    name: String,
}

/// Accepts OTLP/HTTP JSON exports (`POST /v1/traces`) and keeps their spans.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<Span>>>,
    exports: Arc<Mutex<String>>,
}

impl Receiver {
    async fn start(&self) -> String {
        let (spans, exports) = (self.spans.clone(), self.exports.clone());
        let app = Router::new().route(
            "/v1/traces",
            post(move |Json(export): Json<Value>| async move {
                spans.lock().unwrap().extend(spans_of(&export));
                exports.lock().unwrap().push_str(&export.to_string());
                Json(serde_json::json!({}))
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        format!("http://{address}")
    }

    fn spans(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }
}

fn spans_of(export: &Value) -> Vec<Span> {
    let mut found = Vec::new();
    for resource in export["resourceSpans"].as_array().into_iter().flatten() {
        let service = resource["resource"]["attributes"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|attribute| attribute["key"] == "service.name")
            .and_then(|attribute| attribute["value"]["stringValue"].as_str())
            .unwrap_or_default();
        for scope in resource["scopeSpans"].as_array().into_iter().flatten() {
            for span in scope["spans"].as_array().into_iter().flatten() {
                found.push(Span {
                    service: service.to_owned(),
                    trace: span["traceId"].as_str().unwrap_or_default().to_owned(),
                    name: span["name"].as_str().unwrap_or_default().to_owned(),
                });
            }
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_create_is_one_trace_across_gateway_key_and_paste_services() {
    let receiver = Receiver::default();
    let endpoint = receiver.start().await;
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        // Send spans every 100 ms instead of every 5 s.
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let env = env.map(|(name, value)| (name.to_owned(), value.to_owned())).to_vec();
    let cluster = Cluster::start(ClusterOptions { env, ..ClusterOptions::default() }).await;

    let key = api::new_key();
    let created = api::create(&cluster.http, Some(&key), "one trace").await.unwrap();
    assert_eq!(created.status, 201, "{}", created.body);

    let is_create = |span: &Span| match span.service.as_str() {
        "pastebin-gateway" => span.name == "POST /api/v1/pastes" || span.name == "put",
        "pastebin-key-service" => span.name.ends_with("/Begin") || span.name.ends_with("/MarkDone"),
        "pastebin-paste-service" => span.name.ends_with("/Insert"),
        _ => false,
    };
    let mut seen = Vec::new();
    for _ in 0..300 {
        seen = receiver.spans().into_iter().filter(is_create).collect();
        let services: BTreeSet<&str> = seen.iter().map(|span| span.service.as_str()).collect();
        if services.len() == 3 && seen.iter().any(|span| span.name == "put") && seen.len() >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let names: BTreeSet<(String, String)> = seen.iter().map(|span| (span.service.clone(), span.name.clone())).collect();
    for (service, name) in [
        ("pastebin-gateway", "POST /api/v1/pastes"),
        ("pastebin-gateway", "put"),
        ("pastebin-paste-service", "/pastebin.pastes.v1.PasteService/Insert"),
    ] {
        assert!(names.contains(&(service.to_owned(), name.to_owned())), "no {name} span from {service}: {names:?}");
    }
    assert_eq!(
        seen.iter().filter(|span| span.service == "pastebin-key-service").count(),
        2,
        "begin and done: {names:?}"
    );
    let traces: BTreeSet<&str> = seen.iter().map(|span| span.trace.as_str()).collect();
    assert_eq!(traces.len(), 1, "one create, one trace: {seen:?}");
    let delete_token = created.json()["delete_token"].as_str().unwrap().to_owned();
    let exports = receiver.exports.lock().unwrap().clone();
    assert!(!exports.contains(&key), "the idempotency key was exported in a span");
    assert!(!exports.contains(&delete_token), "the delete token was exported in a span");
}

#[tokio::test]
async fn json_logs_are_one_object_per_line_with_stable_fields() {
    use tokio::io::AsyncBufReadExt;
    let dir = tempfile::tempdir().unwrap();
    let database = pastebin_tests::postgres::sqlite_url(dir.path(), "keys.db");
    let mut shard = tokio::process::Command::new(pastebin_tests::cluster::testbed_binary())
        .args(["key-service", "--log-format", "json", "--listen", "127.0.0.1:0", "--database-url", &database])
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(shard.stderr.take().unwrap()).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if line.contains("listening") {
                return line;
            }
        }
        panic!("the key service ended without saying where it listens");
    })
    .await
    .expect("the key service logs that it listens");
    let event: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("not one JSON object: {line}"));
    assert_eq!(event["level"], "INFO", "{event}");
    assert!(event["timestamp"].as_str().is_some_and(|at| at.ends_with('Z')), "{event}");
    assert_eq!(event["fields"]["message"], "listening", "{event}");
    assert_eq!(event["fields"]["what"], "key-service", "{event}");
    assert!(event["fields"]["address"].as_str().is_some_and(|a| a.starts_with("127.0.0.1:")), "{event}");
}

/// The operator's eyes (docs/operations.md#access-log): at the default log
/// level each request is one line naming its method, route template, status
/// and duration (a create's also its key's short hash), and is counted in
/// `pastebin_requests_total{route,status}`; `/metrics` shows the live pastes
/// and their bytes. No line names a paste id, a key or a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_a_read_and_a_429_are_each_logged_and_counted_by_their_route() {
    let data = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = ["up", "--data-dir", data.path().to_str().unwrap()].map(String::from).to_vec();
    for flag in ["--http", "--grpc", "--admin"] {
        args.extend([flag.to_owned(), "127.0.0.1:0".to_owned()]);
    }
    // The default level, and a create rate a test can reach at once.
    let env = [("RUST_LOG", "info"), ("PASTEBIN_CREATE_RATE_LIMIT", "1/min")];
    let env = env.map(|(name, value)| (name.to_owned(), value.to_owned())).to_vec();
    let up = pastebin_tests::cluster::Process::start(args, env, &["gateway-http", "gateway-grpc", "admin"]).await;
    let http = format!("http://{}", up.address("gateway-http"));

    let key = api::new_key();
    let created = api::create(&http, Some(&key), "seen by the operator").await.unwrap();
    assert_eq!(created.status, reqwest::StatusCode::CREATED, "{}", created.body);
    let paste = created.json();
    let (id, token) = (paste["id"].as_str().unwrap(), paste["delete_token"].as_str().unwrap());
    assert_eq!(api::get(&http, id).await.status, reqwest::StatusCode::OK);
    let limited = api::create(&http, Some(&api::new_key()), "one too many").await.unwrap();
    assert_eq!(limited.status, reqwest::StatusCode::TOO_MANY_REQUESTS, "{}", limited.body);
    // gRPC calls are logged and counted the same way, by their method names.
    let grpc = format!("http://{}", up.address("gateway-grpc"));
    let mut grpc = PasteApiClient::connect(grpc).await.unwrap();
    grpc.get_paste(GetPasteRequest { id: id.to_owned() }).await.unwrap();
    let grpc_key = api::new_key();
    let request =
        CreatePasteRequest { request_id: grpc_key.clone(), content: "over gRPC".into(), ..Default::default() };
    let refused = grpc.create_paste(request).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused:?}");

    let key_hash = pastebin_core::IdempotencyKey::parse(&key).unwrap().short_hash();
    let grpc_key_hash = pastebin_core::IdempotencyKey::parse(&grpc_key).unwrap().short_hash();
    let expected = [
        ("POST", "/api/v1/pastes", "201", Some(key_hash.as_str())),
        ("GET", "/api/v1/pastes/{id}", "200", None),
        ("POST", "/api/v1/pastes", "429", None),
        ("gRPC", "/pastebin.v1.PasteApi/GetPaste", "Ok", None),
        ("gRPC", "/pastebin.v1.PasteApi/CreatePaste", "ResourceExhausted", Some(grpc_key_hash.as_str())),
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let logs = loop {
        let logs = up.logs();
        let access: Vec<&str> = logs.lines().filter(|line| line.contains("pastebin::access")).collect();
        if access.len() >= expected.len() || tokio::time::Instant::now() > deadline {
            break logs;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let access: Vec<&str> = logs.lines().filter(|line| line.contains("pastebin::access")).collect();
    for (method, route, status, hash) in expected {
        let fields = [format!("method={method}"), format!("route={route}"), format!("status={status}")];
        let line = access
            .iter()
            .find(|line| fields.iter().all(|field| line.split_whitespace().any(|word| word == field)))
            .unwrap_or_else(|| panic!("no access line for {method} {route} {status}:\n{}", access.join("\n")));
        assert!(line.contains(" INFO ") && line.contains("duration_ms="), "{line}");
        if let Some(hash) = hash {
            assert!(line.contains(&format!("key_hash={hash}")), "a create's line carries its key's hash: {line}");
        }
    }
    for secret in [id, token, key.as_str(), grpc_key.as_str()] {
        assert!(!logs.contains(secret), "the logs name {secret}:\n{logs}");
    }

    let metrics = reqwest::get(format!("http://{}/metrics", up.address("admin"))).await.unwrap().text().await.unwrap();
    for counted in [
        r#"pastebin_requests_total{route="/api/v1/pastes",status="201"} 1"#,
        r#"pastebin_requests_total{route="/api/v1/pastes/{id}",status="200"} 1"#,
        r#"pastebin_requests_total{route="/api/v1/pastes",status="429"} 1"#,
        r#"pastebin_requests_total{route="/pastebin.v1.PasteApi/GetPaste",status="Ok"} 1"#,
        r#"pastebin_requests_total{route="/pastebin.v1.PasteApi/CreatePaste",status="ResourceExhausted"} 1"#,
        "pastebin_live_pastes 1",
        "pastebin_stored_bytes 20",
    ] {
        assert!(metrics.lines().any(|line| line == counted), "{counted} missing from /metrics:\n{metrics}");
    }

    // The dashboard shows the same beside the saga, from its next sample.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        let status: Value = reqwest::get(format!("http://{}/dashboard/status.json", up.address("admin")))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if status["traffic"]["total"]["rate_limited"] == 1 || tokio::time::Instant::now() > deadline {
            break status;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let traffic = &status["traffic"];
    assert_eq!(traffic["serves_http"], true, "{traffic}");
    assert_eq!(traffic["total"]["rate_limited"], 1, "{traffic}");
    assert!(traffic["total"]["success"].as_u64().is_some_and(|n| n >= 2), "{traffic}");
    assert_eq!(traffic["storage"]["live_pastes"], 1.0, "{traffic}");
    assert!(traffic["storage"]["free_bytes"].as_f64().is_some_and(|free| free > 0.0), "{traffic}");
    assert_eq!(traffic["storage"]["min_free_bytes"], 64.0 * 1024.0 * 1024.0, "the default watermark: {traffic}");
}
