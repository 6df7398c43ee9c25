//! pg_auto_failover as a real HA manager for failover tests: a monitor and
//! two PostgreSQL nodes run by `pg_autoctl` (Debian's
//! `postgresql-15-auto-failover`), which replicate synchronously and promote
//! the standby by themselves when the primary is lost. Each part runs in a
//! process group of its own, so a test can kill a whole node (its keeper and
//! its server) at once. Every process of the formation carries one
//! [`ProcessTag`]: they all end when the formation is dropped, pass or fail,
//! and a detached watchdog ends them if the test process itself is killed.

use std::{
    fs::File,
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::Duration,
};

use sqlx::{Connection, PgConnection};

use crate::postgres::{database_on, free_port, pg_command, Cluster};
use crate::process_tag::ProcessTag;

/// Where Debian installs `pg_autoctl`.
const PG_AUTOCTL: &str = "/usr/bin/pg_autoctl";

/// The monitor's health checks, made quick: by default it declares a node
/// unhealthy only after 20 s, and lets a promoted standby take writes only
/// 30 s later (time for a primary it cannot reach to demote itself; here the
/// test killed that node whole).
const QUICK_HEALTH_CHECKS: &[&str] = &[
    "ALTER SYSTEM SET pgautofailover.primary_demote_timeout = 2000",
    "ALTER SYSTEM SET pgautofailover.health_check_period = 1000",
    "ALTER SYSTEM SET pgautofailover.health_check_retry_delay = 500",
    "ALTER SYSTEM SET pgautofailover.health_check_max_retries = 1",
    "ALTER SYSTEM SET pgautofailover.health_check_timeout = 1000",
    "ALTER SYSTEM SET pgautofailover.node_considered_unhealthy_timeout = 2000",
    "SELECT pg_reload_conf()",
];

/// Whether `pg_autoctl` is installed (scripts/test installs it).
pub fn installed() -> bool {
    Path::new(PG_AUTOCTL).is_file()
}

/// A running formation: a monitor and two nodes.
pub struct AutoFailover {
    dir: PathBuf,
    monitor_port: u16,
    /// Each node's port and the process group of its `pg_autoctl`.
    nodes: Vec<(u16, u32)>,
    /// Carried by the monitor, the nodes and everything they start.
    tag: ProcessTag,
}

impl AutoFailover {
    /// Starts the monitor, then a primary, then its synchronous standby.
    pub async fn start() -> AutoFailover {
        let place =
            tokio::task::spawn_blocking(Cluster::empty).await.expect("no panic").unwrap_or_else(|e| panic!("{e}"));
        let tag = ProcessTag::new();
        tag.kill_all_when_this_process_exits();
        let mut formation = AutoFailover { dir: place.dir.clone(), monitor_port: 0, nodes: Vec::new(), tag };
        formation.monitor_port = free_port().expect("a free port");
        formation.spawn(&place, "monitor", formation.monitor_port, &["create", "monitor"]);
        formation.wait_for_monitor().await;
        for node in 1..=2 {
            let port = free_port().expect("a free port");
            let monitor_url = format!(
                "postgres://autoctl_node@127.0.0.1:{}/pg_auto_failover?sslmode=disable",
                formation.monitor_port
            );
            let group = formation.spawn(
                &place,
                &format!("node{node}"),
                port,
                &["create", "postgres", "--monitor", &monitor_url],
            );
            formation.nodes.push((port, group));
            let want = if node == 1 { "single" } else { "secondary" };
            formation.wait_for_state(port, want).await;
        }
        formation.wait_for_state(formation.nodes[0].0, "primary").await;
        formation
    }

    /// `pg_autoctl <command> ... --run` as `postgres`, in a process group of
    /// its own, logging to `<name>.log`; returns the group.
    fn spawn(&self, place: &Cluster, name: &str, port: u16, command: &[&str]) -> u32 {
        let log = File::create(self.dir.join(format!("{name}.log"))).expect("create the log");
        let dir = self.dir.to_string_lossy();
        let mut pg_autoctl = pg_command(place.as_postgres, Path::new("/usr/bin/env"));
        pg_autoctl
            .args([
                format!("XDG_CONFIG_HOME={dir}/config"),
                format!("XDG_DATA_HOME={dir}/share"),
                format!("HOME={dir}"),
                // Set past runuser, which may not pass the whole environment on.
                self.tag.assignment(),
            ])
            .arg(PG_AUTOCTL)
            .args(command)
            .arg("--pgctl")
            .arg(place.bin.join("pg_ctl"))
            .arg("--pgdata")
            .arg(self.dir.join(name))
            .args(["--pgport", &port.to_string(), "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl", "--run"])
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("clone the log"))
            .stderr(log)
            .process_group(0);
        pg_autoctl.spawn().expect("pg_autoctl starts").id()
    }

    fn monitor_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/pg_auto_failover", self.monitor_port)
    }

    fn logs(&self) -> String {
        ["monitor", "node1", "node2"]
            .map(|name| {
                format!(
                    "--- {name} ---\n{}",
                    std::fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default()
                )
            })
            .join("\n")
    }

    async fn wait_for_monitor(&self) {
        for _ in 0..1200 {
            if let Ok(mut monitor) = PgConnection::connect(&self.monitor_url()).await {
                // The extension's tables exist once the monitor is set up.
                if sqlx::raw_sql("SELECT 1 FROM pgautofailover.node").execute(&mut monitor).await.is_ok() {
                    for setting in QUICK_HEALTH_CHECKS {
                        sqlx::raw_sql(*setting).execute(&mut monitor).await.expect("tune the monitor");
                    }
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the pg_auto_failover monitor never came up:\n{}", self.logs());
    }

    /// Waits until the monitor says the node on `port` is in `state`.
    pub async fn wait_for_state(&self, port: u16, state: &str) {
        for _ in 0..1200 {
            if self.state_of(port).await.as_deref() == Some(state) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("node on port {port} never reached {state}:\n{}", self.logs());
    }

    async fn state_of(&self, port: u16) -> Option<String> {
        let mut monitor = PgConnection::connect(&self.monitor_url()).await.ok()?;
        sqlx::query_scalar("SELECT reportedstate::text FROM pgautofailover.node WHERE nodeport = $1")
            .bind(i32::from(port))
            .fetch_optional(&mut monitor)
            .await
            .ok()
            .flatten()
    }

    /// Waits until the monitor has promoted the node that is not `killed`.
    pub async fn wait_for_promotion(&self, killed: u16) {
        let (other, _) = *self.nodes.iter().find(|(node, _)| *node != killed).expect("two nodes");
        for _ in 0..1200 {
            if matches!(self.state_of(other).await.as_deref(), Some("wait_primary" | "primary")) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the monitor never promoted the node on port {other}:\n{}", self.logs());
    }

    /// A new database, made on the first node (the primary after start-up).
    pub async fn fresh_database(&self) -> String {
        let url = database_on(&format!("postgres://postgres@127.0.0.1:{}/postgres", self.nodes[0].0)).await;
        url.rsplit('/').next().expect("the URL names its database").to_owned()
    }

    /// `database` on both nodes, as `pg_autoctl show uri` gives it.
    pub fn multi_host_url(&self, database: &str) -> String {
        let hosts: Vec<String> = self.nodes.iter().map(|(port, _)| format!("127.0.0.1:{port}")).collect();
        format!("postgres://postgres@{}/{database}?target_session_attrs=read-write", hosts.join(","))
    }

    /// `database` on the node that is not `port`.
    pub fn other_node_url(&self, port: u16, database: &str) -> String {
        let (other, _) = self.nodes.iter().find(|(node, _)| *node != port).expect("two nodes");
        format!("postgres://postgres@127.0.0.1:{other}/{database}")
    }

    /// SIGKILL to the whole first node, keeper and server: the primary is
    /// lost, and only the monitor can promote the standby. Returns its port.
    pub async fn kill_primary(&self) -> u16 {
        let (port, group) = self.nodes[0];
        let status = Command::new("kill").args(["-KILL", "--", &format!("-{group}")]).status().expect("kill runs");
        assert!(status.success(), "could not kill the primary's process group {group}");
        port
    }
}
