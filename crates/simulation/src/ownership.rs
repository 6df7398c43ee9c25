//! Who owns which slot, read beside the run: the live ranges of the K and P
//! shards' running processes after every step, and their stored ranges at
//! the end, one kind at a time.
//! A slot move must never leave a slot with two owners, and once healed it
//! must end with every slot owned exactly once and no move left half done
//! (docs/design.md#moving-slots).

use std::sync::{Arc, Mutex};

use pastebin_core::{OwnedSlots, Slot, SlotRange};
use pastebin_handover::Role;
use pastebin_runtime::db::Database;
use pastebin_slots::shard_slots::{Ownership, ShardSlots};
use sqlx::Row;

use crate::{disk::Disk, history::Violation};

/// The slot state each shard of one kind answers from, by shard (in the
/// order of `hosts`): set when it starts, kept when it crashes (a restart
/// reads back the same range from its database).
#[derive(Clone)]
pub struct Owners {
    hosts: &'static [&'static str],
    shards: Arc<Mutex<Vec<Option<ShardSlots>>>>,
}

impl Owners {
    pub fn of(hosts: &'static [&'static str]) -> Self {
        Self { hosts, shards: Arc::new(Mutex::new(vec![None; hosts.len()])) }
    }

    pub fn started(&self, shard: usize, slots: ShardSlots) {
        self.shards.lock().unwrap_or_else(|poisoned| poisoned.into_inner())[shard] = Some(slots);
    }

    /// Every shard's ownership now. Between two steps of the simulation no
    /// shard RPC is running (each is one step on the disk), so no lock on a
    /// shard's slots is held and reading them cannot wait.
    fn now(&self) -> Vec<Option<Ownership>> {
        let shards = self.shards.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        shards.iter().map(|slots| slots.as_ref().map(|slots| futures::executor::block_on(slots.ownership()))).collect()
    }

    /// A slot two shards would accept writes for at once, in words. Under
    /// the topology a shard writes only what its grant lets it (neither
    /// frozen nor held) and what its own record of a move does not refuse.
    pub fn twice_owned(&self) -> Option<String> {
        let shards = self.now();
        let writable = |shard: usize, slot: Slot| shards[shard].as_ref().is_some_and(|o| accepts_writes(o, slot));
        SlotRange::ALL.slots().find_map(|slot| {
            let owners: Vec<&str> =
                (0..shards.len()).filter(|&shard| writable(shard, slot)).map(|shard| self.hosts[shard]).collect();
            (owners.len() > 1).then(|| format!("slot {slot} owned by {} at once", owners.join(" and ")))
        })
    }

    /// The shard that holds `slot`'s rows now: its owner, or between a
    /// release and a take (no owner) the target's verified copy.
    pub fn holder(&self, slot: Slot) -> Option<usize> {
        let shards = self.now();
        let owner = shards.iter().position(|o| o.as_ref().is_some_and(|o| o.serves().contains(slot)));
        owner.or_else(|| {
            shards.iter().position(|o| {
                let importing = o.as_ref().and_then(|o| o.active.as_ref());
                importing.is_some_and(|m| m.role == Role::Target && m.identity.slots.contains(slot))
            })
        })
    }
}

/// Whether a shard whose slot state is `ownership` accepts a write of
/// `slot`, as its services decide (`ShardSlots::writable`).
fn accepts_writes(ownership: &Ownership, slot: Slot) -> bool {
    let granted = ownership.granted.is_none_or(|granted| granted.writable(slot));
    let importing = ownership.active.as_ref().is_some_and(|active| {
        active.role == Role::Target
            && active.step == pastebin_handover::Step::Importing
            && active.identity.slots.contains(slot)
    });
    let under_topology = ownership.granted.is_some();
    ownership.serves().contains(slot)
        && granted
        && !(under_topology && importing)
        && !ownership.frozen().is_some_and(|frozen| frozen.contains(slot))
}

/// A shard's range and moves as stored in its database: what a restart
/// would serve.
pub struct Stored {
    pub owned: OwnedSlots,
    pub moves_in_progress: i64,
    /// Every move it took part in, by id: its step, and whether an abandon
    /// was recorded.
    pub moves: Vec<(String, String, bool)>,
}

pub fn stored(disk: &Disk, db: &Database) -> anyhow::Result<Stored> {
    let pool = db.pool().clone();
    let (range, moves) = disk.run(async move {
        let range = sqlx::query("SELECT first_slot, last_slot, owns_nothing FROM shard_slots").fetch_one(&pool).await?;
        let moves = sqlx::query("SELECT move_id, step, abandoning FROM slot_moves").fetch_all(&pool).await?;
        Ok::<_, sqlx::Error>((range, moves))
    })?;
    let moves: Vec<(String, String, bool)> =
        moves.iter().map(|row| (row.get("move_id"), row.get("step"), row.get::<i64, _>("abandoning") != 0)).collect();
    let unfinished = moves.iter().filter(|(_, step, _)| step != "done" && step != "abandoned").count();
    let owned = if range.get::<i64, _>("owns_nothing") != 0 {
        OwnedSlots::Nothing
    } else {
        let slot = |column: &str| u8::try_from(range.get::<i64, _>(column));
        OwnedSlots::Range(SlotRange::new(slot("first_slot")?, slot("last_slot")?)?)
    };
    Ok(Stored { owned, moves_in_progress: i64::try_from(unfinished)?, moves })
}

/// After healing: every slot owned by exactly one of the shards `hosts`
/// (one kind), as each stores it, the ranges the moves asked for, and no
/// move left unfinished.
pub fn check_final(hosts: &[&str], stored: &[Stored], expected: &[OwnedSlots]) -> Vec<Violation> {
    let mut found = Vec::new();
    for (name, (stored, expected)) in hosts.iter().zip(stored.iter().zip(expected)) {
        if stored.moves_in_progress > 0 {
            found.push(Violation(format!("{name} still has a slot move in progress after healing")));
        }
        if stored.owned != *expected {
            found.push(Violation(format!("{name} ends owning {}, not {expected} as the moves said", stored.owned)));
        }
    }
    for slot in SlotRange::ALL.slots() {
        let owners = stored.iter().filter(|s| s.owned.contains(slot)).count();
        if owners != 1 {
            found.push(Violation(format!("slot {slot} ends with {owners} owners")));
        }
    }
    found.extend(abandons_taken(hosts, stored));
    found
}

/// After healing: the topology store grants each shard of `hosts` the
/// range the moves asked for, and records no move in progress.
pub fn check_topology(
    kind: pastebin_topology::Kind,
    topology: Option<&pastebin_topology::Topology>,
    hosts: &[&str],
    expected: &[OwnedSlots],
) -> Vec<Violation> {
    let Some(topology) = topology else { return vec![Violation(format!("the {kind} topology is gone"))] };
    let mut found = Vec::new();
    if let Some(moving) = &topology.moving {
        found.push(Violation(format!(
            "the {kind} topology still records {moving} ({}) after healing",
            moving.phase.name()
        )));
    }
    for (name, expected) in hosts.iter().zip(expected) {
        let granted = topology.grant(&crate::topology::address(name)).map(|grant| grant.slots);
        if granted != Some(*expected) {
            found.push(Violation(format!(
                "the {kind} topology grants {name} {granted:?}, not {expected} as the moves said"
            )));
        }
    }
    found
}

/// A move that one shard recorded as abandoning (or abandoned) and another
/// finished as done: an abandon turned into a take, which no rerun,
/// `--resume` or second run may do (docs/design.md#moving-slots).
fn abandons_taken(hosts: &[&str], stored: &[Stored]) -> Vec<Violation> {
    let rows = || hosts.iter().zip(stored).flat_map(|(name, s)| s.moves.iter().map(move |m| (*name, m)));
    let abandoned = rows().filter(|(_, (_, step, abandoning))| *abandoning || step == "abandoned");
    abandoned
        .filter_map(|(name, (id, ..))| {
            let mut taken = rows().filter(|(_, (other, step, _))| other == id && step == "done");
            taken
                .next()
                .map(|(done_on, _)| Violation(format!("move {id} was abandoned on {name} and ended done on {done_on}")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: [&str; 3] = ["k0", "k1", "k2"];

    fn owns(first: u8, last: u8) -> OwnedSlots {
        OwnedSlots::Range(SlotRange::new(first, last).unwrap())
    }

    fn settled(first: u8, last: u8, moves_in_progress: i64) -> Stored {
        Stored { owned: owns(first, last), moves_in_progress, moves: Vec::new() }
    }

    fn spare() -> Stored {
        Stored { owned: OwnedSlots::Nothing, moves_in_progress: 0, moves: Vec::new() }
    }

    #[test]
    fn moves_that_finished_as_asked_leave_no_violation() {
        let stored = [settled(0, 159, 0), settled(160, 255, 0), spare()];
        assert_eq!(check_final(&KEYS, &stored, &[owns(0, 159), owns(160, 255), OwnedSlots::Nothing]), Vec::new());
    }

    #[test]
    fn a_move_left_in_progress_is_a_violation() {
        let expected = [owns(0, 159), owns(160, 255), OwnedSlots::Nothing];
        let found = check_final(&KEYS, &[settled(0, 159, 1), settled(160, 255, 0), spare()], &expected);
        assert!(found.iter().any(|v| v.0.contains("k0 still has a slot move in progress")), "{found:?}");
    }

    #[test]
    fn a_slot_with_two_owners_or_none_is_a_violation() {
        let expected = [owns(0, 127), owns(128, 255), OwnedSlots::Nothing];
        let twice = check_final(&KEYS, &[settled(0, 130, 0), settled(128, 255, 0), spare()], &expected);
        assert!(twice.iter().any(|v| v.0 == "slot 129 ends with 2 owners"), "{twice:?}");
        assert!(twice.iter().any(|v| v.0.contains("k0 ends owning 0-130, not 0-127")), "{twice:?}");
        let none = check_final(&KEYS, &[settled(0, 120, 0), settled(128, 255, 0), spare()], &expected);
        assert!(none.iter().any(|v| v.0 == "slot 125 ends with 0 owners"), "{none:?}");
    }

    #[test]
    fn an_abandon_that_ended_in_a_take_is_a_violation() {
        let expected = [owns(0, 127), owns(128, 255), OwnedSlots::Nothing];
        let (mut source, mut target) = (settled(0, 127, 0), settled(128, 255, 0));
        source.moves.push(("move-1".into(), "abandoned".into(), true));
        target.moves.push(("move-1".into(), "abandoned".into(), true));
        assert_eq!(check_final(&KEYS, &[source, target, spare()], &expected), Vec::new());
        let (mut source, mut target) = (settled(0, 127, 0), settled(128, 255, 0));
        source.moves.push(("move-1".into(), "exporting".into(), true));
        target.moves.push(("move-1".into(), "done".into(), false));
        let found = check_final(&KEYS, &[source, target, spare()], &expected);
        assert!(found.iter().any(|v| v.0 == "move move-1 was abandoned on k0 and ended done on k1"), "{found:?}");
    }
}
