//! The topology of one kind of shard as the authority keeps it, and every
//! change to it as a pure function (docs/design.md#ownership-on-etcd): no
//! I/O, so ctl, the shards and the tests all run the same rules. A change
//! returns the next [`Topology`] with its version one higher; the authority
//! stores it only if nobody wrote since it was read (compare-and-swap).

use std::collections::BTreeMap;

use pastebin_core::{OwnedSlots, Slot, SlotRange};
use serde::{Deserialize, Serialize};

/// Which service's shards a topology assigns slots to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Key,
    Paste,
}

impl Kind {
    pub const ALL: [Kind; 2] = [Kind::Key, Kind::Paste];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Key => "key",
            Kind::Paste => "paste",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the authority grants one shard: its slots, and the marker its
/// database held when the shard last confirmed it had not forgotten.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Grant {
    #[serde(with = "owned_slots")]
    pub slots: OwnedSlots,
    /// Written by the shard to its own database first, then here. A shard
    /// whose database holds another marker has forgotten something since
    /// (a restore, a new volume, a standby promoted without the last
    /// commits) and draws a new one, which voids what a move verified on it.
    pub marker: Option<String>,
}

/// How far a move has come. Only the authority's record decides what a
/// shard may do for the moving slots; the shards keep the rows.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// The source serves the slots and records what changes; the target
    /// receives copies and serves nothing of them.
    Copying,
    /// The source refuses writes for the slots (retryable); the last
    /// changes are being copied.
    Frozen,
    /// The target's copy was read back and matched the source's, row for
    /// row: `digest` is that copy's, `target_marker` the target's marker
    /// when it was read. The cut-over compares both.
    Verified {
        digest: String,
        target_marker: String,
    },
    /// The slots are the target's. Its copy stays trusted only while its
    /// marker is still `target_marker`; the source deletes its copies only
    /// then.
    Taken {
        digest: String,
        target_marker: String,
    },
    Done,
    /// An abandon has begun: nothing is taken any more; the target drops
    /// its copies, then the source serves the slots again.
    Abandoning,
    Abandoned,
}

impl Phase {
    pub fn name(&self) -> &'static str {
        match self {
            Phase::Copying => "copying",
            Phase::Frozen => "frozen",
            Phase::Verified { .. } => "verified",
            Phase::Taken { .. } => "taken",
            Phase::Done => "done",
            Phase::Abandoning => "abandoning",
            Phase::Abandoned => "abandoned",
        }
    }

    pub fn finished(&self) -> bool {
        matches!(self, Phase::Done | Phase::Abandoned)
    }
}

/// One move, as the operator asked for it, and how far it has come.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Move {
    pub id: String,
    #[serde(with = "slot_range")]
    pub slots: SlotRange,
    pub source: String,
    pub target: String,
    #[serde(flatten)]
    pub phase: Phase,
    /// The lost-commits window (Unix ms, since and until) the source held
    /// for these slots: it moves with them
    /// (docs/design.md#adopting-after-a-k-loss).
    #[serde(default)]
    pub search_first: Option<(i64, i64)>,
    /// The source has begun deleting its copies: from then on the target's
    /// copy is the only one, so a target that forgets since is an ordinary
    /// failover (reconcile, repair, adopt), never copied again from a
    /// source that no longer has the rows.
    #[serde(default)]
    pub deleting: bool,
}

impl Move {
    /// The same move, as typed: slots, source and target.
    pub fn names(&self, slots: SlotRange, source: &str, target: &str) -> bool {
        self.slots == slots && self.source == source && self.target == target
    }

    /// Whether the shard at `address` is this move's source or target.
    pub fn involves(&self, address: &str) -> bool {
        self.source == address || self.target == address
    }
}

impl std::fmt::Display for Move {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "move {} of slots {} from {} to {}", self.id, self.slots, self.source, self.target)
    }
}

/// How many finished moves a topology remembers, so that a rerun of one
/// is recognised as done.
pub const FINISHED_KEPT: usize = 16;

/// Every shard of one kind, what each is granted, and the move in
/// progress. `version` only grows: each change adds one, and a reader
/// never replaces a newer topology by an older one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Topology {
    pub version: u64,
    pub shards: BTreeMap<String, Grant>,
    #[serde(default)]
    pub moving: Option<Move>,
    /// The last [`FINISHED_KEPT`] finished moves, newest last.
    #[serde(default)]
    pub finished: Vec<Move>,
}

/// Why a topology cannot be written as asked. Nothing changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("slot {slot} is claimed by both {first} and {second}: give each slot to one shard")]
    Overlap { slot: Slot, first: String, second: String },
    #[error("no shard claims slot {0}: every slot from 0 to 255 needs an owner")]
    Gap(Slot),
    #[error("no shard was named")]
    Empty,
    #[error("{0} is not a shard of this topology: add it first (it registers itself when it starts with --topology)")]
    UnknownShard(String),
    #[error("{0} is in progress: finish it (rerun the same command, or --resume) or --abandon it first")]
    Busy(Box<Move>),
    #[error("no move is in progress")]
    NoMove,
    #[error("{moving} is in progress, not this one")]
    OtherMove { moving: Box<Move> },
    #[error("the {moving} is {phase}, not {expected}")]
    WrongPhase { moving: Box<Move>, phase: &'static str, expected: &'static str },
    #[error("the target's copy does not match what was verified (digest {found}, verified {verified}): copy and verify again")]
    DigestChanged { verified: String, found: String },
    #[error("the target {target} forgot rows since its copy was verified (its marker changed): copy and verify again")]
    TargetForgot { target: String },
    #[error("the {0} was taken by its target: it can no longer be abandoned; rerun without --abandon")]
    AlreadyTaken(Box<Move>),
    #[error(transparent)]
    Slots(#[from] pastebin_core::SlotMoveError),
}

impl Topology {
    /// The first topology of a kind, from the ranges its shards report:
    /// refused if two claim a slot or a slot has no owner.
    pub fn initial(shards: impl IntoIterator<Item = (String, OwnedSlots)>) -> Result<Self, Refused> {
        let shards: BTreeMap<String, Grant> =
            shards.into_iter().map(|(address, slots)| (address, Grant { slots, marker: None })).collect();
        if shards.is_empty() {
            return Err(Refused::Empty);
        }
        let topology = Topology { version: 1, shards, moving: None, finished: Vec::new() };
        topology.check_coverage()?;
        Ok(topology)
    }

    /// Every slot has exactly one owner.
    pub fn check_coverage(&self) -> Result<(), Refused> {
        let mut owners: Vec<Option<&str>> = vec![None; pastebin_core::SLOT_COUNT];
        for (address, grant) in &self.shards {
            let Some(range) = grant.slots.range() else { continue };
            for slot in range.slots() {
                if let Some(first) = owners[slot.index()].replace(address) {
                    return Err(Refused::Overlap { slot, first: first.to_owned(), second: address.clone() });
                }
            }
        }
        match owners.iter().position(Option::is_none) {
            Some(index) => Err(Refused::Gap(Slot(index as u8))),
            None => Ok(()),
        }
    }

    /// The shard that owns `slot`.
    pub fn owner(&self, slot: Slot) -> Option<&str> {
        self.shards.iter().find(|(_, grant)| grant.slots.contains(slot)).map(|(address, _)| address.as_str())
    }

    pub fn grant(&self, address: &str) -> Option<&Grant> {
        self.shards.get(address)
    }

    /// What the shard at `address` may serve now.
    pub fn serving(&self, address: &str) -> Serving {
        let owned = self.grant(address).map_or(OwnedSlots::Nothing, |grant| grant.slots);
        let mut serving = Serving { owned, frozen: None, held: None };
        let Some(moving) = &self.moving else { return serving };
        match &moving.phase {
            Phase::Frozen | Phase::Verified { .. } | Phase::Abandoning if moving.source == address => {
                serving.frozen = Some(moving.slots);
            }
            Phase::Taken { target_marker, .. } if moving.target == address && !moving.deleting => {
                let marker = self.grant(address).and_then(|grant| grant.marker.as_deref());
                if marker != Some(target_marker.as_str()) {
                    serving.held = Some(moving.slots);
                }
            }
            _ => {}
        }
        serving
    }

    /// The shard at `address` starts (or its database link came back)
    /// holding `marker` in its database: registered with no slots if it is
    /// new here, its marker replaced by `fresh` if it differs.
    pub fn confirm(&self, address: &str, marker: Option<&str>, fresh: &str) -> Confirmation {
        match self.grant(address) {
            Some(grant) if grant.marker.is_some() && grant.marker.as_deref() == marker => Confirmation::Confirmed,
            found => {
                let mut next = self.bumped();
                let slots = found.map_or(OwnedSlots::Nothing, |grant| grant.slots);
                next.shards.insert(address.to_owned(), Grant { slots, marker: Some(fresh.to_owned()) });
                Confirmation::Forgot { next: Box::new(next), registered: found.is_none() }
            }
        }
    }

    /// Records a new move of `slots` from `source` to `target`, copying.
    pub fn record_move(&self, id: &str, slots: SlotRange, source: &str, target: &str) -> Result<Self, Refused> {
        if let Some(moving) = &self.moving {
            return Err(Refused::Busy(Box::new(moving.clone())));
        }
        let source_grant = self.grant(source).ok_or_else(|| Refused::UnknownShard(source.to_owned()))?;
        let target_grant = self.grant(target).ok_or_else(|| Refused::UnknownShard(target.to_owned()))?;
        // Both ends must still be contiguous after the move.
        source_grant.slots.without(slots)?;
        target_grant.slots.with(slots)?;
        let mut next = self.bumped();
        next.moving = Some(Move {
            id: id.to_owned(),
            slots,
            source: source.to_owned(),
            target: target.to_owned(),
            phase: Phase::Copying,
            search_first: None,
            deleting: false,
        });
        Ok(next)
    }

    /// The source stops accepting writes for the moving slots.
    pub fn freeze(&self, id: &str) -> Result<Self, Refused> {
        self.advance(id, &["copying", "frozen"], |_| Phase::Frozen)
    }

    /// The target's copy matched the source's: `digest` at `target_marker`,
    /// which the target stored in its own database before answering.
    pub fn verified(&self, id: &str, digest: &str, target_marker: &str) -> Result<Self, Refused> {
        let moving = self.move_named(id)?;
        let mut next = self.advance(id, &["frozen", "verified"], |_| Phase::Verified {
            digest: digest.to_owned(),
            target_marker: target_marker.to_owned(),
        })?;
        next.mark(&moving.target, target_marker);
        Ok(next)
    }

    /// The cut-over: the slots become the target's in one write, only if
    /// the target's copy is still the one verified (`digest` read back from
    /// it now) and its marker has not changed since.
    pub fn take(&self, id: &str, digest: &str, search_first: Option<(i64, i64)>) -> Result<Self, Refused> {
        let moving = self.move_named(id)?;
        let Phase::Verified { digest: verified, target_marker } = &moving.phase else {
            return Err(self.wrong_phase(moving, "verified"));
        };
        if verified != digest {
            return Err(Refused::DigestChanged { verified: verified.clone(), found: digest.to_owned() });
        }
        self.check_marker(moving, target_marker)?;
        let source = self.shards[&moving.source].slots.without(moving.slots)?;
        let target = self.shards[&moving.target].slots.with(moving.slots)?;
        let mut next = self.bumped();
        next.grant_slots(&moving.source, source);
        next.grant_slots(&moving.target, target);
        let next_move = next.moving.as_mut().expect("the move was read from this topology");
        next_move.phase = Phase::Taken { digest: verified.clone(), target_marker: target_marker.clone() };
        next_move.search_first = search_first;
        Ok(next)
    }

    /// After a take, the target forgot (its marker changed): its copy was
    /// made again from the source and matched, `digest` at `target_marker`.
    pub fn taken_again(&self, id: &str, digest: &str, target_marker: &str) -> Result<Self, Refused> {
        let moving = self.move_named(id)?;
        if !matches!(moving.phase, Phase::Taken { .. }) {
            return Err(self.wrong_phase(moving, "taken"));
        }
        let mut next = self.advance(id, &["taken"], |_| Phase::Taken {
            digest: digest.to_owned(),
            target_marker: target_marker.to_owned(),
        })?;
        next.mark(&moving.target, target_marker);
        Ok(next)
    }

    /// Whether the source may delete its copies of the moving slots: the
    /// take is recorded here and the target still holds what was verified.
    pub fn may_delete_copies(&self, id: &str) -> Result<(), Refused> {
        let moving = self.move_named(id)?;
        match &moving.phase {
            Phase::Taken { .. } if moving.deleting => Ok(()),
            Phase::Taken { target_marker, .. } => self.check_marker(moving, target_marker),
            _ => Err(self.wrong_phase(moving, "taken")),
        }
    }

    /// The source is about to delete its first copy: recorded only while
    /// the target still holds what was verified (see [`Move::deleting`]).
    pub fn deleting(&self, id: &str) -> Result<Self, Refused> {
        self.may_delete_copies(id)?;
        let mut next = self.bumped();
        next.moving.as_mut().expect("the move was read from this topology").deleting = true;
        Ok(next)
    }

    /// Whether a shard may take `step` of move `id`: only what the topology
    /// records. A rerun of a step whose move finished is allowed when the
    /// move ended the way the step leads (its answer may have been lost).
    pub fn allows(&self, id: &str, step: ShardStep) -> Result<(), Refused> {
        let ended = |how: &Phase| self.finished.iter().any(|done| done.id == id && done.phase == *how);
        let moving = match self.move_named(id) {
            Ok(moving) => moving,
            Err(refused) => {
                let rerun = match step {
                    ShardStep::Release | ShardStep::Take | ShardStep::DeleteCopies => ended(&Phase::Done),
                    ShardStep::Abandon => ended(&Phase::Abandoned),
                    _ => false,
                };
                return if rerun { Ok(()) } else { Err(refused) };
            }
        };
        let (allowed, expected) = match step {
            // Until the cut-over the source holds every row: a target whose
            // database forgot its record of the move records it again, and
            // the verify its copy must pass comes after (its marker changed).
            ShardStep::PrepareImport => {
                (matches!(moving.phase, Phase::Copying | Phase::Frozen | Phase::Verified { .. }), "before its cut-over")
            }
            ShardStep::Take if self.serving(&moving.target).held.is_some() => {
                return Err(Refused::TargetForgot { target: moving.target.clone() })
            }
            ShardStep::Freeze | ShardStep::StampMarker => {
                (matches!(moving.phase, Phase::Frozen | Phase::Verified { .. } | Phase::Taken { .. }), "frozen")
            }
            ShardStep::Release | ShardStep::Take => (matches!(moving.phase, Phase::Taken { .. }), "taken"),
            ShardStep::DeleteCopies => return self.may_delete_copies(id),
            ShardStep::Abandon => (moving.phase == Phase::Abandoning, "abandoning"),
        };
        if allowed {
            Ok(())
        } else {
            Err(self.wrong_phase(moving, expected))
        }
    }

    /// The source deleted its copies: the move is done.
    pub fn finish(&self, id: &str) -> Result<Self, Refused> {
        self.may_delete_copies(id)?;
        self.close(id, Phase::Done)
    }

    /// An abandon begins: refused once the slots were taken.
    pub fn abandon(&self, id: &str) -> Result<Self, Refused> {
        let moving = self.move_named(id)?;
        match moving.phase {
            Phase::Taken { .. } => Err(Refused::AlreadyTaken(Box::new(moving.clone()))),
            Phase::Abandoning => Ok(self.clone()),
            _ => self.advance(id, &["copying", "frozen", "verified"], |_| Phase::Abandoning),
        }
    }

    /// The target dropped its copies: the source serves the slots again.
    pub fn abandoned(&self, id: &str) -> Result<Self, Refused> {
        let moving = self.move_named(id)?;
        if moving.phase != Phase::Abandoning {
            return Err(self.wrong_phase(moving, "abandoning"));
        }
        self.close(id, Phase::Abandoned)
    }

    /// The finished move that named exactly these slots, source and target
    /// last, if its slots are still where it left them.
    pub fn finished_like(&self, slots: SlotRange, source: &str, target: &str) -> Option<&Move> {
        let last = self.finished.iter().rev().find(|done| done.names(slots, source, target))?;
        let holder = if last.phase == Phase::Done { target } else { source };
        self.grant(holder).is_some_and(|grant| grant.slots.covers(slots)).then_some(last)
    }

    fn move_named(&self, id: &str) -> Result<&Move, Refused> {
        match &self.moving {
            Some(moving) if moving.id == id => Ok(moving),
            Some(moving) => Err(Refused::OtherMove { moving: Box::new(moving.clone()) }),
            None => Err(Refused::NoMove),
        }
    }

    fn wrong_phase(&self, moving: &Move, expected: &'static str) -> Refused {
        Refused::WrongPhase { moving: Box::new(moving.clone()), phase: moving.phase.name(), expected }
    }

    fn check_marker(&self, moving: &Move, verified_marker: &str) -> Result<(), Refused> {
        let marker = self.grant(&moving.target).and_then(|grant| grant.marker.as_deref());
        if marker == Some(verified_marker) {
            Ok(())
        } else {
            Err(Refused::TargetForgot { target: moving.target.clone() })
        }
    }

    /// The move moves to `phase` from one of `from`.
    fn advance(&self, id: &str, from: &[&'static str], phase: impl FnOnce(&Move) -> Phase) -> Result<Self, Refused> {
        let moving = self.move_named(id)?;
        if !from.contains(&moving.phase.name()) {
            return Err(self.wrong_phase(moving, from[0]));
        }
        let next_phase = phase(moving);
        let mut next = self.bumped();
        next.moving.as_mut().expect("the move was read from this topology").phase = next_phase;
        Ok(next)
    }

    fn close(&self, id: &str, phase: Phase) -> Result<Self, Refused> {
        let mut closed = self.move_named(id)?.clone();
        closed.phase = phase;
        let mut next = self.bumped();
        next.moving = None;
        next.finished.push(closed);
        let excess = next.finished.len().saturating_sub(FINISHED_KEPT);
        next.finished.drain(..excess);
        Ok(next)
    }

    fn bumped(&self) -> Self {
        Self { version: self.version + 1, ..self.clone() }
    }

    fn grant_slots(&mut self, address: &str, slots: OwnedSlots) {
        if let Some(grant) = self.shards.get_mut(address) {
            grant.slots = slots;
        }
    }

    fn mark(&mut self, address: &str, marker: &str) {
        if let Some(grant) = self.shards.get_mut(address) {
            grant.marker = Some(marker.to_owned());
        }
    }
}

/// A move call a shard takes only where the topology records its step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardStep {
    /// Target: record the move and clear what an abandoned attempt left.
    PrepareImport,
    /// Source: refuse writes for the slots.
    Freeze,
    /// Target: a fresh marker over its verified copy.
    StampMarker,
    /// Source: give the slots up (its own record of the cut-over).
    Release,
    /// Target: own the slots (its own record of the cut-over).
    Take,
    /// Source: delete its copies of the moved slots.
    DeleteCopies,
    /// Either: record and carry out an abandon.
    Abandon,
}

/// What one shard may serve under a topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Serving {
    pub owned: OwnedSlots,
    /// Owned, but writes are refused (retryable): the source of a move
    /// from its freeze until the cut-over or the end of an abandon.
    pub frozen: Option<SlotRange>,
    /// Owned, but nothing is served: a target whose copy was lost after
    /// the take, until it is copied and verified again.
    pub held: Option<SlotRange>,
}

impl Serving {
    /// Whether a read of `slot` may be answered here.
    pub fn readable(&self, slot: Slot) -> bool {
        self.owned.contains(slot) && !self.held.is_some_and(|held| held.contains(slot))
    }

    /// Whether a write of `slot` may be accepted here.
    pub fn writable(&self, slot: Slot) -> bool {
        self.readable(slot) && !self.frozen.is_some_and(|frozen| frozen.contains(slot))
    }
}

/// What a shard's start (or reconnection) found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirmation {
    /// Its database holds the marker the authority has: nothing forgotten.
    Confirmed,
    /// Its database does not: store `next` (its fresh marker, and the
    /// shard itself if it was not `registered` yet).
    Forgot { next: Box<Topology>, registered: bool },
}

mod owned_slots {
    use pastebin_core::OwnedSlots;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(slots: &OwnedSlots, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(slots)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<OwnedSlots, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

mod slot_range {
    use pastebin_core::SlotRange;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(slots: &SlotRange, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(slots)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SlotRange, D::Error> {
        String::deserialize(deserializer)?.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(raw: &str) -> SlotRange {
        raw.parse().unwrap()
    }

    fn two_shards() -> Topology {
        Topology::initial([("a".to_owned(), OwnedSlots::Range(SlotRange::ALL)), ("b".to_owned(), OwnedSlots::Nothing)])
            .unwrap()
    }

    /// `b` confirmed with marker `m1`, and a move of 128-255 verified at it.
    fn verified() -> Topology {
        let Confirmation::Forgot { next, .. } = two_shards().confirm("b", None, "m1") else { panic!() };
        let next = next.record_move("mv", range("128-255"), "a", "b").unwrap();
        next.freeze("mv").unwrap().verified("mv", "d1", "m2").unwrap()
    }

    #[test]
    fn the_first_topology_refuses_overlaps_and_gaps() {
        let overlap = Topology::initial([
            ("a".to_owned(), OwnedSlots::Range(range("0-128"))),
            ("b".to_owned(), OwnedSlots::Range(range("128-255"))),
        ]);
        assert!(matches!(overlap, Err(Refused::Overlap { slot: Slot(128), .. })));
        let gap = Topology::initial([
            ("a".to_owned(), OwnedSlots::Range(range("0-126"))),
            ("b".to_owned(), OwnedSlots::Range(range("128-255"))),
        ]);
        assert_eq!(gap, Err(Refused::Gap(Slot(127))));
        assert_eq!(Topology::initial([]), Err(Refused::Empty));
        assert_eq!(two_shards().owner(Slot(200)), Some("a"));
    }

    #[test]
    fn the_cut_over_moves_the_grant_in_one_change_and_only_on_the_verified_copy() {
        let verified = verified();
        assert_eq!(verified.serving("a").frozen, Some(range("128-255")));
        assert_eq!(
            verified.take("mv", "other", None),
            Err(Refused::DigestChanged { verified: "d1".into(), found: "other".into() })
        );
        let taken = verified.take("mv", "d1", Some((1, 2))).unwrap();
        assert_eq!(taken.version, verified.version + 1);
        assert_eq!(taken.grant("a").unwrap().slots, OwnedSlots::Range(range("0-127")));
        assert_eq!(taken.grant("b").unwrap().slots, OwnedSlots::Range(range("128-255")));
        assert!(taken.serving("b").writable(Slot(200)) && !taken.serving("a").readable(Slot(200)));
        taken.check_coverage().unwrap();
        assert_eq!(taken.may_delete_copies("mv"), Ok(()));
        let done = taken.finish("mv").unwrap();
        assert!(done.moving.is_none());
        assert!(done.finished_like(range("128-255"), "a", "b").is_some());
    }

    #[test]
    fn a_target_that_forgot_is_not_taken_and_its_source_keeps_its_copies() {
        // The target restarted on a database without its marker: a new one.
        let Confirmation::Forgot { next, registered } = verified().confirm("b", Some("m1"), "m3") else { panic!() };
        assert!(!registered);
        assert_eq!(next.take("mv", "d1", None), Err(Refused::TargetForgot { target: "b".into() }));
        // The same after the take: the slots are held, not served, and the source deletes nothing.
        let taken = verified().take("mv", "d1", None).unwrap();
        let Confirmation::Forgot { next, .. } = taken.confirm("b", None, "m4") else { panic!() };
        assert_eq!(next.serving("b").held, Some(range("128-255")));
        assert!(!next.serving("b").readable(Slot(200)));
        assert_eq!(next.may_delete_copies("mv"), Err(Refused::TargetForgot { target: "b".into() }));
        // Copied and verified again: served, and the source may delete.
        let again = next.taken_again("mv", "d1", "m5").unwrap();
        assert!(again.serving("b").writable(Slot(200)));
        assert_eq!(again.may_delete_copies("mv"), Ok(()));
    }

    #[test]
    fn once_the_source_deletes_a_target_that_forgets_is_no_longer_copied_again() {
        let taken = verified().take("mv", "d1", None).unwrap();
        let deleting = taken.deleting("mv").unwrap();
        // The target restarts on an older database: a new marker, but the
        // source's copies are going, so its copy is the one to serve.
        let Confirmation::Forgot { next, .. } = deleting.confirm("b", None, "m4") else { panic!() };
        assert_eq!(next.serving("b").held, None);
        assert_eq!(next.may_delete_copies("mv"), Ok(()));
        // Before the deleting began, the same restart holds the slots.
        let Confirmation::Forgot { next, .. } = taken.confirm("b", None, "m4") else { panic!() };
        assert!(next.serving("b").held.is_some());
        assert_eq!(next.deleting("mv"), Err(Refused::TargetForgot { target: "b".into() }));
    }

    #[test]
    fn a_confirmed_marker_changes_nothing() {
        let Confirmation::Forgot { next, .. } = two_shards().confirm("b", None, "m1") else { panic!() };
        assert_eq!(next.confirm("b", Some("m1"), "m9"), Confirmation::Confirmed);
        let Confirmation::Forgot { next, registered } = next.confirm("c", None, "m2") else { panic!() };
        assert!(registered);
        assert_eq!(next.grant("c").unwrap().slots, OwnedSlots::Nothing);
    }

    #[test]
    fn an_abandon_is_refused_after_the_take_and_unfreezes_the_source_when_it_ends() {
        let taken = verified().take("mv", "d1", None).unwrap();
        assert!(matches!(taken.abandon("mv"), Err(Refused::AlreadyTaken(_))));
        let abandoning = verified().abandon("mv").unwrap();
        assert!(matches!(abandoning.take("mv", "d1", None), Err(Refused::WrongPhase { .. })));
        assert_eq!(abandoning.serving("a").frozen, Some(range("128-255")));
        let abandoned = abandoning.abandoned("mv").unwrap();
        assert_eq!(abandoned.serving("a").frozen, None);
        assert!(abandoned.finished_like(range("128-255"), "a", "b").is_some());
    }

    #[test]
    fn a_second_move_waits_for_the_first_and_a_move_keeps_both_ranges_contiguous() {
        let moving = two_shards().record_move("one", range("128-255"), "a", "b").unwrap();
        assert!(matches!(moving.record_move("two", range("0-9"), "a", "b"), Err(Refused::Busy(_))));
        assert!(matches!(two_shards().record_move("x", range("10-20"), "a", "b"), Err(Refused::Slots(_))));
        assert!(matches!(two_shards().record_move("x", range("0-9"), "a", "c"), Err(Refused::UnknownShard(_))));
    }

    #[test]
    fn a_shard_takes_only_the_steps_the_topology_records() {
        let verified = verified();
        assert!(verified.allows("mv", ShardStep::Freeze).is_ok());
        // Before the cut-over a target that forgot the move records it again.
        assert!(verified.allows("mv", ShardStep::PrepareImport).is_ok());
        assert!(verified.allows("mv", ShardStep::Take).is_err());
        assert!(verified.allows("mv", ShardStep::DeleteCopies).is_err());
        assert!(verified.allows("other", ShardStep::Freeze).is_err());
        let taken = verified.take("mv", "d1", None).unwrap();
        assert!(taken.allows("mv", ShardStep::Release).is_ok() && taken.allows("mv", ShardStep::Take).is_ok());
        assert!(taken.allows("mv", ShardStep::DeleteCopies).is_ok());
        assert!(taken.allows("mv", ShardStep::Abandon).is_err());
        // After it, a fresh prepare would clear what the target now serves.
        assert!(taken.allows("mv", ShardStep::PrepareImport).is_err());
        let done = taken.finish("mv").unwrap();
        assert!(done.allows("mv", ShardStep::DeleteCopies).is_ok(), "a rerun of the last delete");
        assert!(done.allows("mv", ShardStep::Abandon).is_err());
    }

    #[test]
    fn a_topology_round_trips_through_its_stored_form() {
        let topology = verified().take("mv", "d1", Some((5, 6))).unwrap();
        let stored = serde_json::to_string(&topology).unwrap();
        assert_eq!(serde_json::from_str::<Topology>(&stored).unwrap(), topology);
    }
}
