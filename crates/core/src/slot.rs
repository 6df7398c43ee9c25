use std::{fmt, str::FromStr};

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

/// The inclusive run of slots one shard owns (`--slots FIRST-LAST`). A shard
/// refuses every call for a slot outside it, so a client with a wrong slot
/// map gets a refusal instead of a wrong answer (docs/design.md#shard-identity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SlotRange {
    first: Slot,
    last: Slot,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotRangeError {
    #[error("a slot range is FIRST-LAST, two slots from 0 to 255 (e.g. 0-127), not {0:?}")]
    Malformed(String),
    #[error("a slot range's first slot must not be after its last: {first}-{last}")]
    Reversed { first: u8, last: u8 },
}

impl SlotRange {
    /// Every slot: the range of a lone shard, and the default.
    pub const ALL: SlotRange = SlotRange { first: Slot(0), last: Slot(u8::MAX) };

    pub fn new(first: u8, last: u8) -> Result<Self, SlotRangeError> {
        if first > last {
            return Err(SlotRangeError::Reversed { first, last });
        }
        Ok(Self { first: Slot(first), last: Slot(last) })
    }

    pub fn first(self) -> Slot {
        self.first
    }

    pub fn last(self) -> Slot {
        self.last
    }

    pub fn contains(self, slot: Slot) -> bool {
        (self.first..=self.last).contains(&slot)
    }

    pub fn slots(self) -> impl Iterator<Item = Slot> {
        (self.first.0..=self.last.0).map(Slot)
    }
}

impl Default for SlotRange {
    fn default() -> Self {
        Self::ALL
    }
}

impl FromStr for SlotRange {
    type Err = SlotRangeError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let malformed = || SlotRangeError::Malformed(raw.to_owned());
        let (first, last) = raw.trim().split_once('-').ok_or_else(malformed)?;
        let slot = |s: &str| s.trim().parse::<u8>().map_err(|_| malformed());
        Self::new(slot(first)?, slot(last)?)
    }
}

impl fmt::Display for SlotRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_inclusive_ranges_and_prints_them_back() {
        let range: SlotRange = "0-127".parse().unwrap();
        assert_eq!((range.first(), range.last()), (Slot(0), Slot(127)));
        assert_eq!(range.to_string(), "0-127");
        assert!(range.contains(Slot(127)) && !range.contains(Slot(128)));
        assert_eq!("7-7".parse::<SlotRange>().unwrap().slots().count(), 1);
        assert_eq!(SlotRange::default(), SlotRange::ALL);
        assert_eq!(SlotRange::ALL.slots().count(), SLOT_COUNT);
    }

    #[test]
    fn refuses_reversed_out_of_bounds_and_malformed_ranges() {
        assert_eq!("9-3".parse::<SlotRange>(), Err(SlotRangeError::Reversed { first: 9, last: 3 }));
        for bad in ["", "5", "0-256", "-1-4", "a-b", "0..255"] {
            assert!(matches!(bad.parse::<SlotRange>(), Err(SlotRangeError::Malformed(_))), "{bad}");
        }
    }
}
