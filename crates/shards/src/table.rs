//! The pure part of the slot map: from the ranges the shards claim to the
//! owner of every slot, or a refusal that names the shards and slots at
//! fault. No I/O (docs/design.md#slots-and-shards).

use std::fmt;

use pastebin_core::{OwnedSlots, Slot, SlotRange, SLOT_COUNT};

/// One shard of a kind as discovery found it: its address, and what it
/// said it owns (`None`: it did not answer, for callers that go on without
/// it). A shard that owns nothing is listed and routed nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    pub address: String,
    pub slots: Option<OwnedSlots>,
}

/// Why a set of claims is not a slot map. Starting on it would route some
/// slot to no shard, or to two; a process refuses to start instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoverageError {
    #[error("no {kind} shards were given")]
    NoShards { kind: &'static str },
    #[error("{kind} shards {first} and {second} both claim slots {slots}")]
    Overlap { kind: &'static str, first: String, second: String, slots: SlotRange },
    #[error("no {kind} shard claims slots {}", Runs(.slots))]
    Gap { kind: &'static str, slots: Vec<SlotRange> },
}

/// Slot → index of its shard in the list the table was built from, as the
/// shards' own answers say; unknown for a slot no answering shard claims.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotTable {
    owner: Vec<Option<usize>>,
    /// The first shard that did not answer, if any.
    silent: Option<usize>,
}

impl SlotTable {
    /// Every slot must be claimed by exactly one shard, or be left to shards
    /// that did not answer (an operator tool goes on without them): then
    /// its owner is unknown, never guessed.
    pub fn build(kind: &'static str, claims: &[Claim]) -> Result<Self, CoverageError> {
        if claims.is_empty() {
            return Err(CoverageError::NoShards { kind });
        }
        let mut owner: Vec<Option<usize>> = vec![None; SLOT_COUNT];
        for (index, claim) in claims.iter().enumerate() {
            let Some(OwnedSlots::Range(range)) = claim.slots else { continue };
            for slot in range.slots() {
                if let Some(earlier) = owner[slot.index()] {
                    return Err(overlap(kind, &claims[earlier], claim));
                }
                owner[slot.index()] = Some(index);
            }
        }
        let silent = claims.iter().position(|claim| claim.slots.is_none());
        let unclaimed = runs(owner.iter().map(Option::is_none));
        match (silent, unclaimed.is_empty()) {
            (_, true) | (Some(_), false) => Ok(Self { owner, silent }),
            (None, false) => Err(CoverageError::Gap { kind, slots: unclaimed }),
        }
    }

    /// This table, where a slot no shard that answered claims keeps its
    /// owner in `known`, a table of the same list built earlier: each shard
    /// is the authority for its own slots, so the answers win, and a silent
    /// shard's slots stay where they were (docs/design.md#moving-slots).
    pub fn following(&self, known: &SlotTable) -> SlotTable {
        let owner = self.owner.iter().zip(&known.owner).map(|(answered, known)| answered.or(*known)).collect();
        SlotTable { owner, silent: self.silent }
    }

    /// The shard that said it owns `slot`; `None` when none that answered did.
    pub fn owner(&self, slot: Slot) -> Option<usize> {
        self.owner[slot.index()]
    }

    /// The slots `shard` is known to own, as `0-127` (runs joined by
    /// commas), or `none`.
    pub fn slots_of(&self, shard: usize) -> String {
        let runs = runs(self.owner.iter().map(|owner| *owner == Some(shard)));
        if runs.is_empty() {
            "none".to_owned()
        } else {
            Runs(&runs).to_string()
        }
    }

    /// Where a call for `slot` goes: its owner, or for an unknown owner the
    /// first shard that did not answer, whose calls fail as unreachable (and
    /// refuse a slot it turns out not to own). What is shown to a person is
    /// [`Self::owner`], never this.
    pub fn route(&self, slot: Slot) -> usize {
        self.owner(slot).or(self.silent).unwrap_or_default()
    }
}

fn overlap(kind: &'static str, first: &Claim, second: &Claim) -> CoverageError {
    // Both are answering shards: only those are ever entered in the table.
    let range = |claim: &Claim| claim.slots.and_then(OwnedSlots::range).unwrap_or_default();
    let (a, b) = (range(first), range(second));
    let slots = SlotRange::new(a.first().max(b.first()).0, a.last().min(b.last()).0).unwrap_or(a);
    CoverageError::Overlap { kind, first: first.address.clone(), second: second.address.clone(), slots }
}

/// The maximal runs of slots for which `flags` is true.
fn runs(flags: impl Iterator<Item = bool>) -> Vec<SlotRange> {
    let mut runs: Vec<SlotRange> = Vec::new();
    let mut start: Option<u8> = None;
    for (slot, flag) in (0..=u8::MAX).zip(flags) {
        match (flag, start) {
            (true, None) => start = Some(slot),
            (false, Some(first)) => {
                runs.extend(SlotRange::new(first, slot - 1).ok());
                start = None;
            }
            _ => {}
        }
    }
    if let Some(first) = start {
        runs.extend(SlotRange::new(first, u8::MAX).ok());
    }
    runs
}

/// `0-63, 128-255`.
struct Runs<'a>(&'a [SlotRange]);

impl fmt::Display for Runs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, run) in self.0.iter().enumerate() {
            write!(f, "{}{run}", if i == 0 { "" } else { ", " })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(address: &str, slots: &str) -> Claim {
        Claim { address: address.into(), slots: Some(slots.parse().unwrap()) }
    }

    fn empty(address: &str) -> Claim {
        Claim { address: address.into(), slots: Some(OwnedSlots::Nothing) }
    }

    fn silent(address: &str) -> Claim {
        Claim { address: address.into(), slots: None }
    }

    #[test]
    fn the_order_of_the_list_does_not_change_who_owns_a_slot() {
        let forward = [claim("c", "0-127"), claim("d", "128-255")];
        let reversed = [claim("d", "128-255"), claim("c", "0-127")];
        let (a, b) = (SlotTable::build("paste", &forward).unwrap(), SlotTable::build("paste", &reversed).unwrap());
        for slot in (0..=255).map(Slot) {
            assert_eq!(forward[a.route(slot)].address, reversed[b.route(slot)].address, "slot {slot}");
        }
        assert_eq!((a.owner(Slot(127)), a.owner(Slot(128))), (Some(0), Some(1)));
        assert_eq!((b.owner(Slot(127)), b.owner(Slot(128))), (Some(1), Some(0)));
    }

    #[test]
    fn overlapping_claims_name_both_shards_and_the_shared_slots() {
        let error = SlotTable::build("key", &[claim("a:1", "0-150"), claim("b:2", "100-255")]).unwrap_err();
        assert_eq!(
            error,
            CoverageError::Overlap {
                kind: "key",
                first: "a:1".into(),
                second: "b:2".into(),
                slots: "100-150".parse().unwrap()
            }
        );
        assert_eq!(error.to_string(), "key shards a:1 and b:2 both claim slots 100-150");
        let twice = SlotTable::build("key", &[claim("a:1", "0-255"), claim("a:1", "0-255")]).unwrap_err();
        assert!(matches!(twice, CoverageError::Overlap { .. }), "{twice}");
    }

    #[test]
    fn unclaimed_slots_are_named_run_by_run() {
        let error = SlotTable::build("paste", &[claim("a", "64-127"), claim("b", "130-199"), claim("c", "200-254")])
            .unwrap_err();
        assert_eq!(error.to_string(), "no paste shard claims slots 0-63, 128-129, 255-255");
    }

    #[test]
    fn a_shard_that_owns_nothing_is_listed_and_routed_nothing() {
        let table = SlotTable::build("key", &[empty("new"), claim("old", "0-255")]).unwrap();
        assert!((0..=255).map(Slot).all(|slot| table.owner(slot) == Some(1)));
        let gap = SlotTable::build("key", &[empty("new"), claim("old", "0-127")]).unwrap_err();
        assert_eq!(gap.to_string(), "no key shard claims slots 128-255", "owning nothing is not silence");
    }

    #[test]
    fn answers_win_and_a_silent_shard_keeps_the_slots_it_had() {
        let known = SlotTable::build("key", &[claim("a", "0-127"), claim("b", "128-255"), empty("c")]).unwrap();
        // `a` gave 0-63 to `c`; `b` is silent.
        let now = SlotTable::build("key", &[claim("a", "64-127"), silent("b"), claim("c", "0-63")]).unwrap();
        let followed = now.following(&known);
        let owners: Vec<Option<usize>> = [0, 63, 64, 127, 128, 255].map(|s| followed.owner(Slot(s))).to_vec();
        assert_eq!(owners, [Some(2), Some(2), Some(0), Some(0), Some(1), Some(1)]);
        assert_eq!((followed.slots_of(0), followed.slots_of(2)), ("64-127".into(), "0-63".into()));
        assert_eq!(now.slots_of(1), "none", "a silent shard is known to own nothing");
    }

    #[test]
    fn no_shards_is_refused() {
        assert_eq!(SlotTable::build("key", &[]), Err(CoverageError::NoShards { kind: "key" }));
    }

    #[test]
    fn slots_nobody_claims_have_no_known_owner_and_route_to_a_shard_that_did_not_answer() {
        let table = SlotTable::build("key", &[claim("a", "0-99"), silent("b"), silent("c")]).unwrap();
        assert_eq!((table.owner(Slot(99)), table.owner(Slot(100)), table.owner(Slot(255))), (Some(0), None, None));
        assert_eq!((table.route(Slot(99)), table.route(Slot(100)), table.route(Slot(255))), (0, 1, 1));
        let overlap = SlotTable::build("key", &[silent("b"), claim("a", "0-99"), claim("c", "50-60")]);
        assert!(matches!(overlap, Err(CoverageError::Overlap { .. })), "silence does not excuse an overlap");
    }
}
