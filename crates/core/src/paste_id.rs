use std::{fmt, str::FromStr};

use rand::Rng;

use crate::{Slot, SlotRange};

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const PREFIX_LEN: usize = 2;
const RANDOM_LEN: usize = 12;
const LEN: usize = PREFIX_LEN + RANDOM_LEN;

/// A paste id: 14 base62 characters. The first two encode the slot of the key
/// that created it (`62 * digit(id[0]) + digit(id[1])`), so GET and DELETE find
/// the paste shard by decoding the prefix; the other twelve come from a CSPRNG
/// (~71 bits), which is the collision budget.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PasteId(String);

/// Every way an id can be malformed; callers answer all of them like a missing id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PasteIdError {
    #[error("a paste id has 14 characters")]
    Length,
    #[error("a paste id is base62")]
    Alphabet,
    #[error("the paste id's prefix decodes above slot 255")]
    PrefixOutOfRange,
}

fn digit(c: u8) -> Option<u16> {
    let d = match c {
        b'0'..=b'9' => c - b'0',
        b'A'..=b'Z' => c - b'A' + 10,
        b'a'..=b'z' => c - b'a' + 36,
        _ => return None,
    };
    Some(u16::from(d))
}

impl PasteId {
    /// Mints a fresh id for `slot` from the thread-local CSPRNG.
    pub fn mint(slot: Slot) -> Self {
        Self::mint_with(slot, &mut rand::rng())
    }

    pub fn mint_with(slot: Slot, rng: &mut impl Rng) -> Self {
        let mut id = String::with_capacity(LEN);
        id.push_str(&Self::slot_prefix_of(slot));
        for _ in 0..RANDOM_LEN {
            id.push(char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]));
        }
        Self(id)
    }

    pub fn parse(raw: &str) -> Result<Self, PasteIdError> {
        let bytes = raw.as_bytes();
        if bytes.len() != LEN {
            return Err(PasteIdError::Length);
        }
        let digits: Option<Vec<u16>> = bytes.iter().map(|&c| digit(c)).collect();
        let digits = digits.ok_or(PasteIdError::Alphabet)?;
        if 62 * digits[0] + digits[1] > 255 {
            return Err(PasteIdError::PrefixOutOfRange);
        }
        Ok(Self(raw.to_owned()))
    }

    /// The slot encoded in the prefix; [`Self::parse`] guarantees it fits a byte.
    pub fn slot(&self) -> Slot {
        let b = self.0.as_bytes();
        let (hi, lo) = (digit(b[0]).unwrap_or(0), digit(b[1]).unwrap_or(0));
        Slot(u8::try_from(62 * hi + lo).unwrap_or(u8::MAX))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The two characters that encode the slot: what the shards' by-slot
    /// indexes are keyed on.
    pub fn slot_prefix(&self) -> &str {
        &self.0[..2]
    }

    /// The prefix every id of `slot` starts with.
    pub fn slot_prefix_of(slot: Slot) -> String {
        let s = usize::from(slot.0);
        [char::from(ALPHABET[s / 62]), char::from(ALPHABET[s % 62])].into_iter().collect()
    }

    /// The prefixes of every slot of `slots`.
    pub fn slot_prefixes_of(slots: SlotRange) -> Vec<String> {
        slots.slots().map(Self::slot_prefix_of).collect()
    }
}

impl FromStr for PasteId {
    type Err = PasteIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for PasteId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rejects_wrong_length_alphabet_and_prefix() {
        assert_eq!(PasteId::parse("abc"), Err(PasteIdError::Length));
        assert_eq!(PasteId::parse("00000000000000a"), Err(PasteIdError::Length));
        assert_eq!(PasteId::parse("00-00000000000"), Err(PasteIdError::Alphabet));
        assert_eq!(PasteId::parse("0é000000000000"), Err(PasteIdError::Length));
        // "44" decodes to 62*4+4 = 252; "48" to 256.
        assert!(PasteId::parse("44000000000000").is_ok());
        assert_eq!(PasteId::parse("48000000000000"), Err(PasteIdError::PrefixOutOfRange));
        assert_eq!(PasteId::parse("zz000000000000"), Err(PasteIdError::PrefixOutOfRange));
    }

    #[test]
    fn highest_slot_encodes_as_47() {
        assert!(PasteId::mint(Slot(255)).as_str().starts_with("47"));
        assert!(PasteId::mint(Slot(0)).as_str().starts_with("00"));
    }

    proptest! {
        #[test]
        fn minted_ids_round_trip_and_keep_their_slot(slot in any::<u8>(), seed in any::<u64>()) {
            use rand::SeedableRng;
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let id = PasteId::mint_with(Slot(slot), &mut rng);
            prop_assert_eq!(id.as_str().len(), 14);
            let parsed = PasteId::parse(id.as_str()).unwrap();
            prop_assert_eq!(parsed.slot(), Slot(slot));
            prop_assert_eq!(parsed, id);
        }

        #[test]
        fn prefix_decoding_accepts_exactly_slots_0_to_255(a in 0usize..62, b in 0usize..62, rest in "[0-9A-Za-z]{12}") {
            let raw = format!("{}{}{}", ALPHABET[a] as char, ALPHABET[b] as char, rest);
            let value = 62 * a + b;
            match PasteId::parse(&raw) {
                Ok(id) => { prop_assert!(value <= 255); prop_assert_eq!(id.slot().index(), value); }
                Err(e) => { prop_assert!(value > 255); prop_assert_eq!(e, PasteIdError::PrefixOutOfRange); }
            }
        }

        #[test]
        fn parse_never_panics(raw in ".{0,20}") {
            let _ = PasteId::parse(&raw);
        }
    }
}
