//! The `pastebin` command: parses flags (each also a `PASTEBIN_*` environment
//! variable), sets up tracing, and starts the part asked for. Each part's
//! logic lives in its own crate; this is only wiring.

use std::{net::SocketAddr, sync::Arc};

mod config_file;
mod flags;
mod healthcheck;
mod secret;
mod up;

use anyhow::Context;
use clap::{CommandFactory, Parser, Subcommand};
use pastebin_admin::AdminState;
use pastebin_core::SystemClock;
use pastebin_runtime::{db, readiness, shutdown_signal, telemetry};
use tokio::net::TcpListener;

#[derive(Debug, Parser)]
#[command(name = "pastebin", version, about = "The pastebin that does not double-create")]
pub struct Cli {
    /// Log lines as `text` or `json` (one object per line). Spans are exported by OTLP
    /// when OTEL_EXPORTER_OTLP_ENDPOINT is set.
    #[arg(long, global = true, env = "PASTEBIN_LOG_FORMAT", default_value = "text")]
    pub log_format: telemetry::LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a key service (shard K: idempotency records) over gRPC.
    KeyService(ShardArgs),
    /// Run a paste service (shard P: paste rows and tombstones) over gRPC.
    PasteService(ShardArgs),
    /// Run the gateway: the create saga, reads and deletes, over HTTP and gRPC.
    Gateway(GatewayCommand),
    /// Run the sweeper: recovery of stale pending keys, key retention, paste
    /// expiry and the object reaper. Several may run at once.
    Sweeper(SweeperCommand),
    /// Run everything in one process on the embedded default: SQLite shards,
    /// a local object directory, the gateway. K and P still speak gRPC on loopback.
    Up(up::UpArgs),
    /// Load generator and benchmark harnesses (see BENCHMARKS.md).
    Bench(pastebin_bench::BenchArgs),
    /// Operator tools: stale pendings, recover one key, reconcile, stats.
    Ctl(pastebin_ctl::CtlArgs),
    /// Ask an admin listener whether its process is alive (`/healthz`) or ready (`/readyz`): exit 0 if so.
    Healthcheck(healthcheck::HealthcheckArgs),
    /// Paste, list and delete your pastes: a client that never double-creates.
    #[command(flatten)]
    Client(pastebin_client::ClientCommand),
}

#[derive(Debug, clap::Args)]
pub struct SweeperCommand {
    #[command(flatten)]
    pub admin: flags::AdminArgs,
    #[command(flatten)]
    pub sweeper: flags::SweeperArgs,
    #[command(flatten)]
    pub shards: flags::ShardAddresses,
    #[command(flatten)]
    pub objects: flags::ObjectStoreArgs,
}

#[derive(Debug, clap::Args)]
pub struct GatewayCommand {
    #[command(flatten)]
    pub admin: flags::AdminArgs,
    #[command(flatten)]
    pub gateway: flags::GatewayArgs,
    #[command(flatten)]
    pub shards: flags::ShardAddresses,
    #[command(flatten)]
    pub objects: flags::ObjectStoreArgs,
}

#[derive(Debug, clap::Args)]
pub struct ShardArgs {
    /// postgres://... or sqlite:path (created if missing). Migrations run at start-up.
    #[arg(long, env = "PASTEBIN_DATABASE_URL", hide_env_values = true)]
    pub database_url: secret::Secret,
    /// Address for the gRPC server (port 0 picks a free one; the chosen one is logged).
    #[arg(long, env = "PASTEBIN_LISTEN", default_value = "127.0.0.1:50061")]
    pub listen: SocketAddr,
    /// Database connections in the pool.
    #[arg(long, env = "PASTEBIN_DB_CONNECTIONS", default_value_t = 16)]
    pub db_connections: u32,
    #[command(flatten)]
    pub admin: flags::AdminArgs,
}

/// Parses the process's arguments and runs: all `main` does.
pub fn main_from_args() -> anyhow::Result<()> {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    config_file::load_from_env(&Cli::command(), &args)?;
    run(Cli::parse_from(args))
}

/// The part's name in logs and traces: `pastebin-<subcommand>`.
fn service_name(command: &Command) -> &'static str {
    match command {
        Command::KeyService(_) => "pastebin-key-service",
        Command::PasteService(_) => "pastebin-paste-service",
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
    runtime.block_on(async move {
        match cli.command {
            Command::KeyService(args) => run_key_service(args).await,
            Command::PasteService(args) => run_paste_service(args).await,
            Command::Gateway(args) => run_gateway(args).await,
            Command::Sweeper(args) => run_sweeper(args).await,
            Command::Up(args) => up::run(args).await,
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
    })
}

pub(crate) async fn bind(address: SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    let listener = TcpListener::bind(address).await.with_context(|| format!("cannot listen on {address}"))?;
    // Tests and scripts read this line to find a port-0 listener.
    tracing::info!(%what, address = %listener.local_addr()?, "listening");
    Ok(listener)
}

/// Runs one shard service: open its database (running `migrations`), listen,
/// and serve with the admin listener beside it.
async fn run_shard<F: std::future::Future<Output = anyhow::Result<()>>>(
    args: ShardArgs,
    migrations: &sqlx::migrate::Migrator,
    what: &str,
    serve: impl FnOnce(sqlx::AnyPool, TcpListener) -> F,
) -> anyhow::Result<()> {
    let pool = db::connect(args.database_url.expose(), args.db_connections, migrations).await?;
    let database = pool.clone();
    readiness::start_checking("database", move || {
        let database = database.clone();
        async move { db::check_reachable(&database).await }
    })
    .await;
    let listener = bind(args.listen, what).await?;
    tokio::try_join!(serve(pool, listener), args.admin.serve(AdminState::metrics_only()))?;
    Ok(())
}

async fn run_key_service(args: ShardArgs) -> anyhow::Result<()> {
    run_shard(args, &db::KEY_MIGRATIONS, "key-service", |pool, listener| {
        pastebin_keys::serve(listener, pastebin_keys::KeyStore::new(pool, Arc::new(SystemClock)), shutdown_signal())
    })
    .await
}

async fn run_paste_service(args: ShardArgs) -> anyhow::Result<()> {
    run_shard(args, &db::PASTE_MIGRATIONS, "paste-service", |pool, listener| {
        pastebin_pastes::serve(
            listener,
            pastebin_pastes::PasteStore::new(pool, Arc::new(SystemClock)),
            shutdown_signal(),
        )
    })
    .await
}

async fn run_gateway(args: GatewayCommand) -> anyhow::Result<()> {
    let objects = args.objects.open().await?;
    let slots = args.shards.slot_map()?;
    let http = bind(args.gateway.http, "gateway-http").await?;
    let grpc = bind(args.gateway.grpc, "gateway-grpc").await?;
    let gateway = args.gateway.gateway(slots, objects, http.local_addr()?);
    // Before serving (connections wait in the listen queue meanwhile), so the
    // first health answer is already what the shards and the store said.
    let parts = gateway.clone();
    readiness::start_checking("shards and object store", move || {
        let parts = parts.clone();
        async move { parts.check_ready().await }
    })
    .await;
    tokio::try_join!(
        pastebin_gateway::serve_http(http, gateway.clone(), shutdown_signal()),
        pastebin_gateway::serve_grpc(grpc, gateway, shutdown_signal()),
        args.admin.serve(AdminState::metrics_only()),
    )?;
    Ok(())
}

async fn run_sweeper(args: SweeperCommand) -> anyhow::Result<()> {
    let objects = args.objects.open().await?;
    let sweeper = args.sweeper.sweeper(args.shards.slot_map()?, objects);
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
