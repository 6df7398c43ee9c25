//! The published HTTP contract (`GET /api/v1/openapi.json`) against a real
//! deployment: every status the document lists for an operation is produced
//! by the server, with the documented content type, required headers and
//! body shape; every path the server routes is documented with exactly the
//! methods it serves; and a schemathesis run from the document
//! (`scripts/fuzz-api`) finds nothing.

use std::collections::BTreeSet;

use futures::StreamExt;
use pastebin_tests::cluster::{Cluster, ClusterOptions};
use reqwest::{header, Client, Method, RequestBuilder, Response};
use serde_json::{json, Value};

const METHODS: [&str; 5] = ["get", "put", "post", "delete", "patch"];

fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The document, with just enough of a JSON Schema checker for the
/// keywords it uses. An unsupported keyword fails loudly rather than pass.
struct Contract {
    doc: Value,
}

impl Contract {
    fn resolve<'a>(&'a self, value: &'a Value) -> &'a Value {
        match value.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let pointer = reference.strip_prefix('#').expect("local $ref");
                self.resolve(self.doc.pointer(pointer).unwrap_or_else(|| panic!("dangling $ref {reference}")))
            }
            None => value,
        }
    }

    /// (METHOD, path, status) for every documented response.
    fn documented(&self) -> BTreeSet<(String, String, u16)> {
        let mut out = BTreeSet::new();
        for (path, item) in self.doc["paths"].as_object().expect("paths") {
            for method in METHODS {
                if let Some(operation) = item.get(method) {
                    for status in operation["responses"].as_object().expect("responses").keys() {
                        out.insert((method.to_uppercase(), path.clone(), status.parse().expect("numeric status")));
                    }
                }
            }
        }
        out
    }

    fn response_doc(&self, method: &str, path: &str, status: u16) -> Option<&Value> {
        let operation = self.doc["paths"].get(path)?.get(method.to_lowercase())?;
        operation["responses"].get(status.to_string()).map(|r| self.resolve(r))
    }

    fn check(&self, schema: &Value, value: &Value, at: &str, errors: &mut Vec<String>) {
        let schema = self.resolve(schema);
        let object = schema.as_object().expect("a schema is an object");
        for keyword in object.keys() {
            let known = [
                "type",
                "required",
                "properties",
                "additionalProperties",
                "enum",
                "const",
                "minimum",
                "maximum",
                "pattern",
                "format",
                "description",
                "default",
                "examples",
                "items",
            ];
            assert!(known.contains(&keyword.as_str()), "the checker does not know `{keyword}` (at {at})");
        }
        if let Some(types) = schema.get("type") {
            let types: Vec<&str> = match types {
                Value::String(t) => vec![t.as_str()],
                Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                _ => panic!("bad type at {at}"),
            };
            let matches = types.iter().any(|t| match *t {
                "object" => value.is_object(),
                "array" => value.is_array(),
                "string" => value.is_string(),
                "integer" => value.is_i64() || value.is_u64(),
                "number" => value.is_number(),
                "boolean" => value.is_boolean(),
                "null" => value.is_null(),
                other => panic!("unknown type {other}"),
            });
            if !matches {
                errors.push(format!("{at}: {value} is not {types:?}"));
                return;
            }
        }
        if let Some(allowed) = schema.get("enum").and_then(Value::as_array) {
            if !allowed.contains(value) {
                errors.push(format!("{at}: {value} is not one of {allowed:?}"));
            }
        }
        if let Some(constant) = schema.get("const") {
            if constant != value {
                errors.push(format!("{at}: {value} is not {constant}"));
            }
        }
        if let (Some(min), Some(n)) = (schema.get("minimum").and_then(Value::as_f64), value.as_f64()) {
            if n < min {
                errors.push(format!("{at}: {n} < {min}"));
            }
        }
        if let (Some(max), Some(n)) = (schema.get("maximum").and_then(Value::as_f64), value.as_f64()) {
            if n > max {
                errors.push(format!("{at}: {n} > {max}"));
            }
        }
        if let Some(text) = value.as_str() {
            if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
                if !matches_pattern(pattern, text) {
                    errors.push(format!("{at}: {text:?} does not match {pattern}"));
                }
            }
            match schema.get("format").and_then(Value::as_str) {
                Some("date-time") if chrono::DateTime::parse_from_rfc3339(text).is_err() => {
                    errors.push(format!("{at}: {text:?} is not RFC 3339"))
                }
                Some("uri") if !text.starts_with("http://") && !text.starts_with("https://") => {
                    errors.push(format!("{at}: {text:?} is not an absolute URI"))
                }
                _ => {}
            }
        }
        if let Some(fields) = value.as_object() {
            for name in schema.get("required").and_then(Value::as_array).into_iter().flatten() {
                let name = name.as_str().expect("required names are strings");
                if !fields.contains_key(name) {
                    errors.push(format!("{at}: missing required `{name}`"));
                }
            }
            let properties = schema.get("properties").and_then(Value::as_object);
            for (name, field) in fields {
                match properties.and_then(|p| p.get(name)) {
                    Some(property) => self.check(property, field, &format!("{at}.{name}"), errors),
                    None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                        errors.push(format!("{at}: undocumented field `{name}`"))
                    }
                    None => {}
                }
            }
        }
        if let (Some(items), Some(elements)) = (schema.get("items"), value.as_array()) {
            for (index, element) in elements.iter().enumerate() {
                self.check(items, element, &format!("{at}[{index}]"), errors);
            }
        }
    }
}

/// The pattern forms the document uses: `^[class]{n}$` and `^[class]+$`.
fn matches_pattern(pattern: &str, text: &str) -> bool {
    let inner = pattern.strip_prefix("^[").and_then(|p| p.strip_suffix('$')).expect("a supported pattern");
    let (class, count) = inner.split_once(']').expect("a character class");
    let chars: Vec<char> = class.chars().collect();
    let mut ranges = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if i + 2 < chars.len() && chars[i + 1] == '-' {
            ranges.push((chars[i], chars[i + 2]));
            i += 3;
        } else {
            ranges.push((chars[i], chars[i]));
            i += 1;
        }
    }
    let in_class = text.chars().all(|c| ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)));
    let length = text.chars().count();
    let length_ok = match count {
        "+" => length > 0,
        braces => braces.trim_start_matches('{').trim_end_matches('}').parse::<usize>().expect("{n}") == length,
    };
    in_class && length_ok
}

/// Sends requests and holds each answer to the document.
struct Probe<'a> {
    contract: &'a Contract,
    client: Client,
    base: String,
    seen: BTreeSet<(String, String, u16)>,
}

/// What a probe saw, for the scenario's own further checks.
struct Seen {
    status: u16,
    headers: header::HeaderMap,
    body: String,
}

impl Seen {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("a JSON body")
    }
}

impl Probe<'_> {
    fn request(&self, method: &str, path: &str) -> RequestBuilder {
        self.client.request(Method::from_bytes(method.as_bytes()).unwrap(), format!("{}{path}", self.base))
    }

    /// Sends `request` (documented as `method template`) and checks that the
    /// answer has status `expected` and matches the document.
    async fn expect(&mut self, method: &str, template: &str, request: RequestBuilder, expected: u16) -> Seen {
        let response: Response = request.send().await.expect("the request reaches the gateway");
        let seen = Seen {
            status: response.status().as_u16(),
            headers: response.headers().clone(),
            body: response.text().await.expect("a body"),
        };
        let what = format!("{method} {template} → {}", seen.status);
        assert_eq!(seen.status, expected, "{what}: {}", seen.body);
        let documented = self
            .contract
            .response_doc(method, template, seen.status)
            .unwrap_or_else(|| panic!("{what} is not documented"));
        self.check_headers(&what, documented, &seen);
        self.check_body(&what, documented, &seen);
        self.seen.insert((method.to_owned(), template.to_owned(), seen.status));
        seen
    }

    fn check_headers(&self, what: &str, documented: &Value, seen: &Seen) {
        for (name, header_doc) in documented.get("headers").and_then(Value::as_object).into_iter().flatten() {
            let header_doc = self.contract.resolve(header_doc);
            match seen.headers.get(name.as_str()).and_then(|v| v.to_str().ok()) {
                Some(value) => {
                    let mut errors = Vec::new();
                    self.contract.check(&header_doc["schema"], &json!(value), name, &mut errors);
                    assert!(errors.is_empty(), "{what}: header {errors:?}");
                }
                None => assert_ne!(header_doc["required"], json!(true), "{what}: required header {name} is missing"),
            }
        }
    }

    fn check_body(&self, what: &str, documented: &Value, seen: &Seen) {
        let Some(content) = documented.get("content").and_then(Value::as_object) else {
            assert!(seen.body.is_empty(), "{what}: documented without a body, got {:?}", seen.body);
            return;
        };
        let content_type = seen.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        let media_type = content_type.split(';').next().unwrap_or("").trim();
        let media = content
            .get(media_type)
            .unwrap_or_else(|| panic!("{what}: content type {content_type:?} is not one of {:?}", content.keys()));
        let value = if media_type == "application/json" {
            serde_json::from_str(&seen.body).unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {}", seen.body))
        } else {
            json!(seen.body)
        };
        let mut errors = Vec::new();
        self.contract.check(&media["schema"], &value, "body", &mut errors);
        assert!(errors.is_empty(), "{what}: {errors:?}\n{}", seen.body);
    }

    async fn create(&mut self, key: &str, content: &str) -> Value {
        let request =
            self.request("POST", "/api/v1/pastes").header("Idempotency-Key", key).json(&json!({ "content": content }));
        self.expect("POST", "/api/v1/pastes", request, 201).await.json()
    }
}

async fn contract(cluster: &Cluster) -> Contract {
    let response = reqwest::get(format!("{}/api/v1/openapi.json", cluster.http)).await.expect("the document is served");
    assert_eq!(response.status(), 200);
    let doc: Value = response.json().await.expect("the document is JSON");
    assert!(doc["openapi"].as_str().is_some_and(|v| v.starts_with("3.1")), "OpenAPI 3.1");
    Contract { doc }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_documented_status_is_what_the_server_answers() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let contract = contract(&cluster).await;
    let mut probe =
        Probe { contract: &contract, client: Client::new(), base: cluster.http.clone(), seen: BTreeSet::new() };
    let text = contract.doc.to_string();
    for promise in [
        "Idempotency-Key",
        "25 hours",
        "Idempotent-Replayed",
        "Retry-After",
        "after 25 hours a retry with the same key creates a new paste",
    ] {
        assert!(text.contains(promise), "the document says {promise:?}");
    }

    // Create: 201, its replay, the text form, 400, 409, 413.
    let key = new_key();
    let created = probe.create(&key, "hello").await;
    let replay =
        probe.request("POST", "/api/v1/pastes").header("Idempotency-Key", &key).json(&json!({ "content": "hello" }));
    let replay = probe.expect("POST", "/api/v1/pastes", replay, 201).await;
    assert_eq!(replay.headers["idempotent-replayed"], "true");
    assert_eq!(replay.json(), created);
    let as_text = probe
        .request("POST", "/api/v1/pastes?expires_in_seconds=60")
        .header("Idempotency-Key", new_key())
        .header(header::ACCEPT, "text/plain")
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body("raw text");
    let as_text = probe.expect("POST", "/api/v1/pastes", as_text, 201).await;
    assert!(as_text.body.ends_with('\n') && as_text.body.lines().count() == 2);
    let no_key = probe.request("POST", "/api/v1/pastes").json(&json!({ "content": "x" }));
    probe.expect("POST", "/api/v1/pastes", no_key, 400).await;
    let bad_query =
        probe.request("POST", "/api/v1/pastes?expires_in_seconds=soon").header("Idempotency-Key", new_key()).body("x");
    assert_eq!(probe.expect("POST", "/api/v1/pastes", bad_query, 400).await.json()["error"]["code"], "invalid_expiry");
    let conflict =
        probe.request("POST", "/api/v1/pastes").header("Idempotency-Key", &key).json(&json!({ "content": "other" }));
    probe.expect("POST", "/api/v1/pastes", conflict, 409).await;
    let large =
        probe.request("POST", "/api/v1/pastes").header("Idempotency-Key", new_key()).body("x".repeat(1024 * 1024 + 1));
    probe.expect("POST", "/api/v1/pastes", large, 413).await;

    // Reads.
    let id = created["id"].as_str().unwrap().to_owned();
    let token = created["delete_token"].as_str().unwrap().to_owned();
    let missing = "00000000000000";
    for (template, concrete_ok, concrete_missing) in [
        ("/api/v1/pastes/{id}", format!("/api/v1/pastes/{id}"), format!("/api/v1/pastes/{missing}")),
        ("/raw/{id}", format!("/raw/{id}"), format!("/raw/{missing}")),
        ("/{id}", format!("/{id}"), format!("/{missing}")),
        ("/{id}/delete", format!("/{id}/delete"), format!("/{missing}/delete")),
    ] {
        let ok = probe.request("GET", &concrete_ok);
        let ok = probe.expect("GET", template, ok, 200).await;
        if let Some(tag) = ok.headers.get(header::ETAG) {
            let unchanged = probe.request("GET", &concrete_ok).header(header::IF_NONE_MATCH, tag);
            probe.expect("GET", template, unchanged, 304).await;
        }
        let gone = probe.request("GET", &concrete_missing);
        probe.expect("GET", template, gone, 404).await;
    }
    // The share link of a burn paste, asked for by curl: not read, 409.
    let burn = probe
        .request("POST", "/api/v1/pastes")
        .header("Idempotency-Key", new_key())
        .json(&json!({ "content": "once", "burn_after_reading": true }));
    let burn = probe.expect("POST", "/api/v1/pastes", burn, 201).await.json();
    let sealed = probe.request("GET", &format!("/{}", burn["id"].as_str().unwrap()));
    probe.expect("GET", "/{id}", sealed, 409).await;
    // The page's button (a plain paste: the same page, nothing burned), and the QR code.
    let reveal = probe.request("POST", &format!("/{id}"));
    probe.expect("POST", "/{id}", reveal, 200).await;
    let reveal_missing = probe.request("POST", &format!("/{missing}"));
    probe.expect("POST", "/{id}", reveal_missing, 404).await;
    let qr = probe.request("GET", &format!("/{id}/qr.svg"));
    assert!(probe.expect("GET", "/{id}/qr.svg", qr, 200).await.body.contains("<svg"));
    let qr_malformed = probe.request("GET", "/not-an-id/qr.svg");
    probe.expect("GET", "/{id}/qr.svg", qr_malformed, 404).await;
    let page = probe.request("GET", "/");
    let page = probe.expect("GET", "/", page, 200).await;
    assert!(page.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap().contains("script-src 'self'"));
    for asset in ["app.js", "theme.js", "style.css", "highlight.css"] {
        let request = probe.request("GET", &format!("/assets/{asset}"));
        probe.expect("GET", "/assets/{name}", request, 200).await;
    }
    let no_asset = probe.request("GET", "/assets/nope.js");
    probe.expect("GET", "/assets/{name}", no_asset, 404).await;
    let doc = probe.request("GET", "/api/v1/openapi.json");
    probe.expect("GET", "/api/v1/openapi.json", doc, 200).await;
    let health = probe.request("GET", "/healthz");
    probe.expect("GET", "/healthz", health, 200).await;

    // Deletes, through the API and through the HTML form.
    let wrong = probe.request("DELETE", &format!("/api/v1/pastes/{id}")).bearer_auth("wrong");
    probe.expect("DELETE", "/api/v1/pastes/{id}", wrong, 403).await;
    let right = probe.request("DELETE", &format!("/api/v1/pastes/{id}")).bearer_auth(&token);
    probe.expect("DELETE", "/api/v1/pastes/{id}", right, 204).await;
    let again = probe.request("DELETE", &format!("/api/v1/pastes/{id}")).bearer_auth(&token);
    let again = probe.expect("DELETE", "/api/v1/pastes/{id}", again, 404).await;
    let never = probe.request("GET", &format!("/api/v1/pastes/{missing}")).send().await.unwrap().text().await.unwrap();
    assert_eq!(again.body, never, "deleted and never-created answer the same body");

    let second = probe.create(&new_key(), "delete me with the form").await;
    let (id2, token2) =
        (second["id"].as_str().unwrap().to_owned(), second["delete_token"].as_str().unwrap().to_owned());
    let form_path = format!("/{id2}/delete");
    let no_token = probe.request("POST", &form_path).form(&[("other", "x")]);
    probe.expect("POST", "/{id}/delete", no_token, 400).await;
    let wrong = probe.request("POST", &form_path).form(&[("token", "wrong")]);
    probe.expect("POST", "/{id}/delete", wrong, 403).await;
    let right = probe.request("POST", &form_path).form(&[("token", token2.as_str())]);
    probe.expect("POST", "/{id}/delete", right, 200).await;
    let again = probe.request("POST", &form_path).form(&[("token", token2.as_str())]);
    probe.expect("POST", "/{id}/delete", again, 404).await;

    // Limits, reports and a takedown (docs/operations.md#reports-and-takedowns).
    let limits = probe.request("GET", "/api/v1/limits");
    probe.expect("GET", "/api/v1/limits", limits, 200).await;
    let reported = probe.create(&new_key(), "report me").await;
    let rid = reported["id"].as_str().unwrap().to_owned();
    let reports = format!("/api/v1/pastes/{rid}/reports");
    let report = probe.request("POST", &reports).json(&json!({ "reason": "spam", "note": "ads" }));
    probe.expect("POST", "/api/v1/pastes/{id}/reports", report, 201).await;
    let unknown_reason = probe.request("POST", &reports).json(&json!({ "reason": "boring" }));
    probe.expect("POST", "/api/v1/pastes/{id}/reports", unknown_reason, 400).await;
    let nobody = probe.request("POST", &format!("/api/v1/pastes/{missing}/reports")).json(&json!({ "reason": "spam" }));
    probe.expect("POST", "/api/v1/pastes/{id}/reports", nobody, 404).await;
    let form = probe.request("GET", &format!("/{rid}/report"));
    probe.expect("GET", "/{id}/report", form, 200).await;
    let form_missing = probe.request("GET", &format!("/{missing}/report"));
    probe.expect("GET", "/{id}/report", form_missing, 404).await;
    let sent = probe.request("POST", &format!("/{rid}/report")).form(&[("reason", "malware"), ("note", "")]);
    probe.expect("POST", "/{id}/report", sent, 200).await;
    let no_reason = probe.request("POST", &format!("/{rid}/report")).form(&[("note", "x")]);
    probe.expect("POST", "/{id}/report", no_reason, 400).await;
    let sent_missing = probe.request("POST", &format!("/{missing}/report")).form(&[("reason", "spam")]);
    probe.expect("POST", "/{id}/report", sent_missing, 404).await;
    let taken = pastebin_core::PasteId::parse(&rid).unwrap();
    cluster.paste_client(0).take_down(&taken, "spam", "openapi probe").await.expect("P takes it down");
    for (template, concrete) in [
        ("/api/v1/pastes/{id}", format!("/api/v1/pastes/{rid}")),
        ("/raw/{id}", format!("/raw/{rid}")),
        ("/{id}", format!("/{rid}")),
        ("/{id}/report", format!("/{rid}/report")),
    ] {
        let gone = probe.request("GET", &concrete);
        probe.expect("GET", template, gone, 410).await;
    }
    let report_gone = probe.request("POST", &reports).json(&json!({ "reason": "spam" }));
    probe.expect("POST", "/api/v1/pastes/{id}/reports", report_gone, 410).await;

    // A public instance's refusals (docs/security.md): the same gateway
    // again, with create tokens, a rate limit and a short body timeout.
    let tokens = tempfile::tempdir().unwrap();
    let tokens_file = tokens.path().join("create-tokens").to_str().unwrap().to_owned();
    let added = std::process::Command::new(pastebin_tests::cluster::testbed_binary())
        .args(["ctl", "tokens", "--file", &tokens_file, "add", "probe"])
        .output()
        .unwrap();
    assert!(added.status.success(), "{}", String::from_utf8_lossy(&added.stderr));
    let create_token = String::from_utf8(added.stdout).unwrap().trim().to_owned();
    let public = [
        ("PASTEBIN_REQUIRE_CREATE_TOKEN", "true"),
        ("PASTEBIN_CREATE_TOKENS_FILE", tokens_file.as_str()),
        ("PASTEBIN_CREATE_RATE_LIMIT", "2/min"),
        ("PASTEBIN_BODY_READ_TIMEOUT_SECS", "1"),
        ("PASTEBIN_DELETE_RATE_LIMIT", "1/hour"),
        ("PASTEBIN_REPORT_RATE_LIMIT", "1/hour"),
    ];
    cluster.gateway.restart(&public, &["gateway-http", "gateway-grpc", "admin"]).await;
    let anonymous =
        probe.request("POST", "/api/v1/pastes").header("Idempotency-Key", new_key()).json(&json!({ "content": "x" }));
    let anonymous = probe.expect("POST", "/api/v1/pastes", anonymous, 401).await;
    assert_eq!(anonymous.json()["error"]["code"], "create_token_required");
    // A body that stops after 2 of its 10 bytes.
    let stalled = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from_static(b"ab"))])
        .chain(futures::stream::pending());
    let stalled = probe
        .request("POST", "/api/v1/pastes")
        .header("Idempotency-Key", new_key())
        .bearer_auth(&create_token)
        .header(header::CONTENT_TYPE, "text/plain")
        .header(header::CONTENT_LENGTH, "10")
        .body(reqwest::Body::wrap_stream(stalled));
    let stalled = probe.expect("POST", "/api/v1/pastes", stalled, 408).await;
    assert_eq!(stalled.json()["error"]["code"], "request_timeout");
    // The stalled body spent one create of the two a minute; the next is the last.
    for expected in [201, 429] {
        let member = probe
            .request("POST", "/api/v1/pastes")
            .header("Idempotency-Key", new_key())
            .bearer_auth(&create_token)
            .json(&json!({ "content": "x" }));
        probe.expect("POST", "/api/v1/pastes", member, expected).await;
    }
    // The delete rate: one delete an hour from this address; the API and the form share it.
    let spent = probe.request("DELETE", "/api/v1/pastes/00000000000000").bearer_auth("t");
    probe.expect("DELETE", "/api/v1/pastes/{id}", spent, 404).await;
    let limited = probe.request("DELETE", "/api/v1/pastes/00000000000000").bearer_auth("t");
    assert_eq!(
        probe.expect("DELETE", "/api/v1/pastes/{id}", limited, 429).await.json()["error"]["code"],
        "rate_limited"
    );
    let limited_form = probe.request("POST", "/00000000000000/delete").form(&[("token", "t")]);
    probe.expect("POST", "/{id}/delete", limited_form, 429).await;
    // The report rate: one an hour from this address.
    let spent = probe.request("POST", "/api/v1/pastes/00000000000000/reports").json(&json!({ "reason": "spam" }));
    probe.expect("POST", "/api/v1/pastes/{id}/reports", spent, 404).await;
    let limited = probe.request("POST", "/api/v1/pastes/00000000000000/reports").json(&json!({ "reason": "spam" }));
    probe.expect("POST", "/api/v1/pastes/{id}/reports", limited, 429).await;
    let limited_form = probe.request("POST", "/00000000000000/report").form(&[("reason", "spam")]);
    probe.expect("POST", "/{id}/report", limited_form, 429).await;
    let open = [
        ("PASTEBIN_DELETE_RATE_LIMIT", "1000000/s"),
        ("PASTEBIN_REPORT_RATE_LIMIT", "1000000/s"),
        ("PASTEBIN_REQUIRE_CREATE_TOKEN", "false"),
        ("PASTEBIN_CREATE_RATE_LIMIT", "1000000/s"),
        ("PASTEBIN_BODY_READ_TIMEOUT_SECS", "10"),
    ];
    cluster.gateway.restart(&open, &["gateway-http", "gateway-grpc", "admin"]).await;

    // 503s: the paste service goes away. A create leaves its key pending.
    let third = probe.create(&new_key(), "read me while P is down").await;
    let id3 = third["id"].as_str().unwrap().to_owned();
    for process in &mut cluster.pastes {
        process.kill().await;
    }
    let down =
        probe.request("POST", "/api/v1/pastes").header("Idempotency-Key", new_key()).json(&json!({ "content": "x" }));
    probe.expect("POST", "/api/v1/pastes", down, 503).await;
    for (method, template, concrete) in [
        ("GET", "/api/v1/pastes/{id}", format!("/api/v1/pastes/{id3}")),
        ("DELETE", "/api/v1/pastes/{id}", format!("/api/v1/pastes/{id3}")),
        ("GET", "/raw/{id}", format!("/raw/{id3}")),
        ("GET", "/{id}", format!("/{id3}")),
        ("GET", "/{id}/delete", format!("/{id3}/delete")),
    ] {
        let request = probe.request(method, &concrete).bearer_auth("t");
        probe.expect(method, template, request, 503).await;
    }
    let form = probe.request("POST", &format!("/{id3}/delete")).form(&[("token", "t")]);
    probe.expect("POST", "/{id}/delete", form, 503).await;
    let reveal = probe.request("POST", &format!("/{id3}"));
    probe.expect("POST", "/{id}", reveal, 503).await;

    // 507: an instance whose watermark asks for more free space than any disk has
    // (a deployment's gateway watches only a local objects directory; `up`, its data).
    let data = tempfile::tempdir().unwrap();
    let mut up = vec!["up".to_owned(), "--data-dir".to_owned(), data.path().to_str().unwrap().to_owned()];
    for flag in ["--http", "--grpc", "--admin"] {
        up.extend([flag.to_owned(), "127.0.0.1:0".to_owned()]);
    }
    up.extend(["--min-free-bytes".to_owned(), u64::MAX.to_string()]);
    let full = pastebin_tests::cluster::Process::start(up, vec![], &["gateway-http"]).await;
    probe.base = format!("http://{}", full.address("gateway-http"));
    let refused =
        probe.request("POST", "/api/v1/pastes").header("Idempotency-Key", new_key()).json(&json!({ "content": "x" }));
    let refused = probe.expect("POST", "/api/v1/pastes", refused, 507).await;
    assert_eq!(refused.headers[header::RETRY_AFTER], "10");

    let documented = contract.documented();
    let never_seen: Vec<_> = documented.difference(&probe.seen).collect();
    assert!(never_seen.is_empty(), "documented but never produced here: {never_seen:?}");
}

/// Every routed path is documented with exactly the methods it serves: an
/// undocumented method on a documented path is a 405 whose `Allow` lists the
/// documented methods, and paths outside the document are 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_serves_nothing_undocumented() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let contract = contract(&cluster).await;
    let client = Client::new();
    let sample = |template: &str| template.replace("{id}", "00000000000000").replace("{name}", "app.js");
    for (template, item) in contract.doc["paths"].as_object().unwrap() {
        let mut documented: BTreeSet<String> =
            METHODS.iter().filter(|m| item.get(**m).is_some()).map(|m| m.to_uppercase()).collect();
        if documented.contains("GET") {
            documented.insert("HEAD".into());
        }
        for probe in ["PATCH", "PUT", "OPTIONS"] {
            if documented.contains(probe) {
                continue;
            }
            let response = client
                .request(Method::from_bytes(probe.as_bytes()).unwrap(), format!("{}{}", cluster.http, sample(template)))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 405, "{probe} {template} is not documented, so not served");
            let allow: BTreeSet<String> =
                response.headers()[header::ALLOW].to_str().unwrap().split(',').map(|m| m.trim().to_owned()).collect();
            assert_eq!(allow, documented, "{template} serves exactly the documented methods");
        }
    }
    for path in
        ["/api", "/api/v1", "/api/v2/pastes", "/api/v1/pastes/00000000000000/x", "/assets", "/a/b/c", "/metrics/x/y"]
    {
        let response = client.get(format!("{}{path}", cluster.http)).send().await.unwrap();
        assert_eq!(response.status(), 404, "GET {path} is not a route");
    }
}

/// schemathesis, from the document, against a real deployment: no 5xx, no
/// answer that contradicts the document. Needs schemathesis (PyPI).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzzing_from_the_document_finds_nothing() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let output = tokio::process::Command::new(root.join("scripts/fuzz-api"))
        .arg(&cluster.http)
        .current_dir(&root)
        .kill_on_drop(true)
        .output()
        .await
        .expect("scripts/fuzz-api runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_ne!(
        output.status.code(),
        Some(3),
        "schemathesis is not installed: python3 -m venv .venv && .venv/bin/pip install schemathesis\n{stderr}"
    );
    assert!(
        output.status.success(),
        "schemathesis found problems:\n{stdout}\n{stderr}\ngateway log:\n{}",
        cluster.gateway.logs()
    );
}
