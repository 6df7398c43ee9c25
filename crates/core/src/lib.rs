//! The pastebin's domain, with no I/O.
//!
//! A create starts from an [`IdempotencyKey`] the client chose; its [`Slot`]
//! (first byte of SHA-256 over the key's raw bytes) picks the key shard and is
//! written into the first two characters of the [`PasteId`] minted for it, so
//! reads route by decoding the id instead of hashing it. The [`RequestHash`]
//! tells a retry from a different request under the same key, the
//! [`DeleteToken`] is the paste's only credential, and [`KeyState`] is the
//! saga's state machine as it is stored on the key shard. [`Clock`] makes time
//! injectable so the 60 s and 25 h rules are testable without sleeping. The
//! [`alert`] card reads the age of pending keys against the create budget
//! and the recovery threshold.

pub mod alert;
mod attributes;
mod clock;
mod expiry;
#[cfg(test)]
mod fuzz;
mod key;
mod limits;
mod lost_commits;
mod minter;
mod paste_id;
mod report;
mod request_hash;
mod response;
mod slot;
mod state;
mod token;

pub use attributes::{AttributeError, FileName, Language, MediaType, PasteAttributes};
pub use clock::{saturating_ago, Clock, ManualClock, SystemClock};
pub use expiry::{
    is_never, label as lifetime_label, never_expires_at, parse_lifetime, Expiry, ExpiryError, ExpiryPolicy,
};
pub use key::{IdempotencyKey, KeyError, KeyHash, PasteOrigin};
pub use limits::{LimitError, PublishedExpiry, PublishedLimits, PublishedRate, TooLarge};
pub use lost_commits::LostCommits;
pub use minter::{Minter, RandomMinter, SeededMinter};
pub use paste_id::{PasteId, PasteIdError};
pub use report::{
    report_note, without_link_keys, ReportError, ReportReason, MAX_REPORT_NOTE_CHARS, MAX_TAKEDOWN_REASON_CHARS,
};
pub use request_hash::{CreateRequest, RequestHash};
pub use response::ResponseBody;
pub use slot::{OwnedSlots, Slot, SlotMoveError, SlotRange, SlotRangeError, SLOT_COUNT};
pub use state::{KeyState, UnknownKeyState};
pub use token::{random_name, random_secret, CreateToken, DeleteToken, DeleteTokenHash};

/// A SHA-256 digest from its 64 hex digits (the key, request and delete-token
/// hashes all travel and are stored this way); `None` for anything else.
fn sha256_from_hex(raw: &str) -> Option<[u8; 32]> {
    let mut bytes = [0u8; 32];
    hex::decode_to_slice(raw, &mut bytes).ok()?;
    Some(bytes)
}

/// How long a done or aborted key is kept: the window in which a retry replays.
pub const KEY_RETENTION: std::time::Duration = std::time::Duration::from_secs(25 * 3600);
/// The whole create's budget; every call inside it carries what is left of it.
pub const CREATE_BUDGET: std::time::Duration = std::time::Duration::from_secs(2);
/// A pending key younger than this may still have a create in flight (30 × the budget).
pub const RECOVERY_THRESHOLD: std::time::Duration = std::time::Duration::from_secs(60);

/// Milliseconds since the Unix epoch: how the shards store time.
pub fn to_millis(at: chrono::DateTime<chrono::Utc>) -> i64 {
    at.timestamp_millis()
}

/// The inverse of [`to_millis`]; out-of-range values clamp to the epoch.
pub fn from_millis(ms: i64) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp_millis(ms).unwrap_or_default()
}
