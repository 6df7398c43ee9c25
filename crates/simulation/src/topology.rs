//! The simulated deployment: two K shards splitting the slots, one P shard,
//! two gateways and two sweepers, each a turmoil host running the real
//! service code; and the settings the simulation scales down.

use std::{sync::Arc, time::Duration};

use pastebin_core::{Minter, SlotRange};
use pastebin_gateway::{Gateway, GatewaySettings, PasteApiService, SlotMapCell};
use pastebin_keys::{KeyClient, KeyServiceImpl, KeyStore};
use pastebin_pastes::{PasteClient, PasteServiceImpl, PasteStore};
use pastebin_proto::shard::v1::ShardKind;
use pastebin_runtime::shard_slots::{Resharding, ShardSlots};
use pastebin_shards::{Shard, SlotMap};
use pastebin_sweeper::{Sweeper, SweeperSettings};
use tonic::{
    service::Routes,
    transport::{Channel, Server},
};

use crate::{
    clock::HostClock,
    disk::{Disk, OnDiskLayer},
    net,
    objects::SimObjects,
};

pub const GATEWAYS: usize = 2;
pub const SWEEPERS: usize = 2;

/// The K shards and the slots each owns.
pub const KEY_SHARDS: [(&str, u8, u8); 2] = [("k0", 0, 127), ("k1", 128, 255)];
pub const PASTE_SHARDS: [(&str, u8, u8); 1] = [("p0", 0, 255)];

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
    shards.chain((0..GATEWAYS).map(gateway)).chain((0..SWEEPERS).map(sweeper)).collect()
}

fn range(first: u8, last: u8) -> anyhow::Result<SlotRange> {
    Ok(SlotRange::new(first, last)?)
}

/// The slot map every gateway and sweeper builds, with channels through
/// the simulated network. (Discovery by `Describe` is exercised by the
/// real-process tests; here the ranges are known.)
pub fn slot_map() -> anyhow::Result<SlotMap> {
    Ok(SlotMap::new(shards(&KEY_SHARDS, KeyClient::new)?, shards(&PASTE_SHARDS, PasteClient::new)?)?)
}

fn shards<C>(list: &[(&str, u8, u8)], client: fn(Channel) -> C) -> anyhow::Result<Vec<Shard<C>>> {
    list.iter()
        .map(|&(name, first, last)| {
            let address = format!("{name}:{}", net::PORT);
            Ok(Shard { address, slots: Some(range(first, last)?.into()), client: client(net::channel(name)?) })
        })
        .collect()
}

pub async fn serve_keys(store: KeyStore, slots: (u8, u8), disk: Disk) -> anyhow::Result<()> {
    let slots = claimed(&disk, store.database().clone(), ShardKind::Key, slots)?;
    serve_shard(Routes::new(KeyServiceImpl::new(store, slots).into_server()), disk).await
}

pub async fn serve_pastes(store: PasteStore, slots: (u8, u8), disk: Disk) -> anyhow::Result<()> {
    let slots = claimed(&disk, store.database().clone(), ShardKind::Paste, slots)?;
    serve_shard(Routes::new(PasteServiceImpl::new(store, slots).into_server()), disk).await
}

/// The shard's range, stored in its database as a real shard's start does:
/// one atomic step on the disk, like every other database access here (a
/// claim run on sqlx's own threads would race simulated time, and a seed
/// would no longer replay the same history).
fn claimed(
    disk: &Disk,
    db: pastebin_runtime::db::Database,
    kind: ShardKind,
    slots: (u8, u8),
) -> anyhow::Result<ShardSlots> {
    let asked = Some(range(slots.0, slots.1)?.into());
    Ok(disk.run(async move { ShardSlots::claim(db.pool(), kind, asked, Resharding::Allow, 0).await })?)
}

/// A shard's service on the simulated network, each RPC one step on the disk.
async fn serve_shard(routes: Routes, disk: Disk) -> anyhow::Result<()> {
    let listener = net::listen().await?;
    let server = Server::builder().layer(OnDiskLayer(disk)).add_routes(routes);
    server.serve_with_incoming(net::incoming(listener)).await?;
    Ok(())
}

/// The gateway's budget stays the real 2 s: it is what the client's
/// shorter timeouts race against.
pub async fn serve_gateway(objects: SimObjects, clock: HostClock, minter: Arc<dyn Minter>) -> anyhow::Result<()> {
    let settings = GatewaySettings::new("https://paste.sim");
    let slots = SlotMapCell::ready(slot_map()?);
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
    let sweeper = Sweeper::new(slot_map()?, Arc::new(objects), Arc::new(clock), sweeper_settings());
    sweeper.run(std::future::pending()).await;
    Ok(())
}
