//! The command-line client (`pastebin paste`, `pastes`) against a real
//! `pastebin up`, as a user runs it: a source file comes out highlighted,
//! a burn paste opens once, and what never reached a server is not kept as
//! if it might have (crates/client/README.md).

use std::{path::Path, process::Command};

use pastebin_tests::cluster::{testbed_binary, Process};
use reqwest::{header, StatusCode};

/// `pastebin ARGS --state-dir STATE`: its exit code, stdout and stderr.
async fn pastebin(args: &[&str], state: &Path) -> (i32, String, String) {
    let mut command = Command::new(testbed_binary());
    command.args(args).args(["--state-dir", state.to_str().unwrap()]);
    command.env_remove("PASTEBIN_CONFIG").env_remove("PASTEBIN_SERVER").env_remove("PASTEBIN_CREATE_TOKEN");
    let output = tokio::task::spawn_blocking(move || command.output().unwrap()).await.unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(output.stdout), text(output.stderr))
}

async fn up(data: &Path) -> (Process, String) {
    let mut args: Vec<String> = ["up", "--data-dir", data.to_str().unwrap()].map(String::from).to_vec();
    for flag in ["--http", "--grpc", "--admin"] {
        args.extend([flag.to_owned(), "127.0.0.1:0".to_owned()]);
    }
    let up = Process::start(args, vec![], &["gateway-http"]).await;
    let http = format!("http://{}", up.address("gateway-http"));
    (up, http)
}

async fn page(url: &str) -> (StatusCode, String) {
    let response = reqwest::Client::new().get(url).header(header::ACCEPT, "text/html").send().await.unwrap();
    (response.status(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_pastes_a_source_file_the_page_highlights_and_a_burn_paste_that_opens_once() {
    let dir = tempfile::tempdir().unwrap();
    let (_up, http) = up(&dir.path().join("data")).await;
    let state = dir.path().join("state");

    // No --language: the file's name goes with it, and the page guesses from its extension.
    let source = dir.path().join("hello.rs");
    std::fs::write(&source, "fn main() {\n    println!(\"hello\");\n}\n").unwrap();
    let (code, url, stderr) = pastebin(&["paste", source.to_str().unwrap(), "--server", &http], &state).await;
    assert_eq!(code, 0, "{stderr}");
    let (status, shown) = page(url.trim()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(shown.contains("class=\"hl-"), "hello.rs is highlighted:\n{shown}");

    // --language names it where no extension does.
    let script = dir.path().join("notes");
    std::fs::write(&script, "def f(x):\n    return x\n").unwrap();
    let (code, url, stderr) =
        pastebin(&["paste", script.to_str().unwrap(), "--language", "python", "--server", &http], &state).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(page(url.trim()).await.1.contains("class=\"hl-"), "--language python highlights");

    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "read me once").unwrap();
    let (code, url, stderr) =
        pastebin(&["paste", secret.to_str().unwrap(), "--burn-after-reading", "--server", &http], &state).await;
    assert_eq!(code, 0, "{stderr}");
    let id = url.trim().rsplit('/').next().unwrap().to_owned();
    let raw = |id: String| {
        let http = http.clone();
        async move { reqwest::get(format!("{http}/raw/{id}")).await.unwrap() }
    };
    let first = raw(id.clone()).await;
    assert_eq!(first.status(), StatusCode::OK);
    assert_eq!(first.text().await.unwrap(), "read me once");
    assert_eq!(raw(id).await.status(), StatusCode::NOT_FOUND, "burned by its first read");

    // The same file and choices again: the journal's "already pasted", not a second paste.
    let (code, again, stderr) = pastebin(&["paste", source.to_str().unwrap(), "--server", &http], &state).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("already pasted"), "{stderr}");
    assert_eq!(again.trim(), page_url_of(&state, "hello.rs").await);
}

/// The URL `pastebin pastes --json` lists for the save whose subject ends with `name`.
async fn page_url_of(state: &Path, name: &str) -> String {
    let (_, listed, _) = pastebin(&["pastes", "--json"], state).await;
    let row = listed
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|row| row["subject"].as_str().is_some_and(|subject| subject.ends_with(name)))
        .unwrap_or_else(|| panic!("no save of {name}: {listed}"));
    row["url"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paste_against_a_closed_port_leaves_nothing_pending() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let file = dir.path().join("note.txt");
    std::fs::write(&file, "never sent").unwrap();
    let (code, stdout, stderr) =
        pastebin(&["paste", file.to_str().unwrap(), "--server", &closed, "--attempts", "2"], &state).await;
    assert_eq!(code, 1, "failed, not 75 (\"not confirmed yet\"): {stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("Nothing was sent and nothing is kept"), "{stderr}");
    let (code, listed, _) = pastebin(&["pastes", "--all", "--json"], &state).await;
    assert_eq!((code, listed.as_str()), (0, ""), "the journal keeps nothing");

    // Without a scheme, the address is refused at once, with the form to write.
    let bare = closed.trim_start_matches("http://");
    let (code, _, stderr) = pastebin(&["paste", file.to_str().unwrap(), "--server", bare], &state).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains(&format!("write http://{bare}")), "{stderr}");
}

/// `--resume --server URL` finishes that server's saves only, and says what
/// it left; `pastes --drop KEY` forgets one only with `--yes`, after a warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_follows_server_and_drop_forgets_an_unconfirmed_save_after_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let (mut up, http) = up(&dir.path().join("data")).await;
    let state = dir.path().join("state");
    let file = dir.path().join("note.txt");
    std::fs::write(&file, "kept until resumed").unwrap();
    // A server that accepts and never answers: the save is uncertain, so pending.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            held.push(stream);
        }
    });
    let args = ["paste", file.to_str().unwrap(), "--attempts", "1", "--timeout", "1s", "--server"];
    let (code, _, stderr) = pastebin(&[&args[..], &[silent_url.as_str()]].concat(), &state).await;
    assert_eq!(code, 75, "{stderr}");

    let (code, _, stderr) = pastebin(&["paste", "--resume", "--server", &http], &state).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains(&format!("left 1 unconfirmed save(s) of {silent_url} alone")), "{stderr}");
    let (_, listed, _) = pastebin(&["pastes", "--json"], &state).await;
    let row: serde_json::Value = serde_json::from_str(listed.trim()).unwrap();
    assert_eq!(row["status"], "pending", "not sent to {http}: {row}");
    let key = row["key"].as_str().unwrap().to_owned();

    let (code, _, stderr) = pastebin(&["pastes", "--drop", &key], &state).await;
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("may also be the only copy of its content") && stderr.contains("add --yes"), "{stderr}");
    assert_eq!(pastebin(&["pastes", "--json"], &state).await.1, listed, "nothing dropped without --yes");
    let (code, _, stderr) = pastebin(&["pastes", "--drop", &key, "--yes"], &state).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(pastebin(&["pastes", "--all", "--json"], &state).await.1, "");
    up.kill().await;
}
