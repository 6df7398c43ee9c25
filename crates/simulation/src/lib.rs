//! A deterministic simulation of the whole system (docs/testing.md#simulation).
//!
//! The real gateway, K and P services and sweepers run as turmoil hosts on a
//! simulated network and clock; K and P keep real SQLite databases
//! ([`disk`]); the object store is in process ([`objects`]). A seeded
//! [`nemesis`] partitions, delays, crashes and restarts hosts, skews clocks
//! and takes the object store away while seeded clients create pastes with
//! retries ([`workload`]). Then every fault is healed, the sweepers finish
//! what was left pending, and the [`history`] checker judges what the
//! clients saw against the final state. One seed replays one run.

mod clock;
mod disk;
pub mod history;
pub mod nemesis;
mod net;
mod objects;
mod topology;
mod workload;

use std::{sync::Arc, time::Duration};

use anyhow::Context;
use pastebin_core::{Minter, SeededMinter};
use pastebin_keys::KeyStore;
use pastebin_pastes::PasteStore;
use pastebin_runtime::db::Database;
use rand::{rngs::StdRng, Rng, SeedableRng};
use sqlx::Row;

use crate::{
    clock::{Clocks, SimTime},
    disk::Disk,
    history::{Entry, FinalState, History, KeyRow, KeySpec, Violation},
    nemesis::Nemesis,
    objects::SimObjects,
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
    pub violations: Vec<Violation>,
    /// Simulated time the run took.
    pub simulated: Duration,
}

impl Report {
    pub fn creates(&self) -> usize {
        self.history.iter().filter(|entry| matches!(entry.event, history::Event::Created { .. })).count()
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

fn open_shards(disk: &Disk, dir: &std::path::Path, clocks: &Clocks) -> anyhow::Result<Shards> {
    let open = |name: &str, migrations: &'static sqlx::migrate::Migrator| {
        let url = format!("sqlite://{}", dir.join(format!("{name}.db")).display());
        disk.run(async move { pastebin_runtime::db::connect(&url, 4, migrations).await })
    };
    let clock = |name: &str| Arc::new(clocks.of(name));
    let keys = topology::KEY_SHARDS
        .iter()
        .map(|(name, ..)| open(name, &pastebin_keys::MIGRATIONS).map(|db| (KeyStore::new(db.clone(), clock(name)), db)))
        .collect::<anyhow::Result<_>>()?;
    let pastes = topology::PASTE_SHARDS
        .iter()
        .map(|(name, ..)| {
            open(name, &pastebin_pastes::MIGRATIONS).map(|db| (PasteStore::new(db.clone(), clock(name)), db))
        })
        .collect::<anyhow::Result<_>>()?;
    Ok(Shards { keys, pastes })
}

/// Runs the simulation for `seed` and checks it.
pub fn run(seed: u64) -> anyhow::Result<Report> {
    let dir = scratch_dir()?;
    let disk = Disk::new()?;
    let time = SimTime::default();
    let clocks = Clocks::new(&time, topology::servers().into_iter().chain(["objects".to_owned()]));
    let shards = open_shards(&disk, dir.path(), &clocks)?;
    let objects = SimObjects::new(seed ^ 0x6f62_6a73, clocks.of("objects"));

    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .tick_duration(TICK)
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(MAX_LATENCY)
        .simulation_duration(WORKLOAD_LIMIT + RECOVERY_LIMIT + Duration::from_secs(60))
        .build();
    for ((name, first, last), (store, _)) in topology::KEY_SHARDS.iter().zip(&shards.keys) {
        let (store, disk, slots) = (store.clone(), disk.clone(), (*first, *last));
        sim.host(*name, move || host(topology::serve_keys(store.clone(), slots, disk.clone())));
    }
    for ((name, first, last), (store, _)) in topology::PASTE_SHARDS.iter().zip(&shards.pastes) {
        let (store, disk, slots) = (store.clone(), disk.clone(), (*first, *last));
        sim.host(*name, move || host(topology::serve_pastes(store.clone(), slots, disk.clone())));
    }
    for index in 0..topology::GATEWAYS {
        let name = topology::gateway(index);
        let (objects, clock) = (objects.clone(), clocks.of(&name));
        // Outside the host: a restarted gateway must not mint the ids it minted before.
        let minter: Arc<dyn Minter> = Arc::new(SeededMinter::new(seed ^ (index as u64 + 1) << 32));
        sim.host(name, move || host(topology::serve_gateway(objects.clone(), clock.clone(), minter.clone())));
    }
    for index in 0..topology::SWEEPERS {
        let name = topology::sweeper(index);
        let (objects, clock) = (objects.clone(), clocks.of(&name));
        sim.host(name, move || host(topology::run_sweeper(objects.clone(), clock.clone())));
    }
    let (keys, plans) = workload(seed);
    let history = History::default();
    let key_state = key_state_oracle(&disk, &shards);
    for plan in plans {
        let (name, client_seed) = (topology::client(plan.client), seed ^ (plan.client as u64 + 101) << 40);
        let client =
            workload::run_client(plan, keys.clone(), client_seed, time.clone(), history.clone(), key_state.clone());
        sim.client(name, host(client));
    }

    let mut nemesis = Nemesis::new(seed ^ 0x6e65_6d65, clocks.clone(), objects.clone());
    let mut violations = Vec::new();
    let finished = drive(&mut sim, &time, WORKLOAD_LIMIT, |sim, now, clients_finished| {
        nemesis.act(sim, now);
        clients_finished
    })?;
    if !finished {
        violations.push(Violation(format!("the clients had not finished after {WORKLOAD_LIMIT:?}")));
    }
    nemesis.heal(&mut sim);
    let healed_at = sim.elapsed();
    let recovered = drive(&mut sim, &time, healed_at + RECOVERY_LIMIT, |_, now, _| {
        (now - healed_at).as_millis() % 500 == 0 && pending_keys(&disk, &shards) == 0
    })?;
    if !recovered {
        violations.push(Violation(format!("keys still pending {RECOVERY_LIMIT:?} after healing")));
    }
    let end = final_state(&disk, &shards, &objects)?;
    let history = history.entries();
    violations.extend(history::check(&keys, &history, &end));
    Ok(Report { seed, history, faults: nemesis.log, violations, simulated: sim.elapsed() })
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

/// The state of a key on whichever K shard holds it, read at once.
fn key_state_oracle(disk: &Disk, shards: &Shards) -> workload::KeyStateOracle {
    let (disk, pools) = (disk.clone(), shards.keys.iter().map(|(_, db)| db.pool().clone()).collect::<Vec<_>>());
    Arc::new(move |key: &str| {
        let (pools, key) = (pools.clone(), key.to_owned());
        disk.run(async move {
            for pool in pools {
                let query = sqlx::query("SELECT state FROM idempotency_keys WHERE key = $1").bind(key.clone());
                if let Ok(Some(row)) = query.fetch_optional(&pool).await {
                    return Some(row.get::<String, _>("state"));
                }
            }
            None
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

fn final_state(disk: &Disk, shards: &Shards, objects: &SimObjects) -> anyhow::Result<FinalState> {
    let mut end = FinalState::default();
    for (_, db) in &shards.keys {
        let pool = db.pool().clone();
        let rows = disk.run(async move {
            sqlx::query("SELECT key, state, paste_id, response_body FROM idempotency_keys").fetch_all(&pool).await
        })?;
        for row in rows {
            let body = pastebin_core::ResponseBody::new(row.get("response_body"));
            let answer = pastebin_gateway::Created::from_stored(&body).map(|created| history::Answer201 {
                id: created.id,
                url: created.url,
                raw_url: created.raw_url,
                expires_at: created.expires_at,
                delete_token: created.delete_token,
            });
            end.keys.insert(row.get("key"), KeyRow { state: row.get("state"), paste_id: row.get("paste_id"), answer });
        }
    }
    for (_, db) in &shards.pastes {
        let pool = db.pool().clone();
        let rows = disk.run(async move { sqlx::query("SELECT id, state FROM pastes").fetch_all(&pool).await })?;
        for row in rows {
            end.pastes.insert(row.get("id"), row.get("state"));
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
