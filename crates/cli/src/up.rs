//! `pastebin up`: the embedded default. Every part in one process, state in
//! one directory, nothing to install: K and P on SQLite files, objects in a
//! directory, the gateway in front, the sweeper behind. The gateway and the
//! sweeper call K and P through the shards' own gRPC services, in process
//! (docs/design.md#in-process-shards): the same requests and handlers as a
//! deployment of separate services, without a socket. K and P also listen on
//! Unix sockets in the data directory, for the operator tools that
//! `endpoints.json` points at; no TCP port of `up` reaches them.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::Context;
use pastebin_admin::AdminState;
use pastebin_core::{Clock, OwnedSlots, SlotRange, SystemClock};
use pastebin_keys::{KeyClient, KeyStore};
use pastebin_objects::LocalDirStore;
use pastebin_pastes::{PasteClient, PasteStore};
use pastebin_proto::shard::v1::ShardKind;
use pastebin_runtime::{
    db,
    files::private_socket,
    grpc::{unix_address, GrpcServer, ServerOptions},
    lock::{this_process, Sharing},
    shutdown_signal,
};
use pastebin_shards::{Endpoints, Shard, SlotMap, SlotMapCell};
use pastebin_slots::shard_slots::{Resharding, ShardSlots};

use crate::{
    bind,
    flags::{GatewayArgs, SweeperArgs},
    locks, watch_storage,
};

/// This part, as the lock files name it.
const PART: &str = "pastebin up";

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Where the shards' databases, the objects and `endpoints.json` live.
    #[arg(long, env = "PASTEBIN_DATA_DIR", default_value = pastebin_shards::DEFAULT_DATA_DIR,
          help_heading = pastebin_runtime::help::DATABASE)]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub gateway: GatewayArgs,
    #[command(flatten)]
    pub sweeper: SweeperArgs,
    /// After an unsafe failover or a restore by hand (`pastebin ctl restore` stores its window itself).
    #[command(flatten)]
    pub lost_commits: crate::flags::LostCommitsArgs,
    /// Make a new data directory colocated: K's and P's rows in one SQLite
    /// file, each create one commit instead of the saga's three
    /// (docs/design.md#the-colocated-create). A data directory keeps the
    /// layout it was made with; this flag is refused on one made without it.
    #[arg(long, env = "PASTEBIN_COLOCATED", help_heading = pastebin_runtime::help::DATABASE)]
    pub colocated: bool,
    /// Admin listener: `/metrics` of every part and the pending-age `/dashboard`.
    #[arg(long, env = "PASTEBIN_ADMIN", default_value = "127.0.0.1:9090", help_heading = pastebin_runtime::help::TELEMETRY,
          value_parser = crate::flags::listen_address)]
    pub admin: SocketAddr,
}

/// The shedding limit of `pastebin up`: every part is local and a create
/// takes a few milliseconds. At twice the peak rate it keeps the 201s' p99
/// within ~2.6× its value at half load, with the goodput at the peak; the
/// deployment default of 64 let it grow to 4.2× (BENCHMARKS.md, summary).
const CREATES_IN_FLIGHT_PER_SHARD: usize = 32;

/// A private Unix socket at `path`, announced like a TCP listener.
fn listen_private(path: &std::path::Path, what: &str) -> anyhow::Result<tokio::net::UnixListener> {
    let listener = private_socket(path)?;
    // Tests and scripts read this line to find a part's address.
    tracing::info!(%what, address = %unix_address(path), "listening");
    Ok(listener)
}

fn sqlite_url(dir: &std::path::Path, file: &str) -> anyhow::Result<String> {
    let path = dir.join(file);
    let path = path.to_str().context("the data directory path must be UTF-8")?;
    Ok(format!("sqlite://{path}"))
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let dir = &args.data_dir;
    // Before anything is created: a refused start leaves nothing behind.
    args.gateway.public_url(args.gateway.http)?;
    // The databases hold stored 201 bodies (delete tokens) for 25 h: private.
    pastebin_runtime::files::private_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // Before anything in the directory is touched: a second `up` here
    // leaves the first one's files, and its endpoints.json, alone.
    let mut lock = locks::data_dir(dir, PART)?;
    let layout = Layout::of(dir, args.colocated)?;
    let clock = Arc::new(SystemClock);

    let objects_dir = std::path::absolute(dir.join("objects")).context("cannot resolve the objects directory")?;
    let objects = Arc::new(LocalDirStore::open(&objects_dir)?);
    let _objects = locks::objects_dir(&objects_dir, Sharing::Exclusive, PART)?;
    // Made at the first start: a backup carries it, and a restore checks it.
    pastebin_shards::DeploymentId::read_or_create(&objects_dir)?;

    // K and P answer without reflection; the public gRPC
    // API answers reflection for its own API. All within the limits given.
    args.gateway.limits.set_budgets();
    let http_limits = args.gateway.http_limits();
    let internal = ServerOptions { limits: args.gateway.limits.grpc(), ..ServerOptions::default() };
    let public =
        ServerOptions { reflection: true, limits: args.gateway.public_grpc_limits(), ..ServerOptions::default() };
    let shards = match layout {
        Layout::Split => Shards::split(dir, &args.lost_commits, clock, internal).await?,
        Layout::Colocated => Shards::colocated(dir, &args.lost_commits, clock, internal).await?,
    };
    let slots = shards.slots.clone();
    let http = bind(args.gateway.http, "gateway-http", "--http").await?;
    let grpc = bind(args.gateway.grpc, "gateway-grpc", "--grpc").await?;
    let sweeper = args.sweeper.sweeper(slots.clone(), objects.clone());
    // The databases and the objects share the data directory's filesystem.
    let storage = vec![std::path::absolute(dir).context("cannot resolve the data directory")?];
    let gateway = args.gateway.gateway(
        SlotMapCell::ready(slots),
        objects,
        http.local_addr()?,
        CREATES_IN_FLIGHT_PER_SHARD,
        storage,
    )?;
    let admin_listener = bind(args.admin, "admin", "--admin").await?;
    let admin = AdminState::new(sweeper.clone());

    let (http_url, grpc_url, admin_url) = (
        format!("http://{}", http.local_addr()?),
        format!("http://{}", grpc.local_addr()?),
        format!("http://{}", admin_listener.local_addr()?),
    );
    let endpoints = Endpoints {
        key_shards: vec![shards.key_address.clone()],
        paste_shards: vec![shards.paste_address.clone()],
        http: Some(http_url.clone()),
        grpc: Some(grpc_url.clone()),
        admin: Some(admin_url.clone()),
        objects_dir: Some(objects_dir),
    };
    endpoints.write(dir)?;
    let holder = format!("{} at {http_url} (gRPC {grpc_url}, admin {admin_url})", this_process(PART));
    lock.describe(&holder).context("cannot write the data directory's lock file")?;
    println!(
        "pastebin is up\n  web & HTTP API  {http_url}\n  gRPC API        {grpc_url}\n  dashboard       {admin_url}/dashboard\n  metrics         {admin_url}/metrics\n  data            {}\nCtrl-C to stop.",
        dir.display()
    );

    tokio::try_join!(
        shards.serve(),
        pastebin_gateway::serve_http(
            http,
            args.gateway.public_routes(&gateway),
            http_limits.clone(),
            shutdown_signal()
        ),
        pastebin_gateway::serve_grpc(grpc, gateway.clone(), public, shutdown_signal()),
        watch_storage(&gateway),
        async {
            let rounds = admin.clone();
            sweeper.run_with(shutdown_signal(), |report| rounds.record_round(*report)).await;
            Ok(())
        },
        pastebin_admin::serve(admin_listener, admin.clone(), http_limits, shutdown_signal()),
    )?;
    Ok(())
}

/// How a data directory keeps K's and P's rows: the saga's two SQLite files
/// (`keys.db`, `pastes.db`), or one colocated file (`colocated.db`). Chosen
/// when the directory is made; kept for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    Split,
    Colocated,
}

const COLOCATED_DB: &str = "colocated.db";

impl Layout {
    fn of(dir: &Path, colocated: bool) -> anyhow::Result<Self> {
        let made_split = dir.join("keys.db").exists() || dir.join("pastes.db").exists();
        let made_colocated = dir.join(COLOCATED_DB).exists();
        match (made_split, made_colocated) {
            (true, true) => anyhow::bail!(
                "{} holds both keys.db and pastes.db and {COLOCATED_DB}: it is no data directory `pastebin up` made; \
                 move the files that do not belong there away",
                dir.display()
            ),
            (true, false) if colocated => anyhow::bail!(
                "{} was made without --colocated (it holds keys.db and pastes.db) and keeps that layout: \
                 run without --colocated, or give a new --data-dir",
                dir.display()
            ),
            (true, false) => Ok(Self::Split),
            (false, true) => {
                tracing::info!("this data directory is colocated: each create is one commit");
                Ok(Self::Colocated)
            }
            (false, false) if colocated => Ok(Self::Colocated),
            (false, false) => Ok(Self::Split),
        }
    }
}

/// The shards of one `up`: each server with its private socket, their
/// addresses for `endpoints.json`, and the slot map the gateway and the
/// sweeper route by. One shard of each kind (or one of both), owning every slot.
struct Shards {
    served: Vec<(GrpcServer, tokio::net::UnixListener)>,
    slots: SlotMap,
    key_address: String,
    paste_address: String,
    _databases: Vec<Option<pastebin_runtime::lock::Lock>>,
}

/// Every slot, as a lone shard owns them.
const EVERY: Option<OwnedSlots> = Some(OwnedSlots::Range(SlotRange::ALL));

impl Shards {
    /// K and P on `keys.db` and `pastes.db`, joined by the saga.
    async fn split(
        dir: &Path,
        lost_commits: &crate::flags::LostCommitsArgs,
        clock: Arc<dyn Clock>,
        internal: ServerOptions,
    ) -> anyhow::Result<Self> {
        let (key_url, paste_url) = (sqlite_url(dir, "keys.db")?, sqlite_url(dir, "pastes.db")?);
        let databases = vec![locks::sqlite_file(&key_url, PART)?, locks::sqlite_file(&paste_url, PART)?];
        let key_pool = db::connect(&key_url, 8, &pastebin_keys::MIGRATIONS).await?;
        let paste_pool = db::connect(&paste_url, 8, &pastebin_pastes::MIGRATIONS).await?;
        let now = pastebin_core::to_millis(clock.now());
        let key_slots = ShardSlots::claim(key_pool.pool(), ShardKind::Key, EVERY, Resharding::Refuse, now).await?;
        let paste_slots =
            ShardSlots::claim(paste_pool.pool(), ShardKind::Paste, EVERY, Resharding::Refuse, now).await?;
        let keys = key_store(key_pool, &key_slots, lost_commits, clock.clone()).await?;
        // K and P listen only on Unix sockets inside the 0700 data directory:
        // they hand out stored delete tokens to any caller, so no other local
        // account may reach them (docs/security.md#local-sockets).
        let (key_socket, key_listener) = socket(dir, "keys.sock", "key-service")?;
        let (paste_socket, paste_listener) = socket(dir, "pastes.sock", "paste-service")?;
        let key_server = pastebin_keys::server(keys, key_slots, internal.clone()).await?;
        let paste_server = pastebin_pastes::server(PasteStore::new(paste_pool, clock), paste_slots, internal).await?;
        let slots = SlotMap::new(
            vec![shard(&key_socket, KeyClient::new(key_server.in_process()), false)],
            vec![shard(&paste_socket, PasteClient::new(paste_server.in_process()), false)],
        )?;
        Ok(Self {
            served: vec![(key_server, key_listener), (paste_server, paste_listener)],
            slots,
            key_address: key_socket,
            paste_address: paste_socket,
            _databases: databases,
        })
    }

    /// One colocated shard on `colocated.db`, serving both kinds on one socket.
    async fn colocated(
        dir: &Path,
        lost_commits: &crate::flags::LostCommitsArgs,
        clock: Arc<dyn Clock>,
        internal: ServerOptions,
    ) -> anyhow::Result<Self> {
        let url = sqlite_url(dir, COLOCATED_DB)?;
        let databases = vec![locks::sqlite_file(&url, PART)?];
        let pool = db::connect(&url, 8, &pastebin_colocated::MIGRATIONS).await?;
        let now = pastebin_core::to_millis(clock.now());
        let slots = ShardSlots::claim(pool.pool(), ShardKind::Key, EVERY, Resharding::Refuse, now).await?;
        let keys = key_store(pool.clone(), &slots, lost_commits, clock.clone()).await?;
        let (address, listener) = socket(dir, "colocated.sock", "colocated-shard")?;
        let server = pastebin_colocated::server(keys, PasteStore::new(pool, clock), slots, internal).await?;
        let slots = SlotMap::new(
            vec![shard(&address, KeyClient::new(server.in_process()), true)],
            vec![shard(&address, PasteClient::new(server.in_process()), true)],
        )?;
        Ok(Self {
            served: vec![(server, listener)],
            slots,
            key_address: address.clone(),
            paste_address: address,
            _databases: databases,
        })
    }

    async fn serve(self) -> anyhow::Result<()> {
        let served = self.served.into_iter().map(|(server, listener)| server.serve_unix(listener, shutdown_signal()));
        futures::future::try_join_all(served).await.map(drop)
    }
}

/// K's store on `pool`, searching first while the shard may have lost
/// commits (a window it holds, or one `--may-have-lost-commits-since` gives:
/// it belongs to the slots the shard owns now, and moves with them).
pub(crate) async fn key_store(
    pool: db::Database,
    slots: &ShardSlots,
    lost_commits: &crate::flags::LostCommitsArgs,
    clock: Arc<dyn Clock>,
) -> anyhow::Result<KeyStore> {
    let lost = lost_commits.held(slots).await?;
    Ok(KeyStore::new(pool, clock).with_lost_commits(lost).with_search_windows(slots.search_windows()))
}

/// A private socket `file` in the data directory, and its address.
fn socket(dir: &Path, file: &str, what: &str) -> anyhow::Result<(String, tokio::net::UnixListener)> {
    let path = std::path::absolute(dir.join(file)).context("cannot resolve the data directory")?;
    Ok((unix_address(&path), listen_private(&path, what)?))
}

/// This process's own shard at `address`: its range is known without asking.
fn shard<C>(address: &str, client: C, colocated: bool) -> Shard<C> {
    Shard { address: address.to_owned(), slots: EVERY, client, colocated }
}
