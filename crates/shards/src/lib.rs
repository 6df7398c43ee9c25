//! The deployment's topology: which shards there are, where, and which
//! slots each owns.
//!
//! - [`SlotTable`] is the pure slot-map logic: the ranges the shards claim
//!   become the owner of each of the 256 slots, or a [`CoverageError`] naming
//!   the overlap or the gap. No I/O.
//! - [`discover`] asks every shard address `Describe` and builds the
//!   [`SlotMap`] from the answers, so the order of an address list never
//!   matters (docs/design.md#shard-identity). A gateway or a sweeper holds
//!   it in a [`SlotMapCell`], empty (not ready) until every shard has
//!   answered, and replaced by a newer one when a shard says the map is out
//!   of date (docs/design.md#moving-slots).
//! - [`reconcile`]: one slot's cross-check of K, P and the object store
//!   (lost pastes, orphans, missing objects), read-only.
//! - [`address_book`]: the flags every command flattens (shard addresses,
//!   object store), `endpoints.json`, and [`channel`], the one place a
//!   client channel to a shard is made.
//! - `tls_probe`: a failed first call that is a TLS mismatch is told apart
//!   from a shard that is down, and named with the flags to add
//!   ([`tls_mismatch`], for tools that call a shard without [`discover`]).

pub mod address_book;
mod discover;
pub mod reconcile;
mod recovery;
mod table;
mod tls_probe;

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, OnceLock, RwLock},
    time::Duration,
};

use pastebin_core::{OwnedSlots, Slot};
use pastebin_keys::KeyClient;
use pastebin_pastes::PasteClient;
pub use recovery::{fence, fence_batch, recover_batch, recover_key, BatchFence, Decision, FenceError, Fenced};

pub use address_book::{
    channel, endpoint, AddressError, Endpoints, EndpointsError, ObjectStoreArgs, ObjectStoreConfig, ShardAddresses,
    DEFAULT_DATA_DIR,
};
pub use discover::{discover, rediscovery, tls_mismatch, DiscoveryError, Patience};
pub use table::{Claim, CoverageError, SlotTable};

/// One shard: where it is, what it said it owns (`None` when it did not
/// answer an operator tool), and the client that calls it.
#[derive(Clone)]
pub struct Shard<C> {
    pub address: String,
    pub slots: Option<OwnedSlots>,
    pub client: C,
}

/// Shards of one kind, in the order they were listed, and who owns each slot.
#[derive(Clone)]
struct ShardSet<C> {
    clients: Vec<C>,
    addresses: Vec<String>,
    table: SlotTable,
}

impl<C> ShardSet<C> {
    fn new(kind: &'static str, shards: Vec<Shard<C>>) -> Result<Self, CoverageError> {
        let claims: Vec<Claim> = shards.iter().map(|s| Claim { address: s.address.clone(), slots: s.slots }).collect();
        let table = SlotTable::build(kind, &claims)?;
        let (addresses, clients) = shards.into_iter().map(|s| (s.address, s.client)).unzip();
        Ok(Self { clients, addresses, table })
    }
}

/// Which K shard and which P shard own each of the 256 slots. A key's slot
/// picks its K shard; a paste id's prefix, which is that same slot, picks
/// its P shard. Shard indices are positions in the address lists.
#[derive(Clone)]
pub struct SlotMap {
    keys: ShardSet<KeyClient>,
    pastes: ShardSet<PasteClient>,
    generation: u64,
}

impl SlotMap {
    /// Every slot must be owned by exactly one shard of each kind.
    pub fn new(keys: Vec<Shard<KeyClient>>, pastes: Vec<Shard<PasteClient>>) -> Result<Self, CoverageError> {
        Ok(Self { keys: ShardSet::new("key", keys)?, pastes: ShardSet::new("paste", pastes)?, generation: 0 })
    }

    /// The same map, built from answers whose generations add up to
    /// `generation`: every move raises it, so a larger one is newer.
    pub fn at_generation(self, generation: u64) -> Self {
        Self { generation, ..self }
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn key_shard(&self, slot: Slot) -> &KeyClient {
        &self.keys.clients[self.key_shard_index(slot)]
    }

    pub fn paste_shard(&self, slot: Slot) -> &PasteClient {
        &self.pastes.clients[self.paste_shard_index(slot)]
    }

    /// The K shard a call for `slot` goes to. A gateway's or sweeper's map
    /// waited for every shard, so this is the owner; on an operator tool's
    /// map a slot of unknown owner routes to a silent shard (its calls fail
    /// as unreachable). Show people [`Self::key_owner`] instead.
    pub fn key_shard_index(&self, slot: Slot) -> usize {
        self.keys.table.route(slot)
    }

    /// The P shard a call for `slot` goes to; see [`Self::key_shard_index`].
    pub fn paste_shard_index(&self, slot: Slot) -> usize {
        self.pastes.table.route(slot)
    }

    /// The K shard that said it owns `slot`, or `None` when no K shard
    /// that answered claims it.
    pub fn key_owner(&self, slot: Slot) -> Option<usize> {
        self.keys.table.owner(slot)
    }

    /// The P shard that said it owns `slot`, or `None` when no P shard
    /// that answered claims it.
    pub fn paste_owner(&self, slot: Slot) -> Option<usize> {
        self.pastes.table.owner(slot)
    }

    pub fn key_shards(&self) -> &[KeyClient] {
        &self.keys.clients
    }

    pub fn paste_shards(&self) -> &[PasteClient] {
        &self.pastes.clients
    }

    pub fn key_addresses(&self) -> &[String] {
        &self.keys.addresses
    }

    pub fn paste_addresses(&self) -> &[String] {
        &self.pastes.addresses
    }
}

/// How a process finds its slot map again (discovery of the same shards).
pub type Rediscover = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = anyhow::Result<SlotMap>> + Send>> + Send + Sync>;

/// A slot map that may still be being discovered: empty until every shard
/// has said which slots it owns. A gateway listens at once and answers
/// "not ready" until then, instead of routing on a guess. When a shard
/// refuses a call as "not executed" (a slot frozen by a move, or owned
/// elsewhere now), [`Self::refresh`] discovers the map again, once for all
/// the callers that saw it (docs/design.md#moving-slots).
#[derive(Clone, Default)]
pub struct SlotMapCell(Arc<Cell>);

#[derive(Default)]
struct Cell {
    map: RwLock<Option<Arc<SlotMap>>>,
    rediscover: OnceLock<Rediscover>,
    /// Held by the one refresh in flight; when the last one ended.
    refreshing: tokio::sync::Mutex<Option<tokio::time::Instant>>,
}

/// A refresh this soon after the last one is not repeated: the callers that
/// saw the same refusal share it.
const REFRESH_SPACING: Duration = Duration::from_millis(100);

impl SlotMapCell {
    pub fn ready(map: SlotMap) -> Self {
        let cell = Self::default();
        cell.fill(map);
        cell
    }

    /// The map, once discovered.
    pub fn get(&self) -> Option<Arc<SlotMap>> {
        self.0.map.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Sets the map, unless one at least as new is already there.
    pub fn fill(&self, map: SlotMap) {
        let mut current = self.0.map.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.as_ref().is_none_or(|known| known.generation() <= map.generation()) {
            *current = Some(Arc::new(map));
        }
    }

    /// How [`Self::refresh`] finds a newer map; without it, refreshing does nothing.
    pub fn rediscover_with(&self, rediscover: Rediscover) {
        let _ = self.0.rediscover.set(rediscover);
    }

    /// Discovers the map again (one refresh at a time; callers arriving
    /// while one runs wait for it). A map that cannot be built now (a shard
    /// silent, or a move between its two owners) leaves the current one:
    /// the calls it routes are refused as "not executed" and retried.
    pub async fn refresh(&self) {
        let Some(rediscover) = self.0.rediscover.get() else { return };
        let mut last = self.0.refreshing.lock().await;
        if last.is_some_and(|at| at.elapsed() < REFRESH_SPACING) {
            return;
        }
        match rediscover().await {
            Ok(map) => {
                tracing::info!(generation = map.generation(), "slot map discovered again");
                self.fill(map);
            }
            Err(error) => {
                tracing::info!(error = %format!("{error:#}"), "the slot map cannot be discovered again yet; keeping the current one")
            }
        }
        *last = Some(tokio::time::Instant::now());
    }
}
