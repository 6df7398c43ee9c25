//! K, P and the object store: each call is one atomic step on one key's
//! data, exactly as the stores commit it (crates/keys/src/store.rs,
//! crates/pastes/src/store.rs).

use crate::{
    flaw::Flaw,
    world::{Fate, InsertOutcome, KeyRecord, KeyState, KeyWorld, Op, PasteNo, Reply, Row},
};

/// Applies `op` to one key's K record, P rows and objects; returns the reply
/// and whether the call minted the key's current id.
pub fn apply(flaw: Option<Flaw>, searches_first: bool, world: &mut KeyWorld, op: Op) -> (Reply, bool) {
    let answered =
        |record: KeyRecord| Reply::Record { record, search_first: searches_first && record.state != KeyState::Done };
    match op {
        Op::Begin => match world.record {
            Some(record) => (answered(record), false),
            None => {
                let record = KeyRecord { paste: world.mint(), state: KeyState::Pending };
                world.record = Some(record);
                (answered(record), true)
            }
        },
        Op::Search { own } => (Reply::Found(search(world, own)), false),
        Op::Rotate { paste, .. } => (Reply::Changed(world.row(paste) == Row::Live), false),
        Op::Adopt { pending, paste } => {
            let changed = world.record.is_some_and(|record| record.is(pending, KeyState::Pending));
            if changed {
                world.record = Some(KeyRecord { paste, state: KeyState::Done });
                world.adopted = true;
            }
            let already = world.record.is_some_and(|record| record.is(paste, KeyState::Done));
            (Reply::Changed(changed || already), false)
        }
        Op::Restart { aborted } => match world.record {
            Some(record) if record.state == KeyState::Aborted && restart_guard(flaw, record.paste, aborted) => {
                let paste = world.mint();
                world.record = Some(KeyRecord { paste, state: KeyState::Pending });
                (Reply::Restarted(Some(paste)), true)
            }
            _ => (Reply::Restarted(None), false),
        },
        Op::Put(paste) => {
            world.pastes[usize::from(paste)].object = true;
            (Reply::Stored, false)
        }
        Op::DeleteObject(paste) => {
            world.pastes[usize::from(paste)].object = false;
            (Reply::Stored, false)
        }
        Op::Insert(paste) => {
            let holds_fence = flaw != Some(Flaw::FenceDoesNotHold);
            (Reply::Inserted(insert(holds_fence, &mut world.pastes[usize::from(paste)].row)), false)
        }
        Op::Lookup => (Reply::Looked(world.record), false),
        Op::Commit { paste } => (commit(flaw, searches_first, world, paste), false),
        Op::Fence(paste) => (Reply::Fate(tombstone_unless_live(&mut world.pastes[usize::from(paste)].row)), false),
        Op::Read(paste) => (Reply::Fate(read(world.row(paste))), false),
        Op::Abort(paste) => (Reply::Changed(transition(flaw, world, paste, KeyState::Aborted)), false),
        Op::Done(paste) => {
            let changed = transition(flaw, world, paste, KeyState::Done);
            let already = world.record.is_some_and(|record| record.is(paste, KeyState::Done));
            (Reply::Changed(changed || already), false)
        }
    }
}

/// `FindByKey` and the gateway's choice (`earlier_life`) in one: ids are
/// numbered in minting order, so the smallest is the oldest.
fn search(world: &KeyWorld, own: PasteNo) -> Option<(PasteNo, Fate)> {
    let made: Vec<(PasteNo, Row)> =
        (0..).zip(world.pastes.iter().map(|slot| slot.row)).filter(|(_, row)| row.was_created()).collect();
    if made.iter().any(|(paste, _)| *paste == own) {
        return None;
    }
    let live = made.iter().find(|(_, row)| *row == Row::Live).map(|(paste, _)| (*paste, Fate::Live));
    live.or_else(|| made.first().map(|(paste, _)| (*paste, Fate::Dead)))
}

fn restart_guard(flaw: Option<Flaw>, current: u8, aborted: u8) -> bool {
    flaw == Some(Flaw::RestartWithoutIdGuard) || current == aborted
}

/// The colocated shard's one transaction (crates/colocated/src/store.rs):
/// nothing is written if the key has a record (the racer that lost answers
/// it) or while the shard may have lost commits (the saga searches first);
/// else the paste row goes in behind the fence and the key is done with it,
/// together, or, when the fence holds the id, neither.
fn commit(flaw: Option<Flaw>, searches_first: bool, world: &mut KeyWorld, paste: PasteNo) -> Reply {
    if world.record.is_some() {
        return Reply::Looked(world.record);
    }
    if searches_first {
        return Reply::SearchFirst;
    }
    let done = KeyRecord { paste, state: KeyState::Done };
    if flaw == Some(Flaw::OneCommitSplitInTwo) {
        // The broken variant commits the key alone; the row comes later.
        world.record = Some(done);
        world.one_commit = true;
        return Reply::Committed(paste);
    }
    let holds_fence = flaw != Some(Flaw::OneCommitOverTombstone);
    match insert(holds_fence, &mut world.pastes[usize::from(paste)].row) {
        InsertOutcome::Inserted | InsertOutcome::AlreadyExists => {
            world.record = Some(done);
            world.one_commit = true;
            Reply::Committed(paste)
        }
        InsertOutcome::Tombstoned => Reply::Inserted(InsertOutcome::Tombstoned),
    }
}

/// P's insert; `holds_fence` is what the broken variants drop.
fn insert(holds_fence: bool, row: &mut Row) -> InsertOutcome {
    match *row {
        Row::Absent => {
            *row = Row::Live;
            InsertOutcome::Inserted
        }
        Row::Live => InsertOutcome::AlreadyExists,
        Row::Tombstone if !holds_fence => {
            *row = Row::Live;
            InsertOutcome::Inserted
        }
        Row::Tombstone | Row::DeletedByOwner => InsertOutcome::Tombstoned,
    }
}

fn tombstone_unless_live(row: &mut Row) -> Fate {
    match *row {
        Row::Absent => {
            *row = Row::Tombstone;
            Fate::Dead
        }
        Row::Live => Fate::Live,
        Row::Tombstone | Row::DeletedByOwner => Fate::Dead,
    }
}

fn read(row: Row) -> Fate {
    match row {
        Row::Absent => Fate::Unknown,
        Row::Live => Fate::Live,
        Row::Tombstone | Row::DeletedByOwner => Fate::Dead,
    }
}

/// pending → `to`, guarded by state and paste id (the id guard is what the
/// broken variants drop).
fn transition(flaw: Option<Flaw>, world: &mut KeyWorld, paste: u8, to: KeyState) -> bool {
    let ignores_id = match to {
        KeyState::Done => flaw == Some(Flaw::DoneWithoutIdGuard),
        KeyState::Aborted => flaw == Some(Flaw::AbortWithoutIdGuard),
        KeyState::Pending => false,
    };
    match &mut world.record {
        Some(record) if record.state == KeyState::Pending && (ignores_id || record.paste == paste) => {
            record.state = to;
            true
        }
        _ => false,
    }
}
