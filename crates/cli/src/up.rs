//! `pastebin up`: the embedded default. Every part in one process, state in
//! one directory, nothing to install: K and P on SQLite files, objects in a
//! directory, the gateway in front, the sweeper behind. K and P still run behind their gRPC
//! servers on loopback, so the process exercises the same saga as a
//! deployment of separate services.

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use anyhow::Context;
use pastebin_admin::AdminState;
use pastebin_core::SystemClock;
use pastebin_keys::{KeyClient, KeyStore};
use pastebin_objects::LocalDirStore;
use pastebin_pastes::{PasteClient, PasteStore};
use pastebin_runtime::{db, grpc::channel, shutdown_signal};
use serde::Serialize;

use crate::{
    bind,
    flags::{GatewayArgs, SweeperArgs},
};

#[derive(Debug, clap::Args)]
pub struct UpArgs {
    /// Where the shards' databases, the objects and `endpoints.json` live.
    #[arg(long, env = "PASTEBIN_DATA_DIR", default_value = "pastebin-data")]
    pub data_dir: PathBuf,
    #[command(flatten)]
    pub gateway: GatewayArgs,
    #[command(flatten)]
    pub sweeper: SweeperArgs,
    /// Admin listener: `/metrics` of every part and the pending-age `/dashboard`.
    #[arg(long, env = "PASTEBIN_ADMIN", default_value = "127.0.0.1:9090")]
    pub admin: SocketAddr,
}

/// Written to `<data-dir>/endpoints.json` so operator tools find the parts
/// of a running `pastebin up` from the data directory alone.
#[derive(Debug, Serialize)]
struct Endpoints {
    key_shards: Vec<String>,
    paste_shards: Vec<String>,
    http: String,
    grpc: String,
    admin: String,
    objects_dir: PathBuf,
}

fn sqlite_url(dir: &std::path::Path, file: &str) -> anyhow::Result<String> {
    let path = dir.join(file);
    let path = path.to_str().context("the data directory path must be UTF-8")?;
    Ok(format!("sqlite://{path}"))
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    let dir = &args.data_dir;
    // The databases hold stored 201 bodies (delete tokens) for 25 h: private.
    pastebin_runtime::files::private_dir(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let clock = Arc::new(SystemClock);

    let key_pool = db::connect(&sqlite_url(dir, "keys.db")?, 8, &db::KEY_MIGRATIONS).await?;
    let paste_pool = db::connect(&sqlite_url(dir, "pastes.db")?, 8, &db::PASTE_MIGRATIONS).await?;
    let objects_dir = std::path::absolute(dir.join("objects")).context("cannot resolve the objects directory")?;
    let objects = Arc::new(LocalDirStore::open(&objects_dir)?);

    let loopback = SocketAddr::from(([127, 0, 0, 1], 0));
    let key_listener = bind(loopback, "key-service").await?;
    let paste_listener = bind(loopback, "paste-service").await?;
    let key_address = format!("http://{}", key_listener.local_addr()?);
    let paste_address = format!("http://{}", paste_listener.local_addr()?);

    let slots = pastebin_shards::SlotMap::new(
        vec![KeyClient::new(channel(&key_address)?)],
        vec![PasteClient::new(channel(&paste_address)?)],
    )?;
    let http = bind(args.gateway.http, "gateway-http").await?;
    let grpc = bind(args.gateway.grpc, "gateway-grpc").await?;
    let sweeper = args.sweeper.sweeper(slots.clone(), objects.clone());
    let gateway = args.gateway.gateway(slots, objects, http.local_addr()?);
    let admin_listener = bind(args.admin, "admin").await?;
    let admin = AdminState::new(sweeper.clone());

    let endpoints = Endpoints {
        key_shards: vec![key_address],
        paste_shards: vec![paste_address],
        http: format!("http://{}", http.local_addr()?),
        grpc: format!("http://{}", grpc.local_addr()?),
        admin: format!("http://{}", admin_listener.local_addr()?),
        objects_dir,
    };
    pastebin_runtime::files::write_private(&dir.join("endpoints.json"), &serde_json::to_vec_pretty(&endpoints)?)
        .context("cannot write endpoints.json")?;
    println!(
        "pastebin is up\n  web & HTTP API  {}\n  gRPC API        {}\n  dashboard       {}/dashboard\n  metrics         {}/metrics\n  data            {}\nCtrl-C to stop.",
        endpoints.http,
        endpoints.grpc,
        endpoints.admin,
        endpoints.admin,
        dir.display()
    );

    let (http_limits, grpc_limits) = (args.gateway.limits.http(), args.gateway.limits.grpc());
    tokio::try_join!(
        pastebin_keys::serve(
            key_listener,
            KeyStore::new(key_pool, clock.clone()),
            grpc_limits.clone(),
            shutdown_signal()
        ),
        pastebin_pastes::serve(
            paste_listener,
            PasteStore::new(paste_pool, clock),
            grpc_limits.clone(),
            shutdown_signal()
        ),
        pastebin_gateway::serve_http(http, gateway.clone(), http_limits.clone(), shutdown_signal()),
        pastebin_gateway::serve_grpc(grpc, gateway, grpc_limits.clone(), shutdown_signal()),
        async {
            let rounds = admin.clone();
            sweeper.run_with(shutdown_signal(), |report| rounds.record_round(*report)).await;
            Ok(())
        },
        pastebin_admin::serve(admin_listener, admin.clone(), http_limits.clone(), shutdown_signal()),
    )?;
    Ok(())
}
