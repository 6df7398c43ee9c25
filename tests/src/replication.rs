//! A PostgreSQL primary and a streaming standby of its own, for failover
//! tests: the standby is made with `pg_basebackup -R` and streams from the
//! primary, synchronously or not; a test kills the primary with SIGKILL (a
//! lost server) and promotes the standby. Both are cleaned up like the
//! other throwaway servers (crate::postgres).

use std::{
    process::{Command, Stdio},
    time::Duration,
};

use sqlx::{Connection, PgConnection};

use crate::postgres::{database_on, free_port, pg_command, Cluster};

/// Whether the primary waits for the standby before acknowledging a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// `synchronous_standby_names = '*'`: an acknowledged commit is on the standby.
    Synchronous,
    /// A plain streaming replica: the standby may miss acknowledged commits.
    Asynchronous,
}

/// Durable commits (a failover test is about what an acknowledged commit
/// survives), but no fsync: the machine itself never crashes in a test.
const SETTINGS: &str = "-c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=on \
     -c max_connections=300 -c wal_level=replica -c max_wal_senders=4";

pub struct ReplicatedServer {
    primary: Cluster,
    standby: Cluster,
    pub primary_port: u16,
    pub standby_port: u16,
}

/// Both servers end with the test, pass or fail, not with the test process.
impl Drop for ReplicatedServer {
    fn drop(&mut self) {
        self.primary.stop();
        self.standby.stop();
    }
}

fn run(command: &mut Command, what: &str) -> Result<(), String> {
    let out = command.stdin(Stdio::null()).output().map_err(|e| format!("running {what}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{what} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// `cluster` started on a free port.
fn start_on_free_port(cluster: &Cluster) -> Result<u16, String> {
    let mut last_err = String::new();
    for _ in 0..5 {
        let port = free_port()?;
        match cluster.start_with(port, SETTINGS) {
            Ok(()) => return Ok(port),
            Err(e) => last_err = e,
        }
        cluster.stop();
    }
    Err(last_err)
}

impl ReplicatedServer {
    /// A primary and a standby that streams from it in `replication` mode.
    pub async fn start(replication: Replication) -> ReplicatedServer {
        let server = tokio::task::spawn_blocking(|| -> Result<ReplicatedServer, String> {
            let primary = Cluster::init()?;
            let primary_port = start_on_free_port(&primary)?;
            let standby = Cluster::empty()?;
            let mut backup = pg_command(standby.as_postgres, &standby.bin.join("pg_basebackup"));
            backup
                .arg("-D")
                .arg(standby.data())
                .args(["-R", "-X", "stream", "-h", "127.0.0.1", "-U", "postgres", "-p", &primary_port.to_string()])
                .current_dir(&standby.dir);
            run(&mut backup, "pg_basebackup")?;
            let standby_port = start_on_free_port(&standby)?;
            Ok(ReplicatedServer { primary, standby, primary_port, standby_port })
        })
        .await
        .expect("the start-up task does not panic")
        .unwrap_or_else(|e| panic!("{e}"));
        server.wait_for_standby(replication).await;
        server
    }

    fn admin_url(port: u16) -> String {
        format!("postgres://postgres@127.0.0.1:{port}/postgres")
    }

    /// Waits until the standby streams in the asked mode. The synchronous
    /// setting is made only now, after the base backup: copied into the
    /// standby, it would make the promoted server wait for a standby of its own.
    async fn wait_for_standby(&self, replication: Replication) {
        let mut primary =
            PgConnection::connect(&Self::admin_url(self.primary_port)).await.expect("connect to the primary");
        if replication == Replication::Synchronous {
            sqlx::raw_sql("ALTER SYSTEM SET synchronous_standby_names = '*'").execute(&mut primary).await.unwrap();
            sqlx::raw_sql("SELECT pg_reload_conf()").execute(&mut primary).await.unwrap();
        }
        let want = match replication {
            Replication::Synchronous => "sync",
            Replication::Asynchronous => "async",
        };
        for _ in 0..600 {
            let states: Vec<String> =
                sqlx::query_scalar("SELECT sync_state FROM pg_stat_replication WHERE state = 'streaming'")
                    .fetch_all(&mut primary)
                    .await
                    .expect("read pg_stat_replication");
            if states == [want] {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the standby never streamed as {want}");
    }

    /// A new, empty database (made on the primary, streamed to the standby).
    pub async fn fresh_database(&self) -> String {
        let url = database_on(&Self::admin_url(self.primary_port)).await;
        url.rsplit('/').next().expect("the URL names its database").to_owned()
    }

    /// `database` on the server at `port`.
    pub fn url(port: u16, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{port}/{database}")
    }

    /// `database` on both servers, standby first: a shard must pick the
    /// primary by asking, and find the standby once it is promoted.
    pub fn multi_host_url(&self, database: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{database}?target_session_attrs=read-write",
            self.standby_port, self.primary_port
        )
    }

    /// The standby stops receiving WAL (its `primary_conninfo` emptied, as a
    /// network partition or a lagging replica would leave it); returns once
    /// the primary sees no standby. From here on every commit is the
    /// primary's alone, and lost with it.
    pub async fn stop_streaming(&self) {
        let mut standby =
            PgConnection::connect(&Self::admin_url(self.standby_port)).await.expect("connect to the standby");
        sqlx::raw_sql("ALTER SYSTEM SET primary_conninfo = ''").execute(&mut standby).await.unwrap();
        sqlx::raw_sql("SELECT pg_reload_conf()").execute(&mut standby).await.unwrap();
        let mut primary =
            PgConnection::connect(&Self::admin_url(self.primary_port)).await.expect("connect to the primary");
        for _ in 0..600 {
            let standbys: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM pg_stat_replication")
                .fetch_one(&mut primary)
                .await
                .expect("read pg_stat_replication");
            if standbys == 0 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("the standby never stopped streaming");
    }

    /// SIGKILL to the primary's postmaster and every process it started:
    /// the server is gone at once, with whatever the standby had not received.
    pub async fn kill_primary(&self) {
        let pid_file = self.primary.data().join("postmaster.pid");
        let pid = std::fs::read_to_string(&pid_file).expect("the primary runs");
        let pid = pid.lines().next().expect("postmaster.pid names the postmaster").trim().to_owned();
        let children = Command::new("pgrep").args(["-P", &pid]).output().expect("pgrep runs");
        let children =
            String::from_utf8_lossy(&children.stdout).split_whitespace().map(str::to_owned).collect::<Vec<_>>();
        let status = Command::new("kill").args(["-KILL", &pid]).status().expect("kill runs");
        assert!(status.success(), "could not kill the primary's postmaster {pid}");
        // A child may have ended by itself since pgrep listed it (a backend,
        // an autovacuum worker), and then `kill` fails for it: gone is what
        // is wanted, so the children's kill is not checked.
        let _ = Command::new("kill").arg("-KILL").args(&children).stderr(Stdio::null()).status();
    }

    /// `pg_ctl promote -w`: the standby takes writes when this returns.
    pub async fn promote_standby(&self) {
        let standby = self.standby.clone();
        tokio::task::spawn_blocking(move || {
            let mut promote = pg_command(standby.as_postgres, &standby.bin.join("pg_ctl"));
            promote.arg("-D").arg(standby.data()).args(["-w", "promote"]).current_dir(&standby.dir);
            run(&mut promote, "pg_ctl promote")
        })
        .await
        .expect("the promote task does not panic")
        .unwrap_or_else(|e| panic!("{e}"));
    }
}
