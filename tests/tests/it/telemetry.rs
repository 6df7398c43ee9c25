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
