//! How gateways and sweepers find their slot map in the simulation: every
//! shard is asked `Describe` through the simulated network, and the map is
//! built from the answers, as `pastebin_shards::discover` builds it over TCP
//! (its TLS probing has nothing to probe here). A gateway builds it again
//! when a shard refuses a call as "not executed", a sweeper before each
//! round, so both follow slot moves (docs/design.md#moving-slots).

use std::{sync::Arc, time::Duration};

use pastebin_keys::KeyClient;
use pastebin_pastes::PasteClient;
use pastebin_runtime::{grpc::CallError, shard_slots::Described};
use pastebin_shards::{Rediscover, Shard, SlotMap};
use tonic::transport::Channel;

use crate::{
    net,
    topology::{KEY_SHARDS, PASTE_SHARDS},
};

/// Each call of a discovery is bounded by this, as a real gateway's is.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The slot map as the shards describe themselves now, through the
/// simulated network, at the generation their answers add up to (as
/// `pastebin_shards::discover` builds it over TCP). Fails when a shard does
/// not answer in time, or when no map can be built (between a move's
/// release and take no shard owns the slots): the caller keeps its map.
async fn described_map() -> anyhow::Result<SlotMap> {
    let deadline = tokio::time::Instant::now() + DESCRIBE_TIMEOUT;
    let (keys, pastes) = futures::future::join(
        futures::future::join_all(KEY_SHARDS.iter().map(|(name, ..)| describe(name, KeyClient::new, deadline))),
        futures::future::join_all(PASTE_SHARDS.iter().map(|(name, ..)| describe(name, PasteClient::new, deadline))),
    )
    .await;
    let (keys, pastes): (Vec<_>, Vec<_>) =
        (keys.into_iter().collect::<anyhow::Result<_>>()?, pastes.into_iter().collect::<anyhow::Result<_>>()?);
    let generation = keys.iter().map(|(_, g)| g).chain(pastes.iter().map(|(_, g)| g)).sum();
    Ok(SlotMap::new(without_generations(keys), without_generations(pastes))?.at_generation(generation))
}

fn without_generations<C>(described: Vec<(Shard<C>, u64)>) -> Vec<Shard<C>> {
    described.into_iter().map(|(shard, _)| shard).collect()
}

/// A shard's client, for [`described_map`].
trait Describes: Sized {
    async fn describe_by(&self, deadline: tokio::time::Instant) -> Result<Described, CallError>;
}

impl Describes for KeyClient {
    async fn describe_by(&self, deadline: tokio::time::Instant) -> Result<Described, CallError> {
        self.with_deadline(deadline).describe().await
    }
}

impl Describes for PasteClient {
    async fn describe_by(&self, deadline: tokio::time::Instant) -> Result<Described, CallError> {
        self.with_deadline(deadline).describe().await
    }
}

async fn describe<C: Describes>(
    name: &str,
    client: fn(Channel) -> C,
    deadline: tokio::time::Instant,
) -> anyhow::Result<(Shard<C>, u64)> {
    let client = client(net::channel(name)?);
    let described = tokio::time::timeout_at(deadline, client.describe_by(deadline))
        .await
        .map_err(|_| anyhow::anyhow!("{name} did not describe itself in time"))?
        .map_err(|error| anyhow::anyhow!("{name} did not describe itself: {error}"))?;
    let address = format!("{name}:{}", net::PORT);
    Ok((Shard { address, slots: Some(described.owned), client }, described.generation))
}

/// How gateways and sweepers discover their slot map again.
pub fn rediscovery() -> Rediscover {
    Arc::new(|| Box::pin(described_map()))
}

/// The slot map once every shard has described itself, asking again until
/// then (a real gateway or sweeper waits for every shard the same way).
pub async fn first_slot_map() -> SlotMap {
    loop {
        if let Ok(map) = described_map().await {
            return map;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
