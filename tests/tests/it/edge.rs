//! The public edge (docs/design.md#edge, docs/security.md) against a real
//! `pastebin up`: slow and stalled clients, floods and oversized requests,
//! the headers and envelopes of every answer, the create rate limit and
//! create tokens, private files, secrets kept out of debug logs, and values
//! at the extremes. Every wait is bounded, every socket is on loopback.

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    time::Duration,
};

use pastebin_tests::{api::new_key, cluster::Process};
use reqwest::{header, Client, StatusCode};
use serde_json::{json, Value};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// A running `pastebin up` on port 0 with its own data directory.
struct Up {
    process: Process,
    http: String,
    data: tempfile::TempDir,
}

const PARTS: &[&str] = &["key-service", "paste-service", "gateway-http", "gateway-grpc", "admin"];

fn up_args(data: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["up", "--data-dir", data.to_str().unwrap()].map(String::from).to_vec();
    for flag in ["--http", "--grpc", "--admin"] {
        args.extend([flag.to_string(), "127.0.0.1:0".to_string()]);
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

impl Up {
    async fn start(extra: &[&str]) -> Up {
        Self::start_with_env(extra, &[]).await
    }

    async fn start_with_env(extra: &[&str], env: &[(&str, &str)]) -> Up {
        let data = tempfile::tempdir().unwrap();
        let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let process = Process::start(up_args(data.path(), extra), env, PARTS).await;
        let http = format!("http://{}", process.address("gateway-http"));
        Up { process, http, data }
    }

    fn address(&self) -> String {
        self.process.address("gateway-http").to_owned()
    }

    async fn create(
        &self,
        key: &str,
        content: &str,
        extra: &[(&str, &str)],
    ) -> (StatusCode, reqwest::header::HeaderMap, Value) {
        let mut request = Client::new()
            .post(format!("{}/api/v1/pastes", self.http))
            .header("Idempotency-Key", key)
            .json(&json!({ "content": content }))
            .timeout(Duration::from_secs(10));
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        let (status, headers) = (response.status(), response.headers().clone());
        let body = response.text().await.unwrap();
        (status, headers, serde_json::from_str(&body).unwrap_or(Value::String(body)))
    }
}

/// Everything the server sends until it closes the connection, or `None`
/// if it is still open after `bound` (the test then fails, not hangs).
async fn read_until_closed(stream: &mut TcpStream, bound: Duration) -> Option<String> {
    let mut received = Vec::new();
    let read = tokio::time::timeout(bound, async {
        let mut buffer = [0u8; 4096];
        loop {
            match stream.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    read.ok().map(|()| String::from_utf8_lossy(&received).into_owned())
}

const BOUND: Duration = Duration::from_secs(20);

fn error_code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or_else(|| panic!("not the error envelope: {body}"))
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_cut_off() {
    let up = Up::start(&["--header-read-timeout-secs", "1"]).await;
    let mut slow = TcpStream::connect(up.address()).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n").await.unwrap();
    let answer =
        read_until_closed(&mut slow, BOUND).await.expect("the server closes a connection stuck in its headers");
    assert!(!answer.contains("200 OK"), "a request never finished is never served: {answer}");

    // The same timeout closes a kept-alive connection that goes quiet.
    let mut idle = TcpStream::connect(up.address()).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let answer = read_until_closed(&mut idle, BOUND).await.expect("an idle kept-alive connection is closed");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test]
async fn a_body_that_stalls_is_answered_408_in_the_envelope() {
    let up = Up::start(&["--body-read-timeout-secs", "1"]).await;
    let mut stalled = TcpStream::connect(up.address()).await.unwrap();
    let head = format!(
        "POST /api/v1/pastes HTTP/1.1\r\nHost: x\r\nIdempotency-Key: {}\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nab",
        new_key()
    );
    stalled.write_all(head.as_bytes()).await.unwrap();
    let answer =
        read_until_closed(&mut stalled, BOUND).await.expect("a stalled body is answered, not waited on forever");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("\"request_timeout\""), "{answer}");
}

#[tokio::test]
async fn an_oversized_declared_body_is_refused_before_it_is_sent() {
    let up = Up::start(&[]).await;
    let mut stream = TcpStream::connect(up.address()).await.unwrap();
    let head = format!(
        "POST /api/v1/pastes HTTP/1.1\r\nHost: x\r\nIdempotency-Key: {}\r\nContent-Type: text/plain\r\nContent-Length: 1000000000\r\n\r\n",
        new_key()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // Not one byte of the gigabyte is sent: the answer comes anyway.
    let answer = read_until_closed(&mut stream, BOUND).await.expect("answered without reading the body");
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("\"content_too_large\""), "{answer}");
}

#[tokio::test]
async fn connections_and_requests_past_their_caps_are_turned_away_at_once() {
    let up = Up::start(&[
        "--max-connections",
        "3",
        "--max-requests-in-flight",
        "1",
        "--header-read-timeout-secs",
        "60",
        "--body-read-timeout-secs",
        "60",
    ])
    .await;
    // One request holds the only request slot: its body never finishes.
    let mut holder = TcpStream::connect(up.address()).await.unwrap();
    let head = format!(
        "POST /api/v1/pastes HTTP/1.1\r\nHost: x\r\nIdempotency-Key: {}\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nab",
        new_key()
    );
    holder.write_all(head.as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut second = TcpStream::connect(up.address()).await.unwrap();
    second.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await.unwrap();
    let answer = read_until_closed(&mut second, BOUND).await.expect("a request past the cap is answered at once");
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.to_ascii_lowercase().contains("retry-after: 1"), "{answer}");
    assert!(answer.contains("\"overloaded\""), "{answer}");
    drop(second);
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Three connections are open (the holder and two idle ones); a fourth is closed unanswered.
    let _idle = TcpStream::connect(up.address()).await.unwrap();
    let _idle_too = TcpStream::connect(up.address()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut flood = TcpStream::connect(up.address()).await.unwrap();
    let _ = flood.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let answer = read_until_closed(&mut flood, BOUND).await.expect("a connection past the cap is closed");
    assert!(answer.is_empty(), "no request is served past the connection cap: {answer}");

    // Both refusals are counted for the operator.
    let metrics = Client::new()
        .get(format!("http://{}/metrics", up.process.address("admin")))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for reason in ["connection_cap", "overloaded"] {
        let line = format!("pastebin_edge_refusals_total{{reason=\"{reason}\"}}");
        assert!(metrics.contains(&line), "{line} in:\n{metrics}");
    }

    // Freed connections make room again.
    drop((holder, _idle, _idle_too));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let health = Client::new().get(format!("{}/healthz", up.http)).send().await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
}

#[tokio::test]
async fn every_answer_carries_the_edge_headers_and_every_error_the_envelope() {
    let up = Up::start(&[]).await;
    let client = Client::new();
    let nosniff =
        |headers: &header::HeaderMap| headers.get(header::X_CONTENT_TYPE_OPTIONS).map(|v| v.as_bytes().to_vec());

    let (status, headers, created) = up.create(&new_key(), "edge headers", &[]).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(headers[header::CACHE_CONTROL], "no-store", "the answer with the delete token is never cached");
    assert_eq!(nosniff(&headers), Some(b"nosniff".to_vec()));
    let id = created["id"].as_str().unwrap().to_owned();
    let token = created["delete_token"].as_str().unwrap().to_owned();

    for path in [format!("/api/v1/pastes/{id}"), format!("/raw/{id}"), "/healthz".into(), "/api/v1/pastes/nope".into()]
    {
        let response = client.get(format!("{}{path}", up.http)).send().await.unwrap();
        assert_eq!(nosniff(response.headers()), Some(b"nosniff".to_vec()), "{path}");
    }
    let raw = client.get(format!("{}/raw/{id}", up.http)).send().await.unwrap();
    assert_eq!(raw.headers()[header::CONTENT_SECURITY_POLICY], "sandbox");

    // 405 is an envelope, with Allow kept.
    let put = client.put(format!("{}/api/v1/pastes", up.http)).send().await.unwrap();
    assert_eq!(put.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(put.headers().contains_key(header::ALLOW));
    assert_eq!(nosniff(put.headers()), Some(b"nosniff".to_vec()));
    assert_eq!(error_code(&put.json().await.unwrap()), "method_not_allowed");

    // Two Idempotency-Key headers: 400, not the first one silently.
    let twice = client
        .post(format!("{}/api/v1/pastes", up.http))
        .header("Idempotency-Key", new_key())
        .header("Idempotency-Key", new_key())
        .json(&json!({ "content": "which key?" }))
        .send()
        .await
        .unwrap();
    assert_eq!(twice.status(), StatusCode::BAD_REQUEST);
    assert_eq!(error_code(&twice.json().await.unwrap()), "invalid_idempotency_key");

    // A bad expiry has its own code in a JSON body as in the query.
    for body in
        [json!({ "content": "x", "expires_in_seconds": "1h" }), json!({ "content": "x", "expires_in_seconds": -5 })]
    {
        let response = client
            .post(format!("{}/api/v1/pastes", up.http))
            .header("Idempotency-Key", new_key())
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{body}");
        assert_eq!(error_code(&response.json().await.unwrap()), "invalid_expiry", "{body}");
    }
    let query = client
        .post(format!("{}/api/v1/pastes?expires_in_seconds=18446744073709551615", up.http))
        .header("Idempotency-Key", new_key())
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(error_code(&query.json().await.unwrap()), "invalid_expiry");

    // The auth scheme is case-insensitive.
    let deleted = client
        .delete(format!("{}/api/v1/pastes/{id}", up.http))
        .header("authorization", format!("bearer {token}"))
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn creates_past_the_rate_limit_get_429_with_retry_after() {
    let up = Up::start(&["--create-rate-limit", "2/min"]).await;
    for n in 0..2 {
        let (status, _, _) = up.create(&new_key(), &format!("within the limit {n}"), &[]).await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let key = new_key();
    let (status, headers, body) = up.create(&key, "one too many", &[]).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(error_code(&body), "rate_limited");
    let retry_after: u64 = headers[header::RETRY_AFTER].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    // X-Forwarded-For is not believed from an untrusted peer: still limited.
    let (status, _, _) = up.create(&new_key(), "spoofed", &[("x-forwarded-for", "203.0.113.7")]).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);

    // Behind a trusted proxy, each forwarded client has its own budget.
    let proxied = Up::start(&["--create-rate-limit", "1/min", "--trusted-proxy", "127.0.0.1"]).await;
    let alice = [("x-forwarded-for", "203.0.113.1")];
    assert_eq!(proxied.create(&new_key(), "alice 1", &alice).await.0, StatusCode::CREATED);
    assert_eq!(proxied.create(&new_key(), "alice 2", &alice).await.0, StatusCode::TOO_MANY_REQUESTS);
    let bob = [("x-forwarded-for", "198.51.100.2, 127.0.0.1")];
    assert_eq!(proxied.create(&new_key(), "bob 1", &bob).await.0, StatusCode::CREATED);
}

/// Runs `pastebin-testbed ARGS` to the end; (exit code, stdout, stderr).
fn testbed(args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let output = std::process::Command::new(pastebin_tests::cluster::testbed_binary())
        .args(args)
        .envs(env.iter().copied())
        .env_remove("PASTEBIN_CONFIG")
        .output()
        .unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(output.stdout), text(output.stderr))
}

#[tokio::test]
async fn create_tokens_gate_creates_and_replays_and_follow_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("create-tokens");
    let file_arg = file.to_str().unwrap();
    let (code, token, stderr) = testbed(&["ctl", "tokens", "--file", file_arg, "add", "ci"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let token = token.trim().to_owned();
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(!std::fs::read_to_string(&file).unwrap().contains(&token), "only the hash is stored");
    let (code, listing, _) = testbed(&["ctl", "tokens", "--file", file_arg, "list"], &[]);
    assert_eq!(code, 0);
    assert!(listing.contains("ci") && !listing.contains(&token), "{listing}");

    let up = Up::start(&["--require-create-token", "--create-tokens-file", file_arg]).await;
    let key = new_key();
    let (status, headers, body) = up.create(&key, "members only", &[]).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNAUTHORIZED, "create_token_required"));
    assert_eq!(headers[header::WWW_AUTHENTICATE], "Bearer");
    let (status, _, body) = up.create(&key, "members only", &[("authorization", "Bearer pbc_wrong")]).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNAUTHORIZED, "invalid_create_token"));

    let bearer = format!("bearer {token}");
    let (status, _, created) = up.create(&key, "members only", &[("authorization", &bearer)]).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    // A replay of the key without a valid token learns nothing, not even the delete token.
    let (status, _, body) = up.create(&key, "members only", &[]).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(!body.to_string().contains(created["delete_token"].as_str().unwrap()));
    let (status, headers, replayed) = up.create(&key, "members only", &[("authorization", &bearer)]).await;
    assert_eq!((status, &replayed), (StatusCode::CREATED, &created));
    assert_eq!(headers["idempotent-replayed"], "true");

    // The bundled client sends its token (PASTEBIN_CREATE_TOKEN); without one it is refused.
    let note = dir.path().join("note.txt");
    std::fs::write(&note, "from the client").unwrap();
    let (note_arg, state_arg) = (note.to_str().unwrap(), dir.path().join("state"));
    let paste = ["paste", note_arg, "--server", &up.http, "--state-dir", state_arg.to_str().unwrap()];
    let (code, _, stderr) = testbed(&paste, &[]);
    assert_eq!(code, 1, "refused, and nothing was created: {stderr}");
    assert!(stderr.contains("create_token_required"), "{stderr}");
    let (code, stdout, stderr) = testbed(&[&paste[..], &["--new"]].concat(), &[("PASTEBIN_CREATE_TOKEN", &token)]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with(&up.http), "{stdout}");

    // Over gRPC too.
    let grpc = format!("http://{}", up.process.address("gateway-grpc"));
    let mut api = pastebin_proto::api::v1::paste_api_client::PasteApiClient::connect(grpc).await.unwrap();
    let request = || pastebin_proto::api::v1::CreatePasteRequest {
        request_id: new_key(),
        content: "grpc members only".into(),
        expires_in_seconds: None,
        ..Default::default()
    };
    let refused = api.create_paste(request()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::Unauthenticated);
    let mut with_token = tonic::Request::new(request());
    with_token.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    api.create_paste(with_token).await.unwrap();

    // Revoked in the file: refused from the next create, no restart.
    let (code, _, stderr) = testbed(&["ctl", "tokens", "--file", file_arg, "revoke", "ci"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let (status, _, body) = up.create(&new_key(), "after revoke", &[("authorization", &bearer)]).await;
    assert_eq!((status, error_code(&body)), (StatusCode::UNAUTHORIZED, "invalid_create_token"));
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).permissions().mode() & 0o777
}

/// Every file and directory under `root`, itself included.
fn walk(root: &Path) -> Vec<PathBuf> {
    let mut found = vec![root.to_owned()];
    if root.is_dir() {
        for entry in std::fs::read_dir(root).unwrap() {
            found.extend(walk(&entry.unwrap().path()));
        }
    }
    found
}

#[tokio::test]
async fn everything_up_writes_is_private_even_with_umask_000() {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().join("pastebin-data");
    let mut args = vec!["-c".to_string(), "umask 000 && exec \"$0\" \"$@\"".into()];
    args.push(pastebin_tests::cluster::testbed_binary().to_str().unwrap().to_owned());
    args.extend(up_args(&data_dir, &[]));
    let process = Process::start_program("sh".as_ref(), args, vec![], PARTS).await;
    let http = format!("http://{}", process.address("gateway-http"));
    let created = pastebin_tests::api::create(&http, Some(&new_key()), "private bytes").await.unwrap();
    assert_eq!(created.status, StatusCode::CREATED);

    let paths = walk(&data_dir);
    for expected in ["keys.db", "pastes.db", "endpoints.json", "objects"] {
        assert!(paths.iter().any(|p| p.ends_with(expected)), "{expected} is in {paths:?}");
    }
    assert!(paths.iter().any(|p| p.to_string_lossy().ends_with("-wal")), "WAL files exist to check: {paths:?}");
    for path in &paths {
        let expected = if path.is_dir() { 0o700 } else { 0o600 };
        assert_eq!(mode(path), expected, "{} is {:o}", path.display(), mode(path));
    }
    drop(process);
}

/// Every occurrence of any of `secrets` in `logs`.
fn leaks(logs: &str, secrets: &[String]) -> Vec<String> {
    logs.lines().filter(|line| secrets.iter().any(|secret| line.contains(secret.as_str()))).map(str::to_owned).collect()
}

#[tokio::test]
async fn debug_logs_name_a_key_only_by_its_short_hash_through_failing_paths() {
    let up = Up::start_with_env(&[], &[("RUST_LOG", "debug")]).await;
    let mut secrets = Vec::new();

    // A create that fails at the object PUT (the store's directory is not
    // one) is aborted; the same key then succeeds once the store is back.
    let store = up.data.path().join("objects/pastes");
    let parked = up.data.path().join("objects/parked");
    std::fs::rename(&store, &parked).unwrap();
    std::fs::write(&store, b"not a directory").unwrap();
    let key = new_key();
    let (status, _, _) = up.create(&key, "first through a failure", &[]).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    std::fs::remove_file(&store).unwrap();
    std::fs::rename(&parked, &store).unwrap();
    let (status, _, created) = up.create(&key, "first through a failure", &[]).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    secrets.push(created["delete_token"].as_str().unwrap().to_owned());
    // A replay, a conflict and a bad request on the same key.
    assert_eq!(up.create(&key, "first through a failure", &[]).await.0, StatusCode::CREATED);
    assert_eq!(up.create(&key, "another request", &[]).await.0, StatusCode::CONFLICT);
    // A delete with its token.
    let id = created["id"].as_str().unwrap();
    let deleted =
        Client::new().delete(format!("{}/api/v1/pastes/{id}", up.http)).bearer_auth(&secrets[0]).send().await.unwrap();
    assert_eq!(deleted.status(), StatusCode::NO_CONTENT);

    tokio::time::sleep(Duration::from_millis(500)).await;
    let logs = up.process.logs();
    let short_hash = pastebin_core::IdempotencyKey::parse(&key).unwrap().short_hash();
    assert!(logs.contains(&short_hash), "the create is traceable by the key's short hash:\n{logs}");
    assert!(logs.contains("DEBUG"), "logs are at debug, so the check covers them");
    let mut all = secrets.clone();
    all.extend([key.clone(), key.to_uppercase(), key.replace('-', "")]);
    let found = leaks(&logs, &all);
    assert!(found.is_empty(), "a key or token reached the logs:\n{}", found.join("\n"));
}

/// The bundled client's own debug log, with a create token: the key shows
/// as its short hash, and neither the key nor the token is printed.
#[tokio::test]
async fn the_clients_debug_log_names_its_key_by_the_short_hash_and_never_prints_its_token() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("create-tokens");
    let tokens_arg = tokens.to_str().unwrap();
    let (code, token, stderr) = testbed(&["ctl", "tokens", "--file", tokens_arg, "add", "ci"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let token = token.trim().to_owned();
    let up = Up::start(&["--require-create-token", "--create-tokens-file", tokens_arg]).await;
    let (note, state) = (dir.path().join("note.txt"), dir.path().join("state"));
    std::fs::write(&note, "logged at debug").unwrap();
    let paste = ["paste", note.to_str().unwrap(), "--server", &up.http, "--state-dir", state.to_str().unwrap()];
    let (code, _, logs) = testbed(&paste, &[("RUST_LOG", "debug"), ("PASTEBIN_CREATE_TOKEN", &token)]);
    assert_eq!(code, 0, "{logs}");

    let records = pastebin_client::Journal::open(&state).unwrap().scan().unwrap().records;
    let [(_, record)] = &records[..] else { panic!("one save, one record: {records:?}") };
    let key = record.idempotency_key().expect("the record's key is a UUID");
    assert!(logs.contains(&format!("key_hash={}", key.short_hash())), "the send is traceable by the hash:\n{logs}");
    let secrets = [key.canonical(), key.canonical().to_uppercase(), key.canonical().replace('-', ""), token];
    let found = leaks(&logs, &secrets);
    assert!(found.is_empty(), "a key or token reached the client's log:\n{}", found.join("\n"));
}

#[tokio::test]
async fn extreme_values_in_flags_and_rpc_fields_never_panic() {
    let max = u64::MAX.to_string();
    for flag in [
        "--recovery-threshold-secs",
        "--object-age-floor-secs",
        "--sweep-interval-secs",
        "--reap-interval-secs",
        "--tombstone-retention-secs",
        "--header-read-timeout-secs",
        "--request-timeout-secs",
        "--grpc-call-timeout-secs",
        "--max-connections",
    ] {
        // Were the flag accepted, the data directory (under a file) stops the run at once.
        let args: Vec<String> = up_args(Path::new("/dev/null/never"), &[flag, &max]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, stderr) = testbed(&args, &[]);
        assert_eq!(code, 2, "{flag} {max} is a usage error: {stderr}");
        assert!(stderr.contains(flag) && !stderr.contains("panicked"), "{stderr}");
    }

    let up = Up::start(&[]).await;
    let data_dir = up.data.path().to_str().unwrap().to_owned();
    let (code, _, stderr) =
        testbed(&["ctl", "--data-dir", &data_dir, "pending", "--older-than", "100000000000000d"], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let (code, _, stderr) = testbed(&["ctl", "--data-dir", &data_dir, "--timeout-secs", &max, "stats"], &[]);
    assert_eq!(code, 2, "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    let pastes =
        pastebin_pastes::PasteClient::new(pastebin_shards::channel(up.process.address("paste-service"), None).unwrap());
    let purged = pastes.purge_tombstones(Duration::from_secs(u64::MAX), 10).await;
    assert!(matches!(purged, Ok(0)), "{purged:?}");
    assert!(pastes.purge_tombstones(Duration::from_secs(26 * 3600), 10).await.is_ok(), "P still serves");

    let (status, _, body) = up.create(&new_key(), "x", &[]).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let huge = Client::new()
        .post(format!("{}/api/v1/pastes", up.http))
        .header("Idempotency-Key", new_key())
        .json(&json!({ "content": "x", "expires_in_seconds": u64::MAX }))
        .send()
        .await
        .unwrap();
    assert_eq!(error_code(&huge.json().await.unwrap()), "invalid_expiry");
}

#[tokio::test]
async fn a_grpc_call_without_a_deadline_is_bounded_by_the_call_timeout() {
    // The saga is held 5 s after its K begin; the server gives a call 1 s.
    let up =
        Up::start_with_env(&["--grpc-call-timeout-secs", "1"], &[("PASTEBIN_FAILPOINTS", "after_k_begin=sleep:5000")])
            .await;
    let grpc = format!("http://{}", up.process.address("gateway-grpc"));
    let mut api = pastebin_proto::api::v1::paste_api_client::PasteApiClient::connect(grpc).await.unwrap();
    let request = pastebin_proto::api::v1::CreatePasteRequest {
        request_id: new_key(),
        content: "held".into(),
        expires_in_seconds: None,
        ..Default::default()
    };
    let status = api.create_paste(request).await.unwrap_err();
    // Without the bound the call would wait out the hold and end UNAVAILABLE.
    assert_eq!(status.code(), tonic::Code::Cancelled, "{status:?}");
    assert!(status.message().contains("Timeout expired"), "{status:?}");
}
