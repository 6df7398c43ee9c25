//! A shard's database that forgets (docs/testing.md#simulation): a snapshot
//! of its disk taken at some step, restored later under the running system
//! while its process is down, then the shard restarts on it. That is a
//! restore from a backup, a new volume filled from one, or an asynchronous
//! standby promoted without the last commits. The shard strikes at any
//! moment: outside moves, and at any step of a K move or a P move, source or
//! target. A K shard restarts as the operator restarts one after an unsafe
//! failover, with `--may-have-lost-commits-since` the snapshot (less a
//! minute, as clocks disagree).
//!
//! What the rollback erased is recorded, row by row, for the checker: what
//! a database that forgot may legitimately lose ([`Forgotten`]).

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    time::Duration,
};

use pastebin_runtime::db::Database;
use pastebin_topology::{Authority, Kind};
use rand::{rngs::StdRng, Rng, SeedableRng};
use sqlx::{AssertSqlSafe, Row};
use turmoil::Sim;

use crate::{disk::Disk, topology};

/// At most this many rollbacks a run.
const MAX_ROLLBACKS: u32 = 2;
/// How far before its restore a snapshot is taken, at most.
const MAX_FORGOTTEN_MS: u64 = 4_000;
/// How far back the operator says commits may be lost, before the snapshot.
const LOST_SINCE_MARGIN_MS: i64 = 60_000;

/// One rollback, for the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rollback {
    pub shard: &'static str,
    /// When the snapshot was taken (simulated ms) and the move's phase then.
    pub snapshot_at_ms: i64,
    pub phase_then: String,
    /// The move's phase when it was restored, and this shard's part in it.
    pub phase_now: String,
    /// Rows the rollback erased or changed (keys for K, paste ids for P).
    pub erased: usize,
}

/// The rows some rollback erased or changed, which a database that forgot
/// may legitimately lose: keys on K, paste ids on P. A row that a move
/// in progress carried to a target that forgot it, while its source still
/// holds it, is never among them: the move must copy it again.
#[derive(Debug, Clone, Default)]
pub struct Forgotten {
    pub keys: BTreeSet<String>,
    /// The paste each forgotten key named, if it named one.
    pub keys_pastes: BTreeSet<String>,
    pub pastes: BTreeSet<String>,
}

struct Taken {
    shard: usize,
    path: PathBuf,
    restore_at: Duration,
    snapshot_at_ms: i64,
    phase_then: String,
}

/// The shards' disks, the topology store, and what to strike when.
pub struct Amnesia {
    rng: StdRng,
    left: u32,
    next_at: Duration,
    taken: Option<Taken>,
    dir: PathBuf,
    disk: Disk,
    /// K shards first, then P shards, as in [`crate::topology::servers`].
    databases: Vec<(&'static str, Kind, Database)>,
    lost_since: Vec<topology::LostSince>,
    store: topology::Store,
    pub log: Vec<(Duration, Rollback)>,
    pub forgotten: Forgotten,
}

impl Amnesia {
    pub fn new(
        seed: u64,
        dir: PathBuf,
        disk: Disk,
        databases: Vec<(&'static str, Kind, Database)>,
        lost_since: Vec<topology::LostSince>,
        store: topology::Store,
    ) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x616d_6e65);
        let left = rng.random_range(0..=MAX_ROLLBACKS);
        let next_at = Duration::from_millis(rng.random_range(0..8_000));
        let (log, forgotten, taken) = (Vec::new(), Forgotten::default(), None);
        Self { rng, left, next_at, taken, dir, disk, databases, lost_since, store, log, forgotten }
    }

    /// Called after every step: snapshots a shard when due, and restores it
    /// (crash, roll back, restart) when that is due.
    pub fn act(&mut self, sim: &mut Sim<'_>, now: Duration) -> anyhow::Result<()> {
        if let Some(taken) = self.taken.take_if(|taken| taken.restore_at <= now) {
            self.restore(sim, now, taken)?;
        }
        if self.left == 0 || self.taken.is_some() || now < self.next_at {
            return Ok(());
        }
        self.left -= 1;
        self.next_at = now + Duration::from_millis(self.rng.random_range(500..6_000));
        // Half the time a shard of the move in progress, if one is.
        let moving = [Kind::Key, Kind::Paste].into_iter().find_map(|kind| self.moving(kind).map(|m| (kind, m)));
        let shard = match moving {
            Some((kind, (source, target, ..))) if self.rng.random_bool(0.5) => {
                let end = if self.rng.random_bool(0.5) { source } else { target };
                self.databases.iter().position(|(name, of, _)| *of == kind && topology::address(name) == end)
            }
            _ => None,
        };
        let shard = shard.unwrap_or_else(|| self.rng.random_range(0..self.databases.len()));
        let path = self.dir.join(format!("snapshot-{}-{}.db", self.databases[shard].0, now.as_millis()));
        let pool = self.databases[shard].2.pool().clone();
        let into = path.display().to_string();
        self.disk.run(async move { sqlx::query("VACUUM INTO $1").bind(into).execute(&pool).await })?;
        let phase_then = self.phase(self.databases[shard].1);
        let restore_at = now + Duration::from_millis(self.rng.random_range(1..MAX_FORGOTTEN_MS));
        let snapshot_at_ms = i64::try_from(now.as_millis())?;
        self.taken = Some(Taken { shard, path, restore_at, snapshot_at_ms, phase_then });
        Ok(())
    }

    /// Ends a snapshot not restored yet: healing forgets nothing more.
    pub fn heal(&mut self) {
        self.taken = None;
    }

    fn restore(&mut self, sim: &mut Sim<'_>, now: Duration, taken: Taken) -> anyhow::Result<()> {
        let (name, kind, db) = self.databases[taken.shard].clone();
        sim.crash(name);
        let phase_now = self.phase(kind);
        let before = rows(&self.disk, &db, kind)?;
        let pool = db.pool().clone();
        let from = taken.path.display().to_string();
        self.disk.run(async move { roll_back(&pool, &from).await })?;
        let after = rows(&self.disk, &db, kind)?;
        let erased: Vec<(String, Option<String>)> = before
            .iter()
            .filter(|(row, state)| after.get(*row) != Some(*state))
            .map(|(row, (_, paste))| (row.clone(), paste.clone()))
            .collect();
        // Rows a move in progress carries to this shard, still on its source:
        // never lost, unless the source is already deleting them (then the
        // target's copy was the only one: an ordinary failover).
        let carried = match self.moving(kind) {
            Some((source, target, slots, deleting)) if target == topology::address(name) && !deleting => {
                let source = self.databases.iter().find(|(n, of, _)| *of == kind && topology::address(n) == source);
                match source {
                    Some((_, _, source)) => rows(&self.disk, source, kind)?
                        .into_keys()
                        .filter(|row| slot_of(kind, row).is_some_and(|slot| slots.contains(slot)))
                        .collect(),
                    None => BTreeSet::new(),
                }
            }
            _ => BTreeSet::new(),
        };
        for (row, paste) in erased.iter().filter(|(row, _)| !carried.contains(row)) {
            match kind {
                Kind::Key => {
                    self.forgotten.keys.insert(row.clone());
                    self.forgotten.keys_pastes.extend(paste.clone());
                }
                Kind::Paste => {
                    self.forgotten.pastes.insert(row.clone());
                }
            }
        }
        if let Some(lost) =
            self.databases.iter().take_while(|(_, of, _)| *of == Kind::Key).position(|(n, ..)| *n == name)
        {
            *self.lost_since[lost].lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some(taken.snapshot_at_ms - LOST_SINCE_MARGIN_MS);
        }
        sim.bounce(name);
        let _ = std::fs::remove_file(&taken.path);
        let rollback = Rollback {
            shard: name,
            snapshot_at_ms: taken.snapshot_at_ms,
            phase_then: taken.phase_then,
            phase_now,
            erased: erased.len(),
        };
        self.log.push((now, rollback));
        Ok(())
    }

    /// The move of `kind` in progress: source, target, slots, and whether
    /// the source is deleting its copies.
    fn moving(&self, kind: Kind) -> Option<(String, String, pastebin_core::SlotRange, bool)> {
        let read = futures::executor::block_on(self.store.read(kind)).ok()?;
        let moving = read.topology?.moving?;
        Some((moving.source, moving.target, moving.slots, moving.deleting))
    }

    /// The phase of the move of `kind` in progress, in words ("no move").
    fn phase(&self, kind: Kind) -> String {
        let read = futures::executor::block_on(self.store.read(kind)).ok();
        match read.and_then(|read| read.topology).and_then(|topology| topology.moving) {
            Some(moving) => {
                let deleting = if moving.deleting { ", deleting" } else { "" };
                format!("{kind} move {}{deleting}", moving.phase.name())
            }
            None => format!("no {kind} move"),
        }
    }
}

fn slot_of(kind: Kind, row: &str) -> Option<pastebin_core::Slot> {
    match kind {
        Kind::Key => pastebin_core::IdempotencyKey::parse(row).ok().map(|key| key.slot()),
        Kind::Paste => pastebin_core::PasteId::parse(row).ok().map(|id| id.slot()),
    }
}

/// Every key (K) or paste (P) row, with what a rollback may change in it,
/// and the paste a key names.
type Rows = BTreeMap<String, (String, Option<String>)>;

fn rows(disk: &Disk, db: &Database, kind: Kind) -> anyhow::Result<Rows> {
    let pool = db.pool().clone();
    let query = match kind {
        Kind::Key => "SELECT key AS row, state || ':' || COALESCE(paste_id, '') || ':' || COALESCE(response_body, '') AS what, paste_id FROM idempotency_keys",
        Kind::Paste => "SELECT id AS row, state AS what, NULL AS paste_id FROM pastes",
    };
    let found = disk.run(async move { sqlx::query(query).fetch_all(&pool).await })?;
    Ok(found
        .iter()
        .map(|row| (row.get("row"), (row.get("what"), row.try_get::<Option<String>, _>("paste_id").ok().flatten())))
        .collect())
}

/// Replaces every table's rows by the snapshot's, in one transaction.
async fn roll_back(pool: &sqlx::AnyPool, snapshot: &str) -> Result<(), sqlx::Error> {
    let mut connection = pool.acquire().await?;
    sqlx::query("ATTACH DATABASE $1 AS snapshot").bind(snapshot.to_owned()).execute(&mut *connection).await?;
    let tables = sqlx::query(
        "SELECT name FROM main.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> '_sqlx_migrations'",
    )
    .fetch_all(&mut *connection)
    .await?;
    let tables: Vec<String> = tables.iter().map(|row| row.get("name")).collect();
    sqlx::query("BEGIN IMMEDIATE").execute(&mut *connection).await?;
    for table in &tables {
        // The names come from the database's own schema.
        sqlx::query(AssertSqlSafe(format!("DELETE FROM main.\"{table}\""))).execute(&mut *connection).await?;
        sqlx::query(AssertSqlSafe(format!("INSERT INTO main.\"{table}\" SELECT * FROM snapshot.\"{table}\"")))
            .execute(&mut *connection)
            .await?;
    }
    sqlx::query("COMMIT").execute(&mut *connection).await?;
    sqlx::query("DETACH DATABASE snapshot").execute(&mut *connection).await?;
    Ok(())
}
