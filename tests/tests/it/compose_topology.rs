//! `deploy/compose/compose.yaml` run as processes: every `pastebin` service of
//! the Compose file is started with its own command line and environment,
//! only its addresses moved to loopback, its databases to the test
//! PostgreSQL, its bucket to SeaweedFS, its etcd members to Debian's etcd and its
//! certificates to ones made by the Compose file's own `make-certs.sh`. The
//! deployment a new user starts with one command must come up ready, hand its
//! ranges to etcd, and serve a paste through both gateways.

use std::{collections::BTreeMap, path::Path, process::Command, time::Duration};

use pastebin_tests::{
    api,
    cluster::Process,
    etcd::{etcdctl_binary, Etcd, EtcdTls, MemberCommand},
    tls::TlsFiles,
};
use serde_yaml::Value;

/// One `pastebin` service of the Compose file.
struct Service {
    name: String,
    command: Vec<String>,
    environment: BTreeMap<String, String>,
}

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is inside the workspace")
}

/// `${NAME:-default}` as Compose reads it with NAME unset.
fn interpolated(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}').expect("closed ${") + start;
        let inner = &rest[start + 2..end];
        out.push_str(inner.split_once(":-").map_or("", |(_, default)| default));
        rest = &rest[end + 1..];
    }
    out + rest
}

fn text(value: &Value) -> String {
    match value {
        Value::String(text) => interpolated(text),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

/// The Compose file, its `<<` merges applied.
fn compose_file() -> Value {
    let compose = std::fs::read_to_string(workspace().join("deploy/compose/compose.yaml")).unwrap();
    let mut compose: Value = serde_yaml::from_str(&compose).unwrap();
    compose.apply_merge().unwrap();
    compose
}

fn pastebin_services() -> Vec<Service> {
    let compose = compose_file();
    let services = compose["services"].as_mapping().expect("services");
    let mut found = Vec::new();
    for (name, service) in services {
        let mut service = service.clone();
        service.apply_merge().unwrap();
        if !service["image"].as_str().is_some_and(|image| image.starts_with("pastebin")) {
            continue;
        }
        let mut environment = service["environment"].clone();
        environment.apply_merge().unwrap();
        found.push(Service {
            name: name.as_str().unwrap().to_owned(),
            command: service["command"].as_sequence().expect("a command list").iter().map(text).collect(),
            environment: environment
                .as_mapping()
                .expect("an environment map")
                .iter()
                .map(|(name, value)| (name.as_str().unwrap().to_owned(), text(value)))
                .collect(),
        });
    }
    found
}

/// The Compose file's certificates, made by its own script.
fn certificates(dir: &Path) {
    let script = workspace().join("deploy/compose/make-certs.sh");
    let made = Command::new("sh").arg(script).arg(dir).output().expect("sh runs");
    assert!(made.status.success(), "make-certs.sh failed: {}", String::from_utf8_lossy(&made.stderr));
}

/// Rewrites what only makes sense inside Compose's network.
struct Loopback {
    /// Compose host name (`key-0`) → the address its process listens on.
    hosts: BTreeMap<String, String>,
    /// `etcd-N:2379` → where member N's clients connect.
    etcd: Vec<(String, String)>,
    certs: String,
    s3_endpoint: String,
    bucket: String,
}

impl Loopback {
    fn arg(&self, arg: &str, service: &str) -> String {
        let arg = arg.replace("/etc/pastebin/tls", &self.certs);
        match arg.split_once('=') {
            // A shard listens where it advertises, picked before it starts.
            Some((flag @ ("--listen" | "--advertise"), _)) if self.hosts.contains_key(service) => {
                format!("{flag}={}", self.hosts[service])
            }
            Some((flag @ ("--listen" | "--http" | "--grpc"), _)) => format!("{flag}=127.0.0.1:0"),
            _ => arg,
        }
    }

    fn variable(&self, name: &str, value: &str) -> String {
        match name {
            "PASTEBIN_ADMIN" => "127.0.0.1:0".to_owned(),
            "PASTEBIN_S3_ENDPOINT" => self.s3_endpoint.clone(),
            "PASTEBIN_S3_BUCKET" => self.bucket.clone(),
            "PASTEBIN_KEY_SHARDS" | "PASTEBIN_PASTE_SHARDS" => value
                .split(',')
                .map(|address| {
                    let host = address.split(':').next().unwrap();
                    self.hosts.get(host).unwrap_or_else(|| panic!("{host} is not a shard of the Compose file")).clone()
                })
                .collect::<Vec<_>>()
                .join(","),
            "PASTEBIN_TOPOLOGY" => {
                self.etcd.iter().fold(value.to_owned(), |value, (member, moved)| value.replace(member, moved))
            }
            _ => value.replace("/etc/pastebin/tls", &self.certs),
        }
    }

    /// A service's command line and environment, moved to loopback.
    fn command(&self, service: &Service) -> (Vec<String>, Vec<(String, String)>) {
        let args = service.command.iter().map(|arg| self.arg(arg, &service.name)).collect();
        let env = service.environment.iter().map(|(name, value)| (name.clone(), self.variable(name, value))).collect();
        (args, env)
    }

    /// Runs a one-shot service (`ctl …`) to its end: what it printed, and whether it succeeded.
    async fn run(&self, service: &Service) -> (bool, String) {
        let (args, env) = self.command(service);
        let ran = tokio::process::Command::new(pastebin_tests::cluster::testbed_binary())
            .args(&args)
            .envs(env)
            .kill_on_drop(true)
            .output();
        let ran = tokio::time::timeout(Duration::from_secs(120), ran).await.expect("ends by itself").unwrap();
        (
            ran.status.success(),
            format!("{}{}", String::from_utf8_lossy(&ran.stdout), String::from_utf8_lossy(&ran.stderr)),
        )
    }

    async fn start(&self, service: &Service, database_url: Option<String>) -> Process {
        let (args, mut env) = self.command(service);
        if let Some(url) = database_url {
            env.retain(|(name, _)| name != "PASTEBIN_DATABASE_URL");
            env.push(("PASTEBIN_DATABASE_URL".to_owned(), url));
        }
        let expect: &[&str] = match args[0].as_str() {
            "key-service" => &["key-service", "admin"],
            "paste-service" => &["paste-service", "admin"],
            "gateway" => &["gateway-http", "gateway-grpc", "admin"],
            _ => &["admin"],
        };
        Process::start(args, env, expect).await
    }
}

async fn ready(service: &str, admin: &str) {
    let url = format!("http://{admin}/readyz");
    for _ in 0..600 {
        if reqwest::get(&url).await.is_ok_and(|answer| answer.status() == 200) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{service} never became ready: {:?}", reqwest::get(&url).await.map(|a| a.status()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_compose_deployment_runs_as_processes_and_serves_through_both_gateways() {
    let services = pastebin_services();
    let kinds = |kind: &str| services.iter().filter(|s| s.command[0] == kind).count();
    assert_eq!((kinds("key-service"), kinds("paste-service")), (2, 2), "two K and two P shards");
    assert_eq!((kinds("gateway"), kinds("sweeper")), (2, 1), "two gateways, one sweeper");
    let databases: std::collections::BTreeSet<_> =
        services.iter().filter_map(|s| s.environment.get("PASTEBIN_DATABASE_URL")).collect();
    assert_eq!(databases.len(), 4, "one database per shard: {databases:?}");

    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path());
    let ComposeEtcd { etcd, moved } = ComposeEtcd::start(certs.path()).await;
    let s3 = pastebin_tests::s3::fresh_bucket().await;
    let shards: Vec<&Service> = services.iter().filter(|s| s.command[0].ends_with("-service")).collect();
    let ports = pastebin_tests::seaweedfs::free_ports::<4>();
    let loopback = Loopback {
        hosts: shards.iter().zip(ports).map(|(s, port)| (s.name.clone(), format!("127.0.0.1:{port}"))).collect(),
        etcd: moved.members.iter().map(|(name, _)| format!("{name}:2379")).zip(etcd.endpoints()).collect(),
        certs: certs.path().to_str().unwrap().to_owned(),
        s3_endpoint: s3.endpoint.clone().unwrap(),
        bucket: s3.bucket.clone(),
    };

    let mut running = Vec::new();
    for service in &shards {
        let url = pastebin_tests::postgres::fresh_database_url().await;
        running.push((service.name.clone(), loopback.start(service, Some(url)).await));
    }
    // The one-shot services, in the order Compose runs them: the shards' ranges to etcd.
    for service in services.iter().filter(|s| s.command[0] == "ctl") {
        let (ok, output) = loopback.run(service).await;
        assert!(ok, "{}: {output}", service.name);
        assert!(output.contains("every key shard confirmed its grant"), "{output}");
        assert!(output.contains("every paste shard confirmed its grant"), "{output}");
    }
    for service in services.iter().filter(|s| !s.command[0].ends_with("-service") && s.command[0] != "ctl") {
        running.push((service.name.clone(), loopback.start(service, None).await));
    }
    for (name, process) in &running {
        ready(name, process.address("admin")).await;
    }

    let gateways: Vec<String> = running
        .iter()
        .filter_map(|(_, process)| process.addresses.get("gateway-http").map(|a| format!("http://{a}")))
        .collect();
    for content in ["through the first", "and the second"] {
        let created = api::create(&gateways[0], Some(&api::new_key()), content).await.unwrap();
        assert_eq!(created.status, 201, "{}", created.body);
        let id = created.json()["id"].as_str().unwrap().to_owned();
        let read = api::get(&gateways[1], &id).await;
        assert_eq!(read.status, 200, "{}", read.body);
        assert_eq!(read.json()["content"], content);
    }
}

/// The admin listener, Prometheus and Grafana are for the host's operator:
/// nothing is published beyond loopback, and Grafana has no anonymous viewer
/// and no admin password but the one the operator sets.
#[test]
fn compose_publishes_only_on_loopback_and_grafana_needs_a_login() {
    let compose = compose_file();
    let services = compose["services"].as_mapping().expect("services");
    let mut published = 0;
    for (name, service) in services {
        for port in service["ports"].as_sequence().into_iter().flatten() {
            let port = port.as_str().unwrap_or_else(|| panic!("{name:?}: write ports as \"HOST_IP:HOST:CONTAINER\""));
            assert!(port.starts_with("127.0.0.1:"), "{name:?} publishes {port} beyond loopback");
            published += 1;
        }
    }
    assert!(published >= 7, "the gateways, the sweeper, Prometheus and Grafana are still published");

    let grafana = &compose["services"]["grafana"]["environment"];
    assert_eq!(grafana["GF_AUTH_ANONYMOUS_ENABLED"].as_str(), Some("false"), "no anonymous viewer");
    let password = grafana["GF_SECURITY_ADMIN_PASSWORD"].as_str().expect("the admin password is set");
    assert!(
        password.starts_with("${GRAFANA_ADMIN_PASSWORD:?"),
        "taken from the operator's environment, with no default: {password}"
    );

    // The links the gateways hand out come from the operator's environment (.env).
    for gateway in ["gateway-1", "gateway-2"] {
        let command = compose["services"][gateway]["command"].as_sequence().expect("a command list");
        let public_url = command.iter().filter_map(Value::as_str).find(|arg| arg.starts_with("--public-url="));
        assert!(
            public_url.is_some_and(|arg| arg.starts_with("--public-url=${PASTEBIN_PUBLIC_URL:-http://localhost:")),
            "{gateway}: {public_url:?}"
        );
    }
}

/// The Compose file's etcd members, run as processes with Debian's etcd on their own
/// command lines: only their addresses moved to loopback ports, their data to a temp
/// directory and their certificates to ones `make-certs.sh` made.
struct ComposeEtcd {
    etcd: Etcd,
    moved: MovedEtcd,
}

/// Where the Compose file's etcd members are moved.
struct MovedEtcd {
    /// Each member's name and command line, as the Compose file has them.
    members: Vec<(String, Vec<String>)>,
    /// Each member's client and peer port.
    ports: Vec<(u16, u16)>,
    certs: String,
    data: String,
}

impl ComposeEtcd {
    async fn start(certs: &Path) -> ComposeEtcd {
        let compose = compose_file();
        let members: Vec<(String, Vec<String>)> = compose["services"]
            .as_mapping()
            .expect("services")
            .iter()
            .filter(|(_, service)| service["image"].as_str().is_some_and(|image| image.contains("/etcd:")))
            .map(|(name, service)| {
                let command: Vec<String> =
                    service["command"].as_sequence().expect("a command list").iter().map(text).collect();
                assert_eq!(command[0], "etcd", "{name:?} runs etcd");
                (name.as_str().unwrap().to_owned(), command[1..].to_vec())
            })
            .collect();
        assert_eq!(members.len(), 3, "three etcd members");
        let free = pastebin_tests::seaweedfs::free_ports::<6>();
        let dir = tempfile::Builder::new().prefix("pastebin-compose-etcd-").tempdir().unwrap();
        let moved = MovedEtcd {
            ports: (0..3).map(|index| (free[2 * index], free[2 * index + 1])).collect(),
            certs: certs.to_str().unwrap().to_owned(),
            data: dir.path().to_str().unwrap().to_owned(),
            members,
        };
        let commands = (0..3)
            .map(|index| MemberCommand {
                name: moved.members[index].0.clone(),
                client_port: moved.ports[index].0,
                args: moved.members[index].1.iter().map(|arg| moved.arg(arg, index)).collect(),
            })
            .collect();
        let files = |name: &str| TlsFiles {
            cert: certs.join(format!("{name}.crt")),
            key: certs.join(format!("{name}.key")),
            ca: certs.join("etcd-ca.crt"),
        };
        // The test calls etcd as every part does, with etcd-client.crt from etcd's own CA.
        let tls = EtcdTls { member: files("etcd"), client: files("etcd-client") };
        let etcd = Etcd::start_commands(dir, commands, Some(tls)).await.unwrap_or_else(|e| panic!("{e}"));
        ComposeEtcd { etcd, moved }
    }
}

impl MovedEtcd {
    /// `arg` of member `member`'s command line, moved: `etcd-N:2379` and `etcd-N:2380` to
    /// member N's loopback ports, the certificates and the data directory to the test's.
    fn arg(&self, arg: &str, member: usize) -> String {
        let mut arg = arg.replace("/etc/etcd/tls", &self.certs);
        arg = arg.replace("/var/lib/etcd", &format!("{}/{}", self.data, self.members[member].0));
        arg = arg.replace("0.0.0.0:2379", &format!("127.0.0.1:{}", self.ports[member].0));
        arg = arg.replace("0.0.0.0:2380", &format!("127.0.0.1:{}", self.ports[member].1));
        for ((name, _), (client, peer)) in self.members.iter().zip(&self.ports) {
            arg = arg.replace(&format!("{name}:2379"), &format!("127.0.0.1:{client}"));
            arg = arg.replace(&format!("{name}:2380"), &format!("127.0.0.1:{peer}"));
        }
        arg
    }
}

/// The Compose file's three etcd members form one cluster over mutual TLS between peers
/// and with clients, the Compose health check passes on each, and the parts' etcd
/// certificate may write while their K and P one may not: etcd has a CA of its own.
#[tokio::test]
async fn the_compose_etcd_members_form_one_cluster_over_mutual_tls() {
    let certs = tempfile::tempdir().unwrap();
    certificates(certs.path());
    let ComposeEtcd { etcd, moved } = ComposeEtcd::start(certs.path()).await;

    let mut first = compose_file()["services"][moved.members[0].0.as_str()].clone();
    first.apply_merge().unwrap();
    let health: Vec<String> =
        first["healthcheck"]["test"].as_sequence().expect("a health check command").iter().map(text).collect();
    assert_eq!(health[..2], ["CMD", "etcdctl"]);
    for (index, endpoint) in etcd.endpoints().iter().enumerate() {
        let args: Vec<String> =
            health[2..].iter().map(|arg| moved.arg(arg, index).replace("127.0.0.1:2379", endpoint)).collect();
        let checked = Command::new(etcdctl_binary()).args(&args).output().expect("etcdctl runs");
        assert!(checked.status.success(), "the health check fails on {endpoint}: {checked:?}\n{}", etcd.logs());
    }
    let put = etcd.etcdctl(&["put", "compose/probe", "written"]).await;
    assert!(put.status.success(), "etcd-client.crt writes: {put:?}");
    let client = TlsFiles {
        cert: certs.path().join("client.crt"),
        key: certs.path().join("client.key"),
        ca: certs.path().join("etcd-ca.crt"),
    };
    let refused = etcd.etcdctl_as(Some(&client), &etcd.endpoints()[0], &["put", "compose/probe", "no"]).await;
    assert!(!refused.status.success(), "a certificate K and P accept is not etcd's: {refused:?}");
    let listed = etcd.etcdctl(&["member", "list"]).await;
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert_eq!(listed.lines().count(), 3, "one cluster of three: {listed}");
    for (name, _) in &moved.members {
        assert!(listed.contains(&format!(", started, {name}, https://")), "{name} joined over TLS: {listed}");
    }
}
