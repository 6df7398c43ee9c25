use std::{fmt, str::FromStr};

use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::{RequestHash, Slot};

/// The client's idempotency key: one UUID per save, reused on every retry of it.
/// With the request it names, it fetches that save's stored 201 (and so its
/// delete token): `Debug` shows only [`Self::short_hash`].
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(Uuid);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error("the idempotency key is missing")]
    Missing,
    #[error("the idempotency key must be a UUID")]
    NotAUuid,
}

impl IdempotencyKey {
    /// Parses any UUID spelling (case-insensitive, with or without hyphens or
    /// braces); the stored form is always [`Self::canonical`].
    pub fn parse(raw: &str) -> Result<Self, KeyError> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(KeyError::Missing);
        }
        Uuid::parse_str(raw).map(Self).map_err(|_| KeyError::NotAUuid)
    }

    pub fn new_random() -> Self {
        Self(Uuid::new_v4())
    }

    /// Lowercase, hyphenated: the one spelling stored and compared on shard K.
    pub fn canonical(&self) -> String {
        self.0.hyphenated().to_string()
    }

    /// What logs show instead of the key (docs/design.md#identifiers): the
    /// first 8 hex digits of SHA-256 over its raw bytes. Enough to match a
    /// log line to a key an operator already holds, useless for replaying it.
    pub fn short_hash(&self) -> String {
        hex::encode(&self.hash().0[..4])
    }

    /// SHA-256 over the key's 16 raw bytes: what a paste row keeps of the
    /// create that made it, so a search can find it again after K lost the
    /// key (docs/design.md#adopting-after-a-k-loss), without P ever holding
    /// the key itself.
    pub fn hash(&self) -> KeyHash {
        KeyHash(Sha256::digest(self.0.as_bytes()).into())
    }

    /// `slot = first byte of SHA-256(the key's 16 raw bytes)`.
    pub fn slot(&self) -> Slot {
        self.hash().slot()
    }
}

/// [`IdempotencyKey::hash`]: useless for replaying a create (the key is
/// needed for that), enough to recognise the paste it made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyHash(pub [u8; 32]);

impl KeyHash {
    /// The key's slot: the hash's first byte. Every paste id minted for
    /// the key carries it.
    pub fn slot(&self) -> Slot {
        Slot(self.0[0])
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    pub fn from_hex(raw: &str) -> Option<Self> {
        crate::sha256_from_hex(raw).map(Self)
    }
}

/// The create that made a paste, as its row keeps it: the key's hash and
/// the request hash the key was created with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PasteOrigin {
    pub key_hash: KeyHash,
    pub request_hash: RequestHash,
}

impl FromStr for IdempotencyKey {
    type Err = KeyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0.hyphenated(), f)
    }
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdempotencyKey(sha256:{}…)", self.short_hash())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_case_insensitively_to_canonical_form() {
        let key = IdempotencyKey::parse("6F9619FF-8B86-D011-B42D-00C04FC964FF").unwrap();
        assert_eq!(key.canonical(), "6f9619ff-8b86-d011-b42d-00c04fc964ff");
        assert_eq!(key, IdempotencyKey::parse("6f9619ff8b86d011b42d00c04fc964ff").unwrap());
    }

    #[test]
    fn rejects_missing_and_non_uuid_keys() {
        assert_eq!(IdempotencyKey::parse(""), Err(KeyError::Missing));
        assert_eq!(IdempotencyKey::parse("  "), Err(KeyError::Missing));
        assert_eq!(IdempotencyKey::parse("not-a-uuid"), Err(KeyError::NotAUuid));
        assert_eq!(IdempotencyKey::parse("6f9619ff-8b86-d011-b42d-00c04fc964f"), Err(KeyError::NotAUuid));
    }

    #[test]
    fn slot_is_first_byte_of_sha256_of_raw_bytes() {
        let key = IdempotencyKey::parse("00000000-0000-0000-0000-000000000000").unwrap();
        // sha256 of 16 zero bytes = 374708fff7719dd5979ec875d56cd2286f6d3cf7ec317a3b25632aab28ec37bb
        assert_eq!(key.slot(), Slot(0x37));
        assert_eq!(key.short_hash(), "374708ff");
    }

    #[test]
    fn debug_shows_the_short_hash_never_the_key() {
        let key = IdempotencyKey::new_random();
        let printed = format!("{key:?} {:?}", Some(key));
        assert!(printed.contains(&key.short_hash()), "{printed}");
        for spelling in [key.canonical(), key.0.simple().to_string()] {
            assert!(!printed.contains(&spelling), "{printed}");
        }
    }
}
