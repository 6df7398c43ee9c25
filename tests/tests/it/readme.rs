//! The README's shell blocks run as written (docs/testing.md#the-readme-runs):
//! the quick start and "Two shards with mTLS", in a fresh directory, with
//! `pastebin` on `PATH` being the testbed binary. One substitution, said
//! here: the quick start's `cargo run --release --` is that `pastebin`
//! (the test does not build a release). Every process a block starts is
//! stopped at the end, and every wait has its own bound.

use std::{
    path::{Path, PathBuf},
    process::{ExitStatus, Stdio},
    time::Duration,
};

use pastebin_tests::cluster::testbed_binary;

/// Longest a block, or a wait for what it starts, may take.
const BOUND: Duration = Duration::from_secs(120);

/// The ```sh blocks of the README section headed `## {heading}`, in order.
fn shell_blocks(heading: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md")).unwrap();
    let start = readme.find(&format!("\n## {heading}\n")).unwrap_or_else(|| panic!("no section {heading}"));
    let section = &readme[start + 1..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |end| end + 3)];
    section.split("```sh\n").skip(1).map(|block| block[..block.find("```").unwrap()].to_owned()).collect()
}

/// A directory to run in, as a newcomer's shell would be: `pastebin` on
/// `PATH`, a `HOME` of its own, and no `PASTEBIN_*` or `XDG_*` settings
/// inherited from the test's environment.
struct Workspace {
    dir: tempfile::TempDir,
    path: String,
}

impl Workspace {
    fn new() -> Workspace {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        std::os::unix::fs::symlink(testbed_binary(), bin.join("pastebin")).unwrap();
        let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
        Workspace { dir, path }
    }

    /// `bash -c block` in its own process group, so everything it starts can be stopped.
    fn bash(&self, block: &str) -> tokio::process::Command {
        let mut command = tokio::process::Command::new("bash");
        command
            .args(["-c", block])
            .current_dir(self.dir.path())
            .env_clear()
            .env("PATH", &self.path)
            .env("HOME", self.dir.path())
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .process_group(0);
        command
    }

    /// Runs a block to its end; its stdout.
    async fn run(&self, block: &str) -> String {
        let output = tokio::time::timeout(BOUND, self.bash(block).output()).await.expect("the block ends").unwrap();
        let (out, err) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "the block failed:\n{block}\nstdout:\n{out}\nstderr:\n{err}");
        out.into_owned()
    }

    /// Starts a block whose processes keep running; its output goes to a file
    /// (what it leaves running holds the output open, so no pipe would end).
    fn start(&self, name: &str, block: &str) -> Started {
        let log = self.dir.path().join(format!("{name}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let err = out.try_clone().unwrap();
        let shell = self.bash(block).stdout(out).stderr(err).spawn().unwrap();
        let group = shell.id().expect("a process just spawned has an id");
        Started { shell, group, log, stopped: false }
    }
}

/// A block running in the background, in process group `group`. Dropped
/// before [`Started::stop`] (a failed assertion), it kills the whole group:
/// what the block started must not outlive the test and hold its ports.
struct Started {
    shell: tokio::process::Child,
    group: u32,
    log: PathBuf,
    stopped: bool,
}

impl Drop for Started {
    fn drop(&mut self) {
        if !self.stopped {
            signal_group(self.group, "KILL");
        }
    }
}

impl Started {
    /// What the block and everything it started printed so far.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How the block's shell ended, once it ends by itself.
    async fn ended(&mut self) -> ExitStatus {
        let ended = tokio::time::timeout(BOUND, self.shell.wait()).await;
        ended.unwrap_or_else(|_| panic!("the block did not end within {BOUND:?}:\n{}", self.log())).unwrap()
    }

    /// Stops the whole group with SIGTERM, as closing a terminal's jobs does,
    /// waits until none of it is left (its ports are free again) and returns
    /// how the shell ended.
    async fn stop(mut self) -> ExitStatus {
        signal_group(self.group, "TERM");
        let status = self.ended().await;
        let gone = async {
            while !live_members(self.group).is_empty() {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        };
        if tokio::time::timeout(BOUND, gone).await.is_err() {
            panic!("{:?} still running {BOUND:?} after SIGTERM:\n{}", live_members(self.group), self.log());
        }
        self.stopped = true;
        status
    }
}

fn signal_group(group: u32, signal: &str) {
    let group = format!("-{group}");
    let quiet = std::process::Command::new("kill")
        .args(["-s", signal, "--", &group])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    quiet.expect("kill runs");
}

/// The processes of `group` that still run. Zombies do not count: the shell
/// has ended, and whoever adopts its orphans may be slow to reap them.
fn live_members(group: u32) -> Vec<u32> {
    let entries = std::fs::read_dir("/proc").expect("Linux has /proc");
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // After the command's closing parenthesis: state, ppid, pgrp.
            let fields: Vec<&str> = stat.rsplit_once(')').map_or("", |(_, rest)| rest).split_whitespace().collect();
            fields.len() > 2 && fields[0] != "Z" && fields[2] == group.to_string()
        })
        .collect()
}

/// Waits until `url` answers (a server a block started in the background).
async fn wait_for(url: &str, block: &Started) {
    let answered = async {
        while reqwest::get(url).await.is_err() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    let waited = tokio::time::timeout(BOUND, answered).await;
    waited.unwrap_or_else(|_| panic!("{url} never answered; the block printed:\n{}", block.log()));
}

/// The quick start, then the mTLS block: one after the other, as both use port 8080.
#[tokio::test]
async fn the_quick_start_and_the_mtls_block_run_as_written() {
    quick_start().await;
    mtls_block().await;
}

async fn quick_start() {
    let blocks: Vec<String> =
        shell_blocks("Quick start").iter().map(|block| block.replace("cargo run --release --", "pastebin")).collect();
    let [up, curl, paste] = &blocks[..] else { panic!("the quick start has three shell blocks: {blocks:?}") };
    let workspace = Workspace::new();
    // The first block is the server: it runs until stopped, in a terminal of its own.
    let server = workspace.start("up", up);
    wait_for("http://127.0.0.1:8080/healthz", &server).await;

    let answer = workspace.run(curl).await;
    let lines: Vec<&str> = answer.lines().collect();
    assert_eq!(lines.len(), 2, "the paste's URL and its delete token: {answer}");
    assert!(lines[0].starts_with("http://127.0.0.1:8080/"), "{answer}");
    let pasted = workspace.run(paste).await;
    assert!(pasted.starts_with("http://127.0.0.1:8080/"), "the client prints the share URL: {pasted}");
    let stats = workspace.run("pastebin ctl stats").await;
    assert!(stats.contains("level: healthy"), "ctl finds ./pastebin-data by itself: {stats}");

    let log = server.log();
    let stopped = server.stop().await;
    assert!(stopped.success(), "up stops cleanly on SIGTERM: {stopped}\n{log}");
}

async fn mtls_block() {
    let blocks = shell_blocks("Two shards with mTLS");
    let [block] = &blocks[..] else { panic!("the mTLS section has one shell block: {blocks:?}") };
    let workspace = Workspace::new();
    let mut started = workspace.start("mtls", block);
    let status = started.ended().await;
    let out = started.log();
    // The gateway the block left running serves the public API.
    if status.success() {
        wait_for("http://127.0.0.1:8080/healthz", &started).await;
        // … and the sweeper its dashboard.
        wait_for("http://127.0.0.1:7090/dashboard/status.json", &started).await;
    }
    // The shards, the gateway and the sweeper outlive the block: stop them whatever it said.
    started.stop().await;
    assert!(status.success(), "{out}");
    assert!(out.contains("level: healthy"), "every shard answered: {out}");
}
