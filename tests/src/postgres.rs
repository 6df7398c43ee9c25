//! A PostgreSQL server for integration tests.
//!
//! * With `PASTEBIN_TEST_DATABASE_URL` (or else `DATABASE_URL`) set, that server is used; its
//!   `postgres` database serves as the admin database.
//! * Otherwise one throwaway server is started per test process (lazily, on first use): a
//!   temp directory, `initdb`, `pg_ctl start` on a free 127.0.0.1 port. When running as root
//!   the server runs as the `postgres` user via `runuser`. A detached watchdog shell stops
//!   the server and removes the directory once the test process has exited (Rust statics are
//!   never dropped, so there is no destructor to do it).
//!
//! Every [`fresh_database_url`] call creates a new, empty database `t_<random>`.
//!
//! The server is started with plain `std::process` inside a `std::sync::OnceLock`, so it works
//! across the separate tokio runtimes of parallel `#[tokio::test]`s; no sqlx pool is kept in a
//! static (pools are bound to the runtime that created them).

use std::fs;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use sqlx::{Connection, PgConnection};

/// Environment variables naming an existing server, checked in this order.
pub const URL_VARS: [&str; 2] = ["PASTEBIN_TEST_DATABASE_URL", "DATABASE_URL"];

/// Settings for the throwaway server: fast and unsafe (never use them for benchmarks).
const SERVER_SETTINGS: &str = "-c listen_addresses=127.0.0.1 -c fsync=off \
     -c synchronous_commit=off -c full_page_writes=off -c max_connections=300";

const HOW_TO_GET_PG: &str = "Either install PostgreSQL's server binaries (Debian: \
     `apt-get install postgresql`; they land in /usr/lib/postgresql/<version>/bin), point \
     PG_BIN at the directory holding initdb and pg_ctl, or set PASTEBIN_TEST_DATABASE_URL \
     (or DATABASE_URL) to an existing server whose user may CREATE DATABASE, e.g. \
     postgres://postgres@127.0.0.1:5432/postgres";

static SERVER: OnceLock<Result<String, String>> = OnceLock::new();

/// URL of a brand-new, empty database (`CREATE DATABASE t_<random>`) on the test server.
/// Each call creates a new database.
pub async fn fresh_database_url() -> String {
    database_on(server_url().await).await
}

/// Creates a new, empty database on the server at `admin` and returns its URL.
pub(crate) async fn database_on(admin: &str) -> String {
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    let sql = format!("CREATE DATABASE \"{name}\"");

    let mut last_err = String::new();
    for attempt in 0..5u64 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
        }
        let mut conn = match PgConnection::connect(admin).await {
            Ok(c) => c,
            Err(e) => {
                last_err = format!("connecting to {admin}: {e}");
                continue;
            }
        };
        let res = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone())).execute(&mut conn).await;
        let _ = conn.close().await;
        match res {
            Ok(_) => return with_database(admin, &name),
            Err(e) => last_err = format!("{sql} on {admin}: {e}"),
        }
    }
    panic!(
        "could not create a test database: {last_err}\n\
         (the admin user must be allowed to CREATE DATABASE)"
    );
}

/// The server's admin URL (database `postgres`). The server is started lazily, once per
/// test process.
pub async fn server_url() -> &'static str {
    if SERVER.get().is_none() {
        // Starting takes a couple of seconds of blocking process work; keep it off the
        // runtime's worker where possible.
        if tokio::runtime::Handle::try_current().is_ok() {
            tokio::task::spawn_blocking(server_url_blocking)
                .await
                .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        }
    }
    server_url_blocking()
}

/// Blocking version of [`server_url`].
pub fn server_url_blocking() -> &'static str {
    match SERVER.get_or_init(init) {
        Ok(url) => url,
        Err(msg) => panic!("{msg}"),
    }
}

/// A `sqlite://...?mode=rwc` URL for the file `name` in `dir` (created on first connect).
pub fn sqlite_url(dir: &Path, name: &str) -> String {
    let path = dir.join(name);
    let mut enc = String::new();
    for c in path.to_string_lossy().chars() {
        match c {
            '%' => enc.push_str("%25"),
            '?' => enc.push_str("%3F"),
            '#' => enc.push_str("%23"),
            c => enc.push(c),
        }
    }
    format!("sqlite://{enc}?mode=rwc")
}

fn init() -> Result<String, String> {
    for var in URL_VARS {
        if let Ok(url) = std::env::var(var) {
            if !url.trim().is_empty() {
                return Ok(with_database(url.trim(), "postgres"));
            }
        }
    }
    start_server()
}

/// `url` with its database (path) replaced by `db`, keeping any query string.
fn with_database(url: &str, db: &str) -> String {
    let (base, query) = match url.find('?') {
        Some(i) => (&url[..i], &url[i..]),
        None => (url, ""),
    };
    let authority_start = base.find("://").map_or(0, |i| i + 3);
    let base = match base[authority_start..].find('/') {
        Some(i) => &base[..authority_start + i],
        None => base,
    };
    format!("{base}/{db}{query}")
}

fn is_root() -> bool {
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
}

fn find_pg_bin() -> Result<PathBuf, String> {
    let has_tools = |d: &Path| d.join("initdb").is_file() && d.join("pg_ctl").is_file();
    if let Ok(dir) = std::env::var("PG_BIN") {
        let dir = PathBuf::from(dir);
        return if has_tools(&dir) {
            Ok(dir)
        } else {
            Err(format!("PG_BIN={} has no initdb/pg_ctl.\n{HOW_TO_GET_PG}", dir.display()))
        };
    }
    let default = PathBuf::from("/usr/lib/postgresql/15/bin");
    if has_tools(&default) {
        return Ok(default);
    }
    // Newest /usr/lib/postgresql/<version>/bin.
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            has_tools(&bin).then_some((v, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    // Finally, anything on PATH.
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if has_tools(&dir) {
                return Ok(dir);
            }
        }
    }
    Err(format!("PostgreSQL server binaries (initdb, pg_ctl) not found.\n{HOW_TO_GET_PG}"))
}

/// Builds a command that runs `program` as `postgres` when we are root.
pub(crate) fn pg_command(as_postgres: bool, program: &Path) -> Command {
    if as_postgres {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn sh_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

pub(crate) fn free_port() -> Result<u16, String> {
    let l = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("binding 127.0.0.1:0: {e}"))?;
    let port = l.local_addr().map_err(|e| e.to_string())?.port();
    drop(l);
    Ok(port)
}

fn start_server() -> Result<String, String> {
    let cluster = Cluster::init()?;
    let mut last_err = String::new();
    for _ in 0..5 {
        let port = free_port()?;
        match cluster.start(port) {
            Ok(()) => return Ok(format!("postgres://postgres@127.0.0.1:{port}/postgres")),
            Err(e) => last_err = e,
        }
        // Most likely a port clash; make sure nothing half-started remains, then retry.
        cluster.stop();
    }
    Err(format!("could not start the test PostgreSQL server: {last_err}"))
}

/// A fresh data directory (`initdb`) and how to run `pg_ctl` on it.
#[derive(Clone)]
pub(crate) struct Cluster {
    pub(crate) bin: PathBuf,
    pub(crate) as_postgres: bool,
    pub(crate) dir: PathBuf,
}

impl Cluster {
    /// A data directory made by `initdb`.
    pub(crate) fn init() -> Result<Cluster, String> {
        let cluster = Cluster::empty()?;
        let out = pg_command(cluster.as_postgres, &cluster.bin.join("initdb"))
            .arg("-D")
            .arg(cluster.data())
            .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
            .current_dir(&cluster.dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed ({}):\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(cluster)
    }

    /// The data directory (absent until `initdb` or `pg_basebackup` makes it).
    pub(crate) fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    /// A directory of its own, owned by `postgres`, removed when this process exits.
    pub(crate) fn empty() -> Result<Cluster, String> {
        let bin = find_pg_bin()?;
        let as_postgres = is_root();
        if as_postgres && Command::new("runuser").arg("--help").output().is_err() {
            return Err("running as root, but `runuser` is missing (needed to run PostgreSQL as \
                        the `postgres` user); install util-linux, run the tests as a non-root \
                        user, or set PASTEBIN_TEST_DATABASE_URL"
                .to_string());
        }

        // A short path: the Unix socket (in DIR) must fit in ~107 bytes.
        let base = if Path::new("/tmp").is_dir() { PathBuf::from("/tmp") } else { std::env::temp_dir() };
        let dir = base.join(format!(
            "pastebin-pg-{}-{}",
            std::process::id(),
            &uuid::Uuid::new_v4().simple().to_string()[..8]
        ));
        fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let dir_s = dir.to_string_lossy().into_owned();

        // From here on, the watchdog removes DIR (and stops the server) when we exit,
        // whether or not start-up succeeds.
        spawn_watchdog(&bin, as_postgres, &dir)?;

        if as_postgres {
            let out = Command::new("chown")
                .args(["-R", "postgres:", &dir_s])
                .output()
                .map_err(|e| format!("running chown: {e}"))?;
            if !out.status.success() {
                return Err(format!(
                    "chown postgres {dir_s} failed (is there a `postgres` user?): {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }

        Ok(Cluster { bin, as_postgres, dir })
    }

    /// `pg_ctl start` on `port`, waiting until the server accepts connections.
    fn start(&self, port: u16) -> Result<(), String> {
        self.start_with(port, SERVER_SETTINGS)
    }

    /// `pg_ctl start` on `port` with `settings` (`-c name=value ...`).
    pub(crate) fn start_with(&self, port: u16, settings: &str) -> Result<(), String> {
        let (dir_s, log) = (self.dir.to_string_lossy(), self.dir.join("log"));
        // pg_ctl's own output goes to a file: nothing of the server may keep our pipes open.
        let out_path = self.dir.join("pg_ctl.out");
        let out_file = fs::File::create(&out_path).map_err(|e| format!("creating {}: {e}", out_path.display()))?;
        let err_file = out_file.try_clone().map_err(|e| e.to_string())?;
        let status = pg_command(self.as_postgres, &self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .arg("-l")
            .arg(&log)
            .arg("-w")
            .arg("-o")
            .arg(format!("-p {port} -k {dir_s} {settings}"))
            .arg("start")
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(out_file)
            .stderr(err_file)
            .status()
            .map_err(|e| format!("running pg_ctl: {e}"))?;
        if status.success() {
            return Ok(());
        }
        Err(format!(
            "pg_ctl start on port {port} failed ({status}):\n{}\n--- server log ---\n{}",
            fs::read_to_string(&out_path).unwrap_or_default(),
            fs::read_to_string(&log).unwrap_or_default()
        ))
    }

    /// `pg_ctl stop -m immediate`: like a crash, every connection is cut.
    pub(crate) fn stop(&self) {
        let _ = pg_command(self.as_postgres, &self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A PostgreSQL server of one test's own, for tests of an outage: stopping it
/// touches no other test's databases. Cleaned up like the shared one.
pub struct OwnServer {
    cluster: Cluster,
    port: u16,
}

impl OwnServer {
    pub async fn start() -> OwnServer {
        tokio::task::spawn_blocking(|| {
            let cluster = Cluster::init().unwrap_or_else(|e| panic!("{e}"));
            let mut last_err = String::new();
            for _ in 0..5 {
                let port = free_port().unwrap_or_else(|e| panic!("{e}"));
                match cluster.start(port) {
                    Ok(()) => return OwnServer { cluster, port },
                    Err(e) => last_err = e,
                }
                cluster.stop();
            }
            panic!("could not start a PostgreSQL server: {last_err}")
        })
        .await
        .expect("the start-up task does not panic")
    }

    /// `127.0.0.1:PORT`, where the server listens.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A new, empty database on this server.
    pub async fn fresh_database_url(&self) -> String {
        database_on(&format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)).await
    }

    /// Stops the server at once, as a crash would.
    pub async fn stop(&self) {
        let cluster = self.cluster.clone();
        tokio::task::spawn_blocking(move || cluster.stop()).await.expect("pg_ctl stop ran");
    }

    /// Starts it again on the same port, with the same data.
    pub async fn restart(&self) {
        let cluster = self.cluster.clone();
        let port = self.port;
        tokio::task::spawn_blocking(move || cluster.start(port))
            .await
            .expect("pg_ctl start ran")
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Its server ends with the test, pass or fail, not with the test process.
impl Drop for OwnServer {
    fn drop(&mut self) {
        self.cluster.stop();
    }
}

/// A detached shell that waits for this process to exit, then stops the server and deletes
/// its directory. It gets its own process group (so Ctrl-C on the test run doesn't kill it)
/// and no stdio of ours (so `cargo test` doesn't wait for it).
fn spawn_watchdog(bin: &Path, as_postgres: bool, dir: &Path) -> Result<(), String> {
    let pg_ctl = sh_quote(&bin.join("pg_ctl").to_string_lossy());
    let data = sh_quote(&dir.join("data").to_string_lossy());
    let dir_q = sh_quote(&dir.to_string_lossy());
    let runas = if as_postgres { "runuser -u postgres -- " } else { "" };
    let script = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
         if [ -f {data}/postmaster.pid ]; then {runas}{pg_ctl} -D {data} -m immediate -w stop; fi; \
         rm -rf {dir_q}",
        pid = std::process::id(),
    );
    spawn_detached_shell(&script).map_err(|e| format!("spawning the cleanup watchdog: {e}"))
}

/// Starts `script` under `sh` in a process group of its own, with no stdio
/// of ours, so it outlives this process and `cargo test` never waits for it.
pub(crate) fn spawn_detached_shell(script: &str) -> std::io::Result<()> {
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        // Detached: nothing here waits for it.
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_database() {
        assert_eq!(
            with_database("postgres://u:p@h:5432/app?sslmode=disable", "x"),
            "postgres://u:p@h:5432/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h", "x"), "postgres://h/x");
        assert_eq!(with_database("postgres://h/", "x"), "postgres://h/x");
    }

    #[test]
    fn sqlite_url_encodes() {
        assert_eq!(sqlite_url(Path::new("/tmp/a b"), "x?.db"), "sqlite:///tmp/a b/x%3F.db?mode=rwc");
    }
}
