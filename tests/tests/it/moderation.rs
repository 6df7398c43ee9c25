//! The moderation path hardened (docs/operations.md#reports-and-takedowns,
//! docs/security.md#reports), on real processes: a report's note keeps no
//! link key, and `ctl reports` prints a hostile note without obeying it;
//! `ctl reports` shows every kept report and dismisses one or all; P takes
//! operator calls from an operator's identity only (a certificate with the
//! role, `up`'s socket) and its audit line names that identity.

use std::{path::Path, time::Duration};

use pastebin_core::{IdempotencyKey, KeyState};

use pastebin_pastes::{Dismissal, PasteClient, TakedownOutcome};
use pastebin_runtime::grpc::CallError;
use pastebin_tests::{
    api::{self, new_key},
    cluster::{execute, Cluster, ClusterOptions},
};
use reqwest::{Client, StatusCode};
use serde_json::{json, Value};

use crate::{
    keeping::{create, create_sealed, pastebin, start_up},
    mtls::{shard, Given},
};

/// A key as a sealed paste's link carries it after `#`: 43 base64url characters.
const LINK_KEY: &str = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJC";

async fn new_paste(http: &str, content: &str) -> String {
    let (status, body, _) = create(http, &new_key(), json!({ "content": content })).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().to_owned()
}

async fn report(http: &str, id: &str, reason: &str, note: &str) {
    let sent = Client::new()
        .post(format!("{http}/api/v1/pastes/{id}/reports"))
        .json(&json!({ "reason": reason, "note": note }))
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(sent.status(), StatusCode::CREATED, "{}", sent.text().await.unwrap());
}

/// `pastebin ctl --data-dir DATA ARGS` as the operator runs it: its exit status and standard output.
async fn ctl(data: &Path, args: &[&str]) -> (bool, String, String) {
    let state = tempfile::tempdir().unwrap();
    let argv: Vec<&str> = [&["ctl", "--data-dir", data.to_str().unwrap()], args].concat();
    let output = pastebin(&argv, state.path()).await;
    let (out, err) = (String::from_utf8(output.stdout).unwrap(), String::from_utf8(output.stderr).unwrap());
    (output.status.success(), out, err)
}

/// Whether any byte of P's database (its file and its write-ahead log) holds `needle`.
fn pastes_database_holds(data: &Path, needle: &str) -> bool {
    ["pastes.db", "pastes.db-wal"].iter().any(|file| {
        let bytes = std::fs::read(data.join(file)).unwrap_or_default();
        bytes.windows(needle.len()).any(|window| window == needle.as_bytes())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reports_note_keeps_no_link_key_and_ctl_prints_it_without_obeying_it() {
    let data = tempfile::tempdir().unwrap();
    let (_up, http) = start_up(data.path(), &[]).await;
    let id = new_paste(&http, "reported with its link").await;
    // The form asks for the link without its key.
    let form = reqwest::get(format!("{http}/{id}/report")).await.unwrap().text().await.unwrap();
    assert!(form.contains("leave out the part after <code>#</code>"), "{form}");

    // A reporter pastes the whole link anyway, and the key once more on its own.
    report(&http, &id, "illegal", &format!("see {http}/{id}#{LINK_KEY} (key {LINK_KEY})")).await;
    assert!(!pastes_database_holds(data.path(), LINK_KEY), "the key reached P's database");
    report(&http, &id, "spam", "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}exe.gnp").await;

    let (ok, out, err) = ctl(data.path(), &["reports", "--json"]).await;
    assert!(ok, "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    let notes: Vec<&str> =
        listed["pastes"][0]["recent"].as_array().unwrap().iter().map(|r| r["note"].as_str().unwrap()).collect();
    assert_eq!(notes[1], format!("see {http}/{id}#… (key [key removed])"), "{listed}");

    let (ok, table, err) = ctl(data.path(), &["reports"]).await;
    assert!(ok, "{err}");
    assert!(!table.contains(['\u{1b}', '\u{7}', '\u{202e}']), "a control character reached the terminal: {table:?}");
    assert!(table.contains(r"\u{1b}]0;pwned\u{7}\u{1b}[2J\u{202e}exe.gnp"), "shown, escaped: {table}");
}

/// `ctl reports --json`: the one listed paste's open count, its kept reports' ids, and the total open count.
async fn listed(data: &Path) -> (Value, Vec<String>, u64) {
    let (ok, out, err) = ctl(data, &["reports", "--json"]).await;
    assert!(ok, "{err}");
    let listed: Value = serde_json::from_str(&out).unwrap();
    let first = listed["pastes"].get(0).cloned().unwrap_or(Value::Null);
    let ids = first["recent"]
        .as_array()
        .map_or(Vec::new(), |recent| recent.iter().map(|report| report["id"].as_str().unwrap().to_owned()).collect());
    (first, ids, listed["open_reports"].as_u64().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_shows_every_kept_report_and_dismisses_one_or_all_of_a_pastes() {
    let data = tempfile::tempdir().unwrap();
    let (up, http) = start_up(data.path(), &[]).await;
    let id = new_paste(&http, "reported three times").await;
    for (reason, note) in [("spam", "first"), ("other", "second"), ("malware", "third")] {
        report(&http, &id, reason, note).await;
    }
    // The table shows every report P keeps, not only the latest, each by
    // the name --dismiss takes.
    let (ok, table, err) = ctl(data.path(), &["reports"]).await;
    assert!(ok, "{err}");
    for (number, reason, note) in [(1, "spam", "first"), (2, "other", "second"), (3, "malware", "third")] {
        let line = table.lines().find(|line| line.starts_with(&format!("{id}-{number} "))).unwrap_or_default();
        assert!(line.contains(reason) && line.ends_with(note), "report {number}: {table}");
    }

    let (ok, out, err) = ctl(data.path(), &["reports", "--dismiss", &format!("{id}-2")]).await;
    assert!(ok, "{err}");
    assert!(out.contains("1 open") || out.contains("2 open"), "{out}");
    let (paste, ids, open) = listed(data.path()).await;
    assert_eq!(ids, [format!("{id}-3"), format!("{id}-1")], "the dismissed one is gone: {paste}");
    assert_eq!((paste["open_reports"].as_u64(), paste["reports"].as_u64(), open), (Some(2), Some(3), 2), "{paste}");
    // Dismissing it again changes nothing and says so.
    let (ok, _, err) = ctl(data.path(), &["reports", "--dismiss", &format!("{id}-2")]).await;
    assert!(!ok && err.contains("nothing was dismissed"), "{err}");

    // A paste's id dismisses all of its reports: it leaves the list and the count.
    let (ok, _, err) = ctl(data.path(), &["reports", "--dismiss", &id]).await;
    assert!(ok, "{err}");
    let (paste, _, open) = listed(data.path()).await;
    assert_eq!((paste, open), (Value::Null, 0));
    // The audit line names the identity `up`'s owner-only socket proved.
    let logs = up.logs();
    let audit = logs.lines().find(|line| line.contains("report dismissed by the operator")).unwrap_or_default();
    assert!(audit.contains("operator=local uid"), "{logs}");
    // A new report opens it again, numbered after the others.
    report(&http, &id, "illegal", "fourth").await;
    let (_, ids, open) = listed(data.path()).await;
    assert_eq!((ids, open), (vec![format!("{id}-4")], 1));
    // The paste itself was never touched.
    let read = reqwest::get(format!("{http}/raw/{id}")).await.unwrap();
    assert_eq!(read.status(), StatusCode::OK);
}

#[tokio::test]
async fn operator_calls_are_refused_to_the_gateways_certificate_and_taken_from_ctls() {
    let temp = tempfile::tempdir().unwrap();
    let certs = pastebin_tests::tls::ctl_certs(&temp.path().join("certs"));
    let (pastes, address) = shard("paste-service", temp.path(), &certs.paste_service, Given::Flags).await;
    let as_part = |files: &pastebin_tests::tls::TlsFiles| {
        PasteClient::new(pastebin_shards::channel(&address, Some(&files.load())).unwrap())
    };
    let (paste, _token) = pastebin_tests::shards::new_paste(chrono::Utc::now(), chrono::Duration::hours(1));
    as_part(&certs.gateway).insert(&paste).await.expect("the gateway inserts");
    as_part(&certs.gateway).report(&paste.id, "spam", None).await.expect("the gateway passes a report on");

    // Signed by the same CA, but neither the gateway's nor the sweeper's
    // certificate is an operator's: refused, saying what is needed, and
    // whatever operator name the caller writes in the request.
    for part in [&certs.gateway, &certs.sweeper] {
        let refused = as_part(part).take_down(&paste.id, "spam", "root").await.expect_err("not an operator");
        let CallError::Refused(status) = &refused else { panic!("{refused:?}") };
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
        assert!(status.message().contains("pastebin:role:operator"), "{status:?}");
        let refused = as_part(part).dismiss_report(&paste.id, Dismissal::All, "root").await.expect_err("refused");
        assert_eq!(refused.status().code(), tonic::Code::PermissionDenied, "{refused:?}");
    }
    assert!(as_part(&certs.client).get(&paste.id).await.unwrap().is_some(), "nothing was taken down");

    // ctl's certificate carries the role: taken down, and the audit line
    // names the certificate, not the name the caller sent.
    let outcome = as_part(&certs.client).take_down(&paste.id, "spam", "someone else").await.unwrap();
    assert_eq!(outcome, TakedownOutcome::TakenDown);
    let logs = pastes.logs();
    let audit = logs.lines().find(|line| line.contains("paste taken down by the operator")).expect("an audit line");
    assert!(audit.contains("operator=certificate CN=ctl (serial "), "{audit}");
    assert!(audit.contains("operator_says=someone else"), "{audit}");
}

/// A create that crashed after P's insert leaves its key pending with a
/// live paste; an operator takes that paste down. Every retry of the key,
/// before and after the sweeper's fence aborts it, answers 410 with the
/// reason, as a read does: the content is never published again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_key_whose_paste_was_taken_down_never_yields_a_new_id() {
    let mut cluster =
        Cluster::start(ClusterOptions { failpoints: Some("after_p_insert".into()), ..Default::default() }).await;
    let key = new_key();
    assert!(api::create(&cluster.http, Some(&key), "taken down mid-create").await.is_err(), "the gateway died");
    cluster.gateway.wait_exit(Duration::from_secs(10)).await;
    let parsed = IdempotencyKey::parse(&key).unwrap();
    let pending = cluster.key_client(0).get(&parsed).await.unwrap().expect("K begin committed");
    assert_eq!(pending.state, KeyState::Pending);
    let id = pending.paste_id.to_string();
    assert_eq!(cluster.live_pastes().await, 1, "P's insert committed before the crash");

    let reason = "court order 41";
    let (exit, out, err) = crate::operators::ctl(&cluster, &["takedown", &id, "--reason", reason]).await;
    assert_eq!(exit, pastebin_ctl::Exit::Ok, "{out}{err}");
    cluster.restart_gateway("").await;

    let gone = |answer: &api::Answer| {
        assert_eq!(answer.status, StatusCode::GONE, "{}", answer.body);
        assert_eq!(answer.json()["error"]["code"], "removed_by_operator", "{}", answer.body);
        assert!(answer.body.contains(reason), "{}", answer.body);
    };
    // The retry of the pending key: what a read answers.
    gone(&api::create(&cluster.http, Some(&key), "taken down mid-create").await.unwrap());
    gone(&api::get(&cluster.http, &id).await);
    // The sweeper finds the key stale and fences it: P says tombstoned, K aborts.
    let aged = "UPDATE idempotency_keys SET created_at = created_at - 120000 WHERE key = $1";
    assert_eq!(execute(&cluster.key_database_urls[0], aged, &parsed.canonical()).await, 1);
    let now = pastebin_core::ManualClock::starting_at(chrono::Utc::now());
    cluster.sweeper(now).await.round(false).await;
    let aborted = cluster.key_client(0).get(&parsed).await.unwrap().unwrap();
    assert_eq!((aborted.state, aborted.paste_id.to_string()), (KeyState::Aborted, id.clone()));
    // An aborted key is restarted under a new id on its retry, unless its id was taken down.
    for _ in 0..2 {
        gone(&api::create(&cluster.http, Some(&key), "taken down mid-create").await.unwrap());
    }
    let after = cluster.key_client(0).get(&parsed).await.unwrap().unwrap();
    assert_eq!((after.state, after.paste_id.to_string()), (KeyState::Aborted, id), "never a new id");
    assert_eq!(cluster.live_pastes().await, 0, "the content is live under no id");
}

/// `pastebin get ARGS` with `stdin` written to its standard input: its exit status, standard output and error.
async fn get_with_stdin(args: &[&str], stdin: &str) -> (bool, Vec<u8>, String) {
    use tokio::io::AsyncWriteExt;
    let state = tempfile::tempdir().unwrap();
    let mut child = tokio::process::Command::new(pastebin_tests::cluster::testbed_binary())
        .arg("get")
        .args(args)
        .env("PASTEBIN_STATE_DIR", state.path())
        .env_remove("PASTEBIN_CONFIG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("pastebin runs");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).await.unwrap();
    drop(input);
    let output = child.wait_with_output().await.unwrap();
    (output.status.success(), output.stdout, String::from_utf8_lossy(&output.stderr).into_owned())
}

/// A sealed paste's link, key and all, reaches `pastebin get` on standard
/// input or in a file, never in its arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pastebin_get_reads_a_sealed_link_from_standard_input_or_a_file() {
    let data = tempfile::tempdir().unwrap();
    let (_up, http) = start_up(data.path(), &[]).await;
    let sealed = pastebin_sealed::seal(b"opened with a key no argument held", None).expect("seal");
    let id = create_sealed(&http, sealed.envelope).await;
    let link = format!("{http}/{id}#{}", sealed.key.to_fragment());

    let (ok, out, err) = get_with_stdin(&["-"], &format!("{link}\n")).await;
    assert!(ok, "{err}");
    assert_eq!(out, b"opened with a key no argument held");

    let file = data.path().join("link.txt");
    std::fs::write(&file, format!("{link}\nanything after the first line is ignored\n")).unwrap();
    let (ok, out, err) = get_with_stdin(&["--link-file", file.to_str().unwrap()], "").await;
    assert!(ok, "{err}");
    assert_eq!(out, b"opened with a key no argument held");

    // An empty input says what is missing; a link and a file together are refused.
    let (ok, _, err) = get_with_stdin(&["-"], "").await;
    assert!(!ok && err.contains("standard input holds no link"), "{err}");
    let (ok, _, err) = get_with_stdin(&[&link, "--link-file", file.to_str().unwrap()], "").await;
    assert!(!ok && err.contains("cannot be used with"), "{err}");
}
