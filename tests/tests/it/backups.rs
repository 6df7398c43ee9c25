//! Backup and restore of `pastebin up` as a self-hoster runs them
//! (docs/operations.md#backups), on real processes: `ctl backup` while
//! creates go on, `up` stopped, `ctl restore`, and every key retried with
//! its body. Restoring K alone (its disk died) adopts every paste made after
//! its backup; restoring K and P replays what K's backup knows, adopts what
//! was made between the two snapshots and makes once what P's backup does
//! not know. A backup that names another deployment, breaks the order of
//! its snapshots or is damaged is refused with the reason, and so is a
//! restore while `up` runs.

use std::{
    path::{Path, PathBuf},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use pastebin_tests::{
    api::{self, Answer},
    cluster::{scalar, testbed_binary, Process},
};
use reqwest::StatusCode;

fn up_args(data: &Path) -> Vec<String> {
    let mut args: Vec<String> = ["up", "--data-dir", data.to_str().expect("UTF-8 temp dir")].map(String::from).to_vec();
    for flag in ["--http", "--grpc", "--admin"] {
        args.extend([flag.to_owned(), "127.0.0.1:0".to_owned()]);
    }
    args
}

async fn start_up(data: &Path) -> (Process, String) {
    let up = Process::start(up_args(data), Vec::new(), &["gateway-http", "admin"]).await;
    let http = format!("http://{}", up.address("gateway-http"));
    (up, http)
}

/// Stops `up` as an operator does, and waits until it has let go of its files.
async fn stop(mut up: Process) {
    up.signal("TERM");
    assert!(up.wait_exit(Duration::from_secs(90)).await.is_some(), "up stops on SIGTERM:\n{}", up.logs());
}

/// Runs `pastebin ctl ARGS` to its end (at most five minutes): (exit code, stdout, stderr).
async fn ctl(args: &[&str], failpoints: &str) -> (i32, String, String) {
    let output = ctl_command(args, failpoints).output();
    let output = tokio::time::timeout(Duration::from_secs(300), output).await.expect("ctl ends").expect("ctl runs");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
}

fn ctl_command(args: &[&str], failpoints: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new(testbed_binary());
    command
        .arg("ctl")
        .args(args)
        .env_remove("PASTEBIN_CONFIG")
        .env_remove("PASTEBIN_DATA_DIR")
        .env("PASTEBIN_FAILPOINTS", failpoints)
        .kill_on_drop(true);
    command
}

/// One create and its first answer.
struct Made {
    key: String,
    content: String,
    first: Answer,
}

impl Made {
    fn id(&self) -> String {
        field(&self.first, "id")
    }
}

fn field(answer: &Answer, name: &str) -> String {
    answer.json()[name].as_str().unwrap_or_else(|| panic!("no {name} in {}", answer.body)).to_owned()
}

async fn make(http: &str, what: &str) -> Made {
    let (key, content) = (api::new_key(), format!("{what} {}", api::new_key()));
    let first = retried_create(http, &key, &content).await;
    Made { key, content, first }
}

async fn make_many(http: &str, what: &str, count: usize) -> Vec<Made> {
    let mut made = Vec::with_capacity(count);
    for _ in 0..count {
        made.push(make(http, what).await);
    }
    made
}

/// A create as a client sends it: retried with its key until it answers
/// 201 (a 503 while the machine is saturated is a retry, not a result).
async fn retried_create(http: &str, key: &str, content: &str) -> Answer {
    for _ in 0..60 {
        match api::create_within(http, Some(key), content, Duration::from_secs(30)).await {
            Ok(answer) if answer.status == StatusCode::CREATED => return answer,
            Ok(answer) if answer.status.is_server_error() || answer.status == StatusCode::TOO_MANY_REQUESTS => {}
            Ok(answer) => panic!("a create answered {}: {}", answer.status, answer.body),
            Err(_) => {}
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("a create never answered 201");
}

/// Creates one paste after another until told to stop: the creates that go
/// on while the backup runs.
fn keep_creating(http: String, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<Made>> {
    tokio::spawn(async move {
        let mut made = Vec::new();
        while !stop.load(Ordering::SeqCst) {
            made.push(make(&http, "during").await);
        }
        made
    })
}

async fn live_pastes(data: &Path) -> i64 {
    let pastes = format!("sqlite://{}?mode=ro", data.join("pastes.db").display());
    scalar(&pastes, "SELECT COUNT(*) FROM pastes WHERE state = 'live'").await
}

/// Every key's retry, as its client sends it after the restore.
async fn retry(http: &str, made: &Made) -> Answer {
    retried_create(http, &made.key, &made.content).await
}

/// The paste `id` reads back with `content`.
async fn reads(http: &str, id: &str, content: &str) {
    let read = api::get(http, id).await;
    assert_eq!(read.status, StatusCode::OK, "{id} reads: {}", read.body);
    assert!(read.body.contains(content), "{id} holds its content: {}", read.body);
}

fn remove_database(data: &Path, file: &str) {
    for suffix in ["", "-wal", "-shm"] {
        let path = data.join(format!("{file}{suffix}"));
        match std::fs::remove_file(&path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => panic!("remove {}: {error}", path.display()),
            _ => {}
        }
    }
}

fn path(dir: &Path) -> &str {
    dir.to_str().expect("UTF-8 temp dir")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restoring_k_alone_adopts_every_paste_made_after_its_backup() {
    let data = tempfile::tempdir().expect("temp dir");
    let backups = tempfile::tempdir().expect("temp dir");
    let backup = backups.path().join("b");
    let (up, http) = start_up(data.path()).await;
    let before = make_many(&http, "before", 15).await;

    let stop_creating = Arc::new(AtomicBool::new(false));
    let creating = keep_creating(http.clone(), stop_creating.clone());
    // The backup runs while creates go on; a few land before it starts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (code, out, err) = ctl(&["--data-dir", path(data.path()), "backup", path(&backup)], "").await;
    assert_eq!(code, 0, "ctl backup: {out}{err}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop_creating.store(true, Ordering::SeqCst);
    let during = creating.await.expect("the creates go on");
    let after = make_many(&http, "after", 15).await;
    stop(up).await;

    // K's disk dies.
    remove_database(data.path(), "keys.db");
    let (code, out, err) = ctl(&["--data-dir", path(data.path()), "restore", path(&backup), "--only", "key"], "").await;
    assert_eq!(code, 0, "ctl restore --only key: {out}{err}");
    assert!(out.contains("P and the objects: kept as they are"), "{out}");

    let (_up, http) = start_up(data.path()).await;
    for made in &before {
        let again = retry(&http, made).await;
        assert_eq!(again.body, made.first.body, "a key K's backup knows replays byte for byte");
    }
    for made in &during {
        assert_eq!(field(&retry(&http, made).await, "id"), made.id(), "a key made during the backup keeps its paste");
    }
    for made in &after {
        let again = retry(&http, made).await;
        assert_eq!(field(&again, "id"), made.id(), "a key made after the backup adopts its paste: {}", again.body);
        assert_eq!(again.json()["adopted"], true, "{}", again.body);
        reads(&http, &made.id(), &made.content).await;
    }
    let keys = before.len() + during.len() + after.len();
    assert_eq!(live_pastes(data.path()).await, keys as i64, "one paste per key: 0 duplicates, 0 lost");
}

/// Waits until the failpoint `wait:{gate}` is reached.
async fn reached(gate: &Path) {
    let mut reached = gate.as_os_str().to_owned();
    reached.push(".reached");
    for _ in 0..3000 {
        if Path::new(&reached).exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the backup never reached {}", gate.display());
}

fn open(gate: &Path) {
    std::fs::write(gate, "go").expect("open the gate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn restoring_k_and_p_adopts_between_their_snapshots_and_makes_later_keys_once() {
    let data = tempfile::tempdir().expect("temp dir");
    let backups = tempfile::tempdir().expect("temp dir");
    let backup = backups.path().join("b");
    let (after_keys, after_pastes) = (backups.path().join("after-keys"), backups.path().join("after-pastes"));
    let (up, http) = start_up(data.path()).await;
    let before = make_many(&http, "before", 10).await;
    let deleted = make(&http, "deleted after P's snapshot").await;

    let failpoints = format!(
        "backup_after_key_snapshots=wait:{},backup_after_paste_snapshots=wait:{}",
        after_keys.display(),
        after_pastes.display()
    );
    let backing_up = ctl_command(&["--data-dir", path(data.path()), "backup", path(&backup)], &failpoints).output();
    let backing_up = tokio::spawn(backing_up);
    reached(&after_keys).await;
    let between = make_many(&http, "between", 10).await;
    open(&after_keys);
    reached(&after_pastes).await;
    let after_p = make_many(&http, "after P's snapshot", 10).await;
    // Deleted after P's snapshot, before the objects are copied: the delete
    // of its object waits for the backup (the reaper takes it later), so P's
    // copy, which holds it live, comes back with its bytes.
    let token = field(&deleted.first, "delete_token");
    let gone = reqwest::Client::new()
        .delete(format!("{http}/api/v1/pastes/{}", deleted.id()))
        .bearer_auth(token)
        .send()
        .await
        .expect("the delete answers");
    assert!(gone.status().is_success(), "{}", gone.status());
    open(&after_pastes);
    let output = backing_up.await.expect("the backup runs").expect("ctl runs");
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "ctl backup: {said}");
    let after = make_many(&http, "after", 10).await;
    stop(up).await;

    let (code, out, err) = ctl(&["restore", path(&backup)], "").await;
    assert_eq!(code, 0, "ctl restore: {out}{err}");
    let (_up, http) = start_up(data.path()).await;
    for made in &before {
        assert_eq!(retry(&http, made).await.body, made.first.body, "a key K's backup knows replays byte for byte");
        reads(&http, &made.id(), &made.content).await;
    }
    reads(&http, &deleted.id(), &deleted.content).await;
    for made in &between {
        let again = retry(&http, made).await;
        assert_eq!(field(&again, "id"), made.id(), "a key between the snapshots adopts its paste: {}", again.body);
        assert_eq!(again.json()["adopted"], true, "{}", again.body);
        reads(&http, &made.id(), &made.content).await;
    }
    for made in after_p.iter().chain(&after) {
        let again = retry(&http, made).await;
        assert_ne!(field(&again, "id"), made.id(), "P's backup does not know it: its retry makes it again");
        assert_eq!(retry(&http, made).await.body, again.body, "once: the next retry replays it");
        reads(&http, &field(&again, "id"), &made.content).await;
    }
    let keys = before.len() + 1 + between.len() + after_p.len() + after.len();
    assert_eq!(live_pastes(data.path()).await, keys as i64, "one paste per key: 0 duplicates, 0 lost");
}

/// The manifest of `backup`, changed by `change`, written back.
fn edit_manifest(backup: &Path, change: impl FnOnce(&mut serde_json::Value)) {
    let file = backup.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("a manifest")).expect("JSON");
    change(&mut manifest);
    std::fs::write(&file, serde_json::to_vec_pretty(&manifest).unwrap()).expect("write the manifest");
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target: PathBuf = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_restore_refuses_another_deployment_a_broken_order_damage_and_a_running_up() {
    let data = tempfile::tempdir().expect("temp dir");
    let backups = tempfile::tempdir().expect("temp dir");
    let backup = backups.path().join("b");
    let (up, http) = start_up(data.path()).await;
    make(&http, "kept").await;
    let (code, out, err) = ctl(&["--data-dir", path(data.path()), "backup", path(&backup)], "").await;
    assert_eq!(code, 0, "ctl backup: {out}{err}");
    let private =
        |path: &Path| std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(path).unwrap().permissions());
    assert_eq!(private(&backup) & 0o777, 0o700);
    for file in ["manifest.json", "keys.db", "pastes.db", "objects.sha256"] {
        assert_eq!(private(&backup.join(file)) & 0o777, 0o600, "{file} is private");
    }
    let (code, _, err) = ctl(&["--data-dir", path(data.path()), "backup", path(&backup)], "").await;
    assert_eq!(code, 2, "an earlier backup is never overwritten: {err}");

    let restore = ["--data-dir", path(data.path()), "restore"];
    let (code, _, err) = ctl(&[&restore[..], &[path(&backup)]].concat(), "").await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("is in use by pid") && err.contains("(pastebin up)"), "a running up is named: {err}");
    stop(up).await;
    let keys_before = std::fs::read(data.path().join("keys.db")).unwrap();

    let refused = |name: &str, change: fn(&mut serde_json::Value)| {
        let copy = backups.path().join(name);
        copy_dir(&backup, &copy);
        edit_manifest(&copy, change);
        copy
    };
    let other = refused("other", |m| m["deployment"] = "00000000-0000-4000-8000-000000000000".into());
    let (code, _, err) = ctl(&[&restore[..], &[path(&other)]].concat(), "").await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("this backup is of deployment 00000000-0000-4000-8000-000000000000, but"), "{err}");
    assert!(err.contains("Restore it into the data directory it was taken from"), "{err}");

    let out_of_order = refused("order", |m| m["pastes"][0]["snapshot_at"] = "2000-01-01T00:00:00Z".into());
    let (code, _, err) = ctl(&[&restore[..], &[path(&out_of_order)]].concat(), "").await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("this backup breaks the order K, then P, then the objects"), "{err}");
    assert!(err.contains("Take a new backup with `pastebin ctl backup`"), "{err}");

    let damaged = refused("damaged", |_| {});
    std::fs::write(damaged.join("keys.db"), b"not what was taken").unwrap();
    let (code, _, err) = ctl(&[&restore[..], &[path(&damaged)], &["--only", "key"]].concat(), "").await;
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("does not match the manifest's checksum"), "{err}");

    assert_eq!(std::fs::read(data.path().join("keys.db")).unwrap(), keys_before, "a refusal touches nothing");

    // A new disk: an empty data directory takes the backup, and its deployment.
    let new_disk = backups.path().join("new-disk");
    let (code, out, err) = ctl(&["--data-dir", path(&new_disk), "restore", path(&backup)], "").await;
    assert_eq!(code, 0, "{out}{err}");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(backup.join("manifest.json")).unwrap()).unwrap();
    let id = std::fs::read_to_string(new_disk.join("objects").join("deployment-id")).unwrap();
    assert_eq!(id.trim(), manifest["deployment"].as_str().unwrap());
    assert_eq!(private(&new_disk) & 0o777, 0o700);
    assert_eq!(private(&new_disk.join("keys.db")) & 0o777, 0o600);
}
