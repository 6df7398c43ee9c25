//! [`step`]: one move call on one shard, every guard in one place.
//!
//! The guards, each of which a broken variant of the model removes
//! (crates/model/src/handover.rs):
//! - identity: a call naming another move, peer or slots is refused;
//! - fence: a call of an older epoch is refused, and a newer epoch is
//!   taken only when the lease ran out or is the caller's own;
//! - receipt: a target takes only with the source's release of these slots
//!   to it ([`Call::Take`]); the source deletes its copies only when the
//!   target's record shows it took them with that release;
//! - abandon: once "abandoning" is recorded nothing is released or taken,
//!   and a finished record answers only the call that finished it.

use crate::{
    record::{Fence, Identity, Lease, Record, Role, Shard, Step},
    refusal::Refusal,
};

/// A move call, as the shard's service names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Call {
    /// Source, first: record the move; the slots are still served.
    PrepareExport,
    /// Target, second: record the move.
    PrepareImport,
    /// Source: refuse writes for the slots from now on.
    Freeze,
    /// A read of the moving rows (export, hashes, digest, changes) on a
    /// shard in `role`, or on either.
    Read(Option<Role>),
    /// Target: store copies.
    Import,
    /// Source, after the copies were verified: give the slots up to the
    /// target. `token` is the fresh token the shard drew for its receipt;
    /// `search_first`, the lost-commits window it holds for the slots.
    Release { token: String, search_first: Option<(i64, i64)> },
    /// Target: own the slots, on the source's release receipt (its record).
    Take { receipt: Record },
    /// Source, after the take: delete (a page of) its copies, on the
    /// target's record of the take.
    DeleteCopies { taken: Record },
    /// Source, once its copies are gone: the move is done here.
    Finish { taken: Record },
    /// Either: record "abandoning" (nothing is undone yet).
    Abandon,
    /// Either, once abandoning: undo (the source serves the slots again;
    /// the target drops its copies).
    Undo,
}

/// A call with what it names and which run sent it, as the shard received
/// it at `now_ms` on its own clock.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Request {
    pub identity: Identity,
    pub fence: Fence,
    pub now_ms: i64,
    pub call: Call,
}

/// What the shard must do besides storing the new state.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Effect {
    /// Target, a new move: delete rows of these slots that an abandoned
    /// attempt left; or its copies, when the move is undone.
    ClearCopies,
    /// Source: record the rows writes change from now on.
    StartRecording,
    /// Source: stop recording (the slots were released, or the move undone).
    StopRecording,
    /// The call asked for what is already so (a rerun): nothing changed.
    AlreadyDone,
}

/// The shard after a call, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub shard: Shard,
    pub effects: Vec<Effect>,
    /// The record or the owned slots changed (more than the lease's end):
    /// store it before answering.
    pub durable: bool,
}

/// Which guards [`step_with`] applies. The shards always run [`step`],
/// which applies all of them; the model turns one off at a time to show it
/// is needed (each broken variant must fail with a trace).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Guards {
    /// A call must name exactly the recorded move.
    pub identity: bool,
    /// A take needs the source's receipt; a delete, the target's record of the take.
    pub receipt: bool,
    /// A call of an older epoch (or of another holder of the same one) is refused.
    pub epoch: bool,
    /// Once abandoning, nothing is released, taken or imported.
    pub abandoning: bool,
}

impl Guards {
    pub const ALL: Guards = Guards { identity: true, receipt: true, epoch: true, abandoning: true };
}

/// One call on one shard: the next state, or why not (nothing changed).
pub fn step(shard: &Shard, request: &Request) -> Result<Transition, Refusal> {
    step_with(Guards::ALL, shard, request)
}

/// [`step`] with only `guards` applied (the model's broken variants).
pub fn step_with(guards: Guards, shard: &Shard, request: &Request) -> Result<Transition, Refusal> {
    let (next, effects) = match &shard.active {
        Some(active) => on_active(guards, shard, active, request)?,
        None => on_idle(guards, shard, request)?,
    };
    let durable = next.owned != shard.owned
        || next.active.as_ref().map(Record::durable) != shard.active.as_ref().map(Record::durable);
    Ok(Transition { shard: next, effects, durable })
}

type Next = (Shard, Vec<Effect>);

/// A call on a shard in no move.
fn on_idle(guards: Guards, shard: &Shard, request: &Request) -> Result<Next, Refusal> {
    let asked = &request.identity;
    if let Some(finished) = shard.finished.as_ref().filter(|f| f.identity.id == asked.id) {
        return on_finished(guards, shard, finished, request);
    }
    let (role, step, effect) = match request.call {
        Call::PrepareImport => {
            shard.owned.with(asked.slots)?;
            (Role::Target, Step::Importing, Effect::ClearCopies)
        }
        Call::PrepareExport => {
            shard.owned.without(asked.slots)?;
            (Role::Source, Step::Exporting, Effect::StartRecording)
        }
        // The move never began here: there is nothing to undo.
        Call::Abandon | Call::Undo => return Ok((shard.clone(), vec![Effect::AlreadyDone])),
        _ => return Err(Refusal::NoMove(asked.id.clone())),
    };
    let record = Record {
        identity: asked.clone(),
        role,
        step,
        lease: lease_of(&request.fence, request.now_ms),
        abandoning: false,
        release_token: None,
        search_first: None,
        started_at_ms: request.now_ms,
        updated_at_ms: request.now_ms,
    };
    Ok((Shard { owned: shard.owned, active: Some(record), finished: None }, vec![effect]))
}

/// A call naming a move this shard has finished: only the call that
/// finished it answers again (a rerun whose reply was lost); every other is
/// refused, so a finished record never stands in for a step not taken.
fn on_finished(guards: Guards, shard: &Shard, finished: &Record, request: &Request) -> Result<Next, Refusal> {
    same_move(guards, finished, &request.identity)?;
    let repeat = matches!(
        (&request.call, finished.role, finished.step),
        (Call::Take { .. }, Role::Target, Step::Done)
            | (Call::DeleteCopies { .. } | Call::Finish { .. }, Role::Source, Step::Done)
            | (Call::Abandon | Call::Undo, _, Step::Abandoned)
    );
    if repeat {
        Ok((shard.clone(), vec![Effect::AlreadyDone]))
    } else {
        Err(Refusal::Finished(finished.identity.clone()))
    }
}

fn on_active(guards: Guards, shard: &Shard, active: &Record, request: &Request) -> Result<Next, Refusal> {
    same_move(guards, active, &request.identity)?;
    let lease = if guards.epoch { fenced(active, request)? } else { lease_of(&request.fence, request.now_ms) };
    let mut record = Record { lease, ..active.clone() };
    let mut owned = shard.owned;
    let mut effects = Vec::new();
    let have = || active.identity.clone();
    let in_role = |role: Role| match active.role == role {
        true => Ok(()),
        false => Err(Refusal::WrongRole { have: have(), role: active.role, asked: role }),
    };
    let not_abandoning = || match active.abandoning && guards.abandoning {
        true => Err(Refusal::Abandoning(have())),
        false => Ok(()),
    };
    match &request.call {
        Call::PrepareImport => {
            in_role(Role::Target)?;
            not_abandoning()?;
        }
        Call::PrepareExport => {
            in_role(Role::Source)?;
            not_abandoning()?;
        }
        Call::Freeze => {
            in_role(Role::Source)?;
            not_abandoning()?;
            if active.step == Step::Exporting {
                record.step = Step::Frozen;
            }
        }
        Call::Read(role) => {
            if let Some(role) = role {
                in_role(*role)?;
            }
        }
        Call::Import => {
            in_role(Role::Target)?;
            not_abandoning()?;
        }
        Call::Release { token, search_first } => {
            in_role(Role::Source)?;
            not_abandoning()?;
            match active.step {
                Step::Frozen => {
                    owned = owned.without(active.identity.slots)?;
                    record.step = Step::Released;
                    record.release_token = Some(token.clone());
                    record.search_first = *search_first;
                    effects.push(Effect::StopRecording);
                }
                Step::Released => effects.push(Effect::AlreadyDone),
                step => {
                    return Err(Refusal::WrongStep {
                        have: have(),
                        step,
                        what: "its slots are still served: freeze, copy and verify first",
                    })
                }
            }
        }
        Call::Take { receipt } => {
            in_role(Role::Target)?;
            not_abandoning()?;
            if guards.receipt {
                released_to(active, receipt)?;
            }
            owned = owned.with(active.identity.slots)?;
            record.step = Step::Done;
            record.release_token = receipt.release_token.clone();
            record.search_first = receipt.search_first;
        }
        Call::DeleteCopies { taken } | Call::Finish { taken } => {
            in_role(Role::Source)?;
            if guards.receipt {
                taken_from(active, taken)?;
            }
            if matches!(request.call, Call::Finish { .. }) {
                record.step = Step::Done;
            }
        }
        Call::Abandon => {
            if active.step == Step::Released {
                return Err(Refusal::Released { have: have() });
            }
            record.abandoning = true;
        }
        Call::Undo => {
            if !active.abandoning {
                return Err(Refusal::WrongStep {
                    have: have(),
                    step: active.step,
                    what: "record the abandon on both shards first (rerun with --abandon)",
                });
            }
            record.step = Step::Abandoned;
            effects.push(match active.role {
                Role::Source => Effect::StopRecording,
                Role::Target => Effect::ClearCopies,
            });
        }
    }
    if record.step != active.step {
        record.updated_at_ms = request.now_ms;
    }
    let next = match record.step.finished() {
        true => Shard { owned, active: None, finished: Some(record) },
        false => Shard { owned, active: Some(record), finished: None },
    };
    Ok((next, effects))
}

/// The call names exactly the recorded move.
fn same_move(guards: Guards, record: &Record, asked: &Identity) -> Result<(), Refusal> {
    match record.identity == *asked || !guards.identity {
        true => Ok(()),
        false => Err(Refusal::OtherMove { have: Box::new(record.identity.clone()), asked: Box::new(asked.clone()) }),
    }
}

fn lease_of(fence: &Fence, now_ms: i64) -> Lease {
    Lease { epoch: fence.epoch, holder: fence.holder.clone(), until_ms: now_ms.saturating_add(fence.lease_ms) }
}

/// The lease after a call of `request`'s run: renewed for the run that
/// holds it, taken by a newer run once it ran out, refused to an older one.
fn fenced(record: &Record, request: &Request) -> Result<Lease, Refusal> {
    let (lease, fence, now_ms) = (&record.lease, &request.fence, request.now_ms);
    let held_by_another = fence.holder != lease.holder && now_ms < lease.until_ms;
    if fence.epoch < lease.epoch {
        return Err(Refusal::Stale { asked: fence.epoch, lease: lease.clone() });
    }
    if (fence.epoch == lease.epoch && fence.holder != lease.holder) || held_by_another {
        return Err(Refusal::Held { have: Box::new(record.identity.clone()), lease: lease.clone(), now_ms });
    }
    Ok(lease_of(fence, now_ms))
}

/// The receipt is the source's record of releasing exactly this move to
/// this target.
fn released_to(target: &Record, receipt: &Record) -> Result<(), Refusal> {
    let why = if receipt.identity != target.identity {
        format!("the receipt is for {}", receipt.identity)
    } else if receipt.role != Role::Source || !matches!(receipt.step, Step::Released | Step::Done) {
        format!("the source has not released them (it is {})", receipt.step.as_str())
    } else if receipt.release_token.is_none() {
        "the receipt carries no release token".to_owned()
    } else {
        return Ok(());
    };
    Err(Refusal::NoRelease { have: target.identity.clone(), why })
}

/// The target's record shows it took this move with this source's release.
fn taken_from(source: &Record, taken: &Record) -> Result<(), Refusal> {
    let why = if source.step != Step::Released {
        format!("the slots are {} here, not released", source.step.as_str())
    } else if taken.identity != source.identity {
        format!("the target's record is of {}", taken.identity)
    } else if taken.role != Role::Target || taken.step != Step::Done {
        format!("the target has not taken them (it is {})", taken.step.as_str())
    } else if taken.release_token != source.release_token {
        "the target took them with another release".to_owned()
    } else {
        return Ok(());
    };
    Err(Refusal::NotTaken { have: source.identity.clone(), why })
}

#[cfg(test)]
mod tests {
    use pastebin_core::{OwnedSlots, SlotRange};

    use super::*;

    const LEASE_MS: i64 = 10_000;

    fn identity(target: &str) -> Identity {
        Identity { id: "m".into(), slots: "128-255".parse().unwrap(), source: "A".into(), target: target.into() }
    }

    fn request(identity: &Identity, epoch: u64, holder: &str, now_ms: i64, call: Call) -> Request {
        Request {
            identity: identity.clone(),
            fence: Fence { epoch, holder: holder.into(), lease_ms: LEASE_MS },
            now_ms,
            call,
        }
    }

    fn run(shard: &mut Shard, request: Request) -> Result<Vec<Effect>, Refusal> {
        let transition = step(shard, &request)?;
        *shard = transition.shard;
        Ok(transition.effects)
    }

    fn shards() -> (Shard, Shard) {
        let all = OwnedSlots::Range(SlotRange::ALL);
        (
            Shard { owned: all, active: None, finished: None },
            Shard { owned: OwnedSlots::Nothing, active: None, finished: None },
        )
    }

    /// Source and target of move `m` from A to B, frozen, at epoch 1.
    fn frozen() -> (Shard, Shard) {
        let (mut source, mut target) = shards();
        let m = identity("B");
        run(&mut source, request(&m, 1, "run1", 0, Call::PrepareExport)).unwrap();
        run(&mut target, request(&m, 1, "run1", 0, Call::PrepareImport)).unwrap();
        run(&mut source, request(&m, 1, "run1", 0, Call::Freeze)).unwrap();
        (source, target)
    }

    #[test]
    fn a_take_needs_the_source_release_of_this_move_to_this_target() {
        let (mut source, mut target) = frozen();
        let m = identity("B");
        let unreleased = source.active.clone().unwrap();
        let refused = run(&mut target, request(&m, 1, "run1", 1, Call::Take { receipt: unreleased })).unwrap_err();
        assert!(matches!(refused, Refusal::NoRelease { .. }), "{refused}");
        run(&mut source, request(&m, 1, "run1", 1, Call::Release { token: "t".into(), search_first: None })).unwrap();
        let receipt = source.active.clone().unwrap();
        // A shard that recorded another target (a typo in --to) cannot use it.
        let (_, mut other) = shards();
        let to_c = identity("C");
        run(&mut other, request(&to_c, 2, "run2", 1, Call::PrepareImport)).unwrap();
        let refused = run(&mut other, request(&to_c, 2, "run2", 1, Call::Take { receipt: receipt.clone() }));
        assert!(matches!(refused, Err(Refusal::NoRelease { .. })), "{refused:?}");
        run(&mut target, request(&m, 1, "run1", 2, Call::Take { receipt })).unwrap();
        assert_eq!(target.owned, OwnedSlots::Range(m.slots));
        // The source deletes only on the target's record of the take.
        let taken = target.finished.clone().unwrap();
        run(&mut source, request(&m, 1, "run1", 3, Call::DeleteCopies { taken: taken.clone() })).unwrap();
        run(&mut source, request(&m, 1, "run1", 3, Call::Finish { taken })).unwrap();
        assert_eq!(source.finished.as_ref().map(|r| r.step), Some(Step::Done));
    }

    #[test]
    fn a_call_naming_another_peer_or_slots_is_refused_and_a_finished_record_answers_nothing_new() {
        let (mut source, mut target) = frozen();
        let wrong = request(&identity("C"), 2, "run2", 1, Call::Release { token: "t".into(), search_first: None });
        assert!(matches!(run(&mut source, wrong), Err(Refusal::OtherMove { .. })));
        let m = identity("B");
        run(&mut source, request(&m, 1, "run1", 1, Call::Release { token: "t".into(), search_first: None })).unwrap();
        run(&mut target, request(&m, 1, "run1", 1, Call::Take { receipt: source.active.clone().unwrap() })).unwrap();
        let done = run(&mut target, request(&m, 2, "run2", 1, Call::PrepareImport));
        assert!(matches!(done, Err(Refusal::Finished(_))), "{done:?}");
        let again = run(&mut target, request(&m, 2, "run2", 1, Call::Take { receipt: source.active.clone().unwrap() }));
        assert_eq!(again, Ok(vec![Effect::AlreadyDone]));
    }

    #[test]
    fn an_older_epoch_is_refused_and_a_live_lease_is_not_taken_over() {
        let (mut source, _) = frozen();
        let m = identity("B");
        let second = run(&mut source, request(&m, 2, "run2", 5, Call::Read(None)));
        assert!(matches!(second, Err(Refusal::Held { .. })), "{second:?}");
        run(&mut source, request(&m, 2, "run2", LEASE_MS + 1, Call::Read(None))).unwrap();
        let first = run(
            &mut source,
            request(&m, 1, "run1", LEASE_MS + 2, Call::Release { token: "t".into(), search_first: None }),
        );
        assert!(matches!(first, Err(Refusal::Stale { .. })), "{first:?}");
    }

    #[test]
    fn once_abandoning_nothing_is_released_or_taken() {
        let (mut source, mut target) = frozen();
        let m = identity("B");
        run(&mut source, request(&m, 2, "abandon", LEASE_MS, Call::Abandon)).unwrap();
        let release = run(
            &mut source,
            request(&m, 2, "abandon", LEASE_MS, Call::Release { token: "t".into(), search_first: None }),
        );
        assert!(matches!(release, Err(Refusal::Abandoning(_))), "{release:?}");
        run(&mut target, request(&m, 2, "abandon", LEASE_MS, Call::Abandon)).unwrap();
        assert_eq!(run(&mut target, request(&m, 2, "abandon", LEASE_MS, Call::Undo)), Ok(vec![Effect::ClearCopies]));
        assert_eq!(run(&mut source, request(&m, 2, "abandon", LEASE_MS, Call::Undo)), Ok(vec![Effect::StopRecording]));
        assert_eq!(source.active, None);
        assert_eq!(source.owned, OwnedSlots::Range(SlotRange::ALL), "the source serves every slot again");
    }
}
