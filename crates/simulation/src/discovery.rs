//! How gateways and sweepers find their slot map in the simulation: every
//! shard is asked `Describe` through the simulated network, and the map is
//! built from the answers, as `pastebin_shards::discover` builds it over TCP
//! (its TLS probing has nothing to probe here). A gateway builds it again
//! when a shard refuses a call as "not executed", a sweeper before each
//! round, so both follow slot moves (docs/design.md#moving-slots).

use std::{sync::Arc, time::Duration};

use pastebin_keys::KeyClient;
use pastebin_pastes::PasteClient;
use pastebin_runtime::grpc::CallError;
use pastebin_shards::{Rediscover, Shard, SlotMap};
use pastebin_slots::shard_slots::Described;
use tonic::transport::Channel;

use crate::{
    net,
    topology::{KEY_SHARDS, PASTE_SHARDS},
};

/// Each call of a discovery is bounded by this, as a real gateway's is.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(2);

/// The slot map as the shards describe themselves now, through the
/// simulated network, with each shard's generation (as
/// `pastebin_shards::discover` builds it over TCP). With `every_shard`, fails
/// when a shard does not answer in time; without, a silent shard is left
/// out of the answers (a refresh keeps its slots where they were). Fails
/// when no map can be built (between a move's release and take no shard
/// owns the slots): the caller keeps its map.
async fn described_map(every_shard: bool) -> anyhow::Result<SlotMap> {
    let deadline = tokio::time::Instant::now() + DESCRIBE_TIMEOUT;
    let (keys, pastes) = futures::future::join(
        futures::future::join_all(
            KEY_SHARDS.iter().map(|(name, ..)| describe(name, KeyClient::new, deadline, every_shard)),
        ),
        futures::future::join_all(
            PASTE_SHARDS.iter().map(|(name, ..)| describe(name, PasteClient::new, deadline, every_shard)),
        ),
    )
    .await;
    let (keys, pastes): (Vec<_>, Vec<_>) =
        (keys.into_iter().collect::<anyhow::Result<_>>()?, pastes.into_iter().collect::<anyhow::Result<_>>()?);
    Ok(SlotMap::described(keys, pastes)?)
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
    every_shard: bool,
) -> anyhow::Result<(Shard<C>, u64)> {
    let client = client(net::channel(name)?);
    let address = format!("{name}:{}", net::PORT);
    let answer = tokio::time::timeout_at(deadline, client.describe_by(deadline)).await;
    match answer {
        Ok(Ok(described)) => {
            let shard = Shard { address, slots: Some(described.owned), client, colocated: described.colocated };
            Ok((shard, described.generation))
        }
        _ if !every_shard => Ok((Shard { address, slots: None, client, colocated: false }, 0)),
        Ok(Err(error)) => anyhow::bail!("{name} did not describe itself: {error}"),
        Err(_) => anyhow::bail!("{name} did not describe itself in time"),
    }
}

/// How gateways and sweepers discover their slot map again: the shards
/// that answer are followed, as over TCP.
pub fn rediscovery() -> Rediscover {
    Arc::new(|| Box::pin(described_map(false)))
}

/// The slot map once every shard has described itself, asking again until
/// then (a real gateway or sweeper waits for every shard the same way).
pub async fn first_slot_map() -> SlotMap {
    loop {
        if let Ok(map) = described_map(true).await {
            return map;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
