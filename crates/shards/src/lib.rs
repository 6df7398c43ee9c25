//! The deployment's topology: which shards there are, where, and which
//! slots each owns.
//!
//! - [`SlotTable`] is the pure slot-map logic: the ranges the shards claim
//!   become the owner of each of the 256 slots, or a [`CoverageError`] naming
//!   the overlap or the gap. No I/O.
//! - [`discover`] asks every shard address `Describe` and builds the
//!   [`SlotMap`] from the answers, so the order of an address list never
//!   matters (docs/design.md#shard-identity). A gateway holds it in a
//!   [`SlotMapCell`], empty (not ready) until every shard has answered.
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

use std::sync::{Arc, OnceLock};

use pastebin_core::{Slot, SlotRange};
use pastebin_keys::KeyClient;
use pastebin_pastes::PasteClient;
pub use recovery::{fence, fence_batch, recover_batch, recover_key, BatchFence, Decision, FenceError, Fenced};

pub use address_book::{
    channel, endpoint, AddressError, Endpoints, EndpointsError, ObjectStoreArgs, ObjectStoreConfig, ShardAddresses,
    DEFAULT_DATA_DIR,
};
pub use discover::{discover, tls_mismatch, DiscoveryError, Patience};
pub use table::{Claim, CoverageError, SlotTable};

/// One shard: where it is, the range it said it owns (`None` when it did
/// not answer an operator tool), and the client that calls it.
#[derive(Clone)]
pub struct Shard<C> {
    pub address: String,
    pub slots: Option<SlotRange>,
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
}

impl SlotMap {
    /// Every slot must be owned by exactly one shard of each kind.
    pub fn new(keys: Vec<Shard<KeyClient>>, pastes: Vec<Shard<PasteClient>>) -> Result<Self, CoverageError> {
        Ok(Self { keys: ShardSet::new("key", keys)?, pastes: ShardSet::new("paste", pastes)? })
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

/// A slot map that may still be being discovered: empty until every shard
/// has said which slots it owns. A gateway listens at once and answers
/// "not ready" until then, instead of routing on a guess.
#[derive(Clone, Default)]
pub struct SlotMapCell(Arc<OnceLock<SlotMap>>);

impl SlotMapCell {
    pub fn ready(map: SlotMap) -> Self {
        Self(Arc::new(OnceLock::from(map)))
    }

    /// The map, once discovered.
    pub fn get(&self) -> Option<&SlotMap> {
        self.0.get()
    }

    /// Sets the map; the first one set stays (a map never changes under a
    /// running process: a new slot map is a restart).
    pub fn fill(&self, map: SlotMap) {
        let _ = self.0.set(map);
    }
}
