//! The `pastebin` command: parses flags (each also a `PASTEBIN_*` environment
//! variable), sets up tracing, and starts the part asked for. Each part's
//! logic lives in its own crate; this is only wiring.

use std::{net::SocketAddr, sync::Arc};

mod config_file;
mod flags;
mod healthcheck;
mod locks;
mod secret;
mod up;

use anyhow::Context;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use pastebin_admin::AdminState;
use pastebin_core::{Clock, OwnedSlots, SystemClock};
use pastebin_proto::shard::v1::ShardKind;
use pastebin_runtime::{
    db, durability,
    grpc::{GrpcLimits, GrpcServer, ServerOptions},
    help, readiness, shutdown_signal, telemetry,
    tls::{ClientAuth, MutualTls, PublicTls, PublicTlsArgs, TlsArgs, TopologyTlsArgs},
    unless_stopped, with_drain_timeout,
};
use pastebin_shards::{Patience, SlotMap};
use pastebin_slots::{
    granted::Granted,
    shard_slots::{Resharding, ShardSlots},
};
use tokio::net::TcpListener;

#[derive(Debug, Parser)]
#[command(name = "pastebin", version, about = "The pastebin that does not double-create")]
pub struct Cli {
    /// Log lines as `text` or `json` (one object per line). Spans are exported by OTLP
    /// when OTEL_EXPORTER_OTLP_ENDPOINT is set.
    #[arg(long, global = true, env = "PASTEBIN_LOG_FORMAT", default_value = "text", help_heading = help::TELEMETRY)]
    pub log_format: telemetry::LogFormat,
    /// Seconds a serving part may take to drain after SIGTERM or SIGINT before it
    /// stops with work in flight (docs/operations.md#stopping).
    #[arg(long, global = true, env = "PASTEBIN_DRAIN_TIMEOUT_SECS", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..=3600), help_heading = help::TELEMETRY)]
    pub drain_timeout_secs: u64,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a key service (shard K: idempotency records) over gRPC.
    KeyService(KeyServiceArgs),
    /// Run a paste service (shard P: paste rows and tombstones) over gRPC.
    PasteService(ShardArgs),
    /// Run a colocated shard: K and P for the same slots on one database,
    /// each create one commit (docs/design.md#the-colocated-create).
    ColocatedShard(KeyServiceArgs),
    /// Run the gateway: the create saga, reads and deletes, over HTTP and gRPC.
    // Boxed: its flags outweigh every other part's.
    Gateway(Box<GatewayCommand>),
    /// Run the sweeper: recovery of stale pending keys, key retention, paste
    /// expiry and the object reaper. Several may run at once.
    Sweeper(SweeperCommand),
    /// Run everything in one process on the embedded default: SQLite shards,
    /// a local object directory, the gateway. K and P listen only on Unix sockets in the data directory.
    // Boxed, like the gateway's: its flags include the gateway's.
    Up(Box<up::UpArgs>),
    /// Load generator and benchmark harnesses (see BENCHMARKS.md).
    Bench(pastebin_bench::BenchArgs),
    /// Operator tools: pending, recover, reconcile, repair, stats, tokens, reshard, topology, reports, takedown, certs, backup, restore.
    Ctl(pastebin_ctl::CtlArgs),
    /// Ask an admin listener whether its process is alive (`/healthz`) or ready (`/readyz`): exit 0 if so.
    Healthcheck(healthcheck::HealthcheckArgs),
    /// Paste, list and delete your pastes: a client that never double-creates.
    #[command(flatten)]
    Client(pastebin_client::ClientCommand),
}

/// Fields in `--help` order: what a part cannot run without comes first.
#[derive(Debug, clap::Args)]
pub struct SweeperCommand {
    #[command(flatten)]
    pub shards: pastebin_shards::ShardAddresses,
    #[command(flatten)]
    pub objects: pastebin_shards::ObjectStoreArgs,
    #[command(flatten)]
    pub sweeper: flags::SweeperArgs,
    /// The sweeper's identity towards K and P.
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub topology_tls: TopologyTlsArgs,
    #[command(flatten)]
    pub admin: flags::AdminArgs,
}

/// Fields in `--help` order: what a part cannot run without comes first.
#[derive(Debug, clap::Args)]
pub struct GatewayCommand {
    #[command(flatten)]
    pub shards: pastebin_shards::ShardAddresses,
    #[command(flatten)]
    pub objects: pastebin_shards::ObjectStoreArgs,
    #[command(flatten)]
    pub gateway: flags::GatewayArgs,
    /// The gateway's identity towards K and P (a client certificate).
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub topology_tls: TopologyTlsArgs,
    /// The public gRPC listener's own certificate (a server certificate).
    #[command(flatten)]
    pub public_tls: PublicTlsArgs,
    /// Whether the public gRPC listener asks its clients for a certificate
    /// signed by --tls-ca (needs --public-tls-cert, --public-tls-key and the --tls-* flags).
    #[arg(long, env = "PASTEBIN_TLS_CLIENT_AUTH", value_enum, default_value_t = ClientAuth::Off,
          help_heading = help::TLS)]
    pub tls_client_auth: ClientAuth,
    #[command(flatten)]
    pub admin: flags::AdminArgs,
}

#[derive(Debug, clap::Args)]
#[command(next_help_heading = help::DATABASE)]
pub struct ShardArgs {
    /// postgres://... or sqlite:path (created if missing). Migrations run at start-up.
    /// Several PostgreSQL servers, libpq's way, fail over without a proxy:
    /// postgres://u@db1:5432,db2:5432/keys?target_session_attrs=read-write
    #[arg(long, env = "PASTEBIN_DATABASE_URL", hide_env_values = true)]
    pub database_url: secret::Secret,
    /// The slots this shard owns, FIRST-LAST inclusive, or `none` for a new
    /// shard that waits for `pastebin ctl reshard` to move slots to it.
    /// Stored in its database on first start (every slot if not given);
    /// later, the stored range is the truth: leave this out to use it, and a
    /// start with another range refuses.
    #[arg(long, env = "PASTEBIN_SLOTS")]
    pub slots: Option<OwnedSlots>,
    /// Replace the stored slot range with --slots, without moving any row:
    /// disaster recovery only (docs/operations.md, "Moving slots"; moves are
    /// `pastebin ctl reshard`). Deliberately a flag only, with no environment
    /// variable, so it cannot stay set by accident.
    #[arg(long)]
    pub reshard: bool,
    /// The etcd members that decide which slots this shard owns
    /// (docs/design.md#ownership-on-etcd): etcd://HOST:PORT[,HOST:PORT...][/PREFIX].
    /// Needed by a deployment with more than one shard of a kind. Once
    /// etcd holds a topology for this kind, --slots is refused: etcd says.
    /// Over mutual TLS with this shard's --tls-* files when given.
    #[arg(long, env = "PASTEBIN_TOPOLOGY", requires = "advertise", help_heading = help::SHARDS)]
    pub topology: Option<pastebin_topology::TopologyUrl>,
    /// This shard's address as gateways, sweepers and ctl dial it: its name
    /// in the topology (as listed in --key-shards or --paste-shards).
    #[arg(long, env = "PASTEBIN_ADVERTISE", requires = "topology", help_heading = help::SHARDS)]
    pub advertise: Option<String>,
    /// Database connections in the pool.
    #[arg(long, env = "PASTEBIN_DB_CONNECTIONS", default_value_t = 16)]
    pub db_connections: u32,
    /// Refuse to start unless every commit waits for a synchronous standby
    /// (PostgreSQL's synchronous_standby_names and synchronous_commit), so an
    /// acknowledged commit survives the loss of the database server.
    #[arg(long, env = "PASTEBIN_REQUIRE_SYNCHRONOUS_STANDBY")]
    pub require_synchronous_standby: bool,
    /// Address for the gRPC server (port 0 picks a free one; the chosen one is logged).
    #[arg(long, env = "PASTEBIN_LISTEN", default_value = "127.0.0.1:50061", help_heading = help::LISTENERS,
          value_parser = flags::listen_address)]
    pub listen: SocketAddr,
    /// Answer gRPC reflection (off by default: the service is internal).
    #[arg(long, env = "PASTEBIN_REFLECTION", help_heading = help::LISTENERS)]
    pub reflection: bool,
    #[command(flatten)]
    pub limits: flags::LimitArgs,
    /// Serve TLS only, to clients with a certificate signed by --tls-ca.
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub topology_tls: TopologyTlsArgs,
    #[command(flatten)]
    pub admin: flags::AdminArgs,
}

/// A key service's flags: a shard's, and what only K has.
#[derive(Debug, clap::Args)]
pub struct KeyServiceArgs {
    #[command(flatten)]
    pub shard: ShardArgs,
    #[command(flatten)]
    pub lost_commits: flags::LostCommitsArgs,
}

/// How `main` ends: an error as one line on stderr (its causes joined with
/// `: `) and exit code 1, never as a backtrace, whatever `RUST_BACKTRACE`
/// says. An error that reaches here is a person's mistake or the world's (a
/// second `up` on one data directory, a port in use, contradictory flags),
/// and its line says what to do; returning it from `main` would print
/// anyhow's captured backtrace after it.
pub fn ended(result: anyhow::Result<()>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Parses the process's arguments and runs: all `main` does.
pub fn main_from_args() -> anyhow::Result<()> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    config_file::load_from_env(&Cli::command(), &args)?;
    let matches = command().get_matches_from(args);
    run(Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit()))
}

/// Under every part's `--help`: where settings come from besides flags.
const SETTINGS_SOURCES: &str = "Every flag is also the PASTEBIN_* environment variable its help names. \
PASTEBIN_CONFIG names a settings file for one part or all (TOML, or PASTEBIN_NAME=value lines); \
flags win over the environment, the environment over the file (docs/deployment.md#settings).";

/// The parts that drain after a signal: `--drain-timeout-secs` is theirs.
const DRAINING: [&str; 6] = ["key-service", "paste-service", "colocated-shard", "gateway", "sweeper", "up"];

/// [`Cli`]'s command line, with the global flags that do nothing for a
/// command hidden from its `--help` (still accepted, as every part reads
/// one `PASTEBIN_CONFIG` file and environment): `--drain-timeout-secs`
/// outside the serving parts, the object-store flags in the ctl commands
/// that never read the object store.
fn command() -> clap::Command {
    let mut cli = Cli::command();
    // Propagates the global flags into every command first, so that each
    // command's own copy can be hidden.
    cli.build();
    for part in cli.get_subcommands_mut().filter(|part| !DRAINING.contains(&part.get_name())) {
        hide_everywhere(part, "drain_timeout_secs");
        if part.get_name() == "ctl" {
            pastebin_ctl::hide_idle_flags(part);
        }
    }
    let names: Vec<String> = cli.get_subcommands().map(|part| part.get_name().to_owned()).collect();
    names.iter().fold(cli.after_help(SETTINGS_SOURCES), |cli, name| {
        cli.mut_subcommand(name, |part| part.after_help(SETTINGS_SOURCES))
    })
}

/// Hides flag `id` from the help of `command` and of all its commands.
fn hide_everywhere(command: &mut clap::Command, id: &str) {
    pastebin_runtime::help::hide_flags(command, |flag| flag == id);
    for inner in command.get_subcommands_mut() {
        hide_everywhere(inner, id);
    }
}

/// The part's name in logs and traces: `pastebin-<subcommand>`.
fn service_name(command: &Command) -> &'static str {
    match command {
        Command::KeyService(_) => "pastebin-key-service",
        Command::PasteService(_) => "pastebin-paste-service",
        Command::ColocatedShard(_) => "pastebin-colocated-shard",
        Command::Gateway(_) => "pastebin-gateway",
        Command::Sweeper(_) => "pastebin-sweeper",
        Command::Up(_) => "pastebin-up",
        Command::Bench(_) => "pastebin-bench",
        Command::Ctl(_) => "pastebin-ctl",
        Command::Healthcheck(_) => "pastebin-healthcheck",
        Command::Client(_) => "pastebin-client",
    }
}

pub fn run(cli: Cli) -> anyhow::Result<()> {
    // Dropped when the part has drained: the last spans are sent then.
    let _telemetry = telemetry::init(service_name(&cli.command), cli.log_format);
    pastebin_runtime::metrics::install();
    let runtime = tokio::runtime::Runtime::new().context("cannot start the tokio runtime")?;
    let drain_timeout = std::time::Duration::from_secs(cli.drain_timeout_secs);
    let ended = runtime.block_on(async move {
        match cli.command {
            Command::KeyService(args) => with_drain_timeout(run_key_service(args), drain_timeout).await,
            Command::PasteService(args) => with_drain_timeout(run_paste_service(args), drain_timeout).await,
            Command::ColocatedShard(args) => with_drain_timeout(run_colocated_shard(args), drain_timeout).await,
            Command::Gateway(args) => with_drain_timeout(run_gateway(*args), drain_timeout).await,
            Command::Sweeper(args) => with_drain_timeout(run_sweeper(args), drain_timeout).await,
            Command::Up(args) => with_drain_timeout(up::run(*args), drain_timeout).await,
            Command::Bench(args) => pastebin_bench::run(args).await,
            Command::Ctl(args) => match pastebin_ctl::run(args).await? {
                0 => Ok(()),
                code => std::process::exit(code),
            },
            Command::Healthcheck(args) => match healthcheck::run(args).await? {
                0 => Ok(()),
                code => std::process::exit(code),
            },
            Command::Client(command) => match pastebin_client::run(command).await? {
                0 => Ok(()),
                code => std::process::exit(code),
            },
        }
    });
    // A blocking task stuck past the drain (a write to a frozen disk) must
    // not hold the process: the runtime waits for it only briefly.
    runtime.shutdown_timeout(RUNTIME_SHUTDOWN);
    ended
}

/// How long a stopping process waits for its blocking tasks.
const RUNTIME_SHUTDOWN: std::time::Duration = std::time::Duration::from_secs(1);

/// Keeps the gateway's free-space reading fresh until the process stops.
pub(crate) async fn watch_storage(gateway: &pastebin_gateway::Gateway) -> anyhow::Result<()> {
    tokio::select! {
        () = gateway.watch_storage() => {}
        () = shutdown_signal() => {}
    }
    Ok(())
}

/// Listens on `address`, which `flag` set: a failure names the flag, and
/// for an address in use says what to do.
pub(crate) async fn bind(address: SocketAddr, what: &str, flag: &str) -> anyhow::Result<TcpListener> {
    let listener = TcpListener::bind(address).await.map_err(|error| {
        let hint = match error.kind() {
            std::io::ErrorKind::AddrInUse => {
                format!(
                    ": something else already listens there (another pastebin?): stop it, or give {flag} another port"
                )
            }
            _ => String::new(),
        };
        anyhow::Error::new(error).context(format!("cannot listen on {address} ({flag}){hint}"))
    })?;
    // Tests and scripts read this line to find a port-0 listener.
    tracing::info!(%what, address = %listener.local_addr()?, "listening");
    Ok(listener)
}

/// Runs one shard service: open its database (running `migrations`),
/// claim its slot range there, listen, and serve with the admin listener
/// beside it. With TLS files the shard serves mutual TLS only: every client
/// must present a certificate signed by --tls-ca (docs/design.md#mtls).
async fn run_shard<F: std::future::Future<Output = anyhow::Result<GrpcServer>>>(
    args: ShardArgs,
    migrations: &sqlx::migrate::Migrator,
    what: &str,
    kind: ShardKind,
    server: impl FnOnce(db::Database, ShardSlots, ServerOptions) -> F,
) -> anyhow::Result<()> {
    let tls = args.tls.load()?;
    args.limits.set_budgets();
    let options = ServerOptions {
        tls: tls.as_ref().map(|tls| tls.server(ClientAuth::Required)),
        reflection: args.reflection,
        limits: args.limits.grpc(),
    };
    let _sqlite = locks::sqlite_file(args.database_url.expose(), &format!("pastebin {what}"))?;
    let connect = db::connect(args.database_url.expose(), args.db_connections, migrations);
    let Some(pool) = unless_stopped(connect).await.transpose()? else { return Ok(()) };
    let backend = db::Backend::of_url(args.database_url.expose())?;
    durability::start_watching(what, pool.pool().clone(), backend, args.require_synchronous_standby).await?;
    let now = pastebin_core::to_millis(SystemClock.now());
    let slots = match granted(&args, kind, tls.as_ref())? {
        Some(granted) => ShardSlots::claim_granted(pool.pool(), kind, granted, args.slots, now).await?,
        None => {
            let resharding = if args.reshard { Resharding::Allow } else { Resharding::Refuse };
            ShardSlots::claim(pool.pool(), kind, args.slots, resharding, now).await?
        }
    };
    slots.confirm_after_failovers(&pool);
    tracing::info!(%what, slots = %slots.ownership().await.owned, "owning slots");
    let database = pool.clone();
    // Required: a shard without its database can do nothing.
    readiness::start_checking("database", readiness::Weight::Required, move || {
        let database = database.clone();
        async move { db::check_reachable(&database).await }
    })
    .await;
    let listener = bind(args.listen, what, "--listen").await?;
    if options.tls.is_some() {
        tracing::info!(%what, "serving mutual TLS only: clients need a certificate signed by --tls-ca");
    }
    let server = server(pool, slots, options).await?;
    tokio::try_join!(server.serve(listener, shutdown_signal()), args.admin.serve(AdminState::metrics_only()))?;
    Ok(())
}

/// Where a shard started with --topology learns what it owns.
fn granted(args: &ShardArgs, kind: ShardKind, tls: Option<&MutualTls>) -> anyhow::Result<Option<Granted>> {
    let (Some(url), Some(address)) = (&args.topology, &args.advertise) else { return Ok(None) };
    anyhow::ensure!(!args.reshard, "--reshard is refused with --topology: etcd decides what this shard owns");
    let tls = args.topology_tls.load_or(tls)?;
    let authority = pastebin_topology::EtcdAuthority::new(url.clone(), tls.as_ref().map(MutualTls::client))?;
    let kind = match kind {
        ShardKind::Key => pastebin_topology::Kind::Key,
        _ => pastebin_topology::Kind::Paste,
    };
    Ok(Some(Granted::new(Arc::new(authority), kind, pastebin_shards::address_book::normalized(address))))
}

async fn run_key_service(args: KeyServiceArgs) -> anyhow::Result<()> {
    let lost_commits = args.lost_commits;
    run_shard(
        args.shard,
        &pastebin_keys::MIGRATIONS,
        "key-service",
        ShardKind::Key,
        |pool, slots, options| async move {
            let store = up::key_store(pool, &slots, &lost_commits, Arc::new(SystemClock)).await?;
            pastebin_keys::server(store, slots, options).await
        },
    )
    .await
}

/// A colocated shard's slots do not move yet, so it takes no topology: it
/// is the one shard of both kinds of its deployment.
async fn run_colocated_shard(args: KeyServiceArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.shard.topology.is_none(),
        "a colocated shard takes no --topology: its slots do not move yet (docs/design.md#the-colocated-create); \
         run it without --topology, as its deployment's one shard of both kinds"
    );
    let lost_commits = args.lost_commits;
    let migrations = &*pastebin_colocated::MIGRATIONS;
    run_shard(args.shard, migrations, "colocated-shard", ShardKind::Key, |pool, slots, options| async move {
        let clock: Arc<dyn pastebin_core::Clock> = Arc::new(SystemClock);
        let keys = up::key_store(pool.clone(), &slots, &lost_commits, clock.clone()).await?;
        pastebin_colocated::server(keys, pastebin_pastes::PasteStore::new(pool, clock), slots, options).await
    })
    .await
}

async fn run_paste_service(args: ShardArgs) -> anyhow::Result<()> {
    run_shard(args, &pastebin_pastes::MIGRATIONS, "paste-service", ShardKind::Paste, |pool, slots, options| {
        let store = pastebin_pastes::PasteStore::new(pool, Arc::new(SystemClock));
        pastebin_pastes::server(store, slots, options)
    })
    .await
}

/// The public gRPC listener's options: TLS with its own certificate
/// (`--public-tls-*`) when it has one, asking clients for theirs as
/// --tls-client-auth says; reflection of the public API always. The
/// gateway's `--tls-cert` is never served: it is a client certificate
/// towards K and P (docs/design.md#mtls).
fn public_grpc_options(
    tls: Option<&MutualTls>,
    public: Option<&PublicTls>,
    client_auth: ClientAuth,
    limits: GrpcLimits,
) -> anyhow::Result<ServerOptions> {
    anyhow::ensure!(
        client_auth == ClientAuth::Off || (tls.is_some() && public.is_some()),
        "--tls-client-auth needs the listener's own certificate (--public-tls-cert, --public-tls-key) \
         and the CA its clients' certificates come from (--tls-cert, --tls-key, --tls-ca)"
    );
    if tls.is_some() && public.is_none() {
        tracing::warn!(
            "the public gRPC listener serves plaintext: --tls-cert is the gateway's client certificate towards \
             K and P and is not served; give the listener its own with --public-tls-cert and --public-tls-key, \
             or put a TLS proxy in front of it"
        );
    }
    let tls = public.map(|public| public.server(client_auth, tls));
    Ok(ServerOptions { tls, reflection: true, limits })
}

/// The slot map of a process that routes creates or recovers keys: every
/// shard must answer first; a silent one is waited for, never guessed.
async fn slot_map(shards: &pastebin_shards::ShardAddresses, tls: Option<&MutualTls>) -> anyhow::Result<SlotMap> {
    let map = pastebin_shards::discover(shards, tls, Patience::WaitForEveryShard, DESCRIBE_TIMEOUT).await?;
    tracing::info!(key_shards = ?map.key_addresses(), paste_shards = ?map.paste_addresses(), "slot map ready");
    Ok(map)
}

/// With `--topology`, the map in `slots` follows etcd's watch
/// (docs/design.md#routers-watch-the-topology); without it, the shards' refusals.
fn follow_topology(
    shards: &pastebin_shards::ShardAddresses,
    (topology_tls, tls): (&TopologyTlsArgs, Option<&MutualTls>),
    slots: &pastebin_shards::SlotMapCell,
) -> anyhow::Result<()> {
    if let Some(authority) = shards.authority(topology_tls, tls)? {
        pastebin_shards::follow_topology(slots.clone(), Arc::new(authority));
    }
    Ok(())
}

/// How long one `Describe` of a shard may take at start-up.
const DESCRIBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
/// How long a gateway waits for every shard before it listens without a slot map.
const FIRST_DISCOVERY: std::time::Duration = std::time::Duration::from_secs(3);

/// The gateway listens with its slot map ready when every shard answers at
/// start-up (the usual case); otherwise it listens anyway, answers 503 ("not
/// ready") and keeps asking. A refused map (overlap, gap) ends it.
async fn run_gateway(args: GatewayCommand) -> anyhow::Result<()> {
    args.gateway.public_url(args.gateway.http)?;
    let tls = args.tls.load()?;
    args.gateway.limits.set_budgets();
    let public_tls = args.public_tls.load()?;
    let grpc_options = public_grpc_options(
        tls.as_ref(),
        public_tls.as_ref(),
        args.tls_client_auth,
        args.gateway.public_grpc_limits(),
    )?;
    let objects = args.objects.open_for_creates().await?;
    let _objects = locks::deployment_objects(&args.objects, "pastebin gateway")?;
    let slots = pastebin_shards::SlotMapCell::default();
    slots.rediscover_with(pastebin_shards::rediscovery(args.shards.clone(), tls.clone(), DESCRIBE_TIMEOUT));
    follow_topology(&args.shards, (&args.topology_tls, tls.as_ref()), &slots)?;
    if let Ok(map) = tokio::time::timeout(FIRST_DISCOVERY, slot_map(&args.shards, tls.as_ref())).await {
        slots.fill(map?);
    }
    let http = bind(args.gateway.http, "gateway-http", "--http").await?;
    let grpc = bind(args.gateway.grpc, "gateway-grpc", "--grpc").await?;
    let gateway = args.gateway.gateway(
        slots.clone(),
        objects,
        http.local_addr()?,
        pastebin_gateway::CREATES_IN_FLIGHT_PER_SHARD,
        args.objects.objects_dir.iter().cloned().collect(),
    )?;
    // Before serving (connections wait in the listen queue meanwhile), so the
    // first health answer is already what the shards and the store said.
    let parts = gateway.clone();
    readiness::start_checking("slot map and object store", readiness::Weight::Required, move || {
        let parts = parts.clone();
        async move { parts.check_ready().await }
    })
    .await;
    let shards = gateway.clone();
    readiness::start_checking("shards", readiness::Weight::Advisory, move || {
        let shards = shards.clone();
        async move { shards.check_shards().await }
    })
    .await;
    tokio::try_join!(
        async {
            if slots.get().is_none() {
                // Stops at the signal with the servers: nothing to drain in a wait.
                if let Some(map) = unless_stopped(slot_map(&args.shards, tls.as_ref())).await {
                    slots.fill(map?);
                }
            }
            anyhow::Ok(())
        },
        pastebin_gateway::serve_http(
            http,
            args.gateway.public_routes(&gateway),
            args.gateway.http_limits(),
            shutdown_signal()
        ),
        pastebin_gateway::serve_grpc(grpc, gateway.clone(), grpc_options, shutdown_signal()),
        watch_storage(&gateway),
        args.admin.serve(AdminState::metrics_only()),
    )?;
    Ok(())
}

async fn run_sweeper(args: SweeperCommand) -> anyhow::Result<()> {
    let objects = args.objects.open().await?;
    let _objects = locks::deployment_objects(&args.objects, "pastebin sweeper")?;
    let tls = args.tls.load()?;
    let Some(slots) = unless_stopped(slot_map(&args.shards, tls.as_ref())).await.transpose()? else { return Ok(()) };
    let sweeper = args.sweeper.sweeper(slots, objects).rediscovering(pastebin_shards::rediscovery(
        args.shards.clone(),
        tls.clone(),
        DESCRIBE_TIMEOUT,
    ));
    follow_topology(&args.shards, (&args.topology_tls, tls.as_ref()), &sweeper.slot_map_cell())?;
    tracing::info!(settings = ?sweeper.settings(), "sweeper running");
    let admin = AdminState::new(sweeper.clone());
    let rounds = admin.clone();
    tokio::try_join!(
        async {
            sweeper.run_with(shutdown_signal(), |report| rounds.record_round(*report)).await;
            Ok(())
        },
        args.admin.serve(admin),
    )?;
    Ok(())
}

#[cfg(test)]
mod documented_command_lines;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listen_address_without_its_ip_is_refused_with_the_forms_to_write() {
        let error = command().try_get_matches_from(["pastebin", "up", "--http", ":8080"]).unwrap_err().to_string();
        assert!(error.contains("0.0.0.0:8080 (every interface) or 127.0.0.1:8080 (this host only)"), "{error}");
        let error = command().try_get_matches_from(["pastebin", "gateway", "--grpc", "localhost"]).unwrap_err();
        assert!(error.to_string().contains("IP:PORT, e.g. 127.0.0.1:8080"), "{error}");
        assert!(command().try_get_matches_from(["pastebin", "up", "--admin", "[::1]:9090"]).is_ok());
    }

    #[test]
    fn creates_are_rate_limited_by_default_and_the_limit_can_be_turned_off() {
        let limit = |args: &[&str]| {
            let argv = ["pastebin", "up"].iter().chain(args);
            let matches = command().try_get_matches_from(argv).unwrap();
            let (_, up) = matches.subcommand().unwrap();
            up.get_one::<flags::RateLimitOrOff>("create_rate_limit").copied().unwrap().0
        };
        assert_eq!(limit(&[]), Some("60/min".parse().unwrap()), "docs/configuration.md#abuse-controls");
        assert_eq!(limit(&["--create-rate-limit", "off"]), None);
        assert_eq!(limit(&["--create-rate-limit", "5/s"]), Some("5/s".parse().unwrap()));
        let error = command().try_get_matches_from(["pastebin", "up", "--create-rate-limit", "lots"]).unwrap_err();
        assert!(error.to_string().contains("N/s, N/min or N/hour (e.g. 30/min), or off"), "{error}");
    }

    #[test]
    fn a_port_in_use_names_its_flag() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = taken.local_addr().unwrap();
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let error = runtime.block_on(bind(address, "admin", "--admin")).unwrap_err();
        let error = format!("{error:#}");
        assert!(error.starts_with(&format!("cannot listen on {address} (--admin): something else")), "{error}");
        assert!(error.contains("give --admin another port"), "{error}");
    }

    #[test]
    fn every_part_s_help_names_pastebin_config() {
        for words in [&[][..], &["up"], &["gateway"], &["key-service"], &["sweeper"], &["ctl"], &["paste"]] {
            assert!(help_of(words).contains("PASTEBIN_CONFIG"), "`pastebin {words:?} --help` names no PASTEBIN_CONFIG");
        }
    }

    /// What `pastebin WORDS --help` prints.
    fn help_of(words: &[&str]) -> String {
        let argv = std::iter::once("pastebin").chain(words.iter().copied()).chain(["--help"]);
        let shown = command().try_get_matches_from(argv).expect_err("--help ends the parse");
        assert_eq!(shown.kind(), clap::error::ErrorKind::DisplayHelp, "{shown}");
        shown.render().to_string()
    }

    #[test]
    fn the_top_level_help_names_every_ctl_command() {
        let help = help_of(&[]);
        let line = help.lines().find(|line| line.trim_start().starts_with("ctl ")).expect("ctl is listed");
        let cli = command();
        let commands = cli.find_subcommand("ctl").unwrap().get_subcommands().map(|c| c.get_name().to_owned());
        for command in commands.filter(|name| name != "help") {
            assert!(line.contains(&command), "`pastebin --help` does not name `ctl {command}`: {line}");
        }
    }

    /// Flags that do nothing for a command are not in its help
    /// (`--drain-timeout-secs` outside the serving parts, the object store
    /// where it is never read), and are still accepted.
    #[test]
    fn a_command_s_help_lists_no_flag_that_does_nothing_for_it() {
        let objects = ["--objects-dir", "--s3-bucket", "--s3-endpoint", "--s3-region", "--s3-path-style"];
        let drain = "--drain-timeout-secs";
        let listed = |help: &str, flag: &str| help.lines().any(|line| line.trim_start().starts_with(flag));
        for words in [&["ctl", "reshard"][..], &["ctl", "stats"], &["ctl", "pending"], &["ctl", "recover"]] {
            let help = help_of(words);
            for flag in objects.iter().chain([&drain]) {
                assert!(!listed(&help, flag), "`pastebin {words:?} --help` lists {flag}:\n{help}");
            }
        }
        for words in [&["ctl"][..], &["healthcheck"], &["bench"], &["paste"]] {
            let help = help_of(words);
            assert!(!listed(&help, drain), "`pastebin {words:?} --help` lists {drain}:\n{help}");
        }
        for words in [&["ctl", "reconcile"][..], &["ctl", "repair"], &["ctl", "takedown"]] {
            let help = help_of(words);
            for flag in objects.iter().chain([&"--key-shards"]) {
                assert!(listed(&help, flag), "`pastebin {words:?} --help` does not list {flag}:\n{help}");
            }
        }
        for words in [&["gateway"][..], &["sweeper"], &["key-service"], &["up"]] {
            assert!(listed(&help_of(words), drain), "`pastebin {words:?} --help` lists {drain}");
        }
        // Hidden, not refused: a config file or a shared environment may set them.
        let quiet = ["pastebin", "ctl", "reshard", "--kind", "key", "--from", "a:1", "--to", "b:2", "--slots", "0-1"];
        let argv = quiet.iter().chain(&["--objects-dir", "/tmp/objects", "--drain-timeout-secs", "5"]);
        let matches = command().try_get_matches_from(argv).unwrap();
        assert!(Cli::from_arg_matches(&matches).is_ok());
    }

    /// One terminal screen: what a part cannot run without is on it.
    const FIRST_SCREEN: usize = 40;

    #[test]
    fn every_part_shows_the_flags_it_cannot_run_without_on_the_first_screen_of_its_help() {
        let shards = ["--key-shards", "--paste-shards"];
        let objects = ["--objects-dir", "--s3-bucket"];
        let shard = ["--database-url", "--slots", "--listen"];
        let ctl = ["--data-dir", "--key-shards", "--paste-shards"];
        let needs: [(&[&str], &[&str]); 12] = [
            (&["key-service"], &shard),
            (&["paste-service"], &shard),
            (&["gateway"], &[shards, objects].concat()),
            (&["sweeper"], &[shards, objects].concat()),
            (&["up"], &["--data-dir", "--http"]),
            (&["ctl", "stats"], &ctl),
            (&["ctl", "pending"], &ctl),
            (&["ctl", "recover"], &ctl),
            (&["ctl", "reconcile"], &[&ctl[..], &objects].concat()),
            (&["ctl", "repair"], &[&ctl[..], &objects].concat()),
            (&["ctl", "reshard"], &["--kind", "--from", "--to", "--slots"]),
            (&["ctl", "tokens"], &["--file"]),
        ];
        for (words, flags) in needs {
            let help = help_of(words);
            for flag in flags {
                let line = help.lines().position(|line| line.trim_start().starts_with(flag));
                let line = line.unwrap_or_else(|| panic!("{flag} is not in `pastebin {words:?} --help`:\n{help}"));
                assert!(line < FIRST_SCREEN, "{flag} is on line {line} of `pastebin {words:?} --help`:\n{help}");
            }
        }
    }

    #[test]
    fn every_flag_of_every_serving_part_and_of_ctl_is_under_a_heading() {
        let cli = command();
        for part in ["key-service", "paste-service", "gateway", "sweeper", "up", "ctl"] {
            let command = cli.find_subcommand(part).unwrap();
            let loose: Vec<String> = command
                .get_arguments()
                .filter(|arg| arg.get_help_heading().is_none() && !["help", "version"].contains(&arg.get_id().as_str()))
                .map(|arg| arg.get_id().to_string())
                .collect();
            assert!(loose.is_empty(), "`pastebin {part} --help` lists {loose:?} under no heading");
        }
    }

    #[test]
    fn the_client_commands_show_their_own_flags_first_then_where_the_server_and_journal_are() {
        for (command, own) in [("paste", "--expires"), ("pastes", "--all"), ("delete", "<ID>")] {
            let help = help_of(&[command]);
            let heading = help.find("\nServer and journal:\n").unwrap_or_else(|| panic!("`{command} --help`:\n{help}"));
            let (first, then) = help.split_at(heading);
            assert!(first.contains(own), "`{command} --help` shows {own} first:\n{help}");
            for flag in ["--server", "--state-dir", "--timeout", "--create-token"] {
                assert!(then.contains(flag) && !first.contains(flag), "`{command} --help` groups {flag}:\n{help}");
            }
        }
    }

    #[test]
    fn client_auth_on_the_public_listener_needs_its_certificate_and_the_ca() {
        let error = public_grpc_options(None, None, ClientAuth::Required, GrpcLimits::default()).unwrap_err();
        assert!(error.to_string().starts_with("--tls-client-auth needs the listener's own certificate"), "{error}");
        let plaintext = public_grpc_options(None, None, ClientAuth::Off, GrpcLimits::default()).unwrap();
        assert!(plaintext.tls.is_none() && plaintext.reflection, "the public API is reflected, over plaintext");
    }
}
