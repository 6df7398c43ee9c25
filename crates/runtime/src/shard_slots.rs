//! A shard's identity: the slots it owns, kept in its own database so a
//! restart cannot silently change what it serves, the move it is part of
//! (docs/design.md#moving-slots), and the refusals every call for a slot it
//! does not own, or has frozen, gets (docs/design.md#shard-identity).
//!
//! [`ShardSlots`] is the live state a running shard answers from. Every
//! change is written to the database before it takes effect, so a shard
//! killed in the middle of a move restarts with the slots still frozen (or
//! already given up) exactly as it had said.

use std::sync::Arc;

use pastebin_core::{OwnedSlots, Slot, SlotMoveError, SlotRange};
use pastebin_proto::shard::v1 as pb;
use sqlx::{AnyPool, AssertSqlSafe, Row};
use tokio::sync::{RwLock, RwLockReadGuard};

use crate::{
    grpc::CallError,
    move_changes::{ChangeLog, MovedRowKey},
};

#[derive(Debug, thiserror::Error)]
pub enum SlotClaimError {
    #[error(
        "this shard's database says it owns slots {stored}, but it was started with --slots {asked}; refusing to \
         start. The stored range is the truth after a move: start without --slots to use it. Change a shard's \
         range with `pastebin ctl reshard` (docs/operations.md, \"Moving slots\"); a manual resharding step \
         starts once with --reshard"
    )]
    Mismatch { stored: OwnedSlots, asked: OwnedSlots },
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
    /// The operator is making a manual resharding step: the asked range replaces it.
    Allow,
}

/// This shard's part in a move.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveRole {
    Source,
    Target,
}

/// How far a move has come on this shard (docs/design.md#moving-slots).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MoveStep {
    /// Target: copies are arriving; the slots are not served here yet.
    Importing,
    /// Source: the move is recorded and the bulk of its rows is copied
    /// while the slots are still served (writes go on).
    Exporting,
    /// Source: the slots are frozen (writes refused, retryable) while they are copied.
    Frozen,
    /// Source: the slots are given up; the copies here are still to be deleted.
    Released,
    Done,
    Abandoned,
}

impl MoveRole {
    fn as_str(self) -> &'static str {
        match self {
            Self::Source => "source",
            Self::Target => "target",
        }
    }
}

impl MoveStep {
    fn as_str(self) -> &'static str {
        match self {
            Self::Importing => "importing",
            Self::Exporting => "exporting",
            Self::Frozen => "frozen",
            Self::Released => "released",
            Self::Done => "done",
            Self::Abandoned => "abandoned",
        }
    }

    fn parse(raw: &str) -> Option<Self> {
        [Self::Importing, Self::Exporting, Self::Frozen, Self::Released, Self::Done, Self::Abandoned]
            .into_iter()
            .find(|step| step.as_str() == raw)
    }

    fn to_pb(self) -> pb::MoveStep {
        match self {
            Self::Importing => pb::MoveStep::Importing,
            Self::Exporting => pb::MoveStep::Exporting,
            Self::Frozen => pb::MoveStep::Frozen,
            Self::Released => pb::MoveStep::Released,
            Self::Done => pb::MoveStep::Done,
            Self::Abandoned => pb::MoveStep::Abandoned,
        }
    }

    fn finished(self) -> bool {
        matches!(self, Self::Done | Self::Abandoned)
    }
}

/// One move as this shard recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMove {
    pub id: String,
    pub role: MoveRole,
    pub slots: SlotRange,
    pub peer: String,
    pub step: MoveStep,
    pub started_at_ms: i64,
    pub updated_at_ms: i64,
}

impl SlotMove {
    pub fn to_pb(&self) -> pb::Move {
        pb::Move {
            move_id: self.id.clone(),
            role: match self.role {
                MoveRole::Source => pb::MoveRole::Source,
                MoveRole::Target => pb::MoveRole::Target,
            }
            .into(),
            slots: Some(span(self.slots)),
            peer: self.peer.clone(),
            step: self.step.to_pb().into(),
            started_at_ms: self.started_at_ms,
            updated_at_ms: self.updated_at_ms,
        }
    }
}

/// What a shard owns now, and the move it is in the middle of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    pub owned: OwnedSlots,
    pub generation: u64,
    pub active: Option<SlotMove>,
}

impl Ownership {
    /// Publishes how many slots are frozen here (`pastebin_shard_frozen_slots`).
    fn publish(&self) {
        let frozen = self.frozen().map_or(0, |range| range.slots().count());
        metrics::gauge!(crate::metrics::FROZEN_SLOTS).set(frozen as f64);
    }

    /// The slots this shard still owns but refuses writes for.
    pub fn frozen(&self) -> Option<SlotRange> {
        self.active.as_ref().filter(|m| m.role == MoveRole::Source && m.step == MoveStep::Frozen).map(|m| m.slots)
    }

    /// Refuses a call for `slot` unless this shard owns it (and, for a
    /// `write`, has not frozen it).
    fn check(&self, slot: Slot, write: bool) -> Result<(), tonic::Status> {
        if !self.owned.contains(slot) {
            return Err(not_owned(slot, self.owned, self.generation));
        }
        match self.frozen() {
            Some(frozen) if write && frozen.contains(slot) => Err(frozen_refusal(slot, self.generation)),
            _ => Ok(()),
        }
    }
}

/// Why a move step was refused. Nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    #[error(
        "this shard is already in move {0}: finish it first (`pastebin ctl reshard --status`, then rerun that move)"
    )]
    Busy(String),
    #[error("this shard has no move {0} in progress: check `pastebin ctl reshard --status`")]
    Unknown(String),
    #[error("move {id} is at step {step}; {what}")]
    WrongStep { id: String, step: &'static str, what: &'static str },
    #[error(transparent)]
    Slots(#[from] SlotMoveError),
    #[error("cannot record the move: {0}")]
    Database(#[from] sqlx::Error),
}

impl From<MoveError> for tonic::Status {
    fn from(error: MoveError) -> Self {
        match error {
            MoveError::Busy(_) | MoveError::WrongStep { .. } | MoveError::Slots(_) => {
                tonic::Status::failed_precondition(error.to_string())
            }
            MoveError::Unknown(_) => tonic::Status::not_found(error.to_string()),
            MoveError::Database(_) => tonic::Status::unavailable(error.to_string()),
        }
    }
}

/// The live slots of a running shard, shared by its handlers. A write holds
/// a [`WritePermit`] while it runs, so freezing (which takes the lock
/// exclusively) waits for the writes in flight and none can land after it.
#[derive(Clone)]
pub struct ShardSlots {
    kind: pb::ShardKind,
    pool: AnyPool,
    state: Arc<RwLock<Ownership>>,
    changes: Arc<ChangeLog>,
}

/// Held by a write while it runs: the slots it writes were checked under
/// it. When it ends (the write committed, or failed) the rows it named are
/// recorded as changed for a move copying their slots.
pub struct WritePermit<'a> {
    state: RwLockReadGuard<'a, Ownership>,
    changes: &'a ChangeLog,
    rows: Vec<(Slot, String)>,
}

impl Drop for WritePermit<'_> {
    fn drop(&mut self) {
        if self.state.active.is_some() {
            self.changes.record(std::mem::take(&mut self.rows));
        }
    }
}

impl ShardSlots {
    /// Stores `asked` as this shard's range on its first start (every slot
    /// when nothing is asked) and returns the live state; on a later start
    /// the stored range wins: `asked` must match it unless `resharding`
    /// allows the change, and no `--slots` at all means "what is stored".
    pub async fn claim(
        pool: &AnyPool,
        kind: pb::ShardKind,
        asked: Option<OwnedSlots>,
        resharding: Resharding,
        now_ms: i64,
    ) -> Result<Self, SlotClaimError> {
        let first = asked.unwrap_or(OwnedSlots::Range(SlotRange::ALL));
        let (first_slot, last_slot, nothing) = columns(first);
        sqlx::query(
            "INSERT INTO shard_slots (singleton, first_slot, last_slot, owns_nothing, claimed_at) VALUES (1, $1, $2, $3, $4)
             ON CONFLICT (singleton) DO NOTHING",
        )
        .bind(first_slot)
        .bind(last_slot)
        .bind(nothing)
        .bind(now_ms)
        .execute(pool)
        .await?;
        let (stored, generation) = stored_slots(pool).await?;
        let owned = match asked {
            None => stored,
            Some(asked) if asked == stored => stored,
            Some(asked) if resharding == Resharding::Refuse => return Err(SlotClaimError::Mismatch { stored, asked }),
            Some(asked) => {
                let (first_slot, last_slot, nothing) = columns(asked);
                sqlx::query(
                    "UPDATE shard_slots SET first_slot = $1, last_slot = $2, owns_nothing = $3, claimed_at = $4,
                            generation = generation + 1 WHERE singleton = 1",
                )
                .bind(first_slot)
                .bind(last_slot)
                .bind(nothing)
                .bind(now_ms)
                .execute(pool)
                .await?;
                tracing::warn!(%stored, %asked, "resharding: this shard's slot range changed");
                asked
            }
        };
        let generation = if owned == stored { generation } else { generation + 1 };
        let active = active_move(pool).await?;
        if let Some(active) = &active {
            tracing::warn!(move_id = %active.id, slots = %active.slots, step = active.step.as_str(), "a slot move is in progress");
        }
        let changes = Arc::new(ChangeLog::default());
        if let Some(source) = active.as_ref().filter(|m| m.role == MoveRole::Source) {
            // What changed before this start is unknown.
            changes.start(source.slots, false);
        }
        let ownership = Ownership { owned, generation, active };
        ownership.publish();
        let state = Arc::new(RwLock::new(ownership));
        Ok(Self { kind, pool: pool.clone(), state, changes })
    }

    pub fn kind(&self) -> pb::ShardKind {
        self.kind
    }

    pub async fn ownership(&self) -> Ownership {
        self.state.read().await.clone()
    }

    /// A read of `slot`: refused unless this shard owns it.
    pub async fn readable(&self, slot: Slot) -> Result<(), tonic::Status> {
        self.state.read().await.check(slot, false)
    }

    /// A write of `slots`: refused unless this shard owns all of them and
    /// none is frozen. Hold the permit until the write has committed.
    pub async fn writable<'r, R: MovedRowKey + 'r>(
        &self,
        rows: impl IntoIterator<Item = &'r R>,
    ) -> Result<WritePermit<'_>, tonic::Status> {
        let state = self.state.read().await;
        let rows: Vec<(Slot, String)> = rows.into_iter().map(MovedRowKey::moved_row).collect();
        for (slot, _) in &rows {
            state.check(*slot, true)?;
        }
        Ok(WritePermit { state, changes: &self.changes, rows })
    }

    /// A batch write that applies what this shard may write now and
    /// reports the rest, untouched: the items of slots it does not own, and
    /// those of a slot a move has frozen (they wait for the move; the
    /// others of the batch do not: docs/design.md#sweeper).
    pub async fn writable_owned<T, R: MovedRowKey>(
        &self,
        items: Vec<T>,
        row_of: impl Fn(&T) -> &R,
    ) -> Result<(WritePermit<'_>, Vec<T>, Vec<T>), tonic::Status> {
        let state = self.state.read().await;
        let (writable, waiting): (Vec<T>, Vec<T>) =
            items.into_iter().partition(|item| state.check(row_of(item).moved_row().0, true).is_ok());
        let rows: Vec<(Slot, String)> = writable.iter().map(|item| row_of(item).moved_row()).collect();
        Ok((WritePermit { state, changes: &self.changes, rows }, writable, waiting))
    }

    /// A write that is not about one slot (retention, expiry, purges): it
    /// would change rows that a move is copying, so it waits for the move.
    pub async fn writable_everywhere(&self) -> Result<WritePermit<'_>, tonic::Status> {
        let state = self.state.read().await;
        match &state.active {
            Some(active) => Err(refusal(
                tonic::Status::unavailable(format!(
                    "this shard is moving slots {} (move {}): cleanup pauses until it is done; retry later",
                    active.slots, active.id
                )),
                "frozen",
                state.generation,
            )),
            None => Ok(WritePermit { state, changes: &self.changes, rows: Vec::new() }),
        }
    }

    /// Rows the source of move `id` changed after `since` (see [`ChangeLog`]).
    pub async fn changed_rows(
        &self,
        id: &str,
        since: u64,
        limit: usize,
    ) -> Result<crate::move_changes::ChangedRows, MoveError> {
        let state = self.state.read().await;
        match &state.active {
            Some(active) if active.id == id && active.role == MoveRole::Source => Ok(self.changes.since(since, limit)),
            _ => Err(MoveError::Unknown(id.to_owned())),
        }
    }

    /// `Describe`'s answer.
    pub async fn description(&self, now_ms: i64) -> pb::ShardDescription {
        description(self.kind, &*self.state.read().await, now_ms)
    }

    /// Target, step 1: record the move; the slots are not served here
    /// until [`Self::take`]. Returns whether the move is new (then the
    /// caller clears rows an abandoned attempt left in those slots).
    pub async fn prepare_import(&self, id: &str, slots: SlotRange, peer: &str, now_ms: i64) -> Result<bool, MoveError> {
        self.begin_move(id, MoveRole::Target, MoveStep::Importing, slots, peer, now_ms, |owned| owned.with(slots)).await
    }

    /// Source, step 2: record the move; the slots are still served while
    /// the bulk of their rows is copied.
    pub async fn prepare_export(&self, id: &str, slots: SlotRange, peer: &str, now_ms: i64) -> Result<bool, MoveError> {
        self.begin_move(id, MoveRole::Source, MoveStep::Exporting, slots, peer, now_ms, |owned| owned.without(slots))
            .await
    }

    /// Source, step 4: freeze the slots (a move recorded by
    /// [`Self::prepare_export`], or a new one). Taking the lock exclusively
    /// waits for the writes in flight, so no write for them lands after this.
    pub async fn freeze(&self, id: &str, slots: SlotRange, peer: &str, now_ms: i64) -> Result<bool, MoveError> {
        let mut state = self.state.write().await;
        let exporting = state.active.as_ref().filter(|m| m.id == id && m.role == MoveRole::Source);
        if exporting.is_some_and(|m| m.step == MoveStep::Exporting) {
            set_step(&self.pool, id, MoveStep::Frozen, now_ms).await?;
            if let Some(active) = state.active.as_mut() {
                (active.step, active.updated_at_ms) = (MoveStep::Frozen, now_ms);
            }
            tracing::warn!(move_id = id, %slots, "slots frozen: their writes are refused until the move switches");
            state.publish();
            return Ok(true);
        }
        drop(state);
        self.begin_move(id, MoveRole::Source, MoveStep::Frozen, slots, peer, now_ms, |owned| owned.without(slots)).await
    }

    #[allow(clippy::too_many_arguments)] // One call shape for both ends of a move.
    async fn begin_move(
        &self,
        id: &str,
        role: MoveRole,
        step: MoveStep,
        slots: SlotRange,
        peer: &str,
        now_ms: i64,
        check: impl FnOnce(OwnedSlots) -> Result<OwnedSlots, SlotMoveError>,
    ) -> Result<bool, MoveError> {
        let mut state = self.state.write().await;
        if let Some(active) = &state.active {
            return if active.id == id && active.role == role {
                Ok(false)
            } else {
                Err(MoveError::Busy(active.id.clone()))
            };
        }
        if let Some(old) = recorded_move(&self.pool, id).await? {
            // Rerunning a finished move: nothing to begin again.
            return if old.step.finished() { Ok(false) } else { Err(MoveError::Busy(old.id)) };
        }
        check(state.owned)?;
        sqlx::query(
            "INSERT INTO slot_moves (move_id, role, first_slot, last_slot, peer, step, started_at, updated_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
        )
        .bind(id)
        .bind(role.as_str())
        .bind(i64::from(slots.first().0))
        .bind(i64::from(slots.last().0))
        .bind(peer)
        .bind(step.as_str())
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        tracing::warn!(move_id = id, %slots, %peer, step = step.as_str(), "slot move begun");
        if role == MoveRole::Source {
            self.changes.start(slots, true);
        }
        state.active = Some(SlotMove {
            id: id.to_owned(),
            role,
            slots,
            peer: peer.to_owned(),
            step,
            started_at_ms: now_ms,
            updated_at_ms: now_ms,
        });
        state.publish();
        Ok(true)
    }

    /// The active move `id` in `role`, or why not. `Ok(None)`: it is
    /// already finished (a rerun of a finished step).
    async fn active(&self, state: &Ownership, id: &str, role: MoveRole) -> Result<Option<SlotMove>, MoveError> {
        match &state.active {
            Some(active) if active.id == id && active.role == role => Ok(Some(active.clone())),
            Some(active) => Err(MoveError::Busy(active.id.clone())),
            None => match recorded_move(&self.pool, id).await? {
                Some(old) if old.role == role && old.step.finished() => Ok(None),
                _ => Err(MoveError::Unknown(id.to_owned())),
            },
        }
    }

    /// The slots of the active move `id` on this side, for export, import and digests.
    pub async fn moving(&self, id: &str) -> Result<SlotMove, MoveError> {
        let state = self.state.read().await;
        match &state.active {
            Some(active) if active.id == id => Ok(active.clone()),
            _ => Err(MoveError::Unknown(id.to_owned())),
        }
    }

    /// Source, after the copies are verified: give the slots up. From now
    /// on every call for them is refused here as "not owned".
    pub async fn release(&self, id: &str, now_ms: i64) -> Result<(), MoveError> {
        let mut state = self.state.write().await;
        let Some(active) = self.active(&state, id, MoveRole::Source).await? else { return Ok(()) };
        match active.step {
            MoveStep::Frozen => {}
            MoveStep::Exporting => {
                return Err(MoveError::WrongStep {
                    id: id.into(),
                    step: "exporting",
                    what: "its slots are still served: freeze, copy and verify first",
                })
            }
            _ => return Ok(()),
        }
        let owned = state.owned.without(active.slots)?;
        self.change_owner(&mut state, owned, id, MoveStep::Released, now_ms).await?;
        self.changes.stop();
        Ok(())
    }

    /// Target, after the source released them: own the slots.
    pub async fn take(&self, id: &str, now_ms: i64) -> Result<(), MoveError> {
        let mut state = self.state.write().await;
        let Some(active) = self.active(&state, id, MoveRole::Target).await? else { return Ok(()) };
        let owned = state.owned.with(active.slots)?;
        self.change_owner(&mut state, owned, id, MoveStep::Done, now_ms).await
    }

    /// Source, once its copies are deleted: the move is over here.
    pub async fn finish(&self, id: &str, now_ms: i64) -> Result<(), MoveError> {
        let mut state = self.state.write().await;
        let Some(active) = self.active(&state, id, MoveRole::Source).await? else { return Ok(()) };
        if active.step != MoveStep::Released {
            return Err(MoveError::WrongStep { id: id.into(), step: "frozen", what: "release the slots first" });
        }
        set_step(&self.pool, id, MoveStep::Done, now_ms).await?;
        state.active = None;
        state.publish();
        Ok(())
    }

    /// Either side, before the source released: the move never happened.
    /// The source unfreezes; the target forgets (the caller drops its copies).
    pub async fn abandon(&self, id: &str, now_ms: i64) -> Result<Option<SlotMove>, MoveError> {
        let mut state = self.state.write().await;
        let active = match &state.active {
            Some(active) if active.id == id => active.clone(),
            _ => return Ok(None),
        };
        if active.step == MoveStep::Released {
            return Err(MoveError::WrongStep {
                id: id.into(),
                step: "released",
                what: "the source gave the slots up: rerun the move to finish it",
            });
        }
        set_step(&self.pool, id, MoveStep::Abandoned, now_ms).await?;
        tracing::warn!(move_id = id, slots = %active.slots, "slot move abandoned");
        self.changes.stop();
        state.active = None;
        state.publish();
        Ok(Some(active))
    }

    /// The new range, the next generation and the move's step, in one
    /// transaction, then in memory.
    async fn change_owner(
        &self,
        state: &mut Ownership,
        owned: OwnedSlots,
        id: &str,
        step: MoveStep,
        now_ms: i64,
    ) -> Result<(), MoveError> {
        let (first_slot, last_slot, nothing) = columns(owned);
        let mut transaction = self.pool.begin().await?;
        sqlx::query(
            "UPDATE shard_slots SET first_slot = $1, last_slot = $2, owns_nothing = $3, claimed_at = $4,
                    generation = generation + 1 WHERE singleton = 1",
        )
        .bind(first_slot)
        .bind(last_slot)
        .bind(nothing)
        .bind(now_ms)
        .execute(&mut *transaction)
        .await?;
        sqlx::query("UPDATE slot_moves SET step = $1, updated_at = $2 WHERE move_id = $3")
            .bind(step.as_str())
            .bind(now_ms)
            .bind(id)
            .execute(&mut *transaction)
            .await?;
        transaction.commit().await?;
        tracing::warn!(move_id = id, %owned, step = step.as_str(), "this shard's slot range changed");
        state.owned = owned;
        state.generation += 1;
        state.active = match state.active.take() {
            Some(active) if !step.finished() => Some(SlotMove { step, updated_at_ms: now_ms, ..active }),
            _ => None,
        };
        state.publish();
        Ok(())
    }

    /// The most recent move this shard recorded, finished or not (`--status`).
    pub async fn last_move(&self) -> Result<Option<SlotMove>, sqlx::Error> {
        let row = sqlx::query(AssertSqlSafe(format!("{MOVE_COLUMNS} ORDER BY started_at DESC, move_id DESC LIMIT 1")))
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(move_from_row).transpose()
    }
}

const MOVE_COLUMNS: &str =
    "SELECT move_id, role, first_slot, last_slot, peer, step, started_at, updated_at FROM slot_moves";

fn move_from_row(row: &sqlx::any::AnyRow) -> Result<SlotMove, sqlx::Error> {
    let corrupt = |what: String| sqlx::Error::Decode(what.into());
    let slots =
        stored_range(row.try_get("first_slot")?, row.try_get("last_slot")?).map_err(|e| corrupt(e.to_string()))?;
    let role = match row.try_get::<String, _>("role")?.as_str() {
        "source" => MoveRole::Source,
        "target" => MoveRole::Target,
        other => return Err(corrupt(format!("move role {other}"))),
    };
    let step = row.try_get::<String, _>("step")?;
    Ok(SlotMove {
        id: row.try_get("move_id")?,
        role,
        slots,
        peer: row.try_get("peer")?,
        step: MoveStep::parse(&step).ok_or_else(|| corrupt(format!("move step {step}")))?,
        started_at_ms: row.try_get("started_at")?,
        updated_at_ms: row.try_get("updated_at")?,
    })
}

async fn recorded_move(pool: &AnyPool, id: &str) -> Result<Option<SlotMove>, sqlx::Error> {
    let row =
        sqlx::query(AssertSqlSafe(format!("{MOVE_COLUMNS} WHERE move_id = $1"))).bind(id).fetch_optional(pool).await?;
    row.as_ref().map(move_from_row).transpose()
}

async fn active_move(pool: &AnyPool) -> Result<Option<SlotMove>, sqlx::Error> {
    let row = sqlx::query(AssertSqlSafe(format!("{MOVE_COLUMNS} WHERE step NOT IN ('done', 'abandoned') LIMIT 1")))
        .fetch_optional(pool)
        .await?;
    row.as_ref().map(move_from_row).transpose()
}

async fn set_step(pool: &AnyPool, id: &str, step: MoveStep, now_ms: i64) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE slot_moves SET step = $1, updated_at = $2 WHERE move_id = $3")
        .bind(step.as_str())
        .bind(now_ms)
        .bind(id)
        .execute(pool)
        .await?;
    Ok(())
}

/// The stored columns of `owned`: first slot, last slot, owns nothing.
fn columns(owned: OwnedSlots) -> (i64, i64, i64) {
    match owned {
        OwnedSlots::Nothing => (0, 0, 1),
        OwnedSlots::Range(range) => (i64::from(range.first().0), i64::from(range.last().0), 0),
    }
}

async fn stored_slots(pool: &AnyPool) -> Result<(OwnedSlots, u64), SlotClaimError> {
    let row =
        sqlx::query("SELECT first_slot, last_slot, owns_nothing, generation FROM shard_slots WHERE singleton = 1")
            .fetch_one(pool)
            .await?;
    let generation = u64::try_from(row.try_get::<i64, _>("generation")?).unwrap_or_default();
    if row.try_get::<i64, _>("owns_nothing")? != 0 {
        return Ok((OwnedSlots::Nothing, generation));
    }
    Ok((OwnedSlots::Range(stored_range(row.try_get("first_slot")?, row.try_get("last_slot")?)?), generation))
}

fn stored_range(first: i64, last: i64) -> Result<SlotRange, SlotClaimError> {
    let slot = |n: i64| u8::try_from(n).map_err(|_| SlotClaimError::Corrupt(format!("slot {n}")));
    SlotRange::new(slot(first)?, slot(last)?).map_err(|e| SlotClaimError::Corrupt(e.to_string()))
}

/// Metadata on a refusal that says the call was not executed and may be
/// retried (after discovering the slot map again): `frozen` or `not-owned`.
pub const NOT_EXECUTED: &str = "pastebin-not-executed";
/// Metadata on those refusals: the refusing shard's generation.
pub const GENERATION: &str = "pastebin-generation";

fn refusal(mut status: tonic::Status, why: &'static str, generation: u64) -> tonic::Status {
    let metadata = status.metadata_mut();
    metadata.insert(NOT_EXECUTED, tonic::metadata::MetadataValue::from_static(why));
    metadata.insert(GENERATION, tonic::metadata::MetadataValue::from(generation));
    status
}

/// The refusal of a call for a slot this shard does not own: the caller's
/// slot map is wrong, and nothing was read or changed. The message names the
/// slot and the range, never the key or id (a key is a secret).
fn not_owned(slot: Slot, owned: OwnedSlots, generation: u64) -> tonic::Status {
    let owns = match owned {
        OwnedSlots::Nothing => "it owns no slots".to_owned(),
        OwnedSlots::Range(range) => format!("it owns slots {range}"),
    };
    refusal(
        tonic::Status::failed_precondition(format!(
            "slot {slot} is not on this shard ({owns}): the caller's slot map is out of date; discover it again and retry"
        )),
        "not-owned",
        generation,
    )
}

/// The refusal of a write for a frozen slot: nothing was written, and the
/// same call will succeed once the move has switched owners.
fn frozen_refusal(slot: Slot, generation: u64) -> tonic::Status {
    refusal(
        tonic::Status::unavailable(format!(
            "slot {slot} is frozen while it moves to another shard: nothing was written; retry shortly"
        )),
        "frozen",
        generation,
    )
}

pub fn span(range: SlotRange) -> pb::SlotSpan {
    pb::SlotSpan { first_slot: u32::from(range.first().0), last_slot: u32::from(range.last().0) }
}

/// A span in a request or reply, checked.
pub fn span_range(span: Option<&pb::SlotSpan>) -> Result<SlotRange, String> {
    let span = span.ok_or("no slot range")?;
    let slot = |n: u32| u8::try_from(n).map_err(|_| format!("slot {n} is not 0 to 255"));
    SlotRange::new(slot(span.first_slot)?, slot(span.last_slot)?).map_err(|e| e.to_string())
}

/// `Describe`'s answer: what the shard is, which slots it owns, its clock,
/// and the durability of its database as last read.
fn description(kind: pb::ShardKind, ownership: &Ownership, now_ms: i64) -> pb::ShardDescription {
    let (first_slot, last_slot, nothing) = columns(ownership.owned);
    let durability = crate::durability::current();
    pb::ShardDescription {
        kind: kind.into(),
        first_slot: first_slot as u32,
        last_slot: last_slot as u32,
        now_ms,
        owns_nothing: nothing != 0,
        generation: ownership.generation,
        frozen: ownership.frozen().map(span),
        durability: durability.as_ref().map(|d| d.kind().to_owned()).unwrap_or_default(),
        durability_detail: durability.as_ref().map(ToString::to_string).unwrap_or_default(),
        commits_survive_server_loss: durability.and_then(|d| d.survives_server_loss()),
        // K's search-first mode is the key service's to add (`with_lost_commits`).
        may_have_lost_commits_since_ms: None,
        search_first_until_ms: None,
    }
}

/// The durability in a `Describe` answer; `None` when the shard has not read it.
pub fn described_durability(answer: &pb::ShardDescription) -> Option<crate::durability::Reported> {
    (!answer.durability.is_empty()).then(|| crate::durability::Reported {
        kind: answer.durability.clone(),
        detail: answer.durability_detail.clone(),
        commits_survive_server_loss: answer.commits_survive_server_loss,
    })
}

/// A K shard's `Describe` with its search-first mode
/// (docs/design.md#adopting-after-a-k-loss), which operators must see.
pub fn with_lost_commits(
    description: pb::ShardDescription,
    lost: Option<pastebin_core::LostCommits>,
) -> pb::ShardDescription {
    pb::ShardDescription {
        may_have_lost_commits_since_ms: lost.map(|lost| pastebin_core::to_millis(lost.since)),
        search_first_until_ms: lost.map(|lost| pastebin_core::to_millis(lost.search_first_until())),
        ..description
    }
}

/// The search-first mode in a `Describe` answer; `None` when the shard is not in it.
pub fn described_lost_commits(answer: &pb::ShardDescription) -> Option<pastebin_core::LostCommits> {
    answer.may_have_lost_commits_since_ms.map(|since| {
        let until = answer.search_first_until_ms.unwrap_or(since);
        pastebin_core::LostCommits::described(pastebin_core::from_millis(since), pastebin_core::from_millis(until))
    })
}

/// What a shard said about itself in `Describe`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Described {
    pub owned: OwnedSlots,
    pub generation: u64,
    pub frozen: Option<SlotRange>,
}

/// The answer to `Describe`, checked to come from a shard of `kind`.
pub fn described(kind: pb::ShardKind, answer: &pb::ShardDescription) -> Result<Described, CallError> {
    let bad_reply = |what: String| CallError::Uncertain(tonic::Status::internal(format!("malformed Describe: {what}")));
    if answer.kind != i32::from(kind) {
        return Err(bad_reply(format!("expected a {} shard", kind.as_str_name())));
    }
    let owned = if answer.owns_nothing {
        OwnedSlots::Nothing
    } else {
        OwnedSlots::Range(span_range(Some(&span_of(answer))).map_err(bad_reply)?)
    };
    let frozen = answer.frozen.as_ref().map(|f| span_range(Some(f))).transpose().map_err(bad_reply)?;
    Ok(Described { owned, generation: answer.generation, frozen })
}

fn span_of(answer: &pb::ShardDescription) -> pb::SlotSpan {
    pb::SlotSpan { first_slot: answer.first_slot, last_slot: answer.last_slot }
}
