//! A real S3-compatible server for tests: moto's server mode, one per test process.
//!
//! Starting moto takes about two seconds, so every test of a process shares one server
//! and isolates itself with a fresh bucket ([`fresh_bucket`]). Rust never drops statics,
//! so the server is paired with a shell watchdog that kills it when this process is gone.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

use pastebin_objects::{S3Settings, S3Store};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::OnceCell;

/// Cold start is ≈ 2 s on a quiet machine; a busy CI box with a cargo build alongside
/// can be many times slower.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// A port picked free can be taken by someone else before moto binds it.
const START_ATTEMPTS: usize = 3;

const INSTALL_HINT: &str = "moto_server not found. Install it in the workspace root with \
     `python3 -m venv .venv && .venv/bin/pip install 'moto[server]'`, \
     or point PASTEBIN_MOTO_SERVER at a moto_server binary.";

/// A running S3-compatible server.
#[derive(Debug)]
pub struct S3Server {
    /// e.g. `http://127.0.0.1:PORT`
    pub endpoint: String,
}

static SERVER: OnceCell<S3Server> = OnceCell::const_new();

/// Starts moto_server once per test process (lazily, shared, on a free port), waits until
/// it answers HTTP, returns it.
///
/// The binary: `$PASTEBIN_MOTO_SERVER`, else `<workspace root>/.venv/bin/moto_server`, else
/// `moto_server` on `PATH`; if none, panics with how to install it.
pub async fn s3_server() -> &'static S3Server {
    SERVER.get_or_init(start_moto).await
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
    let store = S3Store::connect(settings.clone()).await.expect("connect to moto");
    store.ensure_bucket().await.expect("create a test bucket on moto");
    settings
}

/// Static test credentials for the AWS chain, for a store that talks to no real AWS
/// (moto, or a port where nothing listens). Runs once per process: `set_var` races with
/// `getenv` in other threads, so it must not be repeated while stores are in use.
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

async fn start_moto() -> S3Server {
    let binary = moto_binary();
    let mut last_failure = String::new();
    for _ in 0..START_ATTEMPTS {
        match start_moto_once(&binary).await {
            Ok(server) => return server,
            Err(failure) => last_failure = failure,
        }
    }
    panic!("moto_server ({}) did not start: {last_failure}", binary.display());
}

async fn start_moto_once(binary: &Path) -> Result<S3Server, String> {
    let port = free_port();
    let log_path = std::env::temp_dir().join(format!("pastebin-moto-{}-{port}.log", std::process::id()));
    let log = std::fs::File::create(&log_path).map_err(|e| format!("create {}: {e}", log_path.display()))?;
    let mut child = Command::new(binary)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| {
            let _ = std::fs::remove_file(&log_path);
            format!("spawn: {e}. {INSTALL_HINT}")
        })?;
    spawn_watchdog(child.id(), &log_path);

    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        // Werkzeug prints "Running on" only after it bound the port: without that, a
        // server of another test process that raced us to this port could answer.
        if log_says_running(&log_path) && answers_http(port).await {
            return Ok(S3Server { endpoint: format!("http://127.0.0.1:{port}") });
        }
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited with {status}; log {}:\n{}", log_path.display(), log_tail(&log_path)));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            return Err(format!(
                "not answering after {READY_TIMEOUT:?}; log {}:\n{}",
                log_path.display(),
                log_tail(&log_path)
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Kills the server once this process is gone (a shell polls our pid once a second),
/// then removes its request log, kept until then for a failing test to point at.
// Never waited for on purpose: it exits only after this process has, so it cannot
// linger as a zombie of ours.
#[allow(clippy::zombie_processes)]
fn spawn_watchdog(server_pid: u32, log_path: &Path) {
    let script = r#"while kill -0 "$1" 2>/dev/null; do sleep 1; done; kill "$2" 2>/dev/null; rm -f "$3""#;
    Command::new("sh")
        .args(["-c", script, "moto-watchdog"])
        .arg(std::process::id().to_string())
        .arg(server_pid.to_string())
        .arg(log_path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the moto watchdog (sh)");
}

/// Bound then released: moto binds it a moment later (and a collision is retried).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    listener.local_addr().expect("local addr of a bound listener").port()
}

/// True once the server answers a plain HTTP request with any status line.
async fn answers_http(port: u16) -> bool {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        stream.write_all(b"GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").await.ok()?;
        let mut head = [0u8; 8];
        stream.read_exact(&mut head).await.ok()?;
        Some(head.starts_with(b"HTTP/1."))
    };
    matches!(tokio::time::timeout(Duration::from_secs(2), attempt).await, Ok(Some(true)))
}

fn moto_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("PASTEBIN_MOTO_SERVER") {
        return PathBuf::from(path);
    }
    let workspace_root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let venv = workspace_root.join(".venv/bin/moto_server");
    if venv.is_file() {
        return venv;
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("moto_server"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{INSTALL_HINT}"))
}

fn log_says_running(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|log| log.contains(" * Running on "))
}

fn log_tail(path: &Path) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}
