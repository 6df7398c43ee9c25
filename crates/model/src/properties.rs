//! The properties the protocol must have (docs/model.md lists them with the
//! design rule each one checks), and a few reachability checks that keep
//! the model honest: a model in which nothing happens satisfies everything.

use stateright::Property;

use crate::{
    protocol::Protocol,
    world::{violation, KeyState, KeyWorld, Row, World},
};

pub const ONE_PASTE_PER_KEY: &str = "at most one paste per key, ever";
pub const BODY_NEVER_CHANGES: &str = "a 201 body for a key never changes once sent";
pub const NAMES_LIVE_PASTE: &str = "every 201 names a live paste (or one its owner deleted since)";
pub const NO_201_BEFORE_DONE: &str = "no 201 before its key is done";
pub const DONE_PASTE_KEPT: &str = "a done key's paste is never deleted by recovery or reaping";
pub const NO_PENDING_LEFT: &str = "eventually, with P back, no pending key remains";
pub const UNDISTURBED_CREATES_SUCCEED: &str = "a create that no fault touched answers 201";

pub const SOME_CREATE: &str = "a create answers 201";
pub const SOME_RESTART: &str = "a retry restarts an aborted key with a new id";
pub const SOME_RECOVERY: &str = "a key is resolved while its client has given up";
pub const SOME_OWNER_DELETE: &str = "an owner deletes a paste and its object is reaped";
pub const SOME_ADOPTION: &str = "after a K loss, a retry adopts the paste the lost key made";
pub const SOME_ONE_COMMIT: &str = "a colocated create answers 201 from its one commit";
pub const SOME_SAGA_KEY_FINISHED: &str = "a colocated create finishes a key a saga left, by the saga's steps";

/// The properties whose counterexample is a bug.
pub const SAFETY: [&str; 7] = [
    ONE_PASTE_PER_KEY,
    BODY_NEVER_CHANGES,
    NAMES_LIVE_PASTE,
    NO_201_BEFORE_DONE,
    DONE_PASTE_KEPT,
    NO_PENDING_LEFT,
    UNDISTURBED_CREATES_SUCCEED,
];

/// The examples the checker must find for the model to mean anything.
pub const REACHABLE: [&str; 5] = [SOME_CREATE, SOME_RESTART, SOME_RECOVERY, SOME_OWNER_DELETE, SOME_ADOPTION];

/// ... and, where attempts may run the colocated create, these too.
pub const REACHABLE_ONE_COMMIT: [&str; 2] = [SOME_ONE_COMMIT, SOME_SAGA_KEY_FINISHED];

pub fn all() -> Vec<Property<Protocol>> {
    vec![
        Property::always(ONE_PASTE_PER_KEY, |_, w: &World| w.keys.iter().all(|k| pastes_created(k) <= 1)),
        Property::always(BODY_NEVER_CHANGES, |_, w: &World| w.violations & violation::BODY_CHANGED == 0),
        Property::always(NAMES_LIVE_PASTE, |_, w: &World| w.violations & violation::NAMES_DEAD_ID == 0),
        Property::always(NO_201_BEFORE_DONE, |_, w: &World| w.violations & violation::BEFORE_DONE == 0),
        Property::always(DONE_PASTE_KEPT, |_, w: &World| w.keys.iter().all(done_paste_kept)),
        Property::eventually(NO_PENDING_LEFT, |_, w: &World| settled(w) && !w.keys.iter().any(KeyWorld::is_pending)),
        Property::always(UNDISTURBED_CREATES_SUCCEED, |_, w: &World| w.violations & violation::UNDISTURBED_503 == 0),
        Property::sometimes(SOME_CREATE, |_, w: &World| w.keys.iter().any(|k| k.client.has_201)),
        Property::sometimes(SOME_RESTART, |_, w: &World| w.keys.iter().any(|k| k.pastes.len() >= 2)),
        Property::sometimes(SOME_RECOVERY, |_, w: &World| {
            w.keys.iter().any(|k| {
                let gave_up = !k.client.has_201 && k.client.attempts_left == 0 && k.client.waiting_on.is_none();
                gave_up && k.record.is_some_and(|r| r.state == KeyState::Done)
            })
        }),
        Property::sometimes(SOME_OWNER_DELETE, |_, w: &World| {
            w.keys.iter().flat_map(|k| &k.pastes).any(|p| p.row == Row::DeletedByOwner && !p.object)
        }),
        Property::sometimes(SOME_ADOPTION, |_, w: &World| w.keys.iter().any(|k| k.adopted && k.client.has_201)),
        Property::sometimes(SOME_ONE_COMMIT, |_, w: &World| w.keys.iter().any(|k| k.one_commit && k.client.has_201)),
        Property::sometimes(SOME_SAGA_KEY_FINISHED, |_, w: &World| {
            let done = |k: &KeyWorld| k.record.is_some_and(|r| r.state == KeyState::Done);
            w.keys.iter().any(|k| k.saga_key_followed && done(k) && k.client.has_201)
        }),
    ]
}

fn pastes_created(key: &KeyWorld) -> usize {
    key.pastes.iter().filter(|slot| slot.row.was_created()).count()
}

/// A done key names a paste that is live with its bytes, or that its owner
/// deleted: nothing else may take it away.
fn done_paste_kept(key: &KeyWorld) -> bool {
    match key.record {
        Some(record) if record.state == KeyState::Done => {
            let slot = key.pastes[usize::from(record.paste)];
            slot.row == Row::DeletedByOwner || (slot.row == Row::Live && slot.object)
        }
        _ => true,
    }
}

/// Nothing is in flight any more, P is reachable and every client has
/// finished: from here on only the sweeper can change a key.
fn settled(world: &World) -> bool {
    world.paste_service_reachable
        && world.orphans.is_empty()
        && world.gateways.iter().all(Option::is_none)
        && world.sweepers.iter().all(Option::is_none)
        && world.keys.iter().all(|k| k.client.waiting_on.is_none() && (k.client.has_201 || k.client.attempts_left == 0))
}
