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
//! - [`follow_topology`]: with `--topology`, every change etcd records makes
//!   the map be discovered again until it agrees with the grants
//!   (docs/design.md#routers-watch-the-topology).
//! - [`reconcile`]: one slot's cross-check of K, P and the object store
//!   (lost pastes, orphans, missing objects), read-only.
//! - [`address_book`]: the flags every command flattens (shard addresses,
//!   object store), `endpoints.json`, and [`channel`], the one place a
//!   client channel to a shard is made.
//! - [`DeploymentId`]: which deployment a data directory (and a backup of it) belongs to.
//! - `tls_probe`: a failed first call that is a TLS mismatch is told apart
//!   from a shard that is down, and named with the flags to add
//!   ([`tls_mismatch`], for tools that call a shard without [`discover`]).

pub mod address_book;
mod deployment_id;
mod discover;
mod follow;
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

use pastebin_colocated::ColocatedClient;
use pastebin_core::{OwnedSlots, Slot};
use pastebin_keys::KeyClient;
use pastebin_pastes::PasteClient;
pub use recovery::{fence, fence_batch, recover_batch, recover_key, BatchFence, Decision, FenceError, Fenced};

pub use address_book::{
    channel, endpoint, AddressError, Endpoints, EndpointsError, ObjectStoreArgs, ObjectStoreConfig, ShardAddresses,
    DEFAULT_DATA_DIR,
};
pub use deployment_id::{DeploymentId, DeploymentIdError};
pub use discover::{describe_once, discover, rediscovery, tls_mismatch, DiscoveryError, Patience, ShardKind};
pub use follow::follow_topology;
pub use table::{Claim, CoverageError, SlotTable};

/// One shard: where it is, what it said it owns (`None` when it did not
/// answer an operator tool), and the client that calls it.
#[derive(Clone)]
pub struct Shard<C> {
    pub address: String,
    pub slots: Option<OwnedSlots>,
    pub client: C,
    /// Whether it said it serves both kinds for its slots on one database
    /// (docs/design.md#the-colocated-create).
    pub colocated: bool,
}

/// Shards of one kind, in the order they were listed, who owns each slot,
/// and the highest generation each shard has said (0 before it answered).
#[derive(Clone)]
struct ShardSet<C> {
    clients: Vec<C>,
    addresses: Vec<String>,
    table: SlotTable,
    generations: Vec<u64>,
    /// Whether each shard said what it owns (an operator tool goes on without the others).
    answered: Vec<bool>,
    /// Whether each shard said it is colocated.
    colocated: Vec<bool>,
}

impl<C> ShardSet<C> {
    fn new(kind: &'static str, shards: Vec<(Shard<C>, u64)>) -> Result<Self, CoverageError> {
        let claims: Vec<Claim> =
            shards.iter().map(|(s, _)| Claim { address: s.address.clone(), slots: s.slots }).collect();
        let table = SlotTable::build(kind, &claims)?;
        let (mut addresses, mut clients, mut generations, mut answered, mut colocated) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for (shard, generation) in shards {
            answered.push(shard.slots.is_some());
            colocated.push(shard.colocated);
            addresses.push(shard.address);
            clients.push(shard.client);
            generations.push(generation);
        }
        Ok(Self { clients, addresses, table, generations, answered, colocated })
    }

    /// See [`SlotMap::following`]; a set of other addresses is not followed.
    fn following(self, known: &Self) -> Self {
        if self.addresses != known.addresses {
            return self;
        }
        let table = self.table.following(&known.table);
        let generations = self.generations.iter().zip(&known.generations).map(|(now, known)| *now.max(known)).collect();
        Self { table, generations, ..self }
    }

    fn generation(&self) -> u64 {
        self.generations.iter().sum()
    }

    /// The slots `shard` is known to own (`0-127`, `none`), or `unknown`
    /// when it did not answer and was never seen to own any.
    fn slots_of(&self, shard: usize) -> String {
        let slots = self.table.slots_of(shard);
        if !self.answered[shard] && slots == "none" {
            "unknown".to_owned()
        } else {
            slots
        }
    }

    /// `A 0-127, B 128-255, C none`: each shard by address, with the slots
    /// it is known to own.
    fn describe(&self) -> String {
        let shards = self.addresses.iter().enumerate();
        shards.map(|(index, address)| format!("{address} {}", self.slots_of(index))).collect::<Vec<_>>().join(", ")
    }
}

/// Which K shard and which P shard own each of the 256 slots. A key's slot
/// picks its K shard; a paste id's prefix, which is that same slot, picks
/// its P shard. Shard indices are positions in the address lists.
#[derive(Clone)]
pub struct SlotMap {
    keys: ShardSet<KeyClient>,
    pastes: ShardSet<PasteClient>,
    /// For each K shard that said it is colocated, its one-commit create.
    colocated: Vec<Option<ColocatedClient>>,
}

impl SlotMap {
    /// Every slot must be owned by exactly one shard of each kind.
    pub fn new(keys: Vec<Shard<KeyClient>>, pastes: Vec<Shard<PasteClient>>) -> Result<Self, CoverageError> {
        Self::described(unversioned(keys), unversioned(pastes))
    }

    /// The map the shards' answers describe, each with the generation it
    /// said (0 for a shard that did not answer).
    pub fn described(
        keys: Vec<(Shard<KeyClient>, u64)>,
        pastes: Vec<(Shard<PasteClient>, u64)>,
    ) -> Result<Self, CoverageError> {
        let keys = ShardSet::new("key", keys)?;
        let colocated = keys.clients.iter().zip(&keys.colocated);
        let colocated = colocated.map(|(client, said)| said.then(|| ColocatedClient::new(client.channel().clone())));
        Ok(Self { colocated: colocated.collect(), keys, pastes: ShardSet::new("paste", pastes)? })
    }

    /// This map, discovered again, where the shards that did not answer
    /// keep the slots they had in `known` (the map of the same lists in
    /// use): each shard is the authority for its own slots, so a caller
    /// follows a move between the shards that answer while an unrelated
    /// one is down. Each shard's generation is the highest it has said, so
    /// the map's never goes down, even when a shard's database lost its
    /// last increment (docs/design.md#moving-slots).
    pub fn following(self, known: &SlotMap) -> Self {
        Self { keys: self.keys.following(&known.keys), pastes: self.pastes.following(&known.pastes), ..self }
    }

    /// The sum of the highest generation each shard has said: every move
    /// raises it, so a larger one is newer. Not a shard's own generation
    /// (`ctl reshard --status` prints those).
    pub fn generation(&self) -> u64 {
        self.keys.generation() + self.pastes.generation()
    }

    fn same_as(&self, other: &SlotMap) -> bool {
        self.generation() == other.generation()
            && self.keys.table == other.keys.table
            && self.pastes.table == other.pastes.table
    }

    /// Whether no shard at all answered: nothing is serving at these
    /// addresses (a stopped `pastebin up`), rather than some shard being down.
    pub fn none_answered(&self) -> bool {
        !self.keys.answered.iter().chain(&self.pastes.answered).any(|answered| *answered)
    }

    /// The slots K shard `shard` is known to own (`0-127`, `none`), or
    /// `unknown` for a shard that did not answer.
    pub fn key_shard_slots(&self, shard: usize) -> String {
        self.keys.slots_of(shard)
    }

    /// The slots P shard `shard` is known to own; see [`Self::key_shard_slots`].
    pub fn paste_shard_slots(&self, shard: usize) -> String {
        self.pastes.slots_of(shard)
    }

    /// How K shard `shard` is named to people: `ADDRESS (slots 0-127)`. Its
    /// position in a list is no name: tools may list shards in other orders
    /// (docs/operations.md#operator-tools).
    pub fn key_shard_name(&self, shard: usize) -> String {
        format!("{} (slots {})", self.keys.addresses[shard], self.key_shard_slots(shard))
    }

    /// How P shard `shard` is named to people; see [`Self::key_shard_name`].
    pub fn paste_shard_name(&self, shard: usize) -> String {
        format!("{} (slots {})", self.pastes.addresses[shard], self.paste_shard_slots(shard))
    }

    pub fn key_shard(&self, slot: Slot) -> &KeyClient {
        &self.keys.clients[self.key_shard_index(slot)]
    }

    pub fn paste_shard(&self, slot: Slot) -> &PasteClient {
        &self.pastes.clients[self.paste_shard_index(slot)]
    }

    /// The colocated shard that is both the K and the P shard of `slot`,
    /// where a create is one commit (docs/design.md#the-colocated-create);
    /// `None` where the slot's K and P are two shards, which the saga joins.
    pub fn colocated_shard(&self, slot: Slot) -> Option<&ColocatedClient> {
        let (key, paste) = (self.key_shard_index(slot), self.paste_shard_index(slot));
        let one_shard = self.keys.addresses[key] == self.pastes.addresses[paste] && self.pastes.colocated[paste];
        self.colocated[key].as_ref().filter(|_| one_shard)
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

/// Shards that said no generation (0).
fn unversioned<C>(shards: Vec<Shard<C>>) -> Vec<(Shard<C>, u64)> {
    shards.into_iter().map(|shard| (shard, 0)).collect()
}

/// `key shards A 0-127, B 128-255; paste shards C 0-255 (map generation 7)`.
impl std::fmt::Display for SlotMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (keys, pastes, generation) = (self.keys.describe(), self.pastes.describe(), self.generation());
        write!(f, "key shards {keys}; paste shards {pastes} (map generation {generation})")
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
    /// Why the map could not be discovered again, since when: logged once
    /// per cause, not once per refresh.
    undiscovered: std::sync::Mutex<Option<(String, tokio::time::Instant)>>,
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

    /// Sets the map, unless a newer one is already there.
    pub fn fill(&self, map: SlotMap) {
        let mut current = self.0.map.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.as_ref().is_none_or(|known| known.generation() <= map.generation()) {
            *current = Some(Arc::new(map));
        }
    }

    /// Sets `answered`, followed from the map in use (see
    /// [`SlotMap::following`]); whether the owners or the generation changed.
    fn follow(&self, answered: SlotMap) -> bool {
        let mut current = self.0.map.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        let map = match current.as_deref() {
            Some(known) => answered.following(known),
            None => answered,
        };
        let changed = current.as_deref().is_none_or(|known| !known.same_as(&map));
        if current.as_ref().is_none_or(|known| known.generation() <= map.generation()) {
            *current = Some(Arc::new(map));
        }
        changed
    }

    /// How [`Self::refresh`] finds a newer map; without it, refreshing does nothing.
    pub fn rediscover_with(&self, rediscover: Rediscover) {
        let _ = self.0.rediscover.set(rediscover);
    }

    /// Discovers the map again (one refresh at a time; callers arriving
    /// while one runs wait for it). The shards that answer are followed; a
    /// silent one keeps its slots. A map that cannot be built now (a move
    /// between its release and its take, or two shards claiming a slot)
    /// leaves the current one: the calls it routes are refused as "not
    /// executed" and retried. Logged only when the map changed, and once
    /// per cause while it cannot be discovered.
    pub async fn refresh(&self) {
        let Some(rediscover) = self.0.rediscover.get() else { return };
        let mut last = self.0.refreshing.lock().await;
        if last.is_some_and(|at| at.elapsed() < REFRESH_SPACING) {
            return;
        }
        match rediscover().await {
            Ok(map) => {
                if let Some((_, since)) = self.undiscovered().take() {
                    tracing::info!(after_secs = since.elapsed().as_secs(), "slot map discovered again");
                }
                if self.follow(map) {
                    let now = self.get().map(|map| map.to_string()).unwrap_or_default();
                    tracing::info!(map = %now, "slot map changed");
                }
            }
            Err(error) => self.cannot_discover(format!("{error:#}")),
        }
        *last = Some(tokio::time::Instant::now());
    }

    /// A gap lasts between a move's release and its take, and for good
    /// when a shard owns slots no caller lists (docs/operations.md#slot-maps).
    fn cannot_discover(&self, cause: String) {
        let mut undiscovered = self.undiscovered();
        if undiscovered.as_ref().is_some_and(|(known, _)| *known == cause) {
            return;
        }
        tracing::warn!(
            error = %cause,
            "the slot map cannot be discovered again; keeping the current one, and the calls for those slots are \
             refused as moving until a shard claims them. If no ctl reshard is running, compare this process's \
             shard lists with `pastebin ctl stats`"
        );
        *undiscovered = Some((cause, tokio::time::Instant::now()));
    }

    fn undiscovered(&self) -> std::sync::MutexGuard<'_, Option<(String, tokio::time::Instant)>> {
        self.0.undiscovered.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// What the test's subscriber wrote.
    #[derive(Clone, Default)]
    struct Written(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Written {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_map_that_cannot_be_discovered_is_logged_once_per_cause() {
        let written = Written::default();
        let writer = written.clone();
        let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
        let _logging = tracing::subscriber::set_default(subscriber);
        let calls = Arc::new(AtomicUsize::new(0));
        let cell = SlotMapCell::default();
        let counted = calls.clone();
        cell.rediscover_with(Arc::new(move || {
            let call = counted.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                let slots = if call < 5 { "0-63" } else { "0-127" };
                Err(anyhow::anyhow!("no key shard claims slots {slots}"))
            })
        }));
        for _ in 0..8 {
            cell.refresh().await;
            tokio::time::sleep(REFRESH_SPACING).await;
        }
        assert_eq!(calls.load(Ordering::SeqCst), 8, "every refresh asked the shards");
        let logs = String::from_utf8(written.0.lock().unwrap().clone()).unwrap();
        let lines: Vec<_> = logs.lines().filter(|line| line.contains("cannot be discovered again")).collect();
        assert_eq!(lines.len(), 2, "once per cause: {logs}");
        assert!(lines[0].contains("WARN") && lines[0].contains("no key shard claims slots 0-63"), "{logs}");
        assert!(lines[1].contains("no key shard claims slots 0-127") && lines[1].contains("ctl stats"), "{logs}");
    }
}
