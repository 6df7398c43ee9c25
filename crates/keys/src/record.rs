use chrono::{DateTime, Utc};
use pastebin_core::{IdempotencyKey, KeyState, PasteId, RequestHash, ResponseBody};

/// One idempotency record as stored on shard K.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRecord {
    pub key: IdempotencyKey,
    pub request_hash: RequestHash,
    pub paste_id: PasteId,
    pub state: KeyState,
    pub response_body: ResponseBody,
    pub created_at: DateTime<Utc>,
    pub retain_until: DateTime<Utc>,
    /// Never stored: K sets it on a record not yet done while it may have
    /// lost commits. A create then searches P for the paste an erased
    /// earlier life of the key made before making one
    /// (docs/design.md#adopting-after-a-k-loss).
    pub search_first: bool,
}

/// The record a K loss erased, rebuilt around the paste its first life
/// made: `Adopt` turns the pending record of `pending_paste_id` into it,
/// done, in one guarded update.
#[derive(Debug, Clone)]
pub struct Adopted {
    pub key: IdempotencyKey,
    pub pending_paste_id: PasteId,
    pub paste_id: PasteId,
    /// The request hash the paste's create carried, which may not be this
    /// request's: the record answers as its first life would have.
    pub request_hash: RequestHash,
    pub response_body: ResponseBody,
}

/// What step 2 of the saga asks K to record.
#[derive(Debug, Clone)]
pub struct NewKey {
    pub key: IdempotencyKey,
    pub request_hash: RequestHash,
    pub paste_id: PasteId,
    pub response_body: ResponseBody,
}

/// The outcome of `begin`: this call inserted the pending record, or found
/// the one already there (possibly the winner of a race this call lost).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begun {
    Inserted(KeyRecord),
    Existing(KeyRecord),
}

/// A pending key as listed to the sweeper and operators: no secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingKey {
    pub key: IdempotencyKey,
    pub paste_id: PasteId,
    pub created_at: DateTime<Utc>,
}

/// One key as `ctl reconcile` lists a slot: no response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotKey {
    pub key: IdempotencyKey,
    pub paste_id: PasteId,
    pub state: KeyState,
    pub created_at: DateTime<Utc>,
}

/// What `ApplyVerdicts` did with a batch: the keys it changed, and the keys
/// it left alone because another shard owns their slot. Every other key of
/// the batch was already resolved (or gone).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AppliedVerdicts {
    pub changed: Vec<IdempotencyKey>,
    pub not_owned: Vec<IdempotencyKey>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingStats {
    pub pending: u64,
    pub oldest_created_at: Option<DateTime<Utc>>,
    /// Pending keys older than the create budget: slow or stuck creates
    /// (`pastebin_core::alert::SLOW_AFTER`).
    pub older_than_2s: u64,
    /// Pending keys older than the recovery threshold: the sweeper's to
    /// resolve (`pastebin_core::alert::RECOVERY_AFTER`).
    pub older_than_60s: u64,
    pub now: DateTime<Utc>,
}
