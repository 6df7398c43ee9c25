//! A full disk is a state, not an outage (docs/operations.md#a-full-disk):
//! `pastebin up` on a small filesystem, filled by creates, refuses new creates
//! with 507 before anything is written (no object PUT for a refused create),
//! keeps serving reads and deletes, and creates again within seconds of space
//! being freed; every refused key, retried with its body, then gets exactly
//! one paste.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use pastebin_tests::{
    api::{create, new_key, Answer},
    cluster::Process,
};
use reqwest::StatusCode;

/// A tmpfs of `size` mounted at `at` for the test's life.
struct SmallFilesystem(PathBuf);

impl SmallFilesystem {
    fn mount(at: &Path, size: &str) -> Self {
        std::fs::create_dir_all(at).unwrap();
        let options = format!("size={size},mode=0700");
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &options, "tmpfs"])
            .arg(at)
            .status()
            .expect("mount runs");
        assert!(mounted.success(), "cannot mount a {size} tmpfs at {} (the tests run as root)", at.display());
        Self(at.to_owned())
    }
}

impl Drop for SmallFilesystem {
    fn drop(&mut self) {
        // Lazily: the stopped process may still hold files for a moment.
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// The objects `up` keeps under `data`, counted by listing the directory.
fn stored_objects(data: &Path) -> usize {
    std::fs::read_dir(data.join("objects/pastes"))
        .expect("the objects directory")
        .filter_map(Result::ok)
        .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
        .count()
}

/// One paste's content for `key`: 256 KiB, different for every key.
fn content_for(key: &str) -> String {
    format!("{key}\n{}", "x".repeat(256 * 1024))
}

/// What one create of the fill saw.
struct Attempt {
    key: String,
    answer: Answer,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_creates_with_507_before_any_put_and_recovers_when_space_is_freed() {
    let dir = tempfile::tempdir().unwrap();
    let mount = dir.path().join("small");
    let _filesystem = SmallFilesystem::mount(&mount, "48m");
    let data = mount.join("data");
    // A file that takes half the filesystem, as another program's data would: freeing it
    // is how the operator makes room.
    let filler = mount.join("filler");
    std::fs::write(&filler, vec![0u8; 24 * 1024 * 1024]).unwrap();

    let mut args: Vec<String> =
        ["up", "--data-dir", data.to_str().unwrap(), "--min-free-bytes", "8388608"].map(String::from).to_vec();
    for flag in ["--http", "--grpc", "--admin"] {
        args.extend([flag.to_owned(), "127.0.0.1:0".to_owned()]);
    }
    let up = Process::start(args, vec![], &["gateway-http", "admin"]).await;
    let http = format!("http://{}", up.address("gateway-http"));

    // Eight clients create 256 KiB pastes until each has been refused five times.
    let attempts = Arc::new(Mutex::new(Vec::<Attempt>::new()));
    let clients: Vec<_> = (0..8)
        .map(|_| {
            let (http, attempts) = (http.clone(), attempts.clone());
            tokio::spawn(async move {
                let mut refused = 0;
                let mut made = 0;
                while refused < 5 {
                    let key = new_key();
                    let answer = create(&http, Some(&key), &content_for(&key)).await.expect("the gateway answers");
                    match answer.status {
                        StatusCode::CREATED => made += 1,
                        StatusCode::INSUFFICIENT_STORAGE => refused += 1,
                        other => panic!("a create on a filling disk answered {other}: {}", answer.body),
                    }
                    assert!(made < 200, "48 MiB never holds 200 pastes of 256 KiB: no watermark?");
                    attempts.lock().unwrap().push(Attempt { key, answer });
                }
            })
        })
        .collect();
    for client in clients {
        client.await.expect("a client ran to its end");
    }
    let attempts = std::mem::take(&mut *attempts.lock().unwrap());
    let (created, refused): (Vec<&Attempt>, Vec<&Attempt>) =
        attempts.iter().partition(|attempt| attempt.answer.status == StatusCode::CREATED);
    assert!(!created.is_empty() && refused.len() >= 40, "{} created, {} refused", created.len(), refused.len());

    // Each refusal names the full storage, says when to retry, and wrote nothing.
    for attempt in &refused {
        let error = &attempt.answer.json()["error"];
        assert_eq!(error["code"], "storage_full", "{}", attempt.answer.body);
        assert!(error["message"].as_str().unwrap().contains("storage is full"), "{}", attempt.answer.body);
        assert!(attempt.answer.headers.contains_key("retry-after"), "a 507 says when to retry");
    }
    assert_eq!(stored_objects(&data), created.len(), "a refused create PUT no object");

    // Reads and deletes go on while creates are refused.
    for attempt in &created {
        let paste = attempt.answer.json();
        let read = pastebin_tests::api::get(&http, paste["id"].as_str().unwrap()).await;
        assert_eq!(read.status, StatusCode::OK, "{}", read.body);
        assert_eq!(read.json()["content"], content_for(&attempt.key));
    }
    let deleted = created[0].answer.json();
    let answer = reqwest::Client::new()
        .delete(format!("{http}/api/v1/pastes/{}", deleted["id"].as_str().unwrap()))
        .bearer_auth(deleted["delete_token"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::NO_CONTENT, "a delete on a full disk");

    // Freeing space: creates work again within seconds.
    std::fs::remove_file(&filler).unwrap();
    let freed = Instant::now();
    loop {
        let key = new_key();
        let answer = create(&http, Some(&key), "after the space was freed").await.unwrap();
        if answer.status == StatusCode::CREATED {
            break;
        }
        assert_eq!(answer.status, StatusCode::INSUFFICIENT_STORAGE, "{}", answer.body);
        assert!(freed.elapsed() < Duration::from_secs(30), "creates stay refused 30 s after space was freed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("creates work again {:?} after the space was freed", freed.elapsed());

    // Every refused key, retried with its body, gets one paste; every key, asked again,
    // answers the very paste it answered first: no key is answered twice.
    let mut first_ids = std::collections::HashMap::new();
    for attempt in &created {
        first_ids.insert(attempt.key.clone(), attempt.answer.json()["id"].as_str().unwrap().to_owned());
    }
    for attempt in &refused {
        let answer = create(&http, Some(&attempt.key), &content_for(&attempt.key)).await.unwrap();
        assert_eq!(answer.status, StatusCode::CREATED, "the refused key's retry: {}", answer.body);
        assert!(!answer.headers.contains_key("idempotent-replayed"), "the refusal had made nothing");
        first_ids.insert(attempt.key.clone(), answer.json()["id"].as_str().unwrap().to_owned());
    }
    for attempt in &attempts {
        let answer = create(&http, Some(&attempt.key), &content_for(&attempt.key)).await.unwrap();
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
        assert_eq!(answer.headers.get("idempotent-replayed").map(|v| v.to_str().unwrap()), Some("true"));
        assert_eq!(answer.json()["id"].as_str().unwrap(), first_ids[&attempt.key], "one paste per key");
    }
    // The objects are exactly the live pastes: one per key, less the deleted one, plus the fresh create.
    assert_eq!(stored_objects(&data), attempts.len() - 1 + 1);

    // The free space is exported for the dashboard and an alert.
    let metrics = reqwest::get(format!("http://{}/metrics", up.address("admin"))).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("pastebin_storage_free_bytes "), "{metrics}");
    assert!(metrics.contains("pastebin_storage_min_free_bytes 8388608"), "{metrics}");
    assert!(metrics.contains("pastebin_creates_total{outcome=\"storage_full\"}"), "{metrics}");
}
