//! The suite's S3: a real SeaweedFS (`weed server`, [`crate::seaweedfs`]), one per test
//! process.
//!
//! Starting it takes a few seconds, so every test of a process shares one server and
//! isolates itself with a fresh bucket ([`fresh_bucket`]). Rust never drops statics, so
//! the server is paired with a shell watchdog that kills it, and removes its directory,
//! when this process is gone.

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

use pastebin_objects::{S3Settings, S3Store};
use tokio::sync::OnceCell;

use crate::seaweedfs::{start_all_in_one, WeedProcess, START_ATTEMPTS};

/// A running S3-compatible server.
#[derive(Debug)]
pub struct S3Server {
    /// e.g. `http://127.0.0.1:PORT`
    pub endpoint: String,
}

static SERVER: OnceCell<S3Server> = OnceCell::const_new();

/// Starts SeaweedFS once per test process (lazily, shared, on free ports), waits until
/// it stores an object, returns it. Panics with how to install `weed` if it is missing.
pub async fn s3_server() -> &'static S3Server {
    SERVER.get_or_init(start_shared_server).await
}

/// A fresh bucket (random name) on that server, created, plus an [`S3Settings`] ready to
/// pass to [`S3Store::connect`]. Sets static test credentials via `AWS_ACCESS_KEY_ID` /
/// `AWS_SECRET_ACCESS_KEY` (`test`) and `AWS_REGION=us-east-1` when they are unset.
pub async fn fresh_bucket() -> S3Settings {
    set_test_credentials();
    let server = s3_server().await;
    let settings = S3Settings {
        bucket: bucket_name(),
        endpoint: Some(server.endpoint.clone()),
        region: "us-east-1".to_owned(),
        force_path_style: true,
    };
    let store = S3Store::connect(settings.clone()).await.expect("connect to SeaweedFS");
    store.ensure_bucket().await.expect("create a test bucket on SeaweedFS");
    settings
}

/// Static test credentials for the AWS chain, for a store that checks none (SeaweedFS
/// with no identities configured, or a port where nothing listens). Runs once per
/// process: `set_var` races with `getenv` in other threads, so it must not be repeated
/// while stores are in use.
pub fn set_test_credentials() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for (name, value) in
            [("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"), ("AWS_REGION", "us-east-1")]
        {
            if std::env::var_os(name).is_none() {
                std::env::set_var(name, value);
            }
        }
    });
}

/// Lowercase, digits and hyphens, under 63 characters: a valid bucket name. The pid and
/// a counter make it unique on this process's server; the clock makes it differ run to run.
fn bucket_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    format!("pastebin-test-{}-{}-{nanos:x}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

async fn start_shared_server() -> S3Server {
    let mut last_failure = String::new();
    for _ in 0..START_ATTEMPTS {
        let dir = tempfile::Builder::new().prefix("pastebin-weed-").tempdir().expect("a temp dir for SeaweedFS");
        match start_all_in_one(dir.path()).await {
            Ok((server, endpoint)) => {
                spawn_watchdog(server, dir.keep().as_path());
                return S3Server { endpoint };
            }
            Err(failure) => last_failure = failure,
        }
    }
    panic!("SeaweedFS did not start: {last_failure}");
}

/// Kills the server once this process is gone (a shell polls our pid once a second),
/// then removes its directory, kept until then for a failing test to point at.
// Never waited for on purpose: it exits only after this process has, so it cannot
// linger as a zombie of ours.
#[allow(clippy::zombie_processes)]
fn spawn_watchdog(server: WeedProcess, dir: &Path) {
    let script = r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done; kill -9 "$2" 2>/dev/null; rm -rf "$3""#;
    Command::new("sh")
        .args(["-c", script, "weed-watchdog"])
        .arg(std::process::id().to_string())
        .arg(server.pid().to_string())
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the SeaweedFS watchdog (sh)");
    // The watchdog owns it from here: dropping it would kill the shared server.
    std::mem::forget(server);
}
