//! etcd, the store that says which shard owns which slots, for tests: Debian's
//! `etcd-server` (`/usr/bin/etcd`, 3.4) and `etcd-client` (`etcdctl`), which scripts/test
//! installs, or the binaries `PASTEBIN_ETCD` and `PASTEBIN_ETCDCTL` name.
//!
//! [`Etcd`] is one cluster of a test's own: one member or three, each a real `etcd` on free
//! loopback ports with its data directory in the cluster's temp directory. A test can
//! SIGKILL a member and start it again on the same data, or take two of three away (no
//! quorum: every write and every linearizable read waits, then fails) and bring them back.
//! With [`EtcdTls`] the members serve clients over mutual TLS (`--client-cert-auth`), as a
//! deployment does (docs/deployment.md#etcd).
//!
//! Every member carries the cluster's [`ProcessTag`]: dropping the cluster ends them, and a
//! watchdog ends them if the test process itself is killed (docs/testing.md#nothing-left-running).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::process_tag::ProcessTag;
use crate::seaweedfs::free_ports;
use crate::tls::TlsFiles;

/// A member ready in well under a second on a quiet machine can take many times that on
/// a busy one; nothing here depends on how long it takes, only on it happening.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// A port picked free can be taken by someone else before etcd binds it.
const START_ATTEMPTS: usize = 3;

/// How long one `etcdctl` call may wait for an answer. Without a quorum it is how long a
/// write takes to fail.
const COMMAND_TIMEOUT: &str = "5s";

/// Raft's timing, ten times etcd's heartbeat apart as its tuning guide asks, and slower
/// than the defaults (100 ms / 1 s): on a machine busy with builds, a leader that misses
/// its heartbeats for a second would call elections the tests never asked for.
const HEARTBEAT_MS: &str = "250";
const ELECTION_TIMEOUT_MS: &str = "2500";

const INSTALL_HINT: &str = "etcd not found. Install Debian's etcd-server and etcd-client \
     (`apt-get install etcd-server etcd-client`; scripts/test does), or point PASTEBIN_ETCD and \
     PASTEBIN_ETCDCTL at the etcd and etcdctl binaries.";

/// `$variable`, else `/usr/bin/<name>`.
fn binary(variable: &str, name: &str) -> PathBuf {
    std::env::var_os(variable).map_or_else(|| Path::new("/usr/bin").join(name), PathBuf::from)
}

/// The `etcdctl` the harness runs, for a test that runs a command line of its own.
pub fn etcdctl_binary() -> PathBuf {
    binary("PASTEBIN_ETCDCTL", "etcdctl")
}

/// Client TLS for every member: the members serve with `member` and ask each client for a
/// certificate from `member.ca`; the test's own calls present `client`.
#[derive(Debug, Clone)]
pub struct EtcdTls {
    pub member: TlsFiles,
    pub client: TlsFiles,
}

/// What one member runs: its name, the port it serves clients on, and its command line
/// (without the program), which names its data directory.
pub struct MemberCommand {
    pub name: String,
    pub client_port: u16,
    pub args: Vec<String>,
}

/// One `etcd` process, logging to `<name>.log` in the cluster's directory.
struct Member {
    name: String,
    client_port: u16,
    log: PathBuf,
    args: Vec<String>,
    /// `None` while it is down.
    child: Option<Child>,
}

impl Member {
    fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    fn running(&self) -> bool {
        self.child.is_some()
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM, and waits for it to end: etcd hands its leadership over first.
    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
            let _ = child.wait();
        }
    }

    fn spawn(&mut self, tag: &ProcessTag) -> Result<(), String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| format!("open {}: {e}", self.log.display()))?;
        let stderr = log.try_clone().map_err(|e| format!("{}: {e}", self.log.display()))?;
        let mut etcd = Command::new(binary("PASTEBIN_ETCD", "etcd"));
        // etcd reads ETCD_<FLAG> from its environment: a stray one must not change the member.
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("ETCD_") {
                etcd.env_remove(name);
            }
        }
        let child = etcd
            .args(&self.args)
            .env(tag.env().0, tag.env().1)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr)
            // Its own process group: a Ctrl-C of the test run is not delivered to it twice.
            .process_group(0)
            .spawn()
            .map_err(|e| format!("spawn etcd {}: {e}. {INSTALL_HINT}", self.name))?;
        self.child = Some(child);
        Ok(())
    }

    /// `Some` once the process has ended by itself.
    fn exited(&mut self) -> Option<String> {
        let status = self.child.as_mut()?.try_wait().ok().flatten()?;
        self.child = None;
        Some(format!("etcd {} exited with {status}", self.name))
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        format!("{} ({}):\n{}", self.name, self.log.display(), lines[lines.len().saturating_sub(20)..].join("\n"))
    }
}

/// A running etcd cluster of one test's own.
pub struct Etcd {
    members: Vec<Member>,
    tls: Option<EtcdTls>,
    /// Carried by every member; dropped after them, it ends any that is left.
    tag: ProcessTag,
    dir: tempfile::TempDir,
}

impl Etcd {
    /// One member, plaintext.
    pub async fn single() -> Etcd {
        Etcd::start(1, None).await
    }

    /// Three members, plaintext: a quorum of two.
    pub async fn three() -> Etcd {
        Etcd::start(3, None).await
    }

    /// `members` members, each serving clients over mutual TLS when `tls` is given (peers
    /// talk plaintext on loopback), once every member answers `endpoint health`.
    pub async fn start(members: usize, tls: Option<EtcdTls>) -> Etcd {
        assert!((1..=3).contains(&members), "one, two or three members (free ports for three are picked)");
        let mut last = String::new();
        for _ in 0..START_ATTEMPTS {
            let dir = tempfile::Builder::new().prefix("pastebin-etcd-").tempdir().expect("a temp dir");
            let commands = member_commands(dir.path(), members, tls.as_ref());
            match Etcd::start_commands(dir, commands, tls.clone()).await {
                Ok(etcd) => return etcd,
                Err(failure) => last = failure,
            }
        }
        panic!("etcd did not start: {last}");
    }

    /// Members that run `commands` (a deployment's command lines moved to loopback, say),
    /// logging into `dir`, which the cluster owns from here on; ready once every member
    /// answers `endpoint health`. `tls` is what the members serve clients with.
    pub async fn start_commands(
        dir: tempfile::TempDir,
        commands: Vec<MemberCommand>,
        tls: Option<EtcdTls>,
    ) -> Result<Etcd, String> {
        let tag = ProcessTag::new();
        tag.kill_all_when_this_process_exits();
        let members = commands
            .into_iter()
            .map(|command| Member {
                log: dir.path().join(format!("{}.log", command.name)),
                name: command.name,
                client_port: command.client_port,
                args: command.args,
                child: None,
            })
            .collect();
        let mut etcd = Etcd { members, tls, tag, dir };
        for member in &mut etcd.members {
            member.spawn(&etcd.tag)?;
        }
        let all: Vec<usize> = (0..etcd.members.len()).collect();
        etcd.wait_healthy(&all).await?;
        Ok(etcd)
    }

    /// Each member's client address, `127.0.0.1:PORT`, in member order.
    pub fn endpoints(&self) -> Vec<String> {
        self.members.iter().map(Member::endpoint).collect()
    }

    /// `etcd://127.0.0.1:P1,127.0.0.1:P2,...`, what a part's `--topology` takes.
    pub fn topology_url(&self) -> String {
        format!("etcd://{}", self.endpoints().join(","))
    }

    /// The TLS files the members were started with.
    pub fn tls(&self) -> Option<&EtcdTls> {
        self.tls.as_ref()
    }

    /// How many members there are, running or not.
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// SIGKILL to `member`: it ends at once, with whatever it had not written.
    pub fn kill(&mut self, member: usize) {
        self.members[member].kill();
    }

    /// SIGTERM to `member`, waiting until it has ended.
    pub fn stop(&mut self, member: usize) {
        self.members[member].stop();
    }

    /// Starts `member` again with its data directory, killing it first if it runs. When
    /// the running members are then a majority, waits until it answers `endpoint health`.
    pub async fn restart(&mut self, member: usize) {
        self.members[member].kill();
        let tag = &self.tag;
        self.members[member].spawn(tag).unwrap_or_else(|e| panic!("{e}"));
        if self.has_quorum() {
            self.wait_healthy(&[member]).await.unwrap_or_else(|e| panic!("{e}"));
        }
    }

    /// Kills members until fewer than a majority run (two of three; the one of a single
    /// member). Returns the members killed, for [`Etcd::restore_quorum`].
    pub fn lose_quorum(&mut self) -> Vec<usize> {
        let mut killed = Vec::new();
        for member in (0..self.members.len()).rev() {
            if !self.has_quorum() {
                break;
            }
            if self.members[member].running() {
                self.members[member].kill();
                killed.push(member);
            }
        }
        killed
    }

    /// Starts every member that is down, then waits until all of them answer.
    pub async fn restore_quorum(&mut self) {
        let down: Vec<usize> = (0..self.members.len()).filter(|m| !self.members[*m].running()).collect();
        for &member in &down {
            let tag = &self.tag;
            self.members[member].spawn(tag).unwrap_or_else(|e| panic!("{e}"));
        }
        let all: Vec<usize> = (0..self.members.len()).collect();
        self.wait_healthy(&all).await.unwrap_or_else(|e| panic!("{e}"));
    }

    /// Whether a majority of the members runs.
    pub fn has_quorum(&self) -> bool {
        self.members.iter().filter(|m| m.running()).count() * 2 > self.members.len()
    }

    /// The pids of the running members.
    pub fn pids(&self) -> Vec<u32> {
        self.members.iter().filter_map(|m| m.child.as_ref().map(Child::id)).collect()
    }

    /// `etcdctl ARGS` against every member, with the client certificate when the
    /// members ask for one.
    pub async fn etcdctl(&self, args: &[&str]) -> Output {
        self.etcdctl_on(&self.endpoints().join(","), args).await
    }

    /// `etcdctl ARGS` against `endpoints` (comma-separated `host:port`).
    pub async fn etcdctl_on(&self, endpoints: &str, args: &[&str]) -> Output {
        self.etcdctl_as(self.tls.as_ref().map(|tls| &tls.client), endpoints, args).await
    }

    /// `etcdctl ARGS` against `endpoints`, presenting `identity` (none: no client
    /// certificate) and trusting the members' CA when they serve TLS.
    pub async fn etcdctl_as(&self, identity: Option<&TlsFiles>, endpoints: &str, args: &[&str]) -> Output {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let urls: Vec<String> = endpoints.split(',').map(|e| format!("{scheme}://{e}")).collect();
        let mut command = tokio::process::Command::new(etcdctl_binary());
        command
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", urls.join(",")))
            .arg(format!("--command-timeout={COMMAND_TIMEOUT}"))
            .arg("--dial-timeout=2s");
        if let Some(tls) = &self.tls {
            command.arg(format!("--cacert={}", tls.member.ca.display()));
        }
        if let Some(identity) = identity {
            command.arg(format!("--cert={}", identity.cert.display())).arg(format!("--key={}", identity.key.display()));
        }
        command
            .args(args)
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap_or_else(|e| panic!("run etcdctl: {e}. {INSTALL_HINT}"))
    }

    /// Waits until each of `members` answers `endpoint health` (a read through the quorum),
    /// failing early, with its log, if one ends by itself.
    async fn wait_healthy(&mut self, members: &[usize]) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        for &member in members {
            loop {
                let endpoint = self.members[member].endpoint();
                let health = self.etcdctl_on(&endpoint, &["endpoint", "health"]).await;
                if health.status.success() {
                    break;
                }
                if let Some(exit) = self.members[member].exited() {
                    return Err(format!("{exit}; {}", self.members[member].log_tail()));
                }
                if Instant::now() > deadline {
                    return Err(format!(
                        "etcd member {member} at {endpoint} is not healthy after {READY_TIMEOUT:?} ({}); {}",
                        String::from_utf8_lossy(&health.stderr).trim(),
                        self.logs()
                    ));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Ok(())
    }

    /// The last lines each member logged, for a failure message.
    pub fn logs(&self) -> String {
        self.members.iter().map(Member::log_tail).collect::<Vec<_>>().join("\n")
    }

    /// The cluster's temp directory (each member's data and log are in it).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// The command lines of `count` members on free loopback ports, with their data in `dir`.
fn member_commands(dir: &Path, count: usize, tls: Option<&EtcdTls>) -> Vec<MemberCommand> {
    let ports = free_ports::<6>();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let names: Vec<String> = (0..count).map(|index| format!("member{index}")).collect();
    let peer_url = |index: usize| format!("http://127.0.0.1:{}", ports[2 * index + 1]);
    let initial_cluster: Vec<String> =
        names.iter().enumerate().map(|(index, name)| format!("{name}={}", peer_url(index))).collect();
    // Unique: a member of another test's cluster that reached these ports is refused.
    let token = dir.file_name().map_or_else(String::new, |name| name.to_string_lossy().into_owned());
    names
        .into_iter()
        .enumerate()
        .map(|(index, name)| {
            let client_url = format!("{scheme}://127.0.0.1:{}", ports[2 * index]);
            let mut args = vec![
                format!("--name={name}"),
                format!("--data-dir={}", dir.join(&name).display()),
                format!("--listen-client-urls={client_url}"),
                format!("--advertise-client-urls={client_url}"),
                format!("--listen-peer-urls={}", peer_url(index)),
                format!("--initial-advertise-peer-urls={}", peer_url(index)),
                format!("--initial-cluster={}", initial_cluster.join(",")),
                "--initial-cluster-state=new".into(),
                format!("--initial-cluster-token={token}"),
                format!("--heartbeat-interval={HEARTBEAT_MS}"),
                format!("--election-timeout={ELECTION_TIMEOUT_MS}"),
                "--logger=zap".into(),
                "--log-outputs=stderr".into(),
            ];
            if let Some(tls) = tls {
                args.extend([
                    format!("--cert-file={}", tls.member.cert.display()),
                    format!("--key-file={}", tls.member.key.display()),
                    format!("--trusted-ca-file={}", tls.member.ca.display()),
                    "--client-cert-auth".into(),
                ]);
            }
            MemberCommand { name, client_port: ports[2 * index], args }
        })
        .collect()
}

impl Drop for Etcd {
    fn drop(&mut self) {
        for member in &mut self.members {
            member.kill();
        }
        self.tag.kill_all();
    }
}
