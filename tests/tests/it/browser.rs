//! The pages in a real browser: Debian's `chromium`, driven by
//! `playwright-core` (tests/browser/e2e.mjs), against a real deployment.
//!
//! The browser side creates a paste whose first answer is lost after the
//! server processed it, retries from the page, views and deletes it with
//! JavaScript off, and saves a `<script>` paste that must show as text. This
//! side checks what the browser cannot see: one paste and one key on the
//! server, and what is left after the delete. Screenshots of every page land
//! in `target/test-artifacts/browser/`.
//!
//! Needs node (>= 20), /usr/bin/chromium (or $CHROMIUM) and
//! tests/browser/node_modules (`npm ci --prefix tests/browser`); a missing
//! one fails the test with the line that installs it.

use pastebin_tests::{
    browser::{require_tools, run_phase},
    cluster::{Cluster, ClusterOptions},
};
use serde_json::Value;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_answer_retried_from_the_page_makes_one_paste_then_view_delete_and_escaping() {
    require_tools();
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let client = reqwest::Client::new();

    // Phase 1: the first POST is processed, its answer lost; the page retries.
    let created = run_phase(&cluster, &["create"]).await;
    let id = created["id"].as_str().expect("an id");
    let token = created["token"].as_str().expect("a token");
    assert_eq!(cluster.live_pastes().await, 1, "the lost answer and its retry made one paste");
    assert_eq!(cluster.key_rows().await, 1, "one save, one idempotency key");
    let paste: Value = client
        .get(format!("{}/api/v1/pastes/{id}", cluster.http))
        .send()
        .await
        .expect("GET reaches the gateway")
        .json()
        .await
        .expect("JSON");
    assert_eq!(paste["content"], created["content"], "the paste holds what was typed");

    // Phase 2: view and delete with JavaScript off; a `<script>` paste is text.
    let rest = run_phase(&cluster, &["view-delete", id, token]).await;
    let gone = client.get(format!("{}/api/v1/pastes/{id}", cluster.http)).send().await.expect("GET");
    assert_eq!(gone.status(), 404, "the form deleted the paste");
    let script_id = rest["scriptId"].as_str().expect("the script paste's id");
    assert_eq!(cluster.live_pastes().await, 1, "only the script paste is left (the aborted draft made none)");
    let raw = client.get(format!("{}/raw/{script_id}", cluster.http)).send().await.expect("GET").text().await.unwrap();
    assert_eq!(raw, rest["content"].as_str().unwrap());
}

/// The page resends a save answered 408, 429 or 5xx after its Retry-After,
/// with the same idempotency key, plain and sealed, the first answer being
/// the server's 201 lost behind a 408 (tests/browser/retries.mjs): one
/// paste and one key per save on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_keeps_its_key_across_408_429_and_5xx_plain_and_sealed() {
    require_tools();
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let saved = pastebin_tests::browser::run_script_phase(&cluster, "retries.mjs", &["answers"]).await;
    assert_ne!(saved["plain"]["key"], saved["sealed"]["key"], "two saves, two keys: {saved}");
    assert_eq!(cluster.live_pastes().await, 2, "one paste per save: {saved}");
    assert_eq!(cluster.key_rows().await, 2, "one key per save: {saved}");
}

/// A private instance (`--require-create-token`): the page asks for a create
/// token once, keeps it for this site, and its saves carry it; the server
/// holds exactly the two pastes saved with it (tests/browser/private.mjs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_private_instance_s_page_saves_with_a_token_entered_once() {
    require_tools();
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("create-tokens");
    let tokens_file = tokens.to_str().unwrap();
    // The order the docs show: the action, then --file.
    let minted =
        pastebin_tests::cluster::run_to_exit(&["ctl", "tokens", "add", "browser", "--file", tokens_file]).await;
    assert!(minted.status.success(), "{}", String::from_utf8_lossy(&minted.stderr));
    let token = String::from_utf8(minted.stdout).unwrap().trim().to_owned();
    let env = [("PASTEBIN_REQUIRE_CREATE_TOKEN", "true"), ("PASTEBIN_CREATE_TOKENS_FILE", tokens_file)];
    let env = env.map(|(name, value)| (name.to_owned(), value.to_owned())).to_vec();
    let cluster = Cluster::start(ClusterOptions { env, ..ClusterOptions::default() }).await;

    let saved = pastebin_tests::browser::run_script_phase(&cluster, "private.mjs", &["save", &token]).await;
    assert_eq!(saved["posts"], 3, "two saves and the refused one, nothing else: {saved}");
    let client = reqwest::Client::new();
    for (id, content) in [
        (&saved["first"], "the first private paste"),
        (&saved["second"], "the second private paste, token not typed again"),
    ] {
        let id = id.as_str().expect("an id");
        let paste: Value =
            client.get(format!("{}/api/v1/pastes/{id}", cluster.http)).send().await.unwrap().json().await.unwrap();
        assert_eq!(paste["content"], content);
    }
    assert_eq!(cluster.live_pastes().await, 2, "the refused save made nothing");
}
