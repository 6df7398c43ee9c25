//! The simulated deployment: two K shards splitting the slots (and a third
//! that owns none, for the operator's typos), two P shards splitting them,
//! two gateways, two sweepers and the operator's `ctl`, each a turmoil host
//! running the real service code; and the settings the simulation scales
//! down. Gateways and sweepers build their slot map from what the shards
//! describe ([`crate::discovery`]).

use std::{sync::Arc, time::Duration};

use anyhow::Context;

use pastebin_core::{Minter, OwnedSlots, SlotRange};
use pastebin_gateway::{Gateway, GatewaySettings, PasteApiService, SlotMapCell};
use pastebin_keys::{KeyServiceImpl, KeyStore};
use pastebin_pastes::{PasteServiceImpl, PasteStore};
use pastebin_proto::shard::v1::ShardKind;
use pastebin_runtime::db::Database;
use pastebin_slots::{
    shard_slots::{Resharding, ShardSlots},
    slot_moves::SlotMovesService,
};
use pastebin_sweeper::{Sweeper, SweeperSettings};
use tonic::{service::Routes, transport::Server};

use crate::{
    clock::HostClock,
    discovery::{first_slot_map, rediscovery},
    disk::{Disk, OnDiskLayer},
    net,
    objects::SimObjects,
    ownership::Owners,
    reshard,
};

pub const GATEWAYS: usize = 2;
pub const SWEEPERS: usize = 2;

/// The K shards the callers list, and the slots each owns at first.
pub const KEY_SHARDS: [(&str, u8, u8); 2] = [("k0", 0, 127), ("k1", 128, 255)];
/// A K shard started with `--slots none` that no caller lists: the `--to`
/// of the operator's typo. No caller lists it, so the real `ctl reshard`'s
/// preflight would refuse it first; the simulation's `run_over` has no
/// preflight, so what must refuse a move to it is the shards' records of
/// the move in progress (docs/testing.md#simulation). The nemesis does not
/// strike it: its faults draw the same hosts as before it was added.
pub const SPARE_KEY_SHARD: &str = "k2";
/// Every K shard host; a K shard's index everywhere is its place here.
pub const KEY_HOSTS: [&str; 3] = [KEY_SHARDS[0].0, KEY_SHARDS[1].0, SPARE_KEY_SHARD];
/// The P shards, and the slots each owns at first.
pub const PASTE_SHARDS: [(&str, u8, u8); 2] = [("p0", 0, 127), ("p1", 128, 255)];
/// Every P shard host; a P shard's index everywhere is its place here.
pub const PASTE_HOSTS: [&str; 2] = [PASTE_SHARDS[0].0, PASTE_SHARDS[1].0];

pub fn gateway(index: usize) -> String {
    format!("gw{index}")
}

pub fn sweeper(index: usize) -> String {
    format!("sweeper{index}")
}

pub fn client(index: usize) -> String {
    format!("client{index}")
}

/// Every host that can fail, for the nemesis.
pub fn servers() -> Vec<String> {
    let shards = KEY_SHARDS.iter().chain(&PASTE_SHARDS).map(|(name, ..)| (*name).to_owned());
    let callers = (0..GATEWAYS).map(gateway).chain((0..SWEEPERS).map(sweeper));
    shards.chain(callers).chain([reshard::CTL.to_owned()]).collect()
}

fn range(first: u8, last: u8) -> anyhow::Result<SlotRange> {
    Ok(SlotRange::new(first, last)?)
}

/// The ranges of [`KEY_SHARDS`] and [`PASTE_SHARDS`] stored in the shards'
/// databases, as each one's first start stores its `--slots`; every later
/// start (a restart by the nemesis) serves what is stored, which after a
/// move is no longer the first range.
pub fn first_start(disk: &Disk, keys: &[Database], pastes: &[Database]) -> anyhow::Result<()> {
    let kinds = KEY_SHARDS.iter().zip(keys).map(|(shard, db)| (ShardKind::Key, shard, db));
    let kinds = kinds.chain(PASTE_SHARDS.iter().zip(pastes).map(|(shard, db)| (ShardKind::Paste, shard, db)));
    for (kind, &(_, first, last), db) in kinds {
        claimed(disk, db.clone(), kind, Some(range(first, last)?.into()))?;
    }
    let spare = keys.get(KEY_SHARDS.len()).context("the spare K shard has a database")?;
    claimed(disk, spare.clone(), ShardKind::Key, Some(OwnedSlots::Nothing))?;
    Ok(())
}

pub async fn serve_keys(store: KeyStore, shard: usize, owners: Owners, disk: Disk) -> anyhow::Result<()> {
    let slots = claimed(&disk, store.database().clone(), ShardKind::Key, None)?;
    owners.started(shard, slots.clone());
    let clock = store.clock().clone();
    let moves = SlotMovesService::new(slots.clone(), store.database().clone(), &pastebin_keys::MOVED_TABLE, clock);
    let routes = Routes::new(KeyServiceImpl::new(store, slots).into_server()).add_service(moves.into_server());
    serve_shard(routes, disk).await
}

pub async fn serve_pastes(store: PasteStore, shard: usize, owners: Owners, disk: Disk) -> anyhow::Result<()> {
    let slots = claimed(&disk, store.database().clone(), ShardKind::Paste, None)?;
    owners.started(shard, slots.clone());
    let clock = store.clock().clone();
    let moves = SlotMovesService::new(slots.clone(), store.database().clone(), &pastebin_pastes::MOVED_TABLE, clock);
    let routes = Routes::new(PasteServiceImpl::new(store, slots).into_server()).add_service(moves.into_server());
    serve_shard(routes, disk).await
}

/// The shard's range, stored in its database as a real shard's start does
/// (`asked`: its `--slots`; `None`: what is stored): one atomic step on the
/// disk, like every other database access here (a claim run on sqlx's own
/// threads would race simulated time, and a seed would no longer replay
/// the same history).
fn claimed(
    disk: &Disk,
    db: pastebin_runtime::db::Database,
    kind: ShardKind,
    asked: Option<OwnedSlots>,
) -> anyhow::Result<ShardSlots> {
    Ok(disk.run(async move { ShardSlots::claim(db.pool(), kind, asked, Resharding::Refuse, 0).await })?)
}

/// A shard's service on the simulated network, each RPC one step on the disk.
async fn serve_shard(routes: Routes, disk: Disk) -> anyhow::Result<()> {
    let listener = net::listen().await?;
    let server = Server::builder().layer(OnDiskLayer(disk)).add_routes(routes);
    server.serve_with_incoming(net::incoming(listener)).await?;
    Ok(())
}

/// The gateway's budget stays the real 2 s: it is what the client's
/// shorter timeouts race against. It listens at once and answers "not
/// ready" until every shard has described itself.
pub async fn serve_gateway(objects: SimObjects, clock: HostClock, minter: Arc<dyn Minter>) -> anyhow::Result<()> {
    let settings = GatewaySettings::new("https://paste.sim");
    let slots = SlotMapCell::default();
    slots.rediscover_with(rediscovery());
    let discovering = slots.clone();
    tokio::spawn(async move { discovering.fill(first_slot_map().await) });
    let gateway = Gateway::new(slots, Arc::new(objects), Arc::new(clock), minter, settings);
    let listener = net::listen().await?;
    let service = PasteApiService::new(gateway).into_server();
    Server::builder().add_service(service).serve_with_incoming(net::incoming(listener)).await?;
    Ok(())
}

/// The sweeper's thresholds scaled from minutes to seconds so a run stays
/// short; the fence makes any threshold safe (docs/design.md#fence), and a
/// short one fences live creates more often, which is the harder case.
pub fn sweeper_settings() -> SweeperSettings {
    SweeperSettings {
        interval: Duration::from_millis(700),
        recovery_threshold: Duration::from_secs(5),
        batch_size: 3,
        call_timeout: Duration::from_secs(1),
        object_age_floor: Duration::from_secs(4),
        reap_interval: Duration::from_secs(3),
        ..SweeperSettings::default()
    }
}

pub async fn run_sweeper(objects: SimObjects, clock: HostClock) -> anyhow::Result<()> {
    let sweeper = Sweeper::new(first_slot_map().await, Arc::new(objects), Arc::new(clock), sweeper_settings())
        .rediscovering(rediscovery());
    sweeper.run(std::future::pending()).await;
    Ok(())
}
