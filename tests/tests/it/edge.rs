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
        let line = format!("pastebin_edge_refusals_total{{protocol=\"http\",reason=\"{reason}\"}}");
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

/// A request as curl sends it by default (`Accept: */*`), answered whole.
async fn curl_get(url: &str, accept: Option<&str>) -> (StatusCode, header::HeaderMap, Vec<u8>) {
    let mut request = Client::new().get(url).timeout(Duration::from_secs(10));
    if let Some(accept) = accept {
        request = request.header(header::ACCEPT, accept);
    }
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    (status, headers, response.bytes().await.unwrap().to_vec())
}

#[tokio::test]
async fn curl_gets_errors_as_one_line_and_the_missing_key_names_its_header() {
    let up = Up::start(&[]).await;
    let client = Client::new();
    let no_key = |accept: &'static str| {
        client.post(format!("{}/api/v1/pastes", up.http)).header(header::ACCEPT, accept).body("no key").send()
    };
    let as_text = no_key("text/plain").await.unwrap();
    assert_eq!(as_text.status(), StatusCode::BAD_REQUEST);
    assert_eq!(as_text.headers()[header::CONTENT_TYPE], "text/plain; charset=utf-8");
    let line = as_text.text().await.unwrap();
    assert!(line.ends_with('\n') && line.lines().count() == 1, "one line of text: {line:?}");
    assert!(
        line.contains("Idempotency-Key") && line.contains("/proc/sys/kernel/random/uuid"),
        "names the header and shows how: {line}"
    );
    // A JSON client keeps the envelope, with the same message.
    let as_json: Value = no_key("application/json").await.unwrap().json().await.unwrap();
    assert_eq!(error_code(&as_json), "invalid_idempotency_key");
    assert_eq!(format!("{}\n", as_json["error"]["message"].as_str().unwrap()), line);
    let not_uuid = client
        .post(format!("{}/api/v1/pastes", up.http))
        .header("Idempotency-Key", "nope")
        .header(header::ACCEPT, "text/plain")
        .body("x")
        .send()
        .await
        .unwrap();
    assert!(not_uuid.text().await.unwrap().contains("Idempotency-Key header must be a UUID"));

    // Every error: the handler's, the router's (405) and a layer's, same status and headers.
    let missing = client.get(format!("{}/raw/00000000000000", up.http)).header(header::ACCEPT, "text/plain");
    let missing = missing.send().await.unwrap();
    assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    assert_eq!(missing.text().await.unwrap(), "no such paste\n");
    let put = client.put(format!("{}/api/v1/pastes", up.http)).header(header::ACCEPT, "text/plain").send();
    let put = put.await.unwrap();
    assert_eq!(put.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(put.headers().contains_key(header::ALLOW));
    assert_eq!(put.text().await.unwrap(), "this method is not allowed here\n");
    let form = client.post(format!("{}/00000000000000/delete", up.http)).header(header::ACCEPT, "text/plain");
    let form = form.form(&[("token", "t")]).send().await.unwrap();
    assert_eq!(form.status(), StatusCode::NOT_FOUND);
    assert_eq!(form.text().await.unwrap(), "no such paste\n", "a page's refusal too");
}

#[tokio::test]
async fn the_share_link_answers_curl_with_the_raw_text_and_browsers_with_the_page() {
    let up = Up::start(&[]).await;
    let (status, _, created) = up.create(&new_key(), "line one\n<b>two</b>\n", &[]).await;
    assert_eq!(status, StatusCode::CREATED);
    let link = created["url"].as_str().unwrap().to_owned();
    let raw = curl_get(&format!("{}/raw/{}", up.http, created["id"].as_str().unwrap()), None).await;

    for accept in [Some("*/*"), Some("text/plain"), None] {
        let (status, headers, body) = curl_get(&link, accept).await;
        assert_eq!(status, StatusCode::OK, "{accept:?}");
        assert_eq!(body, b"line one\n<b>two</b>\n", "{accept:?}: exactly the text");
        for name in [header::CONTENT_TYPE, header::ETAG, header::CONTENT_SECURITY_POLICY] {
            assert_eq!(headers.get(&name), raw.1.get(&name), "{accept:?}: {name} as /raw answers it");
        }
        assert_eq!(headers[header::VARY], "accept");
    }
    // wget, and a client that sends no Accept at all, on the wire.
    let path = link.trim_start_matches(&up.http).to_owned();
    for accept in ["Accept: */*\r\nUser-Agent: Wget/1.21\r\n", ""] {
        let mut stream = TcpStream::connect(up.address()).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{accept}Connection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let answer = read_until_closed(&mut stream, BOUND).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200") && answer.ends_with("\r\n\r\nline one\n<b>two</b>\n"), "{answer}");
    }
    let browser = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
    let (status, headers, page) = curl_get(&link, Some(browser)).await;
    assert_eq!(status, StatusCode::OK);
    assert!(headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/html"));
    assert_eq!(headers[header::VARY], "accept");
    assert!(String::from_utf8_lossy(&page).contains("&lt;b&gt;two&lt;/b&gt;"));

    // A binary paste keeps /raw's download rules.
    let pdf = Client::new()
        .post(format!("{}/api/v1/pastes", up.http))
        .header("Idempotency-Key", new_key())
        .header(header::CONTENT_TYPE, "application/pdf")
        .body(b"%PDF-1.4 \x00\x01".to_vec())
        .send()
        .await
        .unwrap();
    let pdf: Value = pdf.json().await.unwrap();
    let (status, headers, body) = curl_get(pdf["url"].as_str().unwrap(), Some("*/*")).await;
    assert_eq!((status, body.as_slice()), (StatusCode::OK, b"%PDF-1.4 \x00\x01".as_slice()));
    assert!(headers[header::CONTENT_DISPOSITION].to_str().unwrap().starts_with("attachment;"));

    // A burn paste stays sealed on its link: curl is told how to read it once.
    let burn_request = Client::new()
        .post(format!("{}/api/v1/pastes", up.http))
        .header("Idempotency-Key", new_key())
        .json(&json!({ "content": "the secret", "burn_after_reading": true }));
    let burn_created: Value = burn_request.send().await.unwrap().json().await.unwrap();
    let burn_link = burn_created["url"].as_str().unwrap();
    for _ in 0..2 {
        let (status, _, body) = curl_get(burn_link, Some("*/*")).await;
        let body: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(error_code(&body), "burn_after_reading");
        assert!(body["error"]["message"].as_str().unwrap().contains(burn_created["raw_url"].as_str().unwrap()));
    }
    let (status, _, body) = curl_get(burn_created["raw_url"].as_str().unwrap(), None).await;
    assert_eq!((status, body.as_slice()), (StatusCode::OK, b"the secret".as_slice()), "still there for its one read");
    assert_eq!(curl_get(burn_link, None).await.0, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn active_content_never_runs_from_raw() {
    let up = Up::start(&[]).await;
    let client = Client::new();
    for (stored, served, body) in [
        ("text/javascript", "text/plain; charset=utf-8", "alert(document.cookie)"),
        ("text/html; charset=utf-8", "text/plain; charset=utf-8", "<script>alert(1)</script>"),
        ("image/svg+xml", "text/plain; charset=utf-8", "<svg onload=alert(1)></svg>"),
        ("application/xml", "text/plain; charset=utf-8", "<?xml version=\"1.0\"?><x/>"),
        ("application/x-shockwave-flash", "application/octet-stream", "FWS"),
    ] {
        let created = client
            .post(format!("{}/api/v1/pastes", up.http))
            .header("Idempotency-Key", new_key())
            .header(header::CONTENT_TYPE, stored)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), StatusCode::CREATED, "{stored}");
        let id = created.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
        for url in [format!("{}/raw/{id}", up.http), format!("{}/{id}", up.http)] {
            let raw = client.get(&url).send().await.unwrap();
            let headers = raw.headers().clone();
            assert_eq!(headers[header::CONTENT_TYPE], served, "{stored} at {url}");
            assert!(headers[header::CONTENT_DISPOSITION].to_str().unwrap().starts_with("attachment;"), "{stored}");
            assert_eq!(headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
            assert_eq!(raw.text().await.unwrap(), body, "the bytes themselves are unchanged");
        }
        let described: Value =
            client.get(format!("{}/api/v1/pastes/{id}", up.http)).send().await.unwrap().json().await.unwrap();
        assert_eq!(described["media_type"], stored, "the metadata still reports the stored type");
    }
    // Passive types keep their own type, inline.
    let png = client
        .post(format!("{}/api/v1/pastes", up.http))
        .header("Idempotency-Key", new_key())
        .header(header::CONTENT_TYPE, "image/png")
        .body(vec![0x89, b'P', b'N', b'G'])
        .send()
        .await
        .unwrap();
    let id = png.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let raw = client.get(format!("{}/raw/{id}", up.http)).send().await.unwrap();
    assert_eq!(raw.headers()[header::CONTENT_TYPE], "image/png");
    assert!(!raw.headers().contains_key(header::CONTENT_DISPOSITION));
}

/// A create's headers sent with `sent` bytes of a body that declares `declared`.
fn slow_create_head(declared: usize, sent: usize, extra: &str) -> String {
    format!(
        "POST /api/v1/pastes HTTP/1.1\r\nHost: x\r\nIdempotency-Key: {}\r\nContent-Type: text/plain\r\n{extra}Content-Length: {declared}\r\n\r\n{}",
        new_key(),
        "a".repeat(sent)
    )
}

/// A client bound to `local` (another loopback address is another client).
fn client_from(local: &str) -> Client {
    Client::builder().local_address(local.parse::<std::net::IpAddr>().unwrap()).build().unwrap()
}

/// Refusals counted for `reason`, over both protocols.
async fn refusals(up: &Up, reason: &str) -> u64 {
    refusals_over(up, None, reason).await
}

/// Refusals counted for `reason` over `protocol` (`http`, `grpc`), or over both.
async fn refusals_over(up: &Up, protocol: Option<&str>, reason: &str) -> u64 {
    let metrics = Client::new().get(format!("http://{}/metrics", up.process.address("admin"))).send().await.unwrap();
    let metrics = metrics.text().await.unwrap();
    let reason = format!("reason=\"{reason}\"");
    let protocol = protocol.map(|protocol| format!("protocol=\"{protocol}\""));
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix("pastebin_edge_refusals_total{"))
        .filter_map(|line| line.split_once("} "))
        .filter(|(labels, _)| {
            labels.split(',').any(|label| label == reason)
                && protocol.as_ref().is_none_or(|protocol| labels.split(',').any(|label| label == protocol))
        })
        .map(|(_, count)| count.trim().parse::<u64>().unwrap())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_address_holding_400_slow_bodies_does_not_lock_out_another() {
    // Default shares; a long body deadline so that the attack holds for the whole test.
    let up = Up::start(&["--body-read-timeout-secs", "600", "--header-read-timeout-secs", "600"]).await;
    let mut attackers = Vec::new();
    for n in 0..400 {
        let Ok(mut stream) = TcpStream::connect(up.address()).await else { continue };
        // The first 32 (its share of requests in flight) declare 1,000 bytes
        // and send one: a request held for as long as the server lets it.
        // The rest never finish their headers, so each holds a connection
        // and no request: a request past the share would be answered 503
        // and its connection closed, and whether the connection share then
        // ever fills would depend on how fast the server accepts.
        let head = if n < 32 { slow_create_head(1000, 1, "") } else { "POST /api/v1/pastes HTTP/1.1\r\n".to_owned() };
        let _ = stream.write_all(head.as_bytes()).await;
        attackers.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let other = client_from("127.0.0.2");
    for n in 0..5 {
        let created = other
            .post(format!("{}/api/v1/pastes", up.http))
            .header("Idempotency-Key", new_key())
            .body(format!("from another address {n}"))
            .timeout(Duration::from_secs(20))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), StatusCode::CREATED, "{}", created.text().await.unwrap());
    }
    // The server closes a connection past the share when it accepts it: on
    // a saturated machine an attacker's handshake may complete only after
    // the other client's, so the refusal is waited for (bounded), not read once.
    // 368 connections hold no request, so past 64 open ones it must come.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while refusals_over(&up, Some("http"), "client_connections").await == 0 {
        let connected = attackers.len();
        assert!(
            tokio::time::Instant::now() < deadline,
            "the attacker's connections past its share were closed ({connected} of 400 connected)"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(attackers);
}

#[tokio::test]
async fn behind_a_trusted_proxy_each_forwarded_client_has_its_own_share() {
    let up = Up::start(&[
        "--trusted-proxy",
        "127.0.0.1",
        "--max-requests-in-flight-per-client",
        "2",
        "--max-connections-per-client",
        "2",
        "--body-read-timeout-secs",
        "600",
    ])
    .await;
    // The proxy holds two of 203.0.113.1's requests (bodies that never finish)...
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(up.address()).await.unwrap();
        stream.write_all(slow_create_head(10, 1, "X-Forwarded-For: 203.0.113.1\r\n").as_bytes()).await.unwrap();
        held.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // ...so a third for that client is refused at once, on a third connection
    // (the proxy's connections count only globally).
    let client = Client::new();
    let third = client.get(format!("{}/healthz", up.http)).header("x-forwarded-for", "203.0.113.1").send();
    let third = third.await.unwrap();
    assert_eq!(third.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(third.headers().contains_key(header::RETRY_AFTER));
    assert_eq!(error_code(&third.json().await.unwrap()), "overloaded");
    // Another forwarded client is served.
    let other = client.get(format!("{}/healthz", up.http)).header("x-forwarded-for", "203.0.113.2").send();
    assert_eq!(other.await.unwrap().status(), StatusCode::OK);
    assert!(refusals(&up, "client_requests").await >= 1);
    drop(held);
}

#[tokio::test]
async fn the_body_deadline_is_a_total_not_a_silence_between_pieces() {
    let up = Up::start(&["--body-read-timeout-secs", "2"]).await;
    let mut stream = TcpStream::connect(up.address()).await.unwrap();
    stream.write_all(slow_create_head(100, 0, "").as_bytes()).await.unwrap();
    // A byte every 200 ms: never silent for long, but 20 s for the whole body.
    let trickle = async {
        for _ in 0..100 {
            if stream.write_all(b"a").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(8), trickle).await.ok();
    let answer = read_until_closed(&mut stream, BOUND).await.expect("answered");
    assert!(answer.starts_with("HTTP/1.1 408"), "the body's deadline passed while it trickled: {answer}");
}

#[tokio::test]
async fn a_create_refused_by_its_headers_is_answered_before_its_body() {
    let up = Up::start(&["--body-read-timeout-secs", "600", "--create-rate-limit", "1/hour"]).await;
    // No key, a body that never comes: 400 at once, not after the body deadline.
    let mut no_key = TcpStream::connect(up.address()).await.unwrap();
    let head = "POST /api/v1/pastes HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\na";
    no_key.write_all(head.as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut no_key, BOUND).await.expect("answered without the body");
    assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("Idempotency-Key"), "{answer}");
    // The rate limit too: the first create spends the hour's one; the second is refused at once.
    let (status, _, _) = up.create(&new_key(), "the one", &[]).await;
    assert_eq!(status, StatusCode::CREATED);
    let mut limited = TcpStream::connect(up.address()).await.unwrap();
    limited.write_all(slow_create_head(1000, 1, "").as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut limited, BOUND).await.expect("answered without the body");
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
}

#[tokio::test]
async fn deletes_and_the_delete_form_are_rate_limited_per_address() {
    let up = Up::start(&["--delete-rate-limit", "2/hour"]).await;
    let (_, _, created) = up.create(&new_key(), "keep me", &[]).await;
    let id = created["id"].as_str().unwrap();
    let client = Client::new();
    let form = || client.post(format!("{}/{id}/delete", up.http)).form(&[("token", "wrong")]).send();
    assert_eq!(form().await.unwrap().status(), StatusCode::FORBIDDEN);
    let api = client.delete(format!("{}/api/v1/pastes/{id}", up.http)).bearer_auth("wrong").send();
    assert_eq!(api.await.unwrap().status(), StatusCode::FORBIDDEN);
    let limited = form().await.unwrap();
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(limited.headers().contains_key(header::RETRY_AFTER));
    assert!(limited.text().await.unwrap().contains("too many deletes"));
    let api = client.delete(format!("{}/api/v1/pastes/{id}", up.http)).bearer_auth("wrong").send().await.unwrap();
    assert_eq!(api.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(error_code(&api.json().await.unwrap()), "rate_limited");
    // Another address still deletes.
    let other = client_from("127.0.0.2").delete(format!("{}/api/v1/pastes/{id}", up.http)).bearer_auth("wrong");
    assert_eq!(other.send().await.unwrap().status(), StatusCode::FORBIDDEN);
    assert!(refusals(&up, "delete_rate_limited").await >= 2);
}

/// The up process's resident memory now, in bytes.
fn resident_bytes(up: &Up) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", up.process.pid())).unwrap();
    let kib = status.lines().find_map(|line| line.strip_prefix("VmRSS:")).expect("VmRSS in /proc/PID/status");
    kib.trim().trim_end_matches("kB").trim().parse::<u64>().unwrap() * 1024
}

/// Waits (bounded) until `reasons` together have been counted at least `count` times.
async fn until_refused(up: &Up, reasons: &[&str], count: u64) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let mut seen = 0;
        for reason in reasons {
            seen += refusals(up, reason).await;
        }
        if seen >= count || tokio::time::Instant::now() > deadline {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_that_stop_reading_hold_little_memory_and_are_cut_off() {
    let up = Up::start(&[
        "--send-timeout-secs",
        "3",
        "--max-connections-per-client",
        "1000",
        "--max-requests-in-flight-per-client",
        "1000",
        "--max-requests-in-flight",
        "1000",
        // Each stalled reader holds its answer's 1 MiB of the answer budget: room for all 30.
        "--max-answer-bytes-per-client",
        "100000000",
    ])
    .await;
    // 1 MiB of a control character: its JSON answer is 6 MiB (`\u0001` each),
    // more than any socket buffer takes, so a reader that reads nothing stalls the server.
    let content = "\u{1}".repeat(1024 * 1024);
    let (status, _, created) = up.create(&new_key(), &content, &[]).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["id"].as_str().unwrap().to_owned();
    let whole: Value =
        Client::new().get(format!("{}/api/v1/pastes/{id}", up.http)).send().await.unwrap().json().await.unwrap();
    assert_eq!(whole["content"].as_str().unwrap().len(), content.len(), "a reader that reads gets it all");
    let idle = resident_bytes(&up);

    const SLOW_READERS: usize = 30;
    let mut slow = Vec::new();
    for n in 0..SLOW_READERS {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stream = socket.connect(up.address().parse().unwrap()).await.unwrap();
        let path = if n % 5 == 0 { format!("/raw/{id}") } else { format!("/api/v1/pastes/{id}") };
        stream.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes()).await.unwrap();
        slow.push(stream);
    }
    let mut peak = idle;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        peak = peak.max(resident_bytes(&up));
    }
    // Built whole, the JSON answers alone would be 24 x 6 MiB; streamed, each holds a chunk.
    assert!(
        peak < idle + 64 * 1024 * 1024,
        "RSS {} MB above idle with {SLOW_READERS} stalled readers",
        (peak - idle) >> 20
    );

    // Meanwhile another client is served, whole.
    let other = client_from("127.0.0.2");
    let raw = other.get(format!("{}/raw/{id}", up.http)).send().await.unwrap().bytes().await.unwrap();
    assert_eq!(raw.len(), content.len());
    let (status, _, _) = up.create(&new_key(), "still taking creates", &[]).await;
    assert_eq!(status, StatusCode::CREATED);

    // Each stalled JSON reader is cut off once its writes have waited 3 s: at
    // once, or (when the kernel lets a few bytes through now and then) as a
    // reader below the minimum rate.
    let stalled_json = SLOW_READERS as u64 * 4 / 5;
    let closed = until_refused(&up, &["send_timeout", "send_rate"], stalled_json).await;
    assert!(closed >= stalled_json, "{closed} of {stalled_json} stalled readers were closed");
    let mut one = slow.pop().unwrap();
    let received = read_until_closed(&mut one, BOUND).await.expect("the server closed the stalled connection");
    assert!(received.len() < 6 * 1024 * 1024, "the answer was cut off, not sent whole ({} bytes)", received.len());
}

#[tokio::test]
async fn past_the_body_budget_a_create_is_answered_503_before_its_body() {
    let up = Up::start(&["--body-budget-bytes", "200000", "--body-read-timeout-secs", "600"]).await;
    // One client holds 150,000 bytes of the process's budget with a body that never ends.
    let mut holder = TcpStream::connect(up.address()).await.unwrap();
    holder.write_all(slow_create_head(150_000, 1, "").as_bytes()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Another client's 100,000-byte body does not fit: refused from its headers, at once.
    let local = "127.0.0.2:0".parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(local).unwrap();
    let mut refused = socket.connect(up.address().parse().unwrap()).await.unwrap();
    refused.write_all(slow_create_head(100_000, 0, "").as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut refused, BOUND).await.expect("answered without the body");
    assert!(answer.starts_with("HTTP/1.1 503") && answer.contains("retry-after: 1"), "{answer}");
    // A small body still fits beside the held one.
    let created = client_from("127.0.0.2")
        .post(format!("{}/api/v1/pastes", up.http))
        .header("Idempotency-Key", new_key())
        .body("small enough")
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), StatusCode::CREATED);
    assert!(refusals_over(&up, Some("http"), "body_budget").await >= 1);
    drop(holder);
}

type Frames = futures::channel::mpsc::Sender<Result<http_body::Frame<bytes::Bytes>, std::convert::Infallible>>;

/// A CreatePaste on `channel` whose message declares `declared` bytes and
/// sends `sent` of them; the rest never comes while the returned sender
/// lives. The task answers the call's `grpc-status`, when it has one.
fn half_sent_grpc_create(
    channel: &tonic::transport::Channel,
    declared: u32,
    sent: usize,
) -> (Frames, tokio::task::JoinHandle<Option<String>>) {
    half_sent_grpc_create_with(channel, declared, sent, &[])
}

/// [`half_sent_grpc_create`] with `headers` (metadata) on the call.
fn half_sent_grpc_create_with(
    channel: &tonic::transport::Channel,
    declared: u32,
    sent: usize,
    headers: &[(&str, &str)],
) -> (Frames, tokio::task::JoinHandle<Option<String>>) {
    let (mut frames, body) = futures::channel::mpsc::channel(1);
    let mut message = vec![0u8];
    message.extend_from_slice(&declared.to_be_bytes());
    message.resize(5 + sent, b'a');
    frames.try_send(Ok(http_body::Frame::data(bytes::Bytes::from(message)))).unwrap();
    let mut request = http::Request::post("/pastebin.v1.PasteApi/CreatePaste")
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(tonic::body::Body::new(http_body_util::StreamBody::new(body))).unwrap();
    let mut channel = channel.clone();
    let call = tokio::spawn(async move {
        use tonic::codegen::Service;
        std::future::poll_fn(|cx| channel.poll_ready(cx)).await.ok()?;
        let response = channel.call(request).await.ok()?;
        let status = response.headers().get("grpc-status").map(|status| status.to_str().unwrap().to_owned());
        let retry_after = response.headers().get("retry-after").map(|hint| hint.to_str().unwrap().to_owned());
        status.map(|status| retry_after.map_or(status.clone(), |hint| format!("{status} retry-after={hint}")))
    });
    (frames, call)
}

async fn grpc_create(channel: &tonic::transport::Channel, content: String) -> Result<(), tonic::Status> {
    let mut api = pastebin_proto::api::v1::paste_api_client::PasteApiClient::new(channel.clone());
    let request = pastebin_proto::api::v1::CreatePasteRequest { request_id: new_key(), content, ..Default::default() };
    api.create_paste(request).await.map(|_| ())
}

#[tokio::test]
async fn grpc_messages_are_charged_to_the_body_budget_before_they_arrive() {
    // A long message deadline: the half-sent message is held for the whole test.
    let up = Up::start(&["--body-budget-bytes", "2000000", "--grpc-message-deadline-secs", "600"]).await;
    let grpc = format!("http://{}", up.process.address("gateway-grpc"));
    let channel = tonic::transport::Channel::from_shared(grpc).unwrap().connect().await.unwrap();
    // A message that declares 1.5 MB and sends 10 bytes holds 1.5 MB of the budget...
    let (held, held_call) = half_sent_grpc_create(&channel, 1_500_000, 10);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // ...so one more of 1 MB is UNAVAILABLE at once, before a byte past its prefix is read,
    let (_busy, busy) = half_sent_grpc_create(&channel, 1_000_000, 0);
    let busy = tokio::time::timeout(BOUND, busy).await.expect("answered at once").unwrap();
    assert_eq!(busy.as_deref(), Some("14 retry-after=1"), "UNAVAILABLE, with the retry hint");
    // one larger than the whole budget can never fit: RESOURCE_EXHAUSTED,
    let (_huge, huge) = half_sent_grpc_create(&channel, 3_000_000, 0);
    let huge = tokio::time::timeout(BOUND, huge).await.expect("answered at once").unwrap();
    assert_eq!(huge.as_deref(), Some("8"), "RESOURCE_EXHAUSTED, and no retry hint: it can never fit");
    // and a small create is still served beside the held one.
    grpc_create(&channel, "small".into()).await.unwrap();
    assert!(refusals_over(&up, Some("grpc"), "body_budget").await >= 1);

    // Once the half-sent message is given up, its bytes are back.
    drop(held);
    let _ = tokio::time::timeout(BOUND, held_call).await;
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        match grpc_create(&channel, "b".repeat(900_000)).await {
            Ok(()) => break,
            Err(status) if status.code() == tonic::Code::Unavailable && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(status) => panic!("the budget was not given back: {status:?}"),
        }
    }
}

#[tokio::test]
async fn grpc_connections_past_the_cap_are_closed() {
    let up = Up::start(&["--grpc-max-connections", "2"]).await;
    let connect = || grpc_served_from(&up, "127.0.0.1");
    let first = connect().await.expect("the first connection is served");
    let _second = connect().await.expect("the second connection is served");
    assert!(connect().await.is_none(), "a third is closed");
    assert!(refusals_over(&up, Some("grpc"), "connection_cap").await >= 1);
    drop(first);
    let deadline = tokio::time::Instant::now() + BOUND;
    while connect().await.is_none() {
        assert!(tokio::time::Instant::now() < deadline, "a closed connection gives its place back");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A new connection to the up's public gRPC listener from `local`, if the
/// server serves a call on it (a health check); `None` if it closed it.
async fn grpc_served_from(up: &Up, local: &str) -> Option<tonic::transport::Channel> {
    let grpc = format!("http://{}", up.process.address("gateway-grpc"));
    let endpoint = tonic::transport::Endpoint::from_shared(grpc).unwrap().local_address(Some(local.parse().unwrap()));
    let channel = endpoint.connect().await.ok()?;
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    let request = tonic_health::pb::HealthCheckRequest { service: String::new() };
    health.check(request).await.ok().map(|_| channel)
}

#[tokio::test]
async fn grpc_connections_past_an_address_share_are_closed_and_forwarded_for_from_a_stranger_is_ignored() {
    let up = Up::start(&[
        "--max-connections-per-client",
        "2",
        "--max-requests-in-flight-per-client",
        "2",
        "--grpc-message-deadline-secs",
        "600",
    ])
    .await;
    let first = grpc_served_from(&up, "127.0.0.5").await.expect("the first connection is served");
    let _second = grpc_served_from(&up, "127.0.0.5").await.expect("the second connection is served");
    assert!(grpc_served_from(&up, "127.0.0.5").await.is_none(), "a third from the same address is closed");
    assert!(refusals_over(&up, Some("grpc"), "client_connections").await >= 1);
    grpc_served_from(&up, "127.0.0.6").await.expect("another address has its own share");

    // No --trusted-proxy: whatever x-forwarded-for a client sends, its calls
    // are its own address's. Two stalled calls that name two other clients
    // fill 127.0.0.5's share, and a third naming a third client is refused.
    let claims = ["203.0.113.1", "203.0.113.2"];
    let held: Vec<_> =
        claims.iter().map(|claim| half_sent_grpc_create_with(&first, 100, 1, &[("x-forwarded-for", claim)])).collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (_third, third) = half_sent_grpc_create_with(&first, 100, 1, &[("x-forwarded-for", "203.0.113.3")]);
    let third = tokio::time::timeout(BOUND, third).await.expect("refused at once").unwrap();
    assert_eq!(third.as_deref(), Some("8 retry-after=1"), "counted as 127.0.0.5's: RESOURCE_EXHAUSTED");
    drop(held);
}

/// One HTTP/2 connection to the up's public gRPC listener from the loopback
/// address `local` (another loopback address is another client).
async fn grpc_channel_from(up: &Up, local: &str) -> tonic::transport::Channel {
    let grpc = format!("http://{}", up.process.address("gateway-grpc"));
    let endpoint = tonic::transport::Endpoint::from_shared(grpc).unwrap();
    endpoint.local_address(Some(local.parse().unwrap())).connect().await.unwrap()
}

/// The gRPC code a half-sent call ended with (its `grpc-status`, without the retry hint).
fn code_of(ended: &str) -> &str {
    ended.split(' ').next().unwrap_or(ended)
}

#[tokio::test]
async fn grpc_calls_past_an_address_share_are_refused_with_a_retry_hint_and_behind_a_proxy_per_forwarded_client() {
    let up = Up::start(&[
        "--trusted-proxy",
        "127.0.0.1",
        "--max-requests-in-flight-per-client",
        "2",
        "--grpc-message-deadline-secs",
        "600",
    ])
    .await;
    let proxy = grpc_channel_from(&up, "127.0.0.1").await;
    // The proxy carries two of 203.0.113.1's calls, each stalled in its message...
    let alice = [("x-forwarded-for", "203.0.113.1")];
    let held: Vec<_> = (0..2).map(|_| half_sent_grpc_create_with(&proxy, 100, 1, &alice)).collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // ...so a third of hers is refused at once: RESOURCE_EXHAUSTED with a retry hint,
    let (_third, third) = half_sent_grpc_create_with(&proxy, 100, 1, &alice);
    let third = tokio::time::timeout(BOUND, third).await.expect("refused at once").unwrap();
    assert_eq!(third.as_deref(), Some("8 retry-after=1"), "RESOURCE_EXHAUSTED with its retry hint");
    // while another forwarded client, on the same connection, creates.
    let mut api = pastebin_proto::api::v1::paste_api_client::PasteApiClient::new(proxy.clone());
    let mut request = tonic::Request::new(pastebin_proto::api::v1::CreatePasteRequest {
        request_id: new_key(),
        content: "bob's".into(),
        ..Default::default()
    });
    request.metadata_mut().insert("x-forwarded-for", "203.0.113.2".parse().unwrap());
    api.create_paste(request).await.expect("another forwarded client has its own share");
    assert!(refusals_over(&up, Some("grpc"), "client_streams").await >= 1);

    // A message longer than the API decodes (4 MiB and a bit) is refused on
    // its prefix, though the body budget (128 MiB) could hold it.
    let direct = grpc_channel_from(&up, "127.0.0.2").await;
    let (_long, long) = half_sent_grpc_create(&direct, 10_000_000, 0);
    let long = tokio::time::timeout(BOUND, long).await.expect("refused at once").unwrap();
    assert_eq!(long.as_deref().map(code_of), Some("8"), "RESOURCE_EXHAUSTED");
    assert!(refusals_over(&up, Some("grpc"), "message_too_large").await >= 1);
    drop(held);
}

/// A raw HTTP/2 connection to the up's public gRPC listener from `local`
/// that grants no stream any window: the server can send each answer's
/// headers and not one byte of its body. The task ends when the server
/// closes the connection.
async fn zero_window_connection(
    up: &Up,
    local: &str,
) -> (h2::client::SendRequest<bytes::Bytes>, tokio::task::JoinHandle<()>) {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{local}:0").parse().unwrap()).unwrap();
    let stream = socket.connect(up.process.address("gateway-grpc").parse().unwrap()).await.unwrap();
    let (client, connection) =
        h2::client::Builder::new().initial_window_size(0).handshake::<_, bytes::Bytes>(stream).await.unwrap();
    (
        client,
        tokio::spawn(async move {
            connection.await.ok();
        }),
    )
}

/// A GetPaste of `id` on a raw HTTP/2 connection: the answer, whose body is never read.
async fn raw_get_paste(client: &mut h2::client::SendRequest<bytes::Bytes>, id: &str) -> h2::client::ResponseFuture {
    use prost::Message;
    let message = pastebin_proto::api::v1::GetPasteRequest { id: id.into() }.encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    framed.extend(message);
    let request = http::Request::post("http://pastebin/pastebin.v1.PasteApi/GetPaste")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    std::future::poll_fn(|cx| client.poll_ready(cx)).await.unwrap();
    let (response, mut body) = client.send_request(request, false).unwrap();
    body.send_data(framed.into(), true).unwrap();
    response
}

#[tokio::test]
async fn answers_a_client_never_lets_the_server_send_end_at_the_send_timeout_and_give_the_share_back() {
    // The stalled reader of docs/security.md#total-bounds: 4 calls fill the
    // address's share; a 3 s send timeout; the call timeout and keepalive
    // would never end them (the client answers every ping).
    let up = Up::start(&["--max-requests-in-flight-per-client", "4", "--grpc-send-timeout-secs", "3"]).await;
    let response = client_from("127.0.0.1")
        .post(format!("{}/api/v1/pastes", up.http))
        .header("Idempotency-Key", new_key())
        .body("x".repeat(1024 * 1024 - 10))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let id = response.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();

    let started = tokio::time::Instant::now();
    let (mut stalled, connection) = zero_window_connection(&up, "127.0.0.9").await;
    let mut answers = Vec::new();
    for _ in 0..4 {
        let answer = tokio::time::timeout(BOUND, raw_get_paste(&mut stalled, &id).await).await;
        let answer = answer.expect("the answer's headers are sent").expect("answered");
        assert_eq!(answer.status(), http::StatusCode::OK);
        answers.push(answer);
    }
    // The address's share is held by answers the server cannot send...
    let from_same_address = grpc_channel_from(&up, "127.0.0.9").await;
    let refused = grpc_create(&from_same_address, "refused".into()).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::ResourceExhausted, "{refused:?}");
    // ...until the server gives up on them: it closes the connection.
    tokio::time::timeout(Duration::from_secs(60), connection).await.expect("the server closed the connection").unwrap();
    assert!(started.elapsed() >= Duration::from_secs(3), "not before the send timeout");
    assert!(refusals_over(&up, Some("grpc"), "send_timeout").await >= 1);
    // The share is given back: the same address's calls are admitted again.
    let deadline = tokio::time::Instant::now() + BOUND;
    while let Err(status) = grpc_create(&from_same_address, "admitted".into()).await {
        assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
        assert!(tokio::time::Instant::now() < deadline, "the stalled answers kept the share: {status:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(answers);
}

/// A raw HTTP/2 connection to the up's public gRPC listener, with the
/// library's default windows; the task ends with how the server closed it.
async fn raw_connection(
    up: &Up,
) -> (h2::client::SendRequest<bytes::Bytes>, tokio::task::JoinHandle<Result<(), h2::Error>>) {
    let stream = TcpStream::connect(up.process.address("gateway-grpc")).await.unwrap();
    let (client, connection) = h2::client::handshake(stream).await.unwrap();
    (client, tokio::spawn(connection))
}

/// A health check's request head with `metadata` bytes of one custom header.
fn health_check_with(metadata: usize) -> http::Request<()> {
    http::Request::post("http://pastebin/grpc.health.v1.Health/Check")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("x-padding", "a".repeat(metadata))
        .body(())
        .unwrap()
}

#[tokio::test]
async fn http2_rapid_resets_past_the_flag_close_the_connection_with_goaway() {
    // h2 allows 20 by default; the flag lowers it, so 10 are already too many.
    let up = Up::start(&["--grpc-max-pending-resets", "5"]).await;
    let (mut client, connection) = raw_connection(&up).await;
    // Each stream is opened and reset at once, before the server can serve it
    // (CVE-2023-44487): all of them leave in one write.
    for _ in 0..10 {
        std::future::poll_fn(|cx| client.poll_ready(cx)).await.unwrap();
        let (_response, mut body) = client.send_request(health_check_with(0), false).unwrap();
        body.send_reset(h2::Reason::CANCEL);
    }
    let closed = tokio::time::timeout(BOUND, connection).await.expect("the server closed the connection").unwrap();
    let error = closed.expect_err("closed for the resets, not cleanly");
    assert!(error.is_go_away() && error.is_remote(), "{error:?}");
    assert_eq!(error.reason(), Some(h2::Reason::ENHANCE_YOUR_CALM), "{error:?}");
}

#[tokio::test]
async fn an_http2_header_list_past_the_flag_is_refused_431_and_the_connection_serves_on() {
    // 4 KiB: a 6 KiB header list, which the default 16 KiB would take, is refused.
    let up = Up::start(&["--grpc-max-header-list-bytes", "4096"]).await;
    let (mut client, connection) = raw_connection(&up).await;
    let mut ask = |metadata| {
        let (response, mut body) = client.send_request(health_check_with(metadata), false).unwrap();
        // An empty HealthCheckRequest: the 5-byte prefix of a 0-byte message.
        body.send_data(vec![0u8; 5].into(), true).unwrap();
        response
    };
    let refused = tokio::time::timeout(BOUND, ask(6 * 1024)).await.expect("answered").unwrap();
    assert_eq!(refused.status(), http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE);
    let served = tokio::time::timeout(BOUND, ask(1024)).await.expect("answered").unwrap();
    assert_eq!(served.status(), http::StatusCode::OK, "a small header list on the same connection is served");
    assert!(!connection.is_finished(), "the connection stays open");
}

/// What one run of the stalled-stream wave measured.
struct Wave {
    /// Latencies of the other address's creates, HTTP and gRPC.
    http: Vec<Duration>,
    grpc: Vec<Duration>,
    /// The slowest create before the wave, and the bound each create met during it.
    quiet: Duration,
    bound: Duration,
    /// How the stalled calls ended, by gRPC code.
    ended: std::collections::BTreeMap<String, usize>,
    /// Resident memory of the up process: idle before the wave, and the most during it.
    idle: u64,
    peak: u64,
}

/// The attack of docs/security.md#total-bounds against `up`: from each of
/// `attackers` (loopback addresses), `connections` HTTP/2 connections of
/// `streams` CreatePaste calls, each message's prefix declaring 1 MiB and
/// then one byte, the whole wave opened again every 10 s; meanwhile
/// 127.0.0.100 creates over HTTP and over gRPC every 2 s for 40 s. Every
/// create must succeed within 2 s (or 5 x the slowest create before the
/// wave, on a slow machine) and every stalled call must be ended by the
/// server (the attacker keeps each one's body open).
async fn stalled_stream_wave(up: &Up, attackers: &[String], connections: usize, streams: usize) -> Wave {
    const ROUNDS: u32 = 20;
    const EVERY: Duration = Duration::from_secs(2);
    const WAVE_EVERY: u32 = 5;
    let honest_http = client_from("127.0.0.100");
    let honest_grpc = grpc_channel_from(up, "127.0.0.100").await;
    // One create over each protocol, each timed; any failure fails the test.
    let create_both = |what: String| {
        let (honest_http, honest_grpc) = (&honest_http, &honest_grpc);
        async move {
            let started = tokio::time::Instant::now();
            let created = honest_http
                .post(format!("{}/api/v1/pastes", up.http))
                .header("Idempotency-Key", new_key())
                .body(format!("created over HTTP {what}"))
                .timeout(Duration::from_secs(30))
                .send()
                .await
                .unwrap_or_else(|error| panic!("{what}: the HTTP create failed: {error}"));
            assert_eq!(created.status(), StatusCode::CREATED, "{what}: {}", created.text().await.unwrap());
            let http = started.elapsed();
            let started = tokio::time::Instant::now();
            let created =
                tokio::time::timeout(Duration::from_secs(30), grpc_create(honest_grpc, format!("over gRPC {what}")))
                    .await;
            let created = created.unwrap_or_else(|_| panic!("{what}: the gRPC create did not finish"));
            created.unwrap_or_else(|status| panic!("{what}: the gRPC create failed: {status:?}"));
            (http, started.elapsed())
        }
    };
    // Warm both paths, then time a few creates with no wave. The issue asks
    // each create during the wave to take under 2 s; the machine the tests
    // run on is shared and at times much slower than any server, so the
    // bound is 5 x the slowest quiet create when that is more: the wave
    // must not make creates slow, the machine may.
    create_both("to warm up".into()).await;
    let mut quiet = Duration::ZERO;
    for n in 0..5 {
        let (http, grpc) = create_both(format!("before the wave, {n}")).await;
        quiet = quiet.max(http).max(grpc);
    }
    let bound = Duration::from_secs(2).max(quiet * 5);
    let idle = resident_bytes(up);
    let mut channels = Vec::new();
    for attacker in attackers {
        for _ in 0..connections {
            channels.push(grpc_channel_from(up, attacker).await);
        }
    }
    let (mut bodies, mut calls) = (Vec::new(), Vec::new());
    let (mut http, mut grpc, mut peak) = (Vec::new(), Vec::new(), idle);
    let mut ticks = tokio::time::interval(EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for round in 0..ROUNDS {
        ticks.tick().await;
        if round % WAVE_EVERY == 0 {
            for channel in &channels {
                for _ in 0..streams {
                    let (body, call) = half_sent_grpc_create(channel, 1024 * 1024, 1);
                    bodies.push(body);
                    calls.push(call);
                }
            }
        }
        let (over_http, over_grpc) = create_both(format!("during the wave, round {round}")).await;
        for (protocol, took) in [("HTTP", over_http), ("gRPC", over_grpc)] {
            assert!(
                took < bound,
                "round {round}: a create over {protocol} took {took:?}, past {bound:?} (quiet: {quiet:?})"
            );
        }
        http.push(over_http);
        grpc.push(over_grpc);
        peak = peak.max(resident_bytes(up));
    }
    // Every stalled call is ended by the server while the attacker still
    // holds its body open: refused at once, or at the message deadline.
    let mut ended = std::collections::BTreeMap::new();
    for call in calls {
        let code = tokio::time::timeout(Duration::from_secs(120), call)
            .await
            .expect("a stalled call was never ended by the server")
            .unwrap()
            .expect("the server answered the stalled call with a grpc-status");
        *ended.entry(code_of(&code).to_owned()).or_insert(0) += 1;
    }
    drop(bodies);
    Wave { http, grpc, quiet, bound, ended, idle, peak }
}

/// The figures of a wave, for the test's output (BENCHMARKS.md records them).
fn report(what: &str, wave: &Wave) {
    let summary = |latencies: &[Duration]| {
        let mut sorted = latencies.to_vec();
        sorted.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        format!(
            "{} creates, median {:.1} ms, max {:.1} ms",
            sorted.len(),
            ms(sorted[sorted.len() / 2]),
            ms(*sorted.last().unwrap())
        )
    };
    eprintln!(
        "{what}: HTTP {}; gRPC {}; each under {:?} (slowest before the wave {:?}); stalled calls ended by code {:?}; RSS idle {} MB, peak +{} MB",
        summary(&wave.http),
        summary(&wave.grpc),
        wave.bound,
        wave.quiet,
        wave.ended,
        wave.idle >> 20,
        wave.peak.saturating_sub(wave.idle) >> 20
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_stream_wave_from_one_address_never_refuses_another_addresses_creates() {
    // Default shares and caps: 32 calls and 7 MiB of message bytes per
    // address, a 5 s message deadline, a 128 MiB body budget.
    let up = Up::start(&[]).await;
    let wave = stalled_stream_wave(&up, &["127.0.0.1".to_string()], 3, 90).await;
    report("stalled-stream wave from 1 address (3 connections x 90 calls, every 10 s)", &wave);
    assert!(wave.peak < wave.idle + 100 * 1024 * 1024, "RSS {} MB above idle", (wave.peak - wave.idle) >> 20);
    // Past the address's share the calls were refused at once, and those it
    // held were ended at their message deadline, not the 30 s call timeout.
    assert!(wave.ended.get("8").is_some_and(|&n| n > 0), "{:?}", wave.ended);
    assert!(wave.ended.get("4").is_some_and(|&n| n > 0), "{:?}", wave.ended);
    assert!(refusals_over(&up, Some("grpc"), "client_streams").await > 0);
    assert!(refusals_over(&up, Some("grpc"), "message_deadline").await > 0);
    assert_eq!(refusals_over(&up, Some("grpc"), "body_budget").await, 0, "the global budget was never reached");
    // The dashboard lists the refusals by protocol and reason.
    let status: Value = Client::new()
        .get(format!("http://{}/dashboard/status.json", up.process.address("admin")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = status["edge_refusals"].as_array().expect("edge_refusals in status.json");
    assert!(
        listed
            .iter()
            .any(|r| r["protocol"] == "grpc" && r["reason"] == "client_streams" && r["count"].as_u64() > Some(0)),
        "{listed:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_stream_wave_spread_over_16_addresses_stays_within_the_global_caps() {
    // Default shares and caps: 16 addresses at their full share of message
    // bytes (7 MiB each) hold 112 MiB, within the 128 MiB body budget: the
    // global cap stays the last line, never reached (docs/security.md#total-bounds).
    let up = Up::start(&[]).await;
    let attackers: Vec<String> = (2..18).map(|n| format!("127.0.0.{n}")).collect();
    // The same 270 calls as from one address, spread: 17 on one connection from each.
    let wave = stalled_stream_wave(&up, &attackers, 1, 17).await;
    report("stalled-stream wave from 16 addresses (16 connections x 17 calls, every 10 s)", &wave);
    assert!(wave.peak < wave.idle + 100 * 1024 * 1024, "RSS {} MB above idle", (wave.peak - wave.idle) >> 20);
    assert!(wave.ended.get("4").is_some_and(|&n| n > 0), "{:?}", wave.ended);
    assert!(refusals_over(&up, Some("grpc"), "client_message_bytes").await > 0);
    assert_eq!(refusals_over(&up, Some("grpc"), "body_budget").await, 0, "the global budget was never reached");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_grpc_connections_from_16_addresses_are_closed_at_the_preface_timeout_while_another_creates() {
    // Default caps, shares and preface timeout (10 s): 16 addresses each
    // hold their full share of 64 connections and never send a byte.
    let up = Up::start(&[]).await;
    let listener: std::net::SocketAddr = up.process.address("gateway-grpc").parse().unwrap();
    let idle = resident_bytes(&up);
    let mut silent = Vec::new();
    for address in 2..18 {
        for _ in 0..64 {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind(format!("127.0.0.{address}:0").parse().unwrap()).unwrap();
            silent.push(socket.connect(listener).await.unwrap());
        }
    }
    // The 1,024 take half the listener's 2,048: another address creates meanwhile.
    let honest = grpc_channel_from(&up, "127.0.0.100").await;
    tokio::time::timeout(BOUND, grpc_create(&honest, "while 1,024 connections are silent".into()))
        .await
        .expect("answered")
        .expect("another address creates over gRPC");
    eprintln!(
        "1,024 silent gRPC connections: RSS idle {} MB, +{} KB",
        idle >> 20,
        resident_bytes(&up).saturating_sub(idle) >> 10
    );
    // Every silent connection is closed by the server, none kept past the timeout.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    for (n, stream) in silent.iter_mut().enumerate() {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        assert!(read_until_closed(stream, left).await.is_some(), "silent connection {n} is still open");
    }
    assert!(refusals_over(&up, Some("grpc"), "preface_timeout").await >= 1024);
}

#[tokio::test]
async fn a_health_watch_keeps_its_connection_past_the_send_timeout() {
    use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
    let up = Up::start(&["--grpc-send-timeout-secs", "2"]).await;
    let mut health = HealthClient::new(grpc_channel_from(&up, "127.0.0.1").await);
    let request = || HealthCheckRequest { service: String::new() };
    let mut watch = health.watch(request()).await.expect("watching").into_inner();
    let first = tokio::time::timeout(BOUND, watch.message()).await.expect("the first status").unwrap();
    assert!(first.is_some(), "the watch tells the status at once");
    // Three times the send timeout with the stream open and read, whatever it tells.
    let waited = tokio::time::timeout(Duration::from_secs(6), async {
        loop {
            match watch.message().await {
                Ok(Some(_)) => continue,
                ended => return ended,
            }
        }
    })
    .await;
    assert!(waited.is_err(), "the watch was ended: {waited:?}");
    health.check(request()).await.expect("the connection serves on");
    assert_eq!(refusals_over(&up, Some("grpc"), "send_timeout").await, 0);
}

#[tokio::test]
async fn an_idle_grpc_connection_is_closed_and_an_old_one_is_ended_after_its_grace() {
    use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
    let up = Up::start(&[
        "--grpc-idle-timeout-secs",
        "2",
        "--grpc-max-connection-age-secs",
        "4",
        "--grpc-call-timeout-secs",
        "3",
    ])
    .await;
    // One health check, then nothing but the pings h2 answers: closed as idle.
    let (mut client, connection) = raw_connection(&up).await;
    let (response, mut body) = client.send_request(health_check_with(0), false).unwrap();
    body.send_data(vec![0u8; 5].into(), true).unwrap();
    let answered = tokio::time::timeout(BOUND, response).await.expect("answered").unwrap();
    assert_eq!(answered.status(), http::StatusCode::OK);
    drop(answered);
    tokio::time::timeout(BOUND, connection).await.expect("the idle connection was closed").unwrap().ok();
    assert!(refusals_over(&up, Some("grpc"), "idle_timeout").await >= 1);
    // A watch is never idle, but its connection is told to go at 4 s and
    // closed a call timeout (3 s) later.
    let started = tokio::time::Instant::now();
    let mut health = HealthClient::new(grpc_channel_from(&up, "127.0.0.1").await);
    let mut watch = health.watch(HealthCheckRequest { service: String::new() }).await.unwrap().into_inner();
    let ended = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            match watch.message().await {
                Ok(Some(_)) => continue,
                ended => return ended,
            }
        }
    })
    .await
    .expect("the old connection was ended");
    assert!(ended.is_err(), "ended by the server: {ended:?}");
    assert!(started.elapsed() >= Duration::from_secs(4), "not before its age");
    assert!(refusals_over(&up, Some("grpc"), "max_connection_age").await >= 1);
}

/// A 1 MiB paste of a control character, created over HTTP: its JSON
/// answer is 6 MiB (`\u0001` each), more than socket buffers take.
async fn one_mib_paste(up: &Up) -> String {
    let (status, _, created) = up.create(&new_key(), &"\u{1}".repeat(1024 * 1024), &[]).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    created["id"].as_str().unwrap().to_owned()
}

/// Opens from `local` one HTTP/2 connection that grants no window and asks
/// for `id` 32 times: how many answers the server holds (their headers sent,
/// their bodies never) and how many it refused at once, with its grpc-status;
/// and the connection and the answers' bodies, to keep them open.
async fn stalled_get_pastes(
    up: &Up,
    local: &str,
    id: &str,
) -> (usize, Vec<String>, h2::client::SendRequest<bytes::Bytes>, Vec<h2::RecvStream>) {
    let (mut client, _connection) = zero_window_connection(up, local).await;
    let mut pending = Vec::new();
    for _ in 0..32 {
        pending.push(raw_get_paste(&mut client, id).await);
    }
    let (mut held, mut refused, mut bodies) = (0, Vec::new(), Vec::new());
    for answer in pending {
        let answer = tokio::time::timeout(BOUND, answer).await.expect("the headers are sent").expect("answered");
        match answer.headers().get("grpc-status") {
            // Trailers-only: refused before anything was held.
            Some(code) => refused.push(code.to_str().unwrap().to_owned()),
            None => held += 1,
        }
        bodies.push(answer.into_body());
    }
    (held, refused, client, bodies)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_that_grant_no_window_hold_at_most_the_answer_budget_however_many_addresses() {
    // A 64 MiB answer budget (8 addresses at their default 8 MiB share), a
    // send timeout longer than the test: only the budget ends the holding.
    let up = Up::start(&["--answer-budget-bytes", "67108864", "--grpc-send-timeout-secs", "600"]).await;
    let id = one_mib_paste(&up).await;
    let read = client_from("127.0.0.1").get(format!("{}/raw/{id}", up.http)).send().await.unwrap();
    assert_eq!(read.bytes().await.unwrap().len(), 1024 * 1024, "read once: in the cache");
    let idle = resident_bytes(&up);
    let mut connections = Vec::new();
    let (mut held, mut refused) = (0, Vec::new());
    let mut growth = Vec::new();
    for (from, to) in [(2, 6), (6, 18)] {
        for address in from..to {
            let (h, r, client, bodies) = stalled_get_pastes(&up, &format!("127.0.0.{address}"), &id).await;
            held += h;
            refused.extend(r);
            connections.push((client, bodies));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        growth.push(resident_bytes(&up).saturating_sub(idle));
        eprintln!(
            "{} addresses x 32 GetPaste of a 1 MiB paste, no window: {held} answers held, {} refused, RSS idle {} MB, +{} MB",
            to - 2,
            refused.len(),
            idle >> 20,
            growth.last().unwrap() >> 20
        );
    }
    // 4 addresses hold their 8 MiB shares; 16 would hold 128 MiB, but the budget holds 64.
    assert!(held <= 64, "{held} answers of 1 MiB held within a 64 MiB budget");
    assert!(refused.iter().all(|code| code == "8" || code == "14"), "{refused:?}");
    assert!(refusals_over(&up, Some("grpc"), "client_answer_bytes").await > 0);
    assert!(refusals_over(&up, Some("grpc"), "answer_budget").await > 0);
    let bound = 64 * 1024 * 1024 + 48 * 1024 * 1024;
    assert!(growth[1] < bound, "RSS +{} MB with 16 addresses, past the budget and slack", growth[1] >> 20);
    // Another address reads over HTTP once answers are given back: closing
    // the first stalled connection drops the answers it held.
    drop(connections.remove(0));
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let answer = client_from("127.0.0.100").get(format!("{}/raw/{id}", up.http)).send().await.unwrap();
        if answer.status() == StatusCode::OK {
            assert_eq!(answer.bytes().await.unwrap().len(), 1024 * 1024);
            break;
        }
        assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert!(answer.headers().contains_key(header::RETRY_AFTER));
        assert!(tokio::time::Instant::now() < deadline, "the closed connection's answers were never given back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn an_http_answer_holds_its_share_until_its_body_is_dropped() {
    let up = Up::start(&["--max-answer-bytes-per-client", "2500000", "--send-timeout-secs", "600"]).await;
    let id = one_mib_paste(&up).await;
    // Two readers that never read hold two answers of 1 MiB (each 6 MiB of JSON).
    let mut stalled = Vec::new();
    for _ in 0..2 {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_recv_buffer_size(4096).unwrap();
        let mut stream = socket.connect(up.address().parse().unwrap()).await.unwrap();
        let request = format!("GET /api/v1/pastes/{id} HTTP/1.1\r\nHost: x\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        stalled.push(stream);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A third read from the same address is refused at once; another address reads.
    let third = Client::new().get(format!("{}/api/v1/pastes/{id}", up.http)).send().await.unwrap();
    assert_eq!(third.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert!(third.headers().contains_key(header::RETRY_AFTER));
    assert_eq!(error_code(&third.json().await.unwrap()), "overloaded");
    let other = client_from("127.0.0.2").get(format!("{}/raw/{id}", up.http)).send().await.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    assert!(refusals_over(&up, Some("http"), "client_answer_bytes").await >= 1);
    // Closed, the stalled readers' answers are dropped and their share given back.
    drop(stalled);
    let deadline = tokio::time::Instant::now() + BOUND;
    loop {
        let again = Client::new().get(format!("{}/raw/{id}", up.http)).send().await.unwrap();
        if again.status() == StatusCode::OK {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the share was never given back");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A report of `id` declaring `declared` bytes and sending `sent` of them.
fn slow_report_head(id: &str, declared: usize, sent: usize) -> String {
    format!(
        "POST /api/v1/pastes/{id}/reports HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\n\r\n{}",
        "a".repeat(sent)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_report_bodies_from_8_addresses_cost_at_most_the_body_budget_while_another_creates() {
    // Default shares and budget; a body deadline longer than the test.
    let up = Up::start(&["--body-read-timeout-secs", "120"]).await;
    let (_, _, created) = up.create(&new_key(), "reported", &[]).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let idle = resident_bytes(&up);
    // 8 addresses x 32 reports of 2 MB, each sent but for its last 100 bytes.
    const DECLARED: usize = 2_000_000;
    let mut slow = Vec::new();
    for address in 2..10 {
        for _ in 0..32 {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind(format!("127.0.0.{address}:0").parse().unwrap()).unwrap();
            let mut stream = socket.connect(up.address().parse().unwrap()).await.unwrap();
            // A refused report is answered (and closed) while its body is sent: that write may fail.
            let _ = stream.write_all(slow_report_head(&id, DECLARED, DECLARED - 100).as_bytes()).await;
            slow.push(stream);
        }
    }
    let mut peak = resident_bytes(&up);
    let honest = client_from("127.0.0.100");
    for n in 0..5 {
        let created = honest
            .post(format!("{}/api/v1/pastes", up.http))
            .header("Idempotency-Key", new_key())
            .body(format!("created while 256 reports stall, {n}"))
            .timeout(Duration::from_secs(20))
            .send()
            .await
            .unwrap();
        assert_eq!(created.status(), StatusCode::CREATED, "{}", created.text().await.unwrap());
        peak = peak.max(resident_bytes(&up));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let growth = peak.saturating_sub(idle);
    eprintln!("256 slow 2 MB report bodies from 8 addresses: RSS idle {} MB, peak +{} MB", idle >> 20, growth >> 20);
    assert!(growth < 128 * 1024 * 1024 + 32 * 1024 * 1024, "RSS +{} MB: past the 128 MiB body budget", growth >> 20);
    assert!(refusals_over(&up, Some("http"), "client_body_bytes").await > 0, "each address past its share was refused");
    drop(slow);
}

#[tokio::test]
async fn a_report_past_the_rate_is_refused_before_its_body_is_read() {
    let up = Up::start(&["--body-read-timeout-secs", "600", "--report-rate-limit", "1/hour"]).await;
    let (_, _, created) = up.create(&new_key(), "reported", &[]).await;
    let id = created["id"].as_str().unwrap().to_owned();
    let first = Client::new()
        .post(format!("{}/api/v1/pastes/{id}/reports", up.http))
        .json(&json!({ "reason": "spam" }))
        .send()
        .await
        .unwrap();
    assert_eq!(first.status(), StatusCode::CREATED);
    // The second's body never comes: it is answered 429 at once, not after the body deadline.
    let mut second = TcpStream::connect(up.address()).await.unwrap();
    second.write_all(slow_report_head(&id, 1000, 1).as_bytes()).await.unwrap();
    let answer = read_until_closed(&mut second, BOUND).await.expect("answered without the body");
    assert!(answer.starts_with("HTTP/1.1 429"), "{answer}");
}
