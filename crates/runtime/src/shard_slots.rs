//! A shard's identity: the slot range it owns, kept in its own database so
//! a restart with another `--slots` cannot silently change what it serves,
//! and the refusal every call for a slot outside it gets
//! (docs/design.md#shard-identity).

use pastebin_core::{Slot, SlotRange};

use crate::grpc::CallError;
use pastebin_proto::shard::v1 as pb;
use sqlx::{AnyPool, Row};

#[derive(Debug, thiserror::Error)]
pub enum SlotClaimError {
    #[error(
        "this shard's database says it owns slots {stored}, but it was started with --slots {asked}; refusing to \
         start. Changing a shard's range is a resharding step (docs/operations.md, \"Changing the slot map\"): follow it, \
         then start once with --reshard"
    )]
    Mismatch { stored: SlotRange, asked: SlotRange },
    #[error("the stored slot range is not valid: {0}")]
    Corrupt(String),
    #[error("cannot read or write the shard's slot range: {0}")]
    Database(#[from] sqlx::Error),
}

/// Whether a start may replace the stored range with the one asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resharding {
    /// The normal start: a different stored range is an error.
    Refuse,
    /// The operator is making a resharding step: the asked range replaces it.
    Allow,
}

/// Stores `asked` as this shard's range on its first start and returns it;
/// on a later start, returns it only if it matches what is stored (or
/// `resharding` allows the change). `now_ms` is recorded beside it.
pub async fn claim(
    pool: &AnyPool,
    asked: SlotRange,
    resharding: Resharding,
    now_ms: i64,
) -> Result<SlotRange, SlotClaimError> {
    let bounds = (i64::from(asked.first().0), i64::from(asked.last().0));
    sqlx::query(
        "INSERT INTO shard_slots (singleton, first_slot, last_slot, claimed_at) VALUES (1, $1, $2, $3)
         ON CONFLICT (singleton) DO NOTHING",
    )
    .bind(bounds.0)
    .bind(bounds.1)
    .bind(now_ms)
    .execute(pool)
    .await?;
    let row = sqlx::query("SELECT first_slot, last_slot FROM shard_slots WHERE singleton = 1").fetch_one(pool).await?;
    let stored = stored_range(row.try_get("first_slot")?, row.try_get("last_slot")?)?;
    if stored == asked {
        return Ok(asked);
    }
    if resharding == Resharding::Refuse {
        return Err(SlotClaimError::Mismatch { stored, asked });
    }
    sqlx::query("UPDATE shard_slots SET first_slot = $1, last_slot = $2, claimed_at = $3 WHERE singleton = 1")
        .bind(bounds.0)
        .bind(bounds.1)
        .bind(now_ms)
        .execute(pool)
        .await?;
    tracing::warn!(%stored, %asked, "resharding: this shard's slot range changed");
    Ok(asked)
}

fn stored_range(first: i64, last: i64) -> Result<SlotRange, SlotClaimError> {
    let slot = |n: i64| u8::try_from(n).map_err(|_| SlotClaimError::Corrupt(format!("slot {n}")));
    SlotRange::new(slot(first)?, slot(last)?).map_err(|e| SlotClaimError::Corrupt(e.to_string()))
}

/// The refusal of a call for a slot this shard does not own: the caller's
/// slot map is wrong, and nothing was read or changed. The message names the
/// slot and the range, never the key or id (a key is a secret).
pub fn ensure_owned(range: SlotRange, slot: Slot) -> Result<(), tonic::Status> {
    if range.contains(slot) {
        return Ok(());
    }
    Err(tonic::Status::failed_precondition(format!(
        "slot {slot} is not on this shard (it owns slots {range}): the caller's slot map is out of date"
    )))
}

/// `Describe`'s answer: what the shard is, which slots it owns, and its clock.
pub fn description(kind: pb::ShardKind, range: SlotRange, now_ms: i64) -> pb::ShardDescription {
    pb::ShardDescription {
        kind: kind.into(),
        first_slot: u32::from(range.first().0),
        last_slot: u32::from(range.last().0),
        now_ms,
    }
}

/// The range in a `Describe` answer, checked to come from a shard of `kind`.
pub fn described_range(kind: pb::ShardKind, answer: &pb::ShardDescription) -> Result<SlotRange, CallError> {
    let bad_reply = |what: String| CallError::Uncertain(tonic::Status::internal(format!("malformed Describe: {what}")));
    if answer.kind != i32::from(kind) {
        return Err(bad_reply(format!("expected a {} shard", kind.as_str_name())));
    }
    let slot = |n: u32| u8::try_from(n).map_err(|_| bad_reply(format!("slot {n}")));
    SlotRange::new(slot(answer.first_slot)?, slot(answer.last_slot)?).map_err(|e| bad_reply(e.to_string()))
}
