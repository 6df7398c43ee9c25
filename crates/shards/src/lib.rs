//! The slot map: routing from a slot to the K shard and the P shard that own it.

mod recovery;

pub use recovery::{fence, recover_batch, recover_key, Decision, FenceError, Fenced};

use pastebin_core::{Slot, SLOT_COUNT};
use pastebin_keys::KeyClient;
use pastebin_pastes::PasteClient;

/// Which K shard and which P shard own each of the 256 slots.
///
/// With N shards of a kind, slot `s` belongs to shard `s * N / 256`:
/// contiguous ranges, so growing from N to 2N shards splits every range in
/// two and each moved slot moves whole (see docs/operations.md, "Changing the
/// slot map"). A key's slot picks its K shard; a paste id's prefix, which is
/// that same slot, picks its P shard.
#[derive(Clone)]
pub struct SlotMap {
    key_shards: Vec<KeyClient>,
    paste_shards: Vec<PasteClient>,
}

/// The shard index owning `slot` when there are `shards` shards.
pub fn shard_of(slot: Slot, shards: usize) -> usize {
    slot.index() * shards / SLOT_COUNT
}

impl SlotMap {
    /// Needs at least one shard of each kind; at most 256 (one per slot).
    pub fn new(key_shards: Vec<KeyClient>, paste_shards: Vec<PasteClient>) -> anyhow::Result<Self> {
        for (kind, count) in [("key", key_shards.len()), ("paste", paste_shards.len())] {
            anyhow::ensure!((1..=SLOT_COUNT).contains(&count), "need 1 to 256 {kind} shards, got {count}");
        }
        Ok(Self { key_shards, paste_shards })
    }

    pub fn key_shard(&self, slot: Slot) -> &KeyClient {
        &self.key_shards[shard_of(slot, self.key_shards.len())]
    }

    pub fn paste_shard(&self, slot: Slot) -> &PasteClient {
        &self.paste_shards[shard_of(slot, self.paste_shards.len())]
    }

    pub fn paste_shard_index(&self, slot: Slot) -> usize {
        shard_of(slot, self.paste_shards.len())
    }

    pub fn key_shards(&self) -> &[KeyClient] {
        &self.key_shards
    }

    pub fn paste_shards(&self) -> &[PasteClient] {
        &self.paste_shards
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_split_into_contiguous_ranges() {
        assert_eq!(shard_of(Slot(0), 1), 0);
        assert_eq!(shard_of(Slot(255), 1), 0);
        assert_eq!(shard_of(Slot(127), 2), 0);
        assert_eq!(shard_of(Slot(128), 2), 1);
        assert_eq!(shard_of(Slot(255), 2), 1);
        // Doubling the shard count only ever splits a range: slot s on shard
        // i of N lands on shard 2i or 2i+1 of 2N.
        for n in 1..=128 {
            for s in 0..=255u8 {
                let before = shard_of(Slot(s), n);
                let after = shard_of(Slot(s), 2 * n);
                assert!(after == 2 * before || after == 2 * before + 1, "slot {s}, {n} shards");
            }
        }
    }
}
