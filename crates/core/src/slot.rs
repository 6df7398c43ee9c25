use std::fmt;

/// Number of slots; a slot map assigns each to one key shard and one paste shard.
pub const SLOT_COUNT: usize = 256;

/// One of 256 slots: the unit a slot map moves between shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Slot(pub u8);

impl Slot {
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Display for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
