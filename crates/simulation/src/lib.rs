//! A deterministic simulation of the whole system (docs/testing.md#simulation).
//!
//! The real gateway, K and P services and sweepers run as turmoil hosts on a
//! simulated network and clock; K and P keep real SQLite databases
//! ([`disk`]); the object store is in process ([`objects`]). A seeded
//! [`nemesis`] partitions, delays, crashes and restarts hosts, skews clocks
//! and takes the object store away while seeded clients create pastes with
//! retries, and delete some ([`workload`]); it also has the operator move
//! slots between the K shards or the P shards with the real `ctl reshard`
//! ([`reshard`]), and after every step the shards' live ranges are checked
//! for a slot with two owners ([`ownership`]). Then every fault is healed,
//! the moves and the sweepers finish, and the [`history`] checker judges
//! what the clients saw against the final state. One seed replays one run.

pub mod amnesia;
mod clock;
mod discovery;
mod disk;
pub mod history;
pub mod nemesis;
mod net;
mod objects;
mod ownership;
pub mod reshard;
mod topology;
mod workload;

use std::{sync::Arc, time::Duration};

use anyhow::Context;
use pastebin_core::{Minter, SeededMinter};
use pastebin_ctl::reshard::Kind;
use pastebin_keys::KeyStore;
use pastebin_pastes::PasteStore;
use pastebin_runtime::db::Database;
use pastebin_topology::{Authority, Kind as TopologyKind};
use rand::{rngs::StdRng, Rng, SeedableRng};
use sqlx::Row;

use crate::{
    amnesia::Amnesia,
    clock::{Clocks, SimTime},
    disk::Disk,
    history::{Entry, FinalState, History, KeyRow, KeySpec, Violation},
    nemesis::Nemesis,
    objects::SimObjects,
    ownership::Owners,
    reshard::Operator,
    workload::ClientPlan,
};

const TICK: Duration = Duration::from_millis(5);
const MAX_LATENCY: Duration = Duration::from_millis(20);
/// Clients that have not finished by then are a finding in themselves.
const WORKLOAD_LIMIT: Duration = Duration::from_secs(180);
/// How long, after healing, the sweepers get to leave no key pending.
const RECOVERY_LIMIT: Duration = Duration::from_secs(60);
const CLIENTS: usize = 3;
const KEYS_PER_CLIENT: usize = 6;

/// What one seed did and what the checker found.
#[derive(Debug)]
pub struct Report {
    pub seed: u64,
    pub history: Vec<Entry>,
    /// What the nemesis did, and when.
    pub faults: Vec<(Duration, nemesis::Fault)>,
    /// The shards' databases rolled back to a snapshot, and when.
    pub rollbacks: Vec<(Duration, amnesia::Rollback)>,
    /// What the operator's `ctl reshard` runs ended with, and when.
    pub moves: Vec<(Duration, reshard::Seen)>,
    pub violations: Vec<Violation>,
    /// Simulated time the run took.
    pub simulated: Duration,
}

impl Report {
    pub fn creates(&self) -> usize {
        self.history.iter().filter(|entry| matches!(entry.event, history::Event::Created { .. })).count()
    }

    /// The slot moves `ctl` finished.
    pub fn moves(&self) -> usize {
        self.moves.iter().filter(|(_, seen)| matches!(seen, reshard::Seen::Moved(_))).count()
    }

    /// The slot moves `ctl` finished between the P shards (tombstones
    /// included).
    pub fn paste_moves(&self) -> usize {
        let of_pastes = |seen: &reshard::Seen| matches!(seen, reshard::Seen::Moved(moved) if moved.kind == Kind::Paste);
        self.moves.iter().filter(|(_, seen)| of_pastes(seen)).count()
    }

    /// The pastes a client deleted (answered 204).
    pub fn deletes(&self) -> usize {
        let deleted = |event: &history::Event| {
            matches!(event, history::Event::Deleted { outcome: history::DeleteOutcome::Deleted, .. })
        };
        self.history.iter().filter(|entry| deleted(&entry.event)).count()
    }

    /// Rollbacks that struck while a move was in progress (at either end).
    pub fn rollbacks_mid_move(&self) -> usize {
        let mid = |phase: &str| !phase.starts_with("no ");
        self.rollbacks.iter().filter(|(_, rollback)| mid(&rollback.phase_then) || mid(&rollback.phase_now)).count()
    }

    /// The moves in which the operator made a mistake ([`reshard::Mistake`]).
    pub fn mistakes(&self) -> usize {
        let mistaken = |fault: &nemesis::Fault| matches!(fault, nemesis::Fault::MoveSlots { mistake: Some(_), .. });
        self.faults.iter().filter(|(_, fault)| mistaken(fault)).count()
    }

    /// Crashes and restarts of `ctl` while a move was running: each one
    /// left a move for a rerun to resume.
    pub fn ctl_crashes_mid_move(&self) -> usize {
        let asked = self.faults.iter().filter(|(_, fault)| matches!(fault, nemesis::Fault::MoveSlots { .. }));
        let ended = |seen: &reshard::Seen| matches!(seen, reshard::Seen::Moved(_) | reshard::Seen::Kept(_));
        let finished = self.moves.iter().filter(|(_, seen)| ended(seen));
        let mut finished = finished.map(|(at, _)| *at);
        let running: Vec<(Duration, Duration)> =
            asked.map(|(at, _)| (*at, finished.next().unwrap_or(Duration::MAX))).collect();
        let ctl_down = |fault: &nemesis::Fault| matches!(fault, nemesis::Fault::Crash(host) | nemesis::Fault::Restart(host) if host == reshard::CTL);
        let crashes = self.faults.iter().filter(|(_, fault)| ctl_down(fault));
        crashes.filter(|(at, _)| running.iter().any(|(from, to)| from <= at && at < to)).count()
    }
}

/// The workload of a seed: every client's keys, one of them shared by two
/// clients (the same request sent by two processes at once).
fn workload(seed: u64) -> (Vec<KeySpec>, Vec<ClientPlan>) {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6b65_7973);
    let keys: Vec<KeySpec> = (0..CLIENTS * KEYS_PER_CLIENT)
        .map(|index| KeySpec {
            key: uuid::Builder::from_random_bytes(rng.random()).into_uuid().to_string(),
            content: format!("paste {index} of seed {seed}"),
        })
        .collect();
    let mut plans: Vec<ClientPlan> = (0..CLIENTS)
        .map(|client| ClientPlan { client, keys: (0..KEYS_PER_CLIENT).map(|k| client * KEYS_PER_CLIENT + k).collect() })
        .collect();
    plans[1].keys.insert(0, 0);
    (keys, plans)
}

/// The shards' databases, on a fresh directory.
struct Shards {
    keys: Vec<(KeyStore, Database)>,
    pastes: Vec<(PasteStore, Database)>,
}

impl Shards {
    fn key_databases(&self) -> Vec<Database> {
        self.keys.iter().map(|(_, db)| db.clone()).collect()
    }

    fn paste_databases(&self) -> Vec<Database> {
        self.pastes.iter().map(|(_, db)| db.clone()).collect()
    }
}

fn open_shards(
    disk: &Disk,
    dir: &std::path::Path,
    clocks: &Clocks,
    time: &SimTime,
    store: &topology::Store,
) -> anyhow::Result<Shards> {
    let open = |name: &str, migrations: &'static sqlx::migrate::Migrator| {
        let url = format!("sqlite://{}", dir.join(format!("{name}.db")).display());
        disk.run(async move { pastebin_runtime::db::connect(&url, 4, migrations).await })
    };
    // The spare K shard's clock is never skewed: the nemesis does not strike it.
    let clock =
        |name: &str| Arc::new(if name == topology::SPARE_KEY_SHARD { time.host_clock() } else { clocks.of(name) });
    let keys = topology::KEY_HOSTS
        .iter()
        .map(|name| open(name, &pastebin_keys::MIGRATIONS).map(|db| (KeyStore::new(db.clone(), clock(name)), db)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let pastes = topology::PASTE_SHARDS
        .iter()
        .map(|(name, ..)| {
            open(name, &pastebin_pastes::MIGRATIONS).map(|db| (PasteStore::new(db.clone(), clock(name)), db))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let shards = Shards { keys, pastes };
    topology::first_start(disk, &shards.key_databases(), &shards.paste_databases(), store)?;
    Ok(shards)
}

/// Runs the simulation for `seed` and checks it.
pub fn run(seed: u64) -> anyhow::Result<Report> {
    let dir = scratch_dir()?;
    let disk = Disk::new()?;
    let time = SimTime::default();
    // ctl reads no clock: a skew of its clock would be a fault that does nothing.
    let clocked = topology::servers().into_iter().filter(|host| host != reshard::CTL);
    let clocks = Clocks::new(&time, clocked.chain(["objects".to_owned()]));
    let store = topology::Store::default();
    let shards = open_shards(&disk, dir.path(), &clocks, &time, &store)?;
    let objects = SimObjects::new(seed ^ 0x6f62_6a73, clocks.of("objects"));

    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .tick_duration(TICK)
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(MAX_LATENCY)
        .simulation_duration(WORKLOAD_LIMIT + RECOVERY_LIMIT + Duration::from_secs(60))
        .build();
    let owners = [Owners::of(&topology::KEY_HOSTS), Owners::of(&topology::PASTE_HOSTS)];
    let lost_since: Vec<topology::LostSince> = topology::KEY_HOSTS.iter().map(|_| Default::default()).collect();
    for (shard, (name, (keys, _))) in topology::KEY_HOSTS.iter().zip(&shards.keys).enumerate() {
        let (keys, disk, owners) = (keys.clone(), disk.clone(), owners[0].clone());
        let (authority, lost) = (store.clone(), lost_since[shard].clone());
        sim.host(*name, move || {
            let (keys, owners, disk) = (keys.clone(), owners.clone(), disk.clone());
            host(topology::serve_keys(keys, shard, owners, disk, authority.clone(), lost.clone()))
        });
    }
    for (shard, (name, (pastes, _))) in topology::PASTE_HOSTS.iter().zip(&shards.pastes).enumerate() {
        let (pastes, disk, owners, authority) = (pastes.clone(), disk.clone(), owners[1].clone(), store.clone());
        sim.host(*name, move || {
            host(topology::serve_pastes(pastes.clone(), shard, owners.clone(), disk.clone(), authority.clone()))
        });
    }
    for index in 0..topology::GATEWAYS {
        let name = topology::gateway(index);
        let (objects, clock) = (objects.clone(), clocks.of(&name));
        // Outside the host: a restarted gateway must not mint the ids it minted before.
        let minter: Arc<dyn Minter> = Arc::new(SeededMinter::new(seed ^ (index as u64 + 1) << 32));
        let authority = store.clone();
        sim.host(name, move || {
            host(topology::serve_gateway(objects.clone(), clock.clone(), minter.clone(), authority.clone()))
        });
    }
    for index in 0..topology::SWEEPERS {
        let name = topology::sweeper(index);
        let (objects, clock) = (objects.clone(), clocks.of(&name));
        let authority = store.clone();
        sim.host(name, move || host(topology::run_sweeper(objects.clone(), clock.clone(), authority.clone())));
    }
    let operator = Operator::default();
    let (ctl, ctl_time, ctl_store) = (operator.clone(), time.clone(), store.clone());
    sim.host(reshard::CTL, move || host(reshard::run_operator(ctl.clone(), ctl_time.clone(), ctl_store.clone())));
    let (keys, plans) = workload(seed);
    let history = History::default();
    let key_state = key_state_oracle(&disk, &shards, &owners[0]);
    for plan in plans {
        let (name, client_seed) = (topology::client(plan.client), seed ^ (plan.client as u64 + 101) << 40);
        let client =
            workload::run_client(plan, keys.clone(), client_seed, time.clone(), history.clone(), key_state.clone());
        sim.client(name, host(client));
    }

    let mut nemesis = Nemesis::new(seed ^ 0x6e65_6d65, clocks.clone(), objects.clone(), operator.clone());
    let databases = topology::KEY_HOSTS[..topology::KEY_SHARDS.len()]
        .iter()
        .zip(shards.key_databases())
        .map(|(name, db)| (*name, TopologyKind::Key, db))
        .chain(
            topology::PASTE_HOSTS
                .iter()
                .zip(shards.paste_databases())
                .map(|(name, db)| (*name, TopologyKind::Paste, db)),
        )
        .collect();
    let mut amnesia = Amnesia::new(seed, dir.path().to_owned(), disk.clone(), databases, lost_since, store.clone());
    let mut violations = Vec::new();
    let mut twice_owned = None;
    let mut amnesia_failed = None;
    let finished = drive(&mut sim, &time, WORKLOAD_LIMIT, |sim, now, clients_finished| {
        nemesis.act(sim, now);
        if let Err(error) = amnesia.act(sim, now) {
            amnesia_failed.get_or_insert(error);
        }
        watch_owners(&owners, now, &mut twice_owned);
        clients_finished
    })?;
    if let Some(error) = amnesia_failed {
        return Err(error.context("a rollback of a shard's database failed"));
    }
    amnesia.heal();
    if !finished {
        violations.push(Violation(format!("the clients had not finished after {WORKLOAD_LIMIT:?}")));
    }
    nemesis.heal(&mut sim);
    let healed_at = sim.elapsed();
    let recovered = drive(&mut sim, &time, healed_at + RECOVERY_LIMIT, |_, now, _| {
        watch_owners(&owners, now, &mut twice_owned);
        (now - healed_at).as_millis() % 500 == 0 && operator.idle() && pending_keys(&disk, &shards) == 0
    })?;
    if !recovered {
        let what = if operator.idle() { "keys still pending" } else { "a slot move still unfinished" };
        violations.push(Violation(format!("{what} {RECOVERY_LIMIT:?} after healing")));
    }
    violations.extend(twice_owned.map(Violation));
    violations.extend(operator.findings().into_iter().map(Violation));
    let stored =
        |dbs: &[Database]| dbs.iter().map(|db| ownership::stored(&disk, db)).collect::<anyhow::Result<Vec<_>>>();
    let stored = [stored(&shards.key_databases())?, stored(&shards.paste_databases())?];
    violations.extend(ownership::check_final(&topology::KEY_HOSTS, &stored[0], &nemesis.final_ranges(Kind::Key)));
    violations.extend(ownership::check_final(&topology::PASTE_HOSTS, &stored[1], &nemesis.final_ranges(Kind::Paste)));
    for (kind, hosts, ours) in [
        (TopologyKind::Key, &topology::KEY_HOSTS[..], Kind::Key),
        (TopologyKind::Paste, &topology::PASTE_HOSTS[..], Kind::Paste),
    ] {
        let read = futures::executor::block_on(store.read(kind))?;
        violations.extend(ownership::check_topology(kind, read.topology.as_ref(), hosts, &nemesis.final_ranges(ours)));
    }
    let mut end = final_state(&disk, &shards, &stored, &objects, &mut violations)?;
    end.forgotten = amnesia.forgotten.clone();
    let history = history.entries();
    violations.extend(history::check(&keys, &history, &end));
    let moves = operator.seen();
    let rollbacks = amnesia.log;
    Ok(Report { seed, history, faults: nemesis.log, rollbacks, moves, violations, simulated: sim.elapsed() })
}

/// Records the first moment a slot had two owners of one kind (the check
/// runs after every step, and one finding is enough).
fn watch_owners(owners: &[Owners], now: Duration, found: &mut Option<String>) {
    if found.is_none() {
        *found = owners.iter().find_map(Owners::twice_owned).map(|what| format!("{what} at {} ms", now.as_millis()));
    }
}

/// Steps the simulation until `stop` says so, given the time and whether
/// every client has finished; `false` if `until` came first.
fn drive(
    sim: &mut turmoil::Sim<'_>,
    time: &SimTime,
    until: Duration,
    mut stop: impl FnMut(&mut turmoil::Sim<'_>, Duration, bool) -> bool,
) -> anyhow::Result<bool> {
    while sim.elapsed() < until {
        let clients_finished = sim.step().map_err(|error| anyhow::anyhow!("a simulated host failed: {error}"))?;
        time.set(sim.elapsed());
        if stop(sim, sim.elapsed(), clients_finished) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A host's software as turmoil runs it.
async fn host(software: impl std::future::Future<Output = anyhow::Result<()>>) -> turmoil::Result {
    software.await.map_err(|error| {
        let error: Box<dyn std::error::Error + Send + Sync> = error.into();
        error as Box<dyn std::error::Error>
    })
}

/// Where a run's databases live: memory-backed when the machine has it
/// (fsync there is free; durability is not what the simulation tests).
fn scratch_dir() -> anyhow::Result<tempfile::TempDir> {
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() { tempfile::tempdir_in(shm) } else { tempfile::tempdir() };
    dir.context("cannot make a directory for the simulated shards")
}

/// The state of a key on the K shard that holds its slot now, read at once
/// (a move leaves a stale copy on its source until it deletes it).
fn key_state_oracle(disk: &Disk, shards: &Shards, owners: &Owners) -> workload::KeyStateOracle {
    let (disk, owners) = (disk.clone(), owners.clone());
    let pools = shards.keys.iter().map(|(_, db)| db.pool().clone()).collect::<Vec<_>>();
    Arc::new(move |key: &str| {
        let slot = pastebin_core::IdempotencyKey::parse(key).ok()?.slot();
        let (pool, key) = (pools[owners.holder(slot)?].clone(), key.to_owned());
        disk.run(async move {
            let query = sqlx::query("SELECT state FROM idempotency_keys WHERE key = $1").bind(key);
            query.fetch_optional(&pool).await.ok().flatten().map(|row| row.get::<String, _>("state"))
        })
    })
}

fn pending_keys(disk: &Disk, shards: &Shards) -> usize {
    shards
        .keys
        .iter()
        .map(|(_, db)| {
            let pool = db.pool().clone();
            disk.run(async move {
                let query = sqlx::query("SELECT COUNT(*) AS n FROM idempotency_keys WHERE state = 'pending'");
                query.fetch_one(&pool).await.map(|row| row.get::<i64, _>("n")).unwrap_or(1)
            })
        })
        .map(|n| usize::try_from(n).unwrap_or(1))
        .sum()
}

/// K, P and the object store at the end. A key's row counts on the K shard
/// that owns its slot, a paste's on the P shard that owns its id's slot; a
/// row left on another shard is one no caller will ever find there.
fn final_state(
    disk: &Disk,
    shards: &Shards,
    stored: &[Vec<ownership::Stored>; 2],
    objects: &SimObjects,
    violations: &mut Vec<Violation>,
) -> anyhow::Result<FinalState> {
    let mut end = FinalState::default();
    for ((name, (_, db)), stored) in topology::KEY_HOSTS.iter().zip(&shards.keys).zip(&stored[0]) {
        let pool = db.pool().clone();
        let rows = disk.run(async move {
            sqlx::query("SELECT key, state, paste_id, response_body FROM idempotency_keys").fetch_all(&pool).await
        })?;
        for row in rows {
            let key: String = row.get("key");
            let slot = pastebin_core::IdempotencyKey::parse(&key)?.slot();
            if !stored.owned.contains(slot) {
                violations.push(Violation(format!("key {key} is left on {name}, which does not own its slot {slot}")));
                continue;
            }
            let body = pastebin_core::ResponseBody::new(row.get("response_body"));
            let answer = pastebin_gateway::Created::from_stored(&body).map(|created| history::Answer201 {
                id: created.id,
                url: created.url,
                raw_url: created.raw_url,
                expires_at: created.expires_at,
                delete_token: created.delete_token,
            });
            end.keys.insert(key, KeyRow { state: row.get("state"), paste_id: row.get("paste_id"), answer });
        }
    }
    for ((name, (_, db)), stored) in topology::PASTE_HOSTS.iter().zip(&shards.pastes).zip(&stored[1]) {
        let pool = db.pool().clone();
        let rows = disk.run(async move { sqlx::query("SELECT id, state FROM pastes").fetch_all(&pool).await })?;
        for row in rows {
            let id: String = row.get("id");
            let slot = pastebin_core::PasteId::parse(&id)?.slot();
            if !stored.owned.contains(slot) {
                violations.push(Violation(format!("paste {id} is left on {name}, which does not own its slot {slot}")));
                continue;
            }
            end.pastes.insert(id, row.get("state"));
        }
    }
    for id in end.pastes.keys() {
        if let Some(content) = objects.content(id) {
            end.objects.insert(id.clone(), content);
        }
    }
    end.deleted_objects = objects.deleted().into_iter().collect();
    Ok(end)
}
