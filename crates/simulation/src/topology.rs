//! The simulated deployment: two K shards splitting the slots (and a third
//! that owns none, for the operator's typos), two P shards splitting them,
//! two gateways, two sweepers and the operator's `ctl`, each a turmoil host
//! running the real service code; and the settings the simulation scales
//! down. Every process runs as the real ones do with `--topology`: who owns
//! which slot is decided by the topology store, here the real in-process
//! [`MemoryAuthority`] behind the same `Authority` trait etcd serves
//! (docs/testing.md#simulation). Shards start from their grant and follow
//! its watch; gateways and sweepers build their slot map from what the
//! shards describe ([`crate::discovery`]) and discover it again at each
//! change the watch shows.

use std::{sync::Arc, time::Duration};

use anyhow::Context;

use futures::StreamExt;
use pastebin_core::{LostCommits, Minter, OwnedSlots, SlotRange};
use pastebin_gateway::{Gateway, GatewaySettings, PasteApiService, SlotMapCell};
use pastebin_keys::{KeyServiceImpl, KeyStore};
use pastebin_pastes::{PasteServiceImpl, PasteStore};
use pastebin_proto::shard::v1::ShardKind;
use pastebin_runtime::db::Database;
use pastebin_slots::{
    granted::Granted,
    shard_slots::{Resharding, ShardSlots},
    slot_moves::SlotMovesService,
};
use pastebin_sweeper::{Sweeper, SweeperSettings};
use pastebin_topology::{Authority, Kind, MemoryAuthority, Topology};
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

/// The address a shard has in the topology, as callers dial it.
pub fn address(name: &str) -> String {
    format!("{name}:{}", net::PORT)
}

/// The topology store every process of a run shares.
pub type Store = Arc<MemoryAuthority>;

/// The ranges of [`KEY_SHARDS`] and [`PASTE_SHARDS`] stored in the shards'
/// databases, as each one's first start stores its `--slots`, then written
/// into the topology store from them, as `ctl topology init` does. From
/// then on every start (a restart by the nemesis) serves what the topology
/// grants, which after a move is no longer the first range.
pub fn first_start(disk: &Disk, keys: &[Database], pastes: &[Database], store: &Store) -> anyhow::Result<()> {
    let kinds = KEY_SHARDS.iter().zip(keys).map(|(shard, db)| (ShardKind::Key, shard, db));
    let kinds = kinds.chain(PASTE_SHARDS.iter().zip(pastes).map(|(shard, db)| (ShardKind::Paste, shard, db)));
    let mut first: Vec<(Kind, String, OwnedSlots)> = Vec::new();
    for (kind, &(name, first_slot, last), db) in kinds {
        let owned = OwnedSlots::from(range(first_slot, last)?);
        claimed(disk, db.clone(), kind, Some(owned))?;
        first.push((kind_of(kind), address(name), owned));
    }
    let spare = keys.get(KEY_SHARDS.len()).context("the spare K shard has a database")?;
    claimed(disk, spare.clone(), ShardKind::Key, Some(OwnedSlots::Nothing))?;
    first.push((Kind::Key, address(SPARE_KEY_SHARD), OwnedSlots::Nothing));
    for kind in Kind::ALL {
        let shards = first.iter().filter(|(of, ..)| *of == kind).map(|(_, name, owned)| (name.clone(), *owned));
        let initial = Topology::initial(shards)?;
        futures::executor::block_on(store.swap(kind, None, &initial))?;
    }
    Ok(())
}

fn kind_of(kind: ShardKind) -> Kind {
    match kind {
        ShardKind::Key => Kind::Key,
        _ => Kind::Paste,
    }
}

/// What the operator tells a K shard it restarts after its database lost
/// commits (`--may-have-lost-commits-since`, Unix ms), taken by its next
/// start; shared across its restarts, as the operator outlives them.
pub type LostSince = Arc<std::sync::Mutex<Option<i64>>>;

pub async fn serve_keys(
    store: KeyStore,
    shard: usize,
    owners: Owners,
    disk: Disk,
    authority: Store,
    lost_since: LostSince,
) -> anyhow::Result<()> {
    let db = store.database().clone();
    let slots = granted(&disk, db.clone(), ShardKind::Key, KEY_HOSTS[shard], &authority)?;
    owners.started(shard, slots.clone());
    let lost = lost_since.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    let lost = match lost {
        Some(since) => Some(lost_commits(&disk, &slots, &store, since)?),
        None => None,
    };
    let store = store.with_lost_commits(lost).with_search_windows(slots.search_windows());
    tokio::spawn(follow(slots.clone(), db, disk.clone(), authority, Kind::Key));
    let clock = store.clock().clone();
    let moves = SlotMovesService::new(slots.clone(), store.database().clone(), &pastebin_keys::MOVED_TABLE, clock);
    let routes = Routes::new(KeyServiceImpl::new(store, slots).into_server()).add_service(moves.into_server());
    serve_shard(routes, disk).await
}

/// A K shard's lost-commits window from `since` (Unix ms) to its start,
/// held over the slots it owns now as the real `--may-have-lost-commits-since`
/// holds it (docs/design.md#adopting-after-a-k-loss).
fn lost_commits(disk: &Disk, slots: &ShardSlots, store: &KeyStore, since: i64) -> anyhow::Result<LostCommits> {
    let now = pastebin_core::Clock::now(&**store.clock());
    let lost = LostCommits::new(pastebin_core::from_millis(since), now);
    let slots = slots.clone();
    let (since, until) = (pastebin_core::to_millis(lost.since), pastebin_core::to_millis(lost.search_first_until()));
    disk.run(async move {
        match slots.ownership().await.owned {
            OwnedSlots::Range(owned) => slots.hold_window(owned, since, until).await,
            OwnedSlots::Nothing => Ok(()),
        }
    })?;
    Ok(lost)
}

pub async fn serve_pastes(
    store: PasteStore,
    shard: usize,
    owners: Owners,
    disk: Disk,
    authority: Store,
) -> anyhow::Result<()> {
    let db = store.database().clone();
    let slots = granted(&disk, db.clone(), ShardKind::Paste, PASTE_HOSTS[shard], &authority)?;
    owners.started(shard, slots.clone());
    tokio::spawn(follow(slots.clone(), db, disk.clone(), authority, Kind::Paste));
    let clock = store.clock().clone();
    let moves = SlotMovesService::new(slots.clone(), store.database().clone(), &pastebin_pastes::MOVED_TABLE, clock);
    let routes = Routes::new(PasteServiceImpl::new(store, slots).into_server()).add_service(moves.into_server());
    serve_shard(routes, disk).await
}

/// A shard's start under the topology, as a real one's with `--topology`
/// and no `--slots`: its grant, its marker confirmed (one step on the disk;
/// the in-process store answers at once).
fn granted(disk: &Disk, db: Database, kind: ShardKind, name: &str, authority: &Store) -> anyhow::Result<ShardSlots> {
    let granted = Granted::new(authority.clone(), kind_of(kind), address(name));
    Ok(disk.run(async move { ShardSlots::claim_granted_unfollowed(db.pool(), kind, granted, None, 0).await })?)
}

/// The shard follows the topology's watch as a real one does, each change
/// taken up in one step on the disk (it may write the shard's marker).
async fn follow(slots: ShardSlots, db: Database, disk: Disk, authority: Store, kind: Kind) {
    let Ok(mut changes) = authority.watch(kind).await else { return };
    while let Some(Ok(topology)) = changes.next().await {
        let (slots, pool) = (slots.clone(), db.pool().clone());
        disk.run(async move { slots.follow_change(&pool, &topology).await });
    }
}

/// The shard's range, stored in its database as a real shard's first
/// start with `--slots` does (before the topology is written from them):
/// one atomic step on the disk, like every other database access here (a
/// claim run on sqlx's own threads would race simulated time, and a seed
/// would no longer replay the same history).
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
pub async fn serve_gateway(
    objects: SimObjects,
    clock: HostClock,
    minter: Arc<dyn Minter>,
    authority: Store,
) -> anyhow::Result<()> {
    let settings = GatewaySettings::new("https://paste.sim");
    let slots = SlotMapCell::default();
    slots.rediscover_with(rediscovery());
    let discovering = slots.clone();
    tokio::spawn(async move {
        discovering.fill(first_slot_map().await);
        pastebin_shards::follow_topology(discovering, authority);
    });
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

pub async fn run_sweeper(objects: SimObjects, clock: HostClock, authority: Store) -> anyhow::Result<()> {
    let sweeper = Sweeper::new(first_slot_map().await, Arc::new(objects), Arc::new(clock), sweeper_settings())
        .rediscovering(rediscovery());
    pastebin_shards::follow_topology(sweeper.slot_map_cell(), authority);
    sweeper.run(std::future::pending()).await;
    Ok(())
}
