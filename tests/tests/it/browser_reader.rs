//! The reader features in a real browser (tests/browser/e2e.mjs, phase
//! `reader`): a highlighted page; dark mode from the system preference and
//! from the toggle, remembered across a reload; a burn paste whose page
//! (viewed twice) shows only a notice and whose button reads it once; a file
//! upload whose first answer is lost and whose retry makes one paste; the
//! QR code; the download link; a dropped file. Then (phase `share`) the page
//! to share from. This side checks the server.
//!
//! Screenshots land in `target/test-artifacts/browser/`; with
//! `PASTEBIN_UPDATE_SCREENSHOTS=1` the pages also replace
//! docs/screenshots/paste-{light,dark,saved,share}.png.

use base64::Engine;
use pastebin_tests::{
    browser::{require_tools, run_phase, workspace_root},
    cluster::{Cluster, ClusterOptions},
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn highlighting_dark_mode_burn_notice_file_upload_download_and_qr_in_chromium() {
    require_tools();
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let result = run_phase(&cluster, &["reader"]).await;
    let client = reqwest::Client::new();
    let get = |path: String| {
        let client = client.clone();
        let url = format!("{}{path}", cluster.http);
        async move { client.get(url).send().await.expect("GET reaches the gateway") }
    };

    // The burn paste was read once, by the button, and is gone.
    let burned = result["burnId"].as_str().unwrap();
    assert_eq!(get(format!("/api/v1/pastes/{burned}")).await.status(), 404);

    // The upload whose answer was lost: one paste for its one key, byte-exact.
    let file_id = result["fileId"].as_str().unwrap();
    let expected = base64::engine::general_purpose::STANDARD.decode(result["fileBase64"].as_str().unwrap()).unwrap();
    let raw = get(format!("/raw/{file_id}")).await;
    assert_eq!(raw.headers()["content-type"], "application/octet-stream");
    assert_eq!(raw.bytes().await.unwrap().as_ref(), expected.as_slice());
    let key_ids: Vec<String> = pastebin_tests::cluster::key_table(&cluster.key_database_urls[0])
        .await
        .into_iter()
        .filter(|(key, ..)| key == result["fileKey"].as_str().unwrap())
        .map(|(_, _, paste_id, _)| paste_id)
        .collect();
    assert_eq!(key_ids, [file_id], "the upload's key made exactly this paste");
    // Highlighted, burn, uploaded and dropped: four pastes, one of them burned.
    assert_eq!(cluster.live_pastes().await, 3);
    assert_eq!(cluster.key_rows().await, 4, "one key per save, the retried upload included");

    let dropped = result["droppedId"].as_str().unwrap();
    let text = get(format!("/raw/{dropped}")).await;
    assert_eq!(text.headers()["content-type"], "text/plain; charset=utf-8");
    assert_eq!(text.text().await.unwrap(), "dropped text\n");

    if std::env::var_os("PASTEBIN_UPDATE_SCREENSHOTS").is_some() {
        let (from, to) =
            (workspace_root().join("target/test-artifacts/browser"), workspace_root().join("docs/screenshots"));
        std::fs::create_dir_all(&to).unwrap();
        for name in ["paste-light.png", "paste-dark.png"] {
            std::fs::copy(from.join(name), to.join(name)).unwrap();
        }
    }
}

/// The page to share from (tests/browser/e2e.mjs, phase `share`): the
/// language list, the address bar after a save, copy link, copy content,
/// the QR code and relative times. The gateway's `--public-url` names a host
/// the browser never reached: the page shows (and draws as a QR code) the
/// link the browser did reach, not the server's idea of it. This side checks
/// the pastes it made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paste_page_to_share_from_in_chromium() {
    require_tools();
    let env = vec![("PASTEBIN_PUBLIC_URL".to_owned(), "http://public-url.invalid".to_owned())];
    let cluster = Cluster::start(ClusterOptions { env, ..ClusterOptions::default() }).await;
    let result = run_phase(&cluster, &["share"]).await;
    let id = result["id"].as_str().unwrap();
    let paste: serde_json::Value = reqwest::get(format!("{}/api/v1/pastes/{id}", cluster.http))
        .await
        .expect("GET reaches the gateway")
        .json()
        .await
        .expect("JSON");
    assert_eq!(paste["language"], "Rust", "the language chosen from the list was saved as it reads");
    assert_eq!(cluster.live_pastes().await, 2, "one paste per save");

    if std::env::var_os("PASTEBIN_UPDATE_SCREENSHOTS").is_some() {
        let (from, to) =
            (workspace_root().join("target/test-artifacts/browser"), workspace_root().join("docs/screenshots"));
        std::fs::create_dir_all(&to).unwrap();
        for name in ["paste-saved.png", "paste-share.png"] {
            std::fs::copy(from.join(name), to.join(name)).unwrap();
        }
    }
}
