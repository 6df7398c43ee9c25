//! `pastebin up`'s local attack surface (docs/security.md#local-sockets):
//! K and P hand out stored delete tokens to any caller, so they listen only
//! on private Unix sockets in the 0700 data directory, never on TCP; the
//! operator tools reach them there through `endpoints.json`. The gateway and
//! the sweeper call them in process, where a call is bounded as over the
//! network (docs/design.md#in-process-shards).

use std::{
    collections::BTreeSet,
    convert::Infallible,
    os::unix::fs::{FileTypeExt, PermissionsExt},
    path::Path,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use pastebin_core::SlotRange;
use pastebin_keys::KeyClient;
use pastebin_pastes::PasteClient;
use pastebin_runtime::grpc::{GrpcLimits, GrpcServer, ServerOptions};
use pastebin_shards::{Endpoints, Shard, SlotMap};
use pastebin_tests::{api::new_key, cluster::Process};
use reqwest::StatusCode;

fn up_args(data: &Path) -> Vec<String> {
    let mut args: Vec<String> = ["up", "--data-dir", data.to_str().expect("UTF-8 temp dir")].map(String::from).to_vec();
    for flag in ["--http", "--grpc", "--admin"] {
        args.extend([flag.to_owned(), "127.0.0.1:0".to_owned()]);
    }
    args
}

/// The ports `pid` listens on over TCP (IPv4 and IPv6), from `/proc`: the
/// socket inodes among its open files, matched against the kernel's tables.
fn tcp_listening_ports(pid: u32) -> BTreeSet<u16> {
    let inodes: BTreeSet<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("the process's open files are readable")
        .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
        .filter_map(|target| {
            let target = target.to_str()?;
            Some(target.strip_prefix("socket:[")?.strip_suffix(']')?.to_owned())
        })
        .collect();
    let mut ports = BTreeSet::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(state), Some(inode)) = (fields.get(1), fields.get(3), fields.get(9)) else {
                continue;
            };
            const LISTEN: &str = "0A";
            if *state == LISTEN && inodes.contains(*inode) {
                let port = local.rsplit(':').next().expect("address:port");
                ports.insert(u16::from_str_radix(port, 16).expect("a hex port"));
            }
        }
    }
    ports
}

fn port_of(address: &str) -> u16 {
    address.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("no port in {address}"))
}

#[tokio::test]
async fn up_serves_k_and_p_only_on_private_sockets_that_ctl_reaches() {
    let data = tempfile::tempdir().expect("temp dir");
    let parts = ["key-service", "paste-service", "gateway-http", "gateway-grpc", "admin"];
    let up = Process::start(up_args(data.path()), vec![], &parts).await;
    let http = format!("http://{}", up.address("gateway-http"));
    let created = pastebin_tests::api::create(&http, Some(&new_key()), "local only").await.expect("answers");
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);

    // Only the public listeners are on TCP: none of them reaches K or P.
    let public: BTreeSet<u16> = ["gateway-http", "gateway-grpc", "admin"].map(|p| port_of(up.address(p))).into();
    assert_eq!(tcp_listening_ports(up.pid()), public, "K and P have no TCP port");

    // endpoints.json names the sockets, which are private files in the data directory.
    let endpoints = Endpoints::read(data.path()).expect("up wrote endpoints.json");
    for (address, logged) in
        [(&endpoints.key_shards, up.address("key-service")), (&endpoints.paste_shards, up.address("paste-service"))]
    {
        assert_eq!(address.as_slice(), [logged.to_owned()]);
        let path = Path::new(logged.strip_prefix("unix:").unwrap_or_else(|| panic!("{logged} is a Unix socket")));
        assert!(path.starts_with(std::fs::canonicalize(data.path()).unwrap()) || path.starts_with(data.path()));
        let meta = std::fs::metadata(path).expect("the socket exists");
        assert!(meta.file_type().is_socket(), "{} is a socket", path.display());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600, "{} is private", path.display());
    }

    // ctl finds K and P through the data directory and talks to them there.
    let data_dir = data.path().to_str().unwrap();
    let output = std::process::Command::new(pastebin_tests::cluster::testbed_binary())
        .args(["ctl", "--data-dir", data_dir, "stats", "--json"])
        .env_remove("PASTEBIN_CONFIG")
        .output()
        .expect("ctl runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "ctl stats: {stdout}{}", String::from_utf8_lossy(&output.stderr));
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("stats --json is JSON");
    for kind in ["key_shards", "paste_shards"] {
        let shard = &report[kind][0];
        assert_eq!(shard["reachable"], true, "ctl reached the {kind} socket: {report}");
        assert!(shard["address"].as_str().is_some_and(|a| a.starts_with("unix:")), "{report}");
    }
}

/// A K (`PASTES = false`) or P (`true`) that takes every call and never
/// answers, as a shard whose group-commit writer is stuck would.
#[derive(Clone, Copy)]
struct Stalled<const PASTES: bool>;

impl tonic::server::NamedService for Stalled<false> {
    const NAME: &'static str = pastebin_keys::SERVICE_NAME;
}

impl tonic::server::NamedService for Stalled<true> {
    const NAME: &'static str = pastebin_pastes::SERVICE_NAME;
}

impl<const PASTES: bool> tonic::codegen::Service<http::Request<tonic::body::Body>> for Stalled<PASTES> {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = std::future::Pending<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Request<tonic::body::Body>) -> Self::Future {
        std::future::pending()
    }
}

/// A server of `service` as `up` makes K and P, with `call_timeout`.
async fn in_process<S>(service: S, name: &str, call_timeout: Duration) -> GrpcServer
where
    S: tonic::codegen::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let described = pastebin_runtime::grpc::Described { services: &[name], descriptors: &[] };
    let options = ServerOptions { limits: GrpcLimits { call_timeout, ..GrpcLimits::default() }, ..Default::default() };
    GrpcServer::new(tonic::service::Routes::new(service), described, options).await.expect("a server of the stub")
}

/// Far longer than the timeouts a call here should end at: a call still
/// running then was not bounded by them.
const HUNG: Duration = Duration::from_secs(90);

#[tokio::test]
async fn an_in_process_call_to_a_stalled_shard_ends_at_the_call_timeout() {
    // A call that names no deadline of its own ends at the server's limit,
    // as tonic's server ends it over the network: uncertain, not hung.
    let keys = in_process(Stalled::<false>, pastebin_keys::SERVICE_NAME, Duration::from_secs(1)).await;
    let stats = tokio::time::timeout(HUNG, KeyClient::new(keys.in_process()).pending_stats()).await;
    let error = stats.expect("the call ended at the server's limit").expect_err("a stalled K answers nothing");
    assert!(matches!(error, pastebin_runtime::grpc::CallError::Uncertain(_)), "{error:?}");
    assert_eq!(error.status().code(), tonic::Code::Cancelled, "{error:?}");

    // With a server limit past HUNG, only the caller's `grpc-timeout` can end a call in time.
    let patient = Duration::from_secs(3600);
    let keys = in_process(Stalled::<false>, pastebin_keys::SERVICE_NAME, patient).await;
    let pastes = in_process(Stalled::<true>, pastebin_pastes::SERVICE_NAME, patient).await;
    // A sweeper round gives each call its own deadline: the round fails
    // after it instead of waiting on the stalled shards forever.
    let slots = SlotMap::new(
        vec![Shard {
            address: "in process".into(),
            slots: Some(SlotRange::ALL.into()),
            client: KeyClient::new(keys.in_process()),
            colocated: false,
        }],
        vec![Shard {
            address: "in process".into(),
            slots: Some(SlotRange::ALL.into()),
            client: PasteClient::new(pastes.in_process()),
            colocated: false,
        }],
    )
    .expect("one shard of each kind owns every slot");
    let objects = tempfile::tempdir().expect("temp dir");
    let settings = pastebin_sweeper::SweeperSettings { call_timeout: Duration::from_secs(1), ..Default::default() };
    let sweeper = pastebin_sweeper::Sweeper::new(
        slots,
        Arc::new(pastebin_objects::LocalDirStore::open(objects.path()).expect("objects directory")),
        Arc::new(pastebin_core::ManualClock::starting_at(chrono::Utc::now())),
        settings,
    );
    let report =
        tokio::time::timeout(HUNG, sweeper.round(false)).await.expect("the round's calls ended at its call timeout");
    assert_eq!(report.recovery.key_shards_unreachable, 1, "{report:?}");
    assert!(report.failure().is_some_and(|why| why.contains("key shards unreachable")), "{report:?}");
}

/// `ctl` beside an `up` that is not running says so, instead of a table of
/// unknowns and a level it cannot read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_against_a_stopped_up_asks_whether_it_is_running() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut up = Process::start(up_args(&data), vec![], &["gateway-http"]).await;
    up.signal("TERM");
    assert!(up.wait_exit(Duration::from_secs(30)).await.is_some(), "up stops at SIGTERM");

    let data_dir = data.to_str().unwrap();
    for command in ["stats", "pending"] {
        let ran = pastebin_tests::cluster::run_to_exit(&["ctl", command, "--data-dir", data_dir]).await;
        let (stdout, stderr) = (String::from_utf8_lossy(&ran.stdout), String::from_utf8_lossy(&ran.stderr));
        assert_eq!(ran.status.code(), Some(3), "unreachable: {stdout}{stderr}");
        assert!(stderr.contains("is `pastebin up` running?"), "ctl {command}: {stderr}");
        assert!(!stdout.contains("level: unknown") && !stdout.contains("no pending keys"), "ctl {command}: {stdout}");
    }
}

/// `up` and `gateway` on every interface without `--public-url` would hand
/// out `http://0.0.0.0:PORT/…` links nobody can open: they refuse to start,
/// naming the flag, before anything is written.
#[tokio::test]
async fn listening_on_every_interface_without_a_public_url_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_dir = data.to_str().unwrap();
    for http in ["0.0.0.0:0", "[::]:0"] {
        let ran = pastebin_tests::cluster::run_to_exit(&["up", "--data-dir", data_dir, "--http", http]).await;
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert!(!ran.status.success(), "up --http {http} without --public-url must refuse: {stderr}");
        assert!(stderr.contains("--public-url"), "the refusal names the flag: {stderr}");
        assert!(!data.exists(), "a refused start leaves no data directory behind");
        let ran =
            pastebin_tests::cluster::run_to_exit(&["gateway", "--http", http, "--paste-shards", "127.0.0.1:1"]).await;
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert!(!ran.status.success() && stderr.contains("--public-url"), "gateway --http {http}: {stderr}");
    }
    // With the flag, the same listener starts and its links carry the URL given.
    let mut args = up_args(&data);
    args.splice(3..5, ["--http".to_owned(), "0.0.0.0:0".to_owned()]);
    args.extend(["--public-url".to_owned(), "https://paste.example.com".to_owned()]);
    let up = Process::start(args, vec![], &["gateway-http"]).await;
    let port = port_of(up.address("gateway-http"));
    let created = pastebin_tests::api::create(&format!("http://127.0.0.1:{port}"), Some(&new_key()), "linked")
        .await
        .expect("answers");
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert!(created.body.contains("https://paste.example.com/"), "{}", created.body);
}
