//! Sealed pastes (docs/api.md#sealed-pastes) end to end, against a real
//! deployment: the page in Debian's Chromium (tests/browser/sealed.mjs), the
//! `pastebin` client (`paste --encrypt`, `pastes`, `get`), and an independent
//! reader in Python's `cryptography` (tests/sealed/open_sealed.py). This side
//! checks what no browser can see: one paste per save, and no plaintext and
//! no key in either database, the object store or any process's log.
//!
//! The browser tests need node (>= 20), /usr/bin/chromium (or $CHROMIUM),
//! tests/browser/node_modules and zbarimg (to scan the page's QR code); the
//! Python ones .venv with `cryptography` (scripts/test installs them all).

use std::{
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::Output,
};

use base64::Engine;
use pastebin_tests::{
    browser::{require_tools, run_script_phase, workspace_root},
    cluster::{testbed_binary, Cluster, ClusterOptions},
};
use serde_json::Value;

const SEALED_TYPE: &str = "application/vnd.pastebin.sealed+json";

async fn phase(cluster: &Cluster, args: &[&str]) -> Value {
    run_script_phase(cluster, "sealed.mjs", args).await
}

/// `pastebin ARGS` (the testbed binary), to its exit.
async fn pastebin(args: &[&str]) -> Output {
    let command = tokio::process::Command::new(testbed_binary()).args(args).kill_on_drop(true).output();
    tokio::time::timeout(std::time::Duration::from_secs(180), command)
        .await
        .expect("the client finishes within 3 minutes")
        .expect("the client runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `pastebin paste --encrypt FILE` with a journal in `state`; `extra` flags after.
async fn paste_encrypted(cluster: &Cluster, state: &Path, file: &Path, extra: &[&str]) -> Output {
    let (state, file) = (state.to_str().unwrap(), file.to_str().unwrap());
    let args = [&["paste", "--encrypt", file, "--server", &cluster.http, "--state-dir", state][..], extra].concat();
    pastebin(&args).await
}

/// Every row of both databases as JSON text, the object of `id`, and every
/// process's log: all the server side holds.
async fn server_side(cluster: &Cluster, id: &str) -> String {
    use sqlx::Connection;
    let mut everything = String::new();
    let tables = cluster
        .key_database_urls
        .iter()
        .map(|url| (url, "SELECT row_to_json(t)::text FROM idempotency_keys t"))
        .chain(cluster.paste_database_urls.iter().map(|url| (url, "SELECT row_to_json(t)::text FROM pastes t")));
    for (url, sql) in tables {
        let mut conn = sqlx::PgConnection::connect(url).await.expect("connect to the shard database");
        let rows: Vec<String> = sqlx::query_scalar(sql).fetch_all(&mut conn).await.expect("query");
        everything.extend(rows.into_iter().map(|row| row + "\n"));
    }
    let object = cluster.object_store().await.get(id).await.expect("the object store answers");
    everything.push_str(&text(&object.expect("the paste's object exists")));
    for process in cluster.keys.iter().chain(&cluster.pastes).chain(std::iter::once(&cluster.gateway)) {
        everything.push_str(&process.logs());
    }
    everything
}

fn assert_holds_none(haystack: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(!secret.is_empty() && !haystack.contains(secret), "the server side holds {secret:?}");
    }
}

/// The Python reader's opening of `envelope` with `link` (and a password file).
fn open_independently(envelope: &[u8], link: &str, password_file: Option<&Path>) -> Output {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("envelope");
    std::fs::write(&file, envelope).unwrap();
    let mut command = std::process::Command::new(python());
    command.arg(workspace_root().join("tests/sealed/open_sealed.py")).args(["open", file.to_str().unwrap(), link]);
    command.args(password_file.map(|p| p.to_str().unwrap().to_owned()));
    command.output().expect("python runs")
}

fn python() -> PathBuf {
    let python = workspace_root().join(".venv/bin/python");
    assert!(python.exists(), "{} is missing: run scripts/test once (it installs `cryptography`)", python.display());
    python
}

async fn raw(cluster: &Cluster, id: &str) -> reqwest::Response {
    reqwest::get(format!("{}/raw/{id}", cluster.http)).await.expect("GET reaches the gateway")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_sealed_paste_survives_its_lost_answer_holds_no_plaintext_and_opens_only_with_its_key() {
    require_tools();
    let cluster = Cluster::start(ClusterOptions::default()).await;

    // The page seals and saves; its first 201 is lost; it resends the same request.
    let created = phase(&cluster, &["create"]).await;
    let field = |name: &str| created[name].as_str().unwrap_or_else(|| panic!("the create phase's {name}")).to_owned();
    let (id, link, fragment, plaintext, marker) =
        (field("id"), field("link"), field("fragment"), field("text"), field("marker"));
    assert_eq!(cluster.live_pastes().await, 1, "the lost answer and its retry made one paste");
    assert_eq!(cluster.key_rows().await, 1, "one save, one idempotency key");
    let sent = base64::engine::general_purpose::STANDARD.decode(field("envelope")).unwrap();
    let stored = cluster.object_store().await.get(&id).await.unwrap().expect("the object");
    assert_eq!(stored, sent, "the server stores the envelope byte for byte");
    assert_holds_none(&server_side(&cluster, &id).await, &[&marker, &fragment, "second line"]);

    // What the server answers for it: opaque bytes, marked sealed.
    let answer = raw(&cluster, &id).await;
    assert_eq!(answer.headers()["content-type"], "application/octet-stream");
    assert_eq!(answer.headers()["paste-sealed"], "true");
    let envelope = answer.bytes().await.unwrap();
    assert_eq!(envelope, sent);

    // Another browser with the link opens it; without the key, or with a wrong one, nothing shows.
    let read = phase(&cluster, &["read", &link]).await;
    let lines: Vec<&str> = plaintext.lines().collect();
    assert_eq!(read["lines"], serde_json::json!(lines), "the lines as typed");
    assert_eq!(read["copied"], lines.join("\n"), "copy gives the text");
    assert_eq!(read["downloaded"], plaintext, "the download is the plaintext");
    assert_eq!(read["copiedLink"], link, "the copied link carries the key");
    let qr = std::process::Command::new("zbarimg")
        .args(["--quiet", "--raw", read["qrImage"].as_str().expect("the QR code's screenshot")])
        .output()
        .expect("zbarimg runs: install it with `apt-get install -y zbar-tools`");
    assert_eq!(text(&qr.stdout).trim_end(), link, "the page's QR code scans as the whole link");

    // An independent implementation opens the live paste, and so does the client.
    let opened = open_independently(&envelope, &link, None);
    assert!(opened.status.success(), "{}", text(&opened.stderr));
    assert_eq!(text(&opened.stdout), plaintext);
    let got = pastebin(&["get", &link]).await;
    assert!(got.status.success(), "{}", text(&got.stderr));
    assert_eq!(text(&got.stdout), plaintext);
    let keyless = pastebin(&["get", &format!("{}/{id}", cluster.http)]).await;
    assert_eq!((keyless.status.code(), keyless.stdout.as_slice()), (Some(1), &b""[..]), "nothing printed");
    assert!(text(&keyless.stderr).contains("the link has no key"), "{}", text(&keyless.stderr));

    // Reading it left no plaintext or key behind either.
    assert_holds_none(&server_side(&cluster, &id).await, &[&marker, &fragment, "second line"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_after_a_failure_seals_anew_and_a_password_paste_needs_its_password_in_the_page_and_the_client() {
    require_tools();
    let cluster = Cluster::start(ClusterOptions::default()).await;

    let edited = phase(&cluster, &["edit"]).await;
    assert!(edited["attempts"].as_u64() >= Some(2), "the failed save was resent: {edited}");
    assert_eq!(cluster.live_pastes().await, 1, "only the edited save reached the server");

    let secret = "correct horse sealed staple";
    let locked = phase(&cluster, &["password", secret]).await;
    assert_eq!(locked["lines"], serde_json::json!(["behind a password"]));
    let link = locked["link"].as_str().expect("a link");
    assert_holds_none(&server_side(&cluster, locked["id"].as_str().unwrap()).await, &[secret, "behind a password"]);

    // The client reads the page's password paste: only with the password.
    let without = pastebin(&["get", link]).await;
    assert_eq!((without.status.code(), without.stdout.as_slice()), (Some(1), &b""[..]));
    assert!(text(&without.stderr).contains("password"), "{}", text(&without.stderr));
    let dir = tempfile::tempdir().unwrap();
    let password_file = dir.path().join("password");
    std::fs::write(&password_file, format!("{secret}\n")).unwrap();
    let with = pastebin(&["get", link, "--password-file", password_file.to_str().unwrap()]).await;
    assert!(with.status.success(), "{}", text(&with.stderr));
    assert_eq!(text(&with.stdout), "behind a password\n");

    // And the page reads the client's password paste (the Python reader too).
    let file = dir.path().join("notes.txt");
    std::fs::write(&file, "sealed by the client, behind a password\n").unwrap();
    let state = dir.path().join("state");
    let pasted = paste_encrypted(&cluster, &state, &file, &["--password-file", password_file.to_str().unwrap()]).await;
    assert!(pasted.status.success(), "{}", text(&pasted.stderr));
    let client_link = text(&pasted.stdout).trim().to_owned();
    let id = client_link.rsplit('/').next().unwrap().split('#').next().unwrap().to_owned();
    let envelope = raw(&cluster, &id).await.bytes().await.unwrap();
    let opened = open_independently(&envelope, &client_link, Some(&password_file));
    assert!(opened.status.success(), "{}", text(&opened.stderr));
    assert_eq!(text(&opened.stdout), "sealed by the client, behind a password\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_burn_paste_asks_before_it_burns_and_plain_http_says_why_it_cannot_seal() {
    require_tools();
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let burned = phase(&cluster, &["burn"]).await;
    assert_eq!(burned["lines"], serde_json::json!(["read me once"]));
    assert_eq!(cluster.live_pastes().await, 0, "the one read burned it");

    // A client without the key asks before it reads: a burn paste is not burned for nobody.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("once.txt");
    std::fs::write(&file, "once\n").unwrap();
    let pasted = pastebin(&[
        "paste",
        "--encrypt",
        file.to_str().unwrap(),
        "--server",
        &cluster.http,
        "--state-dir",
        dir.path().join("state").to_str().unwrap(),
    ])
    .await;
    assert!(pasted.status.success(), "{}", text(&pasted.stderr));
    let link = text(&pasted.stdout).trim().to_owned();
    let (bare, _) = link.split_once('#').expect("the printed link carries the key");
    let id = bare.rsplit('/').next().unwrap().to_owned();
    let keyless = pastebin(&["get", bare]).await;
    assert_eq!((keyless.status.code(), keyless.stdout.as_slice()), (Some(1), &b""[..]));

    let plain = phase(&cluster, &["insecure", &id]).await;
    assert_eq!(plain["id"], id.as_str());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_seals_once_per_content_resends_the_same_envelope_after_a_crash_and_the_page_opens_it() {
    require_tools();
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let file = dir.path().join("notes.txt");
    let content = "sealed by the client\nsecond line\n";
    std::fs::write(&file, content).unwrap();

    // The gateway dies after the paste is stored, before it answers: not confirmed.
    cluster.restart_gateway("after_p_insert").await;
    let crashed = paste_encrypted(&cluster, &state, &file, &["--attempts", "1"]).await;
    assert_eq!(crashed.status.code(), Some(75), "{}", text(&crashed.stderr));
    let records: Vec<PathBuf> =
        std::fs::read_dir(state.join("intents")).unwrap().map(|entry| entry.unwrap().path()).collect();
    assert_eq!(records.len(), 1);
    let record: Value = serde_json::from_slice(&std::fs::read(&records[0]).unwrap()).unwrap();
    assert_eq!(std::fs::metadata(&records[0]).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!((record["state"].as_str(), record["sealed"].as_bool()), (Some("pending"), Some(true)), "{record}");
    let kept = base64::engine::general_purpose::STANDARD.decode(record["content"].as_str().unwrap()).unwrap();
    assert!(!text(&kept).contains("second line"), "the journal keeps the envelope, not the text");
    let fragment = record["link_key"].as_str().expect("the record keeps the key").to_owned();

    // The same command again sends the same envelope under the same key.
    cluster.restart_gateway("").await;
    let finished = paste_encrypted(&cluster, &state, &file, &[]).await;
    assert!(finished.status.success(), "{}", text(&finished.stderr));
    let link = text(&finished.stdout).trim().to_owned();
    assert!(link.ends_with(&format!("#{fragment}")), "the link carries the kept key: {link}");
    let id = link.rsplit('/').next().unwrap().split('#').next().unwrap().to_owned();
    assert_eq!(cluster.live_pastes().await, 1, "the crash and the resend made one paste");
    assert_eq!(cluster.object_store().await.get(&id).await.unwrap().unwrap(), kept, "the very bytes kept");

    // Once more: the journal answers, with the same link; `pastes` shows it whole.
    let again = paste_encrypted(&cluster, &state, &file, &[]).await;
    assert_eq!(text(&again.stdout).trim(), link);
    assert!(text(&again.stderr).contains("already pasted"), "{}", text(&again.stderr));
    let listed =
        pastebin(&["pastes", "--json", "--state-dir", state.to_str().unwrap(), "--server", &cluster.http]).await;
    let row: Value = serde_json::from_slice(text(&listed.stdout).lines().next().unwrap().as_bytes()).unwrap();
    assert_eq!(row["url"], link.as_str());
    assert_eq!(cluster.live_pastes().await, 1);

    // The page opens the client's paste; the client opens it too.
    let read = phase(&cluster, &["read", &link]).await;
    assert_eq!(read["lines"], serde_json::json!(["sealed by the client", "second line"]));
    let got = pastebin(&["get", &link]).await;
    assert_eq!(text(&got.stdout), content);
    assert_holds_none(&server_side(&cluster, &id).await, &["sealed by the client", &fragment]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_keeps_an_envelope_opaque_replays_it_and_refuses_what_no_reader_could_open() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let client = reqwest::Client::new();
    let create = |body: Vec<u8>, key: &str, query: &str| {
        client
            .post(format!("{}/api/v1/pastes{query}", cluster.http))
            .header("Idempotency-Key", key)
            .header("Content-Type", SEALED_TYPE)
            .body(body)
            .send()
    };
    let sealed = pastebin_sealed::seal(b"opaque to the server", None).unwrap();
    let key = uuid::Uuid::new_v4().to_string();
    let first = create(sealed.envelope.clone(), &key, "?expires_in_seconds=3600").await.unwrap();
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    let id = first["id"].as_str().unwrap();
    let replay = create(sealed.envelope.clone(), &key, "?expires_in_seconds=3600").await.unwrap();
    assert_eq!((replay.status().as_u16(), replay.headers()["idempotent-replayed"].to_str().unwrap()), (201, "true"));
    let resealed = pastebin_sealed::seal(b"opaque to the server", None).unwrap();
    let conflict = create(resealed.envelope, &key, "?expires_in_seconds=3600").await.unwrap();
    assert_eq!(conflict.status(), 409, "sealing again is a new request: it needs a new key");

    let json: Value =
        client.get(format!("{}/api/v1/pastes/{id}", cluster.http)).send().await.unwrap().json().await.unwrap();
    assert_eq!(json["sealed"], true);
    let decoded = base64::engine::general_purpose::STANDARD.decode(json["content_base64"].as_str().unwrap()).unwrap();
    assert_eq!(decoded, sealed.envelope);
    let head = client.head(format!("{}/api/v1/pastes/{id}", cluster.http)).send().await.unwrap();
    assert_eq!(head.headers()["paste-sealed"], "true", "HEAD says so without reading");
    let answer = raw(&cluster, id).await;
    assert_eq!(answer.headers()["content-type"], "application/octet-stream");
    assert!(answer.headers()["content-disposition"].to_str().unwrap().starts_with("attachment"));
    let page = client
        .get(format!("{}/{id}", cluster.http))
        .header("Accept", "text/html")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("id=\"sealed-paste\"") && !page.contains(&text(&sealed.envelope)), "{page}");

    // A sealed burn paste is never read by the page's server side, not even by its POST.
    let burn = pastebin_sealed::seal(b"read once", None).unwrap();
    let created = create(burn.envelope, &uuid::Uuid::new_v4().to_string(), "?burn_after_reading=true").await.unwrap();
    let burn_id = created.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let posted = client.post(format!("{}/{burn_id}", cluster.http)).header("Accept", "text/html").send().await.unwrap();
    assert!(posted.text().await.unwrap().contains("data-burn=\"true\""));
    let still = client.head(format!("{}/api/v1/pastes/{burn_id}", cluster.http)).send().await.unwrap();
    assert_eq!(still.status(), 200, "only the script's fetch of /raw burns it");
    assert_eq!(raw(&cluster, &burn_id).await.status(), 200);
    assert_eq!(raw(&cluster, &burn_id).await.status(), 404, "and that read burned it");

    // What no reader could open, or what the server could read beside it, is refused, and nothing is stored.
    let refusals = [
        (b"opaque to the server".to_vec(), "", 400),
        (sealed.envelope.clone(), "?language=rust", 400),
        (sealed.envelope.clone(), "?file_name=notes.txt", 400),
        (vec![b' '; 1024 * 1024 + 1], "", 413),
    ];
    for (body, query, status) in refusals {
        let refused = create(body, &uuid::Uuid::new_v4().to_string(), query).await.unwrap();
        assert_eq!(refused.status(), status, "{query}");
    }
    assert_eq!(cluster.live_pastes().await, 1, "nothing refused was stored");

    // Over gRPC, the client's envelope travels in `data` with `sealed`, and reads back the same.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("grpc.txt");
    std::fs::write(&file, "sealed over gRPC\n").unwrap();
    let grpc = cluster.grpc.replacen("http://", "grpc://", 1);
    let state = dir.path().join("state");
    let args =
        ["paste", "--encrypt", file.to_str().unwrap(), "--server", &grpc, "--state-dir", state.to_str().unwrap()];
    let pasted = pastebin(&args).await;
    assert!(pasted.status.success(), "{}", text(&pasted.stderr));
    let got = pastebin(&["get", text(&pasted.stdout).trim()]).await;
    assert_eq!(text(&got.stdout), "sealed over gRPC\n", "{}", text(&got.stderr));
    assert_eq!(cluster.live_pastes().await, 2);

    // `get` prints a plain paste as it is.
    let plain = client
        .post(format!("{}/api/v1/pastes", cluster.http))
        .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
        .body("plain text\n")
        .send()
        .await
        .unwrap();
    let plain_url = plain.json::<Value>().await.unwrap()["url"].as_str().unwrap().to_owned();
    assert_eq!(text(&pastebin(&["get", &plain_url]).await.stdout), "plain text\n");

    // Deleted by id with its token, as any paste.
    let token = first["delete_token"].as_str().unwrap();
    let deleted =
        client.delete(format!("{}/api/v1/pastes/{id}", cluster.http)).bearer_auth(token).send().await.unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(raw(&cluster, id).await.status(), 404);
}

#[test]
fn an_independent_implementation_opens_and_remakes_the_published_vectors() {
    let output = std::process::Command::new(python())
        .arg(workspace_root().join("tests/sealed/open_sealed.py"))
        .arg("vectors")
        .arg(workspace_root().join("crates/sealed/vectors.json"))
        .output()
        .expect("python runs");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout).trim(), "opened 3 vectors");
}
