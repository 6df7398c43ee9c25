//! A whole deployment as real processes: K shards and P shards on their own
//! PostgreSQL databases, a gateway in front of them on a SeaweedFS S3 bucket, all
//! started from the failpoint-enabled `pastebin-testbed` binary and talking
//! gRPC over loopback. Processes can be killed, crashed at a failpoint and
//! restarted, which is what the saga's guarantees are about.

use std::{
    collections::HashMap,
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use crate::tls::{ClusterTls, TlsFiles};
use pastebin_core::OwnedSlots;
use pastebin_keys::KeyClient;
use pastebin_objects::S3Settings;
use pastebin_pastes::PasteClient;
use pastebin_runtime::tls::MutualTls;
use pastebin_shards::{channel, Shard};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
    sync::mpsc,
};

use crate::shards::even_split;

/// Path of the failpoint-enabled binary. Cargo builds it before this
/// package's integration tests, next to their `deps/` directory.
pub fn testbed_binary() -> std::path::PathBuf {
    if let Ok(path) = std::env::var("PASTEBIN_TESTBED") {
        return path.into();
    }
    let test_exe = std::env::current_exe().expect("the test binary has a path");
    let profile_dir = test_exe.parent().and_then(|deps| deps.parent()).expect("tests run from target/<profile>/deps");
    profile_dir.join("pastebin-testbed")
}

/// Runs the testbed with `args` until it exits by itself (at most a minute):
/// a part that refuses to start.
pub async fn run_to_exit(args: &[&str]) -> std::process::Output {
    let command = Command::new(testbed_binary())
        .args(args)
        .env("RUST_LOG", "info")
        .env("PASTEBIN_CREATE_RATE_LIMIT", "off")
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(60), command).await.expect("the process exits by itself").unwrap()
}

/// One running part, with everything it logged so far.
pub struct Process {
    child: Child,
    logs: Arc<Mutex<String>>,
    /// `what` → address, from the "listening" log lines.
    pub addresses: HashMap<String, String>,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

fn parse_listening(line: &str) -> Option<(String, String)> {
    if !line.contains(" listening ") {
        return None;
    }
    let field =
        |name: &str| line.split_whitespace().find_map(|w| w.strip_prefix(name)).map(|v| v.trim_matches('"').to_owned());
    Some((field("what=")?, field("address=")?))
}

impl Process {
    /// Starts the testbed with `args` and waits until it logged a listening
    /// address for every name in `expect`.
    pub async fn start(args: Vec<String>, env: Vec<(String, String)>, expect: &[&str]) -> Process {
        Self::start_program(testbed_binary().as_os_str(), args, env, expect).await
    }

    /// Like [`Process::start`], but runs `program` with `args` (e.g. a shell
    /// that sets a umask and then execs the testbed). `RUST_LOG` in `env`
    /// wins over the test-wide `PASTEBIN_TEST_LOG`.
    pub async fn start_program(
        program: &std::ffi::OsStr,
        args: Vec<String>,
        env: Vec<(String, String)>,
        expect: &[&str],
    ) -> Process {
        let mut command = Command::new(program);
        command
            .args(&args)
            .env("RUST_LOG", std::env::var("PASTEBIN_TEST_LOG").unwrap_or_else(|_| "info".into()))
            // Tests create many pastes from one address: the default create rate
            // (60/min) is lifted unless a test sets its own (`env`, or the flag).
            .env("PASTEBIN_CREATE_RATE_LIMIT", "off")
            .envs(env.iter().cloned())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("the testbed binary starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let logs = Arc::new(Mutex::new(String::new()));
        let (found, mut listening) = mpsc::unbounded_channel();
        let sink = logs.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(address) = parse_listening(&line) {
                    let _ = found.send(address);
                }
                let mut logs = sink.lock().unwrap();
                logs.push_str(&line);
                logs.push('\n');
            }
        });
        let mut addresses = HashMap::new();
        let wait = async {
            while expect.iter().any(|name| !addresses.contains_key(*name)) {
                match listening.recv().await {
                    Some((what, address)) => {
                        addresses.insert(what, address);
                    }
                    None => break,
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(30), wait).await;
        let process = Process { child, logs, addresses, args, env };
        for name in expect {
            assert!(process.addresses.contains_key(*name), "{name} did not start; its log:\n{}", process.logs());
        }
        process
    }

    pub fn address(&self, what: &str) -> &str {
        &self.addresses[what]
    }

    /// The process id, to look at what it holds open in `/proc`.
    pub fn pid(&self) -> u32 {
        self.child.id().expect("a running process has an id")
    }

    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().clone()
    }

    /// The lines logged at `level` (`ERROR`, `WARN`): the field after the
    /// timestamp, not any text that contains the word (h2's DEBUG lines,
    /// logged when PASTEBIN_TEST_LOG asks for them, say `NO_ERROR`).
    pub fn logged_at(&self, level: &str) -> Vec<String> {
        let logs = self.logs();
        logs.lines().filter(|line| line.split_whitespace().nth(1) == Some(level)).map(str::to_owned).collect()
    }

    /// SIGKILL: the process gets no chance to finish anything.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }

    /// Sends the signal `name` (`TERM`, `INT`) to the process, as an
    /// orchestrator or a Ctrl-C would.
    pub fn signal(&self, name: &str) {
        let pid = self.pid().to_string();
        let sent = std::process::Command::new("kill").args(["-s", name, &pid]).status().expect("kill runs");
        assert!(sent.success(), "kill -s {name} {pid} failed");
    }

    /// Waits until the log has a line containing `needle`, at most `timeout`.
    pub async fn wait_for_log(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if self.logs().contains(needle) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        self.logs().contains(needle)
    }

    /// Waits for the process to end by itself (a failpoint crash), at most `timeout`.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait()).await.ok().and_then(Result::ok)
    }

    /// Removes `flag` and its value from the command line, for the next [`Self::restart`].
    pub fn forget_flag(&mut self, flag: &str) {
        if let Some(at) = self.args.iter().position(|arg| arg == flag) {
            self.args.drain(at..(at + 2).min(self.args.len()));
        }
    }

    /// Sets `flag` to `value` on the command line, for the next [`Self::restart`].
    pub fn set_flag(&mut self, flag: &str, value: &str) {
        self.forget_flag(flag);
        self.args.extend([flag.to_owned(), value.to_owned()]);
    }

    /// The command line, for starting the same part with other flags.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// Starts the same command again (same flags, so the same ports when
    /// they were fixed), with `extra_env` added.
    pub async fn restart(&mut self, extra_env: &[(&str, &str)], expect: &[&str]) {
        self.kill().await;
        let mut env = self.env.clone();
        env.retain(|(k, _)| !extra_env.iter().any(|(e, _)| e == k));
        env.extend(extra_env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let args = self.args.clone();
        // The old process's port may take a moment to be free again.
        for attempt in 0..20 {
            let started =
                tokio::time::timeout(Duration::from_secs(40), Process::start_quiet(args.clone(), env.clone(), expect))
                    .await;
            if let Ok(Some(process)) = started {
                *self = process;
                return;
            }
            tokio::time::sleep(Duration::from_millis(100 * (attempt + 1))).await;
        }
        panic!("could not restart {:?}", self.args);
    }

    async fn start_quiet(args: Vec<String>, env: Vec<(String, String)>, expect: &[&str]) -> Option<Process> {
        let handle = tokio::spawn({
            let expect: Vec<String> = expect.iter().map(|s| s.to_string()).collect();
            async move {
                let expect: Vec<&str> = expect.iter().map(String::as_str).collect();
                Process::start(args, env, &expect).await
            }
        });
        handle.await.ok()
    }
}

/// Listen flags and the name each part logs its address under.
const LISTEN_FLAGS: &[(&str, &str)] = &[
    ("--http", "gateway-http"),
    ("--grpc", "gateway-grpc"),
    ("--admin", "admin"),
    ("--listen", "key-service"),
    ("--listen", "paste-service"),
];

/// Every part starts on port 0 and logs the port the OS chose; picking free
/// ports in the test instead races (two picks can return the same port).
/// Once started, the flags are rewritten to the chosen ports, so a restart
/// comes back where clients already point.
fn pin_ports(process: &mut Process) {
    for (flag, what) in LISTEN_FLAGS {
        let Some(address) = process.addresses.get(*what).cloned() else { continue };
        if let Some(at) = process.args.iter().position(|a| a == flag) {
            process.args[at + 1] = address;
        }
    }
}

/// The gateway's highlighting budget in tests (see docs/reader-features.md#highlighting).
pub const HIGHLIGHT_BUDGET_FOR_TESTS: (&str, &str) = ("PASTEBIN_HIGHLIGHT_BUDGET_MS", "120000");

/// How many shards of each kind, and which failpoints the first gateway arms.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    pub key_shards: usize,
    pub paste_shards: usize,
    /// More shards of each kind, listed after those, started with `--slots none`.
    pub empty_key_shards: usize,
    pub empty_paste_shards: usize,
    pub failpoints: Option<String>,
    /// Overrides the S3 endpoint (e.g. a port where nothing listens).
    pub s3_endpoint: Option<String>,
    /// The gateway's bucket (e.g. on a SeaweedFS cluster of the test's own); by default
    /// a fresh one on the suite's SeaweedFS.
    pub s3: Option<S3Settings>,
    /// Every part speaks mutual TLS with these files (K and P require client certificates).
    pub tls: Option<ClusterTls>,
    /// Environment of every process (e.g. where to export spans).
    pub env: Vec<(String, String)>,
    /// The database of K shard `i` is the `i`-th URL here (e.g. a replicated
    /// server, or one behind an endpoint); shards past the list get a fresh
    /// database on the shared test server.
    pub key_database_urls: Vec<String>,
    /// The same for P shards.
    pub paste_database_urls: Vec<String>,
    /// Every shard starts under this topology (`etcd://…`,
    /// docs/design.md#ownership-on-etcd), and the gateway follows it; the
    /// test writes its first version.
    pub topology: Option<String>,
    /// One colocated shard (`colocated-shard`) serves both kinds on one
    /// database, instead of the K and P shards above: it is `keys[0]`, and
    /// both kinds' address and database URL (docs/design.md#the-colocated-create).
    pub colocated: bool,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self {
            key_shards: 1,
            paste_shards: 1,
            empty_key_shards: 0,
            empty_paste_shards: 0,
            failpoints: None,
            s3_endpoint: None,
            s3: None,
            tls: None,
            env: Vec::new(),
            key_database_urls: Vec::new(),
            paste_database_urls: Vec::new(),
            topology: None,
            colocated: false,
        }
    }
}

pub struct Cluster {
    pub keys: Vec<Process>,
    pub pastes: Vec<Process>,
    pub gateway: Process,
    pub key_database_urls: Vec<String>,
    pub paste_database_urls: Vec<String>,
    pub key_addresses: Vec<String>,
    pub paste_addresses: Vec<String>,
    pub s3: S3Settings,
    /// e.g. `http://127.0.0.1:PORT`
    pub http: String,
    /// `https://` when the cluster speaks TLS.
    pub grpc: String,
    pub tls: Option<ClusterTls>,
    /// How many K and P shards started owning slots (the first ones listed).
    pub started_owning: (usize, usize),
}

/// `https` when a part has TLS files, else `http`.
fn scheme(tls: Option<&TlsFiles>) -> &'static str {
    if tls.is_some() {
        "https"
    } else {
        "http"
    }
}

/// A part's command line: `args`, then its TLS flags if it has files.
fn with_tls(mut args: Vec<String>, tls: Option<&TlsFiles>) -> Vec<String> {
    args.extend(tls.map(TlsFiles::flags).unwrap_or_default());
    args
}

/// What the gateway and a sweeper share: the shards, the bucket, an admin listener.
fn backend_flags(key_addresses: &[String], paste_addresses: &[String], s3: &S3Settings) -> Vec<String> {
    vec![
        "--key-shards".into(),
        key_addresses.join(","),
        "--paste-shards".into(),
        paste_addresses.join(","),
        "--s3-bucket".into(),
        s3.bucket.clone(),
        "--s3-endpoint".into(),
        s3.endpoint.clone().unwrap_or_default(),
        "--s3-path-style".into(),
        "--admin".into(),
        "127.0.0.1:0".into(),
    ]
}

/// The test SeaweedFS checks no credentials; the AWS SDK insists on having some.
fn s3_credentials() -> Vec<(String, String)> {
    [("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"), ("AWS_REGION", "us-east-1")]
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .to_vec()
}

/// Starts a K or P shard owning `slots` on `database_url`, over mutual TLS
/// when `tls` has the shard's files, with `env` added to its environment.
pub async fn start_shard(
    kind: &str,
    database_url: &str,
    slots: impl Into<OwnedSlots>,
    tls: Option<&TlsFiles>,
    env: &[(String, String)],
) -> (Process, String) {
    start_shard_in(kind, database_url, slots, tls, env, None).await
}

/// [`start_shard`] under the topology at `topology` (`etcd://…`), when
/// given: on a port picked first, which it advertises as its name there.
pub async fn start_shard_in(
    kind: &str,
    database_url: &str,
    slots: impl Into<OwnedSlots>,
    tls: Option<&TlsFiles>,
    env: &[(String, String)],
    topology: Option<&str>,
) -> (Process, String) {
    let args = [kind, "--database-url", database_url, "--slots", &slots.into().to_string()];
    let mut args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    match topology {
        Some(url) => {
            let [port] = crate::seaweedfs::free_ports();
            let advertised = format!("{}://127.0.0.1:{port}", scheme(tls));
            args.extend(["--listen".into(), format!("127.0.0.1:{port}"), "--topology".into(), url.to_owned()]);
            args.extend(["--advertise".into(), advertised]);
        }
        None => args.extend(["--listen".into(), "127.0.0.1:0".into()]),
    }
    let mut process = Process::start(with_tls(args, tls), env.to_vec(), &[kind]).await;
    pin_ports(&mut process);
    let address = format!("{}://{}", scheme(tls), process.address(kind));
    (process, address)
}

/// A gateway process over these shards and bucket, every listener on port 0.
async fn start_gateway(
    key_addresses: &[String],
    paste_addresses: &[String],
    s3: &S3Settings,
    tls: Option<&ClusterTls>,
    env: &[(String, String)],
    failpoints: &str,
) -> Process {
    let mut args: Vec<String> =
        ["gateway", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"].map(String::from).to_vec();
    args.extend(backend_flags(key_addresses, paste_addresses, s3));
    let mut env = [s3_credentials(), env.to_vec()].concat();
    // Generous: a debug build on a busy machine must not decide
    // whether a page the tests look at is highlighted.
    env.push((HIGHLIGHT_BUDGET_FOR_TESTS.0.into(), HIGHLIGHT_BUDGET_FOR_TESTS.1.into()));
    if !failpoints.is_empty() {
        env.push(("PASTEBIN_FAILPOINTS".into(), failpoints.to_owned()));
    }
    let mut args = with_tls(args, tls.map(|tls| &tls.gateway));
    args.extend(tls.and_then(|tls| tls.public.as_ref()).map(TlsFiles::public_flags).unwrap_or_default());
    let mut gateway = Process::start(args, env, &["gateway-http", "gateway-grpc", "admin"]).await;
    pin_ports(&mut gateway);
    gateway
}

/// What shard `index` of a cluster with `owning` shards that own slots
/// starts with: its even share, or nothing for the shards listed after them.
fn initial_slots(index: usize, owning: usize) -> OwnedSlots {
    if index < owning {
        even_split(index, owning).into()
    } else {
        OwnedSlots::Nothing
    }
}

impl Cluster {
    pub async fn start(options: ClusterOptions) -> Cluster {
        let (mut keys, mut key_database_urls, mut key_addresses) = (Vec::new(), Vec::new(), Vec::new());
        let (mut pastes, mut paste_database_urls, mut paste_addresses) = (Vec::new(), Vec::new(), Vec::new());
        if options.colocated {
            assert!(options.topology.is_none(), "a colocated shard takes no topology");
            let url = match options.key_database_urls.first() {
                Some(url) => url.clone(),
                None => crate::postgres::fresh_database_url().await,
            };
            let tls = options.tls.as_ref().map(|tls| &tls.key_service);
            let (process, address) =
                start_shard_in("colocated-shard", &url, pastebin_core::SlotRange::ALL, tls, &options.env, None).await;
            keys.push(process);
            (key_database_urls, paste_database_urls) = (vec![url.clone()], vec![url]);
            (key_addresses, paste_addresses) = (vec![address.clone()], vec![address]);
        }
        let split_shards = |count: usize| if options.colocated { 0 } else { count };
        for shard in 0..split_shards(options.key_shards + options.empty_key_shards) {
            let url = match options.key_database_urls.get(shard) {
                Some(url) => url.clone(),
                None => crate::postgres::fresh_database_url().await,
            };
            let tls = options.tls.as_ref().map(|tls| &tls.key_service);
            let slots = initial_slots(shard, options.key_shards);
            let topology = options.topology.as_deref();
            let (process, address) = start_shard_in("key-service", &url, slots, tls, &options.env, topology).await;
            keys.push(process);
            key_database_urls.push(url);
            key_addresses.push(address);
        }
        for shard in 0..split_shards(options.paste_shards + options.empty_paste_shards) {
            let url = match options.paste_database_urls.get(shard) {
                Some(url) => url.clone(),
                None => crate::postgres::fresh_database_url().await,
            };
            let tls = options.tls.as_ref().map(|tls| &tls.paste_service);
            let slots = initial_slots(shard, options.paste_shards);
            let topology = options.topology.as_deref();
            let (process, address) = start_shard_in("paste-service", &url, slots, tls, &options.env, topology).await;
            pastes.push(process);
            paste_database_urls.push(url);
            paste_addresses.push(address);
        }
        let mut s3 = match options.s3 {
            Some(s3) => s3,
            None => crate::s3::fresh_bucket().await,
        };
        if let Some(endpoint) = &options.s3_endpoint {
            s3.endpoint = Some(endpoint.clone());
        }
        let failpoints = options.failpoints.as_deref().unwrap_or_default();
        let gateway_tls = options.tls.as_ref();
        // Under a topology the gateway follows it by a watch, as a deployment's does.
        let topology = options.topology.iter().map(|url| ("PASTEBIN_TOPOLOGY".to_owned(), url.clone()));
        let env: Vec<(String, String)> = options.env.iter().cloned().chain(topology).collect();
        let gateway = start_gateway(&key_addresses, &paste_addresses, &s3, gateway_tls, &env, failpoints).await;
        let http = format!("http://{}", gateway.address("gateway-http"));
        let public_tls = gateway_tls.and_then(|tls| tls.public.as_ref());
        let grpc = format!("{}://{}", scheme(public_tls), gateway.address("gateway-grpc"));
        Cluster {
            keys,
            pastes,
            gateway,
            key_database_urls,
            paste_database_urls,
            key_addresses,
            paste_addresses,
            s3,
            http,
            grpc,
            tls: options.tls,
            started_owning: (options.key_shards, options.paste_shards),
        }
    }

    /// Another gateway in front of the same shards, on `s3` (e.g. a bucket
    /// that does not exist, whose PUTs are refused), with `failpoints` armed.
    pub async fn another_gateway(&self, s3: &S3Settings, failpoints: &str) -> Process {
        start_gateway(&self.key_addresses, &self.paste_addresses, s3, self.tls.as_ref(), &[], failpoints).await
    }

    /// Another gateway that reaches the key shards at `key_addresses`
    /// (e.g. through a proxy) and everything else as the cluster's does.
    pub async fn gateway_with_key_shards(&self, key_addresses: &[String]) -> Process {
        start_gateway(key_addresses, &self.paste_addresses, &self.s3, self.tls.as_ref(), &[], "").await
    }

    /// The gateway's admin listener (`/metrics`).
    pub fn gateway_admin(&self) -> String {
        format!("http://{}", self.gateway.address("admin"))
    }

    /// Restarts the gateway on the same ports with `failpoints` armed (empty: none).
    pub async fn restart_gateway(&mut self, failpoints: &str) {
        self.gateway.restart(&[("PASTEBIN_FAILPOINTS", failpoints)], &["gateway-http", "gateway-grpc", "admin"]).await;
    }

    /// The test's own identity towards K and P, when the cluster speaks TLS.
    fn client_tls(&self) -> Option<MutualTls> {
        self.tls.as_ref().map(|tls| tls.client.load())
    }

    pub fn key_client(&self, shard: usize) -> KeyClient {
        KeyClient::new(channel(&self.key_addresses[shard], self.client_tls().as_ref()).unwrap())
    }

    pub fn paste_client(&self, shard: usize) -> PasteClient {
        PasteClient::new(channel(&self.paste_addresses[shard], self.client_tls().as_ref()).unwrap())
    }

    /// A `pastebin sweeper` process over this cluster's shards and bucket
    /// (with the sweeper's TLS files when the cluster has them), plus `extra` flags.
    pub async fn start_sweeper(&self, extra: &[&str]) -> Process {
        self.start_sweeper_with(extra, &[]).await
    }

    /// [`Self::start_sweeper`] with `env` added (e.g. `PASTEBIN_FAILPOINTS`).
    pub async fn start_sweeper_with(&self, extra: &[&str], env: &[(&str, &str)]) -> Process {
        let mut args = vec!["sweeper".to_string()];
        args.extend(backend_flags(&self.key_addresses, &self.paste_addresses, &self.s3));
        args.extend(extra.iter().map(|a| a.to_string()));
        let env = [s3_credentials(), env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()].concat();
        Process::start(with_tls(args, self.tls.as_ref().map(|tls| &tls.sweeper)), env, &["admin"]).await
    }

    /// The cluster's slot map, as a gateway or sweeper would build it from the
    /// shards' answers (the cluster started them on these ranges; the
    /// shards that started owning nothing are the last ones).
    pub fn slot_map(&self) -> pastebin_shards::SlotMap {
        let (keys, pastes) = (self.key_addresses.len(), self.paste_addresses.len());
        let (owning_keys, owning_pastes) = self.started_owning;
        pastebin_shards::SlotMap::new(
            (0..keys)
                .map(|i| Shard {
                    address: self.key_addresses[i].clone(),
                    slots: Some(initial_slots(i, owning_keys)),
                    client: self.key_client(i),
                    colocated: false,
                })
                .collect(),
            (0..pastes)
                .map(|i| Shard {
                    address: self.paste_addresses[i].clone(),
                    slots: Some(initial_slots(i, owning_pastes)),
                    client: self.paste_client(i),
                    colocated: false,
                })
                .collect(),
        )
        .expect("the cluster's shards cover every slot once")
    }

    /// The gateway's object store (its bucket).
    pub async fn object_store(&self) -> std::sync::Arc<dyn pastebin_objects::ObjectStore> {
        std::sync::Arc::new(pastebin_objects::S3Store::connect(self.s3.clone()).await.expect("S3 client"))
    }

    /// A sweeper over this cluster's shards and bucket, in this process, on
    /// `clock`: tests move the clock instead of waiting a minute or a day.
    pub async fn sweeper(&self, clock: pastebin_core::ManualClock) -> pastebin_sweeper::Sweeper {
        self.sweeper_with(clock, pastebin_sweeper::SweeperSettings::default()).await
    }

    /// [`Self::sweeper`] with `settings`.
    pub async fn sweeper_with(
        &self,
        clock: pastebin_core::ManualClock,
        settings: pastebin_sweeper::SweeperSettings,
    ) -> pastebin_sweeper::Sweeper {
        pastebin_sweeper::Sweeper::new(self.slot_map(), self.object_store().await, std::sync::Arc::new(clock), settings)
    }

    /// Makes every pending key on every K shard `by` older, in K's own
    /// database: K judges a pending key's age on its own clock, so this is
    /// how a test lets "a minute pass" for the recovery threshold.
    pub async fn age_pending_keys(&self, by: Duration) {
        let sql = format!("UPDATE idempotency_keys SET created_at = created_at - {} WHERE state = $1", by.as_millis());
        for url in &self.key_database_urls {
            execute(url, &sql, "pending").await;
        }
    }

    /// Counts rows on every P shard's database directly: `state = 'live'`.
    pub async fn live_pastes(&self) -> i64 {
        let mut total = 0;
        for url in &self.paste_database_urls {
            total += scalar(url, "SELECT COUNT(*) FROM pastes WHERE state = 'live'").await;
        }
        total
    }

    /// Counts every key row on every K shard.
    pub async fn key_rows(&self) -> i64 {
        let mut total = 0;
        for url in &self.key_database_urls {
            total += scalar(url, "SELECT COUNT(*) FROM idempotency_keys").await;
        }
        total
    }
}

/// A short-lived connection to a shard database, PostgreSQL or SQLite.
async fn shard_database(url: &str) -> sqlx::AnyConnection {
    use sqlx::Connection;
    sqlx::any::install_default_drivers();
    sqlx::AnyConnection::connect(url).await.expect("connect to the shard database")
}

/// Every key row of one K shard database: (key, state, paste id, created_at ms).
pub async fn key_table(url: &str) -> Vec<(String, String, String, i64)> {
    let mut conn = shard_database(url).await;
    sqlx::query_as("SELECT key, state, paste_id, created_at FROM idempotency_keys ORDER BY created_at")
        .fetch_all(&mut conn)
        .await
        .expect("query")
}

/// Ids of the live paste rows of one P shard database.
pub async fn live_ids(url: &str) -> Vec<String> {
    let mut conn = shard_database(url).await;
    sqlx::query_scalar("SELECT id FROM pastes WHERE state = 'live'").fetch_all(&mut conn).await.expect("query")
}

/// Runs a one-value `SELECT` on a shard database with a short-lived connection.
pub async fn scalar(url: &str, sql: &'static str) -> i64 {
    let mut conn = shard_database(url).await;
    let value: i64 = sqlx::query_scalar(sql).fetch_one(&mut conn).await.expect("query");
    value
}

/// Runs a statement on a shard database (to simulate time passing, etc.).
pub async fn execute(url: &str, sql: &str, bind: &str) -> u64 {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect to the shard database");
    sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
        .bind(bind.to_owned())
        .execute(&mut conn)
        .await
        .expect("statement")
        .rows_affected()
}

/// A gateway's command line over `keys` and `pastes` (each a list of
/// addresses), objects in the directory `objects`, listeners on port 0.
pub fn gateway_args(keys: &[String], pastes: &[String], objects: &std::path::Path) -> Vec<String> {
    let objects = objects.to_str().expect("a UTF-8 temp path");
    let (keys, pastes) = (keys.join(","), pastes.join(","));
    let args = ["gateway", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--key-shards", &keys];
    let args = args.into_iter().chain(["--paste-shards", &pastes, "--objects-dir", objects]);
    args.map(str::to_owned).collect()
}
