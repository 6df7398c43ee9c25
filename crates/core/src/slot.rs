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

/// The slots one shard owns: a contiguous range, or none at all (a new
/// shard waiting for a move, `--slots none`). A move hands a range at one
/// end of a shard's range to a shard that owns nothing or the adjacent run,
/// so both stay contiguous (docs/design.md#moving-slots).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OwnedSlots {
    Nothing,
    Range(SlotRange),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotMoveError {
    #[error("the shard owns {owned}, not all of slots {moving}")]
    NotAllOwned { owned: OwnedSlots, moving: SlotRange },
    #[error("giving up slots {moving} would split the shard's range {owned} in two: move a range at one end of it")]
    WouldSplit { owned: SlotRange, moving: SlotRange },
    #[error("the shard already owns some of slots {moving} (it owns {owned})")]
    AlreadyOwned { owned: SlotRange, moving: SlotRange },
    #[error("slots {moving} do not touch the shard's range {owned}: its range would not be contiguous")]
    NotAdjacent { owned: SlotRange, moving: SlotRange },
}

impl OwnedSlots {
    pub fn contains(self, slot: Slot) -> bool {
        matches!(self, Self::Range(range) if range.contains(slot))
    }

    /// Every slot of `range` is owned.
    pub fn covers(self, range: SlotRange) -> bool {
        self.contains(range.first) && self.contains(range.last)
    }

    /// No slot of `range` is owned.
    pub fn misses(self, range: SlotRange) -> bool {
        match self {
            Self::Nothing => true,
            Self::Range(owned) => owned.last < range.first || range.last < owned.first,
        }
    }

    pub fn range(self) -> Option<SlotRange> {
        match self {
            Self::Nothing => None,
            Self::Range(range) => Some(range),
        }
    }

    /// The slots both own.
    pub fn overlap(self, other: Self) -> Self {
        match (self, other) {
            (Self::Range(a), Self::Range(b)) if a.first.max(b.first) <= a.last.min(b.last) => {
                Self::Range(SlotRange { first: a.first.max(b.first), last: a.last.min(b.last) })
            }
            _ => Self::Nothing,
        }
    }

    /// The runs of `self` that `other` does not own (none, one, or two
    /// when `other` lies inside `self`).
    pub fn beyond(self, other: Self) -> Vec<SlotRange> {
        let Self::Range(mine) = self else { return Vec::new() };
        let Self::Range(shared) = self.overlap(other) else { return vec![mine] };
        let mut runs = Vec::new();
        if mine.first < shared.first {
            runs.push(SlotRange { first: mine.first, last: Slot(shared.first.0 - 1) });
        }
        if shared.last < mine.last {
            runs.push(SlotRange { first: Slot(shared.last.0 + 1), last: mine.last });
        }
        runs
    }

    /// What is left after giving up `moving`, which must be all of it or a
    /// run at one end of it.
    pub fn without(self, moving: SlotRange) -> Result<Self, SlotMoveError> {
        let owned = match self {
            Self::Range(owned) if self.covers(moving) => owned,
            _ => return Err(SlotMoveError::NotAllOwned { owned: self, moving }),
        };
        match (moving.first == owned.first, moving.last == owned.last) {
            (true, true) => Ok(Self::Nothing),
            (true, false) => Ok(Self::Range(SlotRange { first: Slot(moving.last.0 + 1), last: owned.last })),
            (false, true) => Ok(Self::Range(SlotRange { first: owned.first, last: Slot(moving.first.0 - 1) })),
            (false, false) => Err(SlotMoveError::WouldSplit { owned, moving }),
        }
    }

    /// What is owned after taking `moving`, which must not overlap and must
    /// touch the current range (or the shard owns nothing yet).
    pub fn with(self, moving: SlotRange) -> Result<Self, SlotMoveError> {
        let Self::Range(owned) = self else { return Ok(Self::Range(moving)) };
        if moving.first <= owned.last && owned.first <= moving.last {
            return Err(SlotMoveError::AlreadyOwned { owned, moving });
        }
        let (a, b) = (u16::from(moving.first.0), u16::from(moving.last.0));
        let (c, d) = (u16::from(owned.first.0), u16::from(owned.last.0));
        if b + 1 == c {
            Ok(Self::Range(SlotRange { first: moving.first, last: owned.last }))
        } else if d + 1 == a {
            Ok(Self::Range(SlotRange { first: owned.first, last: moving.last }))
        } else {
            Err(SlotMoveError::NotAdjacent { owned, moving })
        }
    }
}

impl From<SlotRange> for OwnedSlots {
    fn from(range: SlotRange) -> Self {
        Self::Range(range)
    }
}

impl FromStr for OwnedSlots {
    type Err = SlotRangeError;

    /// `none`, or a range `FIRST-LAST`.
    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        if raw.trim().eq_ignore_ascii_case("none") {
            return Ok(Self::Nothing);
        }
        raw.parse().map(Self::Range)
    }
}

impl fmt::Display for OwnedSlots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Nothing => f.write_str("none"),
            Self::Range(range) => range.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beyond_is_what_one_range_owns_and_the_other_does_not() {
        let owned = |raw: &str| raw.parse::<OwnedSlots>().unwrap();
        let ranges = |raws: &[&str]| raws.iter().map(|raw| raw.parse::<SlotRange>().unwrap()).collect::<Vec<_>>();
        assert_eq!(owned("0-127").beyond(owned("0-66")), ranges(&["67-127"]));
        assert_eq!(owned("0-127").beyond(owned("60-255")), ranges(&["0-59"]));
        assert_eq!(owned("0-255").beyond(owned("10-20")), ranges(&["0-9", "21-255"]));
        assert_eq!(owned("0-127").beyond(owned("128-255")), ranges(&["0-127"]));
        assert_eq!(owned("0-127").beyond(owned("none")), ranges(&["0-127"]));
        assert_eq!(owned("0-127").beyond(owned("0-255")), ranges(&[]));
        assert_eq!(owned("none").beyond(owned("0-255")), ranges(&[]));
    }

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
    fn a_shard_gives_up_an_end_of_its_range_and_takes_an_adjacent_run() {
        let all = OwnedSlots::Range(SlotRange::ALL);
        let high: SlotRange = "128-255".parse().unwrap();
        assert_eq!(all.without(high), Ok(OwnedSlots::Range("0-127".parse().unwrap())));
        assert_eq!(all.without(SlotRange::ALL), Ok(OwnedSlots::Nothing));
        assert_eq!(all.without("0-9".parse().unwrap()), Ok(OwnedSlots::Range("10-255".parse().unwrap())));
        assert!(matches!(all.without("10-20".parse().unwrap()), Err(SlotMoveError::WouldSplit { .. })));
        assert!(matches!(OwnedSlots::Nothing.without(high), Err(SlotMoveError::NotAllOwned { .. })));
        assert_eq!(OwnedSlots::Nothing.with(high), Ok(OwnedSlots::Range(high)));
        let low = OwnedSlots::Range("0-127".parse().unwrap());
        assert_eq!(low.with(high), Ok(all));
        assert_eq!(OwnedSlots::Range(high).with("0-127".parse().unwrap()), Ok(all));
        assert!(matches!(low.with("100-200".parse().unwrap()), Err(SlotMoveError::AlreadyOwned { .. })));
        assert!(matches!(low.with("200-255".parse().unwrap()), Err(SlotMoveError::NotAdjacent { .. })));
        assert_eq!("none".parse::<OwnedSlots>(), Ok(OwnedSlots::Nothing));
        assert_eq!("0-127".parse::<OwnedSlots>().unwrap().to_string(), "0-127");
        assert_eq!(OwnedSlots::Nothing.to_string(), "none");
    }

    #[test]
    fn a_range_is_covered_missed_or_neither() {
        let low = OwnedSlots::Range("0-127".parse().unwrap());
        let (inside, across, outside) =
            ("10-20".parse().unwrap(), "100-200".parse().unwrap(), "128-255".parse().unwrap());
        assert!(low.covers(inside) && !low.misses(inside));
        assert!(!low.covers(across) && !low.misses(across));
        assert!(!low.covers(outside) && low.misses(outside));
        assert!(OwnedSlots::Nothing.misses(inside) && !OwnedSlots::Nothing.covers(inside));
    }

    #[test]
    fn refuses_reversed_out_of_bounds_and_malformed_ranges() {
        assert_eq!("9-3".parse::<SlotRange>(), Err(SlotRangeError::Reversed { first: 9, last: 3 }));
        for bad in ["", "5", "0-256", "-1-4", "a-b", "0..255"] {
            assert!(matches!(bad.parse::<SlotRange>(), Err(SlotRangeError::Malformed(_))), "{bad}");
        }
    }
}
