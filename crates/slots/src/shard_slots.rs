//! A shard's identity: the slots it owns, kept in its own database so a
//! restart cannot silently change what it serves, the move it is part of
//! (docs/design.md#moving-slots), and the refusals every call for a slot it
//! does not own, or has frozen, gets (docs/design.md#shard-identity).
//!
//! [`ShardSlots`] is the live state a running shard answers from. Every
//! change is written to the database before it takes effect, so a shard
//! killed in the middle of a move restarts with the slots still frozen (or
//! already given up) exactly as it had said.

use std::sync::{
    atomic::{AtomicBool, AtomicI64, Ordering},
    Arc,
};

use pastebin_core::{OwnedSlots, Slot, SlotRange};
use pastebin_handover::{Effect, Identity, Lease, Record, Refusal, Request, Role, Shard, Step};
use pastebin_proto::shard::v1 as pb;
use pastebin_topology::Serving;
use sqlx::{AnyPool, AssertSqlSafe, Row};
use tokio::sync::{OwnedRwLockReadGuard, RwLock};

use pastebin_runtime::grpc::{CallError, GENERATION, NOT_EXECUTED};

use crate::move_changes::{ChangeLog, MovedRowKey};

/// A move's step was committed to this shard's database and its answer is
/// lost (`fail:N`: the Nth such commit), as when the server restarts
/// mid-COMMIT: the caller hears an error for a step that took effect.
pub const MOVE_STORED_ANSWER_LOST: &str = "move_stored_answer_lost";

#[derive(Debug, thiserror::Error)]
pub enum SlotClaimError {
    #[error(
        "this shard's database says it owns slots {stored}, but it was started with --slots {asked}; refusing to \
         start. The stored range is the truth after a move: start without --slots to use it. Change a shard's \
         range with `pastebin ctl reshard` (docs/operations.md, \"Moving slots\"); a manual resharding step \
         starts once with --reshard"
    )]
    Mismatch { stored: OwnedSlots, asked: OwnedSlots },
    #[error(
        "--slots {asked} is refused: the topology decides what this shard owns (it grants slots {granted}); start \
         without --slots, and change a grant with `pastebin ctl reshard`"
    )]
    GrantedElsewhere { asked: OwnedSlots, granted: OwnedSlots },
    #[error(transparent)]
    Authority(#[from] pastebin_topology::ChangeError),
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
    /// The topology grants the asked range: a stored range that differs is
    /// an older belief of this database, replaced (and logged).
    Obey,
}

/// A move's record as `MoveStatus` shows it.
pub fn move_to_pb(record: &Record) -> pb::Move {
    pb::Move {
        move_id: record.identity.id.clone(),
        role: match record.role {
            Role::Source => pb::MoveRole::Source,
            Role::Target => pb::MoveRole::Target,
        }
        .into(),
        slots: Some(span(record.identity.slots)),
        peer: record.peer().to_owned(),
        step: step_to_pb(record.step).into(),
        started_at_ms: record.started_at_ms,
        updated_at_ms: record.updated_at_ms,
        source: record.identity.source.clone(),
        target: record.identity.target.clone(),
        epoch: record.lease.epoch,
        holder: record.lease.holder.clone(),
        lease_until_ms: record.lease.until_ms,
        abandoning: record.abandoning,
        release_token: record.release_token.clone().unwrap_or_default(),
        search_first_since_ms: record.search_first.map(|window| window.0),
        search_first_until_ms: record.search_first.map(|window| window.1),
    }
}

/// A record in a reply or a request (a receipt), checked.
pub fn move_from_pb(record: &pb::Move) -> Result<Record, String> {
    let role = match pb::MoveRole::try_from(record.role) {
        Ok(pb::MoveRole::Source) => Role::Source,
        Ok(pb::MoveRole::Target) => Role::Target,
        _ => return Err(format!("move {} has no role", record.move_id)),
    };
    let step = match pb::MoveStep::try_from(record.step) {
        Ok(pb::MoveStep::Importing) => Step::Importing,
        Ok(pb::MoveStep::Exporting) => Step::Exporting,
        Ok(pb::MoveStep::Frozen) => Step::Frozen,
        Ok(pb::MoveStep::Released) => Step::Released,
        Ok(pb::MoveStep::Done) => Step::Done,
        Ok(pb::MoveStep::Abandoned) => Step::Abandoned,
        _ => return Err(format!("move {} has no step", record.move_id)),
    };
    Ok(Record {
        identity: Identity {
            id: record.move_id.clone(),
            slots: span_range(record.slots.as_ref())?,
            source: record.source.clone(),
            target: record.target.clone(),
        },
        role,
        step,
        lease: Lease { epoch: record.epoch, holder: record.holder.clone(), until_ms: record.lease_until_ms },
        abandoning: record.abandoning,
        release_token: (!record.release_token.is_empty()).then(|| record.release_token.clone()),
        search_first: record.search_first_since_ms.zip(record.search_first_until_ms),
        started_at_ms: record.started_at_ms,
        updated_at_ms: record.updated_at_ms,
    })
}

fn step_to_pb(step: Step) -> pb::MoveStep {
    match step {
        Step::Importing => pb::MoveStep::Importing,
        Step::Exporting => pb::MoveStep::Exporting,
        Step::Frozen => pb::MoveStep::Frozen,
        Step::Released => pb::MoveStep::Released,
        Step::Done => pb::MoveStep::Done,
        Step::Abandoned => pb::MoveStep::Abandoned,
    }
}

/// What a shard owns now, and the move it is in the middle of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ownership {
    pub owned: OwnedSlots,
    pub generation: u64,
    pub active: Option<Record>,
    /// Under a topology, what it lets this shard serve (`owned` is its
    /// grant): the slots a move froze or holds are refused here too.
    pub granted: Option<Serving>,
}

impl Ownership {
    /// Publishes how many slots are frozen here (`pastebin_shard_frozen_slots`).
    pub(crate) fn publish(&self) {
        let frozen = self.frozen().map_or(0, |range| range.slots().count());
        metrics::gauge!(pastebin_runtime::metrics::FROZEN_SLOTS).set(frozen as f64);
    }

    /// The slots this shard serves: the range in its own database, or under
    /// a topology its grant as last seen, narrowed by this shard's own record
    /// of the moves it took part in (docs/design.md#ownership-on-etcd). A
    /// release it made is in force at once, though its watch may bring the
    /// cut-over much later (after a quorum loss, say): a source whose grant
    /// still showed the slots it gave away would take creates for keys whose
    /// rows it has deleted, and make a second paste for each. A target
    /// serves the slots it is importing once the topology grants them.
    pub fn serves(&self) -> OwnedSlots {
        let Some(granted) = self.granted else { return self.owned };
        let recorded = match self.importing() {
            Some(importing) => self.owned.with(importing).unwrap_or(self.owned),
            None => self.owned,
        };
        granted.owned.overlap(recorded)
    }

    /// The slots a move is bringing here that this shard has not taken yet.
    fn importing(&self) -> Option<SlotRange> {
        self.active.as_ref().filter(|m| m.role == Role::Target && m.step == Step::Importing).map(|m| m.identity.slots)
    }

    /// The slots this shard still owns but refuses writes for.
    pub fn frozen(&self) -> Option<SlotRange> {
        self.active.as_ref().filter(|m| m.role == Role::Source && m.step == Step::Frozen).map(|m| m.identity.slots)
    }

    /// Refuses a call for `slot` unless this shard owns it (and, for a
    /// `write`, has not frozen it).
    fn check(&self, slot: Slot, write: bool) -> Result<(), tonic::Status> {
        let owned = self.serves();
        if !owned.contains(slot) {
            return Err(not_owned(slot, owned, self.generation));
        }
        if let Some(granted) = &self.granted {
            if !granted.readable(slot) {
                return Err(held_refusal(slot, self.generation));
            }
            if write && !granted.writable(slot) {
                return Err(frozen_refusal(slot, self.generation));
            }
            // The target serves the slots once etcd records the take, but
            // takes writes for them only after its own take held their
            // lost-commits window (docs/design.md#adopting-after-a-k-loss).
            if write && self.importing().is_some_and(|slots| slots.contains(slot)) {
                return Err(frozen_refusal(slot, self.generation));
            }
        }
        match self.frozen() {
            Some(frozen) if write && frozen.contains(slot) => Err(frozen_refusal(slot, self.generation)),
            _ => Ok(()),
        }
    }
}

/// Why a move call was refused. Nothing changed.
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// An import of a run that was taken over while it waited to be written.
    #[error("{0}")]
    Fenced(String),
    #[error("cannot record the move: {0}")]
    Database(#[from] sqlx::Error),
}

impl From<MoveError> for tonic::Status {
    fn from(error: MoveError) -> Self {
        match &error {
            MoveError::Refused(Refusal::Held { .. }) => tonic::Status::aborted(error.to_string()),
            MoveError::Refused(Refusal::NoMove(_)) => tonic::Status::not_found(error.to_string()),
            MoveError::Refused(_) | MoveError::Fenced(_) => tonic::Status::failed_precondition(error.to_string()),
            MoveError::Database(_) => tonic::Status::unavailable(error.to_string()),
        }
    }
}

/// The live slots of a running shard, shared by its handlers. A write holds
/// a [`WritePermit`] until its commit is known, so a move step (which takes
/// the lock exclusively: a freeze) waits for the writes in flight and none
/// can land after it.
#[derive(Clone)]
pub struct ShardSlots {
    kind: pb::ShardKind,
    pub(crate) pool: AnyPool,
    pub(crate) state: Arc<RwLock<Ownership>>,
    changes: Arc<ChangeLog>,
    windows: SearchWindows,
    /// The end of the active move's lease as last renewed (Unix ms): a
    /// renewal is not stored, nor taken under the exclusive lock.
    lease_until: Arc<AtomicI64>,
    /// Under a topology: where this shard's grant and its moves are decided.
    pub(crate) granted: Option<crate::granted::Granted>,
    /// Slots a finished move took away while this shard's database forgot
    /// it: the rows it still has of them are stale copies, to delete.
    stale_copies: Arc<std::sync::Mutex<Vec<SlotRange>>>,
    /// A write's outcome was unknown and the database could not be read
    /// since: the next step reads it first ([`ShardSlots::follow_database`]).
    uncertain: Arc<AtomicBool>,
    /// Whether this ownership is a colocated shard's, shared by its key and
    /// paste services (docs/design.md#the-colocated-create).
    colocated: bool,
    /// Refuses every call from a loss of the database link until the shard
    /// confirmed itself again ([`crate::failover`]).
    pub(crate) failover: Arc<crate::failover::FailoverGate>,
}

/// The lost-commits windows a shard holds for slots
/// (docs/design.md#adopting-after-a-k-loss): its own
/// `--may-have-lost-commits-since`, stored over the slots it owned then, and
/// those it took with slots moved to it. A K shard searches P first for a
/// key of a slot inside one until the window ends. Stored in
/// `slot_search_windows`; a window moves with its slots (the release
/// receipt carries it).
#[derive(Clone, Default)]
pub struct SearchWindows(Arc<std::sync::RwLock<Vec<(SlotRange, i64, i64)>>>);

impl SearchWindows {
    fn windows(&self) -> std::sync::RwLockReadGuard<'_, Vec<(SlotRange, i64, i64)>> {
        // A panic while holding it cannot leave the list half written: each change is one push.
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether a key of `slot` is searched for first at `now_ms`.
    pub fn searching(&self, slot: Slot, now_ms: i64) -> bool {
        self.windows().iter().any(|(slots, _, until)| slots.contains(slot) && now_ms < *until)
    }

    /// The window that covers any of `slots` at `now_ms` (the earliest
    /// start, the latest end), if one does.
    fn covering(&self, slots: SlotRange, now_ms: i64) -> Option<(i64, i64)> {
        let overlaps = |held: &SlotRange| held.first() <= slots.last() && slots.first() <= held.last();
        self.windows().iter().filter(|(held, _, until)| overlaps(held) && now_ms < *until).fold(None, |acc, w| {
            Some(acc.map_or((w.1, w.2), |(since, until): (i64, i64)| (since.min(w.1), until.max(w.2))))
        })
    }

    /// The window that covers every one of `slots` at `now_ms` (the
    /// earliest start, the latest end of those that do), if one does: the
    /// mode a shard owning just `slots` is in, as it describes itself.
    pub fn over(&self, slots: SlotRange, now_ms: i64) -> Option<(i64, i64)> {
        let covers = |held: &SlotRange| held.first() <= slots.first() && slots.last() <= held.last();
        self.windows().iter().filter(|(held, _, until)| covers(held) && now_ms < *until).fold(None, |acc, w| {
            Some(acc.map_or((w.1, w.2), |(since, until): (i64, i64)| (since.min(w.1), until.max(w.2))))
        })
    }

    fn add(&self, slots: SlotRange, since_ms: i64, until_ms: i64) {
        self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner).push((slots, since_ms, until_ms));
    }
}

/// Held by a write until its commit is known: the slots it writes were
/// checked under it. When it ends the rows it named are recorded as changed
/// for a move copying their slots. Run the write with [`Self::complete`]:
/// a handler cancelled mid-write (its call timed out, its caller went away)
/// then cannot drop the permit, and so let a freeze pass, while the write is
/// still queued or on its way to the database (docs/design.md#moving-slots).
pub struct WritePermit {
    state: OwnedRwLockReadGuard<Ownership>,
    changes: Arc<ChangeLog>,
    rows: Vec<(Slot, String)>,
}

impl Drop for WritePermit {
    fn drop(&mut self) {
        if self.state.active.is_some() {
            self.changes.record(std::mem::take(&mut self.rows));
        }
    }
}

impl WritePermit {
    /// Runs `write` to its end in a task of its own that holds this permit,
    /// whether or not the caller still waits for it; the rows are recorded
    /// as changed after the write ended (committed, or failed).
    pub async fn complete<T: Send + 'static>(
        self,
        write: impl std::future::Future<Output = T> + Send + 'static,
    ) -> Result<T, tonic::Status> {
        let task = tokio::spawn(async move {
            let outcome = write.await;
            drop(self);
            outcome
        });
        match task.await {
            Ok(outcome) => Ok(outcome),
            Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
            Err(_) => Err(tonic::Status::unavailable("the shard is shutting down: retry")),
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
                set_owned(pool, asked, now_ms).await?;
                match resharding {
                    Resharding::Obey => tracing::warn!(
                        database = %stored, granted = %asked,
                        "this shard's database says it owns other slots than the topology grants: obeying the topology"
                    ),
                    _ => tracing::warn!(%stored, %asked, "resharding: this shard's slot range changed"),
                }
                asked
            }
        };
        let generation = if owned == stored { generation } else { generation + 1 };
        let active = active_move(pool).await?;
        if let Some(active) = &active {
            tracing::warn!(move_id = %active.identity.id, slots = %active.identity.slots, step = active.step.as_str(), "a slot move is in progress");
        }
        let changes = Arc::new(ChangeLog::default());
        if let Some(source) = active.as_ref().filter(|m| m.role == Role::Source && m.step != Step::Released) {
            // What changed before this start is unknown.
            changes.start(source.identity.slots, false);
        }
        let ownership = Ownership { owned, generation, active, granted: None };
        ownership.publish();
        let state = Arc::new(RwLock::new(ownership));
        let windows = SearchWindows::default();
        let stored =
            sqlx::query("SELECT first_slot, last_slot, since, until FROM slot_search_windows WHERE until > $1")
                .bind(now_ms)
                .fetch_all(pool)
                .await?;
        for row in &stored {
            let slots = stored_range(row.try_get("first_slot")?, row.try_get("last_slot")?)?;
            windows.add(slots, row.try_get("since")?, row.try_get("until")?);
        }
        Ok(Self {
            kind,
            pool: pool.clone(),
            state,
            changes,
            windows,
            lease_until: Arc::new(AtomicI64::new(0)),
            granted: None,
            stale_copies: Arc::default(),
            failover: Arc::default(),
            uncertain: Arc::default(),
            colocated: false,
        })
    }

    /// The lost-commits windows this shard holds, for its store to consult.
    pub fn search_windows(&self) -> SearchWindows {
        self.windows.clone()
    }

    /// Holds the window `since_ms`..`until_ms` for `slots`, stored first
    /// ([`store_window`]).
    pub async fn hold_window(&self, slots: SlotRange, since_ms: i64, until_ms: i64) -> Result<(), sqlx::Error> {
        store_window(&self.pool, slots, since_ms, until_ms).await?;
        self.windows.add(slots, since_ms, until_ms);
        tracing::warn!(%slots, since_ms, until_ms, "searching first for the keys of these slots until the window ends");
        Ok(())
    }

    /// The window a release of `slots` carries to the target.
    pub fn window_for(&self, slots: SlotRange, now_ms: i64) -> Option<(i64, i64)> {
        self.windows.covering(slots, now_ms)
    }

    /// This ownership as a colocated shard's two services see it
    /// (docs/design.md#the-colocated-create): one range, in one set of
    /// tables, for its key service and its paste service, each of which
    /// describes itself as colocated.
    pub fn colocated(self) -> (Self, Self) {
        let keys = Self { kind: pb::ShardKind::Key, colocated: true, ..self };
        let pastes = Self { kind: pb::ShardKind::Paste, ..keys.clone() };
        (keys, pastes)
    }

    pub fn kind(&self) -> pb::ShardKind {
        self.kind
    }

    /// Under a topology, where this shard's grant and moves are decided.
    pub fn granted(&self) -> Option<&crate::granted::Granted> {
        self.granted.as_ref()
    }

    pub async fn ownership(&self) -> Ownership {
        let ownership = self.state.read().await.clone();
        Ownership { active: ownership.active.map(|active| self.renewed(active)), ..ownership }
    }

    /// A read of `slot`: refused unless this shard owns it.
    pub async fn readable(&self, slot: Slot) -> Result<(), tonic::Status> {
        let state = self.state.read().await;
        self.failover.check(state.generation)?;
        state.check(slot, false)
    }

    /// A write of `slots`: refused unless this shard owns all of them and
    /// none is frozen. Run the write with [`WritePermit::complete`].
    pub async fn writable<'r, R: MovedRowKey + 'r>(
        &self,
        rows: impl IntoIterator<Item = &'r R>,
    ) -> Result<WritePermit, tonic::Status> {
        let state = self.state.clone().read_owned().await;
        self.failover.check(state.generation)?;
        let rows: Vec<(Slot, String)> = rows.into_iter().map(MovedRowKey::moved_row).collect();
        for (slot, _) in &rows {
            state.check(*slot, true)?;
        }
        Ok(WritePermit { state, changes: self.changes.clone(), rows })
    }

    /// A batch write that applies what this shard may write now and
    /// reports the rest, untouched: the items of slots it does not own, and
    /// those of a slot a move has frozen (they wait for the move; the
    /// others of the batch do not: docs/design.md#sweeper).
    pub async fn writable_owned<T, R: MovedRowKey>(
        &self,
        items: Vec<T>,
        row_of: impl Fn(&T) -> &R,
    ) -> Result<(WritePermit, Vec<T>, Vec<T>), tonic::Status> {
        let state = self.state.clone().read_owned().await;
        self.failover.check(state.generation)?;
        Ok(self.set_aside_unwritable(state, items, row_of))
    }

    /// A batch write of rows this shard must own: refused whole if one is
    /// not its own (the caller's slot map is wrong or stale, and finds the
    /// owner again), while the rows of a slot a move has frozen are set
    /// aside untouched and reported, like [`Self::writable_owned`]'s.
    pub async fn writable_unless_frozen<T, R: MovedRowKey>(
        &self,
        items: Vec<T>,
        row_of: impl Fn(&T) -> &R,
    ) -> Result<(WritePermit, Vec<T>, Vec<T>), tonic::Status> {
        let state = self.state.clone().read_owned().await;
        self.failover.check(state.generation)?;
        for item in &items {
            state.check(row_of(item).moved_row().0, false)?;
        }
        Ok(self.set_aside_unwritable(state, items, row_of))
    }

    /// The permit for the items `state` lets this shard write now, those
    /// items, and the others, untouched.
    fn set_aside_unwritable<T, R: MovedRowKey>(
        &self,
        state: OwnedRwLockReadGuard<Ownership>,
        items: Vec<T>,
        row_of: impl Fn(&T) -> &R,
    ) -> (WritePermit, Vec<T>, Vec<T>) {
        let (writable, waiting): (Vec<T>, Vec<T>) =
            items.into_iter().partition(|item| state.check(row_of(item).moved_row().0, true).is_ok());
        let rows: Vec<(Slot, String)> = writable.iter().map(|item| row_of(item).moved_row()).collect();
        (WritePermit { state, changes: self.changes.clone(), rows }, writable, waiting)
    }

    /// A write that is not about one slot (retention, expiry, purges): it
    /// would change rows that a move is copying, so it waits for the move.
    pub async fn writable_everywhere(&self) -> Result<WritePermit, tonic::Status> {
        let state = self.state.clone().read_owned().await;
        self.failover.check(state.generation)?;
        match &state.active {
            Some(active) => Err(refusal(
                tonic::Status::unavailable(format!(
                    "this shard is moving slots {} (move {}): cleanup pauses until it is done; retry later",
                    active.identity.slots, active.identity.id
                )),
                "frozen",
                state.generation,
            )),
            None => Ok(WritePermit { state, changes: self.changes.clone(), rows: Vec::new() }),
        }
    }

    /// Rows the source changed after `since` (see [`ChangeLog`]); `request`
    /// is checked as a read of the source first.
    pub async fn changed_rows(
        &self,
        request: Request,
        since: u64,
        limit: usize,
    ) -> Result<crate::move_changes::ChangedRows, MoveError> {
        self.apply(request).await?;
        Ok(self.changes.since(since, limit))
    }

    /// `Describe`'s answer.
    pub async fn description(&self, now_ms: i64) -> pb::ShardDescription {
        pb::ShardDescription { colocated: self.colocated, ..description(self.kind, &*self.state.read().await, now_ms) }
    }

    /// One move call, through the handover's state machine
    /// (`pastebin_handover::step`, every guard there): the new record and
    /// range are stored in one transaction before they take effect here, and
    /// the effects the caller must carry out are returned with the record.
    /// Taking the lock exclusively waits for the writes in flight, so none
    /// lands after a freeze or a release.
    pub async fn apply(&self, request: Request) -> Result<Applied, MoveError> {
        // A call that changes nothing durable (a page of a copy, a
        // heartbeat) is checked under the shared lock, so it never stalls
        // the writes of other slots; its lease renewal is kept beside it.
        {
            let state = self.state.read().await;
            let before = self.before(&state, &request).await?;
            let transition = pastebin_handover::step(&before, &request)?;
            if !transition.durable && transition.effects.is_empty() {
                let record = transition.shard.active.clone().or(transition.shard.finished.clone());
                if let Some(active) = &transition.shard.active {
                    self.lease_until.fetch_max(active.lease.until_ms, Ordering::SeqCst);
                }
                return Ok(Applied { effects: transition.effects, record });
            }
        }
        let mut state = self.state.write().await;
        if self.uncertain.load(Ordering::SeqCst) {
            self.follow_database(&mut state).await;
        }
        let before = self.before(&state, &request).await?;
        let transition = pastebin_handover::step(&before, &request)?;
        let after = transition.shard;
        let record = after.active.clone().or(after.finished.clone());
        let owner_changed = after.owned != before.owned;
        if transition.durable {
            let record = record.as_ref().expect("a durable change is a change of a record");
            if let Err(error) = self.store(record, owner_changed.then_some(after.owned), request.now_ms).await {
                self.follow_database(&mut state).await;
                return Err(error.into());
            }
            tracing::warn!(
                move_id = %record.identity.id, slots = %record.identity.slots, role = record.role.as_str(),
                step = record.step.as_str(), epoch = record.lease.epoch, abandoning = record.abandoning,
                "slot move recorded"
            );
        }
        for effect in &transition.effects {
            match (effect, &record) {
                (Effect::StartRecording, Some(record)) => self.changes.start(record.identity.slots, true),
                (Effect::StopRecording, _) => self.changes.stop(),
                _ => {}
            }
        }
        if owner_changed {
            tracing::warn!(owned = %after.owned, "this shard's slot range changed");
            state.generation += 1;
        }
        let until = after.active.as_ref().map_or(0, |active| active.lease.until_ms);
        self.lease_until.store(until, Ordering::SeqCst);
        state.owned = after.owned;
        state.active = after.active;
        state.publish();
        Ok(Applied { effects: transition.effects, record })
    }

    /// After a write whose outcome is unknown (its commit may have reached
    /// the database while its answer was lost: a server restarted mid-COMMIT,
    /// a connection cut), memory takes what the database holds, so the shard
    /// never acts on a step it believes undone while its database kept it
    /// (docs/design.md#moving-slots). If the database cannot be read now, the
    /// next step reads it first.
    async fn follow_database(&self, state: &mut Ownership) {
        let stored =
            async { Ok::<_, SlotClaimError>((stored_slots(&self.pool).await?, active_move(&self.pool).await?)) };
        match stored.await {
            Ok(((owned, generation), active)) => {
                // Under a topology the grant says what is served; the
                // database's own range is only what this shard recorded.
                if state.granted.is_none() && owned != state.owned {
                    tracing::warn!(%owned, "after an uncertain commit the database holds another range: following it");
                    state.owned = owned;
                    state.generation = state.generation.max(generation) + 1;
                }
                if active.as_ref().map(|a| &a.identity) != state.active.as_ref().map(|a| &a.identity)
                    || active.as_ref().map(|a| a.step) != state.active.as_ref().map(|a| a.step)
                {
                    tracing::warn!(
                        active = ?active.as_ref().map(|a| (a.identity.id.as_str(), a.step.as_str())),
                        "after an uncertain commit the database holds another step of the move: following it"
                    );
                }
                state.active = active;
                state.publish();
                self.uncertain.store(false, Ordering::SeqCst);
            }
            Err(error) => {
                tracing::warn!(%error, "after an uncertain commit the database cannot be read: the next step reads it first");
                self.uncertain.store(true, Ordering::SeqCst);
            }
        }
    }

    /// What `step` reads: the range, the move in progress with its lease as
    /// last renewed, or the finished record of the move the call names.
    async fn before(&self, state: &Ownership, request: &Request) -> Result<Shard, sqlx::Error> {
        let finished = match &state.active {
            Some(_) => None,
            None => recorded_move(&self.pool, &request.identity.id).await?.filter(|r| r.step.finished()),
        };
        Ok(Shard { owned: state.owned, active: state.active.clone().map(|a| self.renewed(a)), finished })
    }

    /// `record` with its lease's end as last renewed.
    fn renewed(&self, mut record: Record) -> Record {
        record.lease.until_ms = record.lease.until_ms.max(self.lease_until.load(Ordering::SeqCst));
        record
    }

    /// The record, and the new range when it changed, in one transaction.
    async fn store(&self, record: &Record, owned: Option<OwnedSlots>, now_ms: i64) -> Result<(), sqlx::Error> {
        let mut transaction = self.pool.begin().await?;
        if let Some(owned) = owned {
            set_owned(&mut *transaction, owned, now_ms).await?;
        }
        sqlx::query(
            "INSERT INTO slot_moves (move_id, role, first_slot, last_slot, peer, step, started_at, updated_at, source,
                                     target, epoch, holder, lease_until, abandoning, release_token,
                                     search_first_since, search_first_until)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
             ON CONFLICT (move_id) DO UPDATE SET step = excluded.step, updated_at = excluded.updated_at,
                 epoch = excluded.epoch, holder = excluded.holder, lease_until = excluded.lease_until,
                 abandoning = excluded.abandoning, release_token = excluded.release_token,
                 search_first_since = excluded.search_first_since,
                 search_first_until = excluded.search_first_until",
        )
        .bind(&record.identity.id)
        .bind(record.role.as_str())
        .bind(i64::from(record.identity.slots.first().0))
        .bind(i64::from(record.identity.slots.last().0))
        .bind(record.peer())
        .bind(record.step.as_str())
        .bind(record.started_at_ms)
        .bind(record.updated_at_ms)
        .bind(&record.identity.source)
        .bind(&record.identity.target)
        .bind(i64::try_from(record.lease.epoch).unwrap_or(i64::MAX))
        .bind(&record.lease.holder)
        .bind(record.lease.until_ms)
        .bind(i64::from(record.abandoning))
        .bind(record.release_token.clone())
        .bind(record.search_first.map(|window| window.0))
        .bind(record.search_first.map(|window| window.1))
        .execute(&mut *transaction)
        .await?;
        transaction.commit().await?;
        if pastebin_runtime::failpoints::fails(MOVE_STORED_ANSWER_LOST) {
            return Err(sqlx::Error::Io(std::io::Error::other("failpoint: the commit's answer was lost")));
        }
        Ok(())
    }

    /// Under a topology, a target whose database forgot the copy of a move
    /// already cut over: its own record goes back to importing that move,
    /// and its own range to what it had without those slots, so the move's
    /// take is recorded here again; while the topology holds the slots here
    /// the copy and verification run again first
    /// (docs/design.md#ownership-on-etcd). Nothing if its database still
    /// records the take.
    pub(crate) async fn import_again(&self, moving: &pastebin_topology::Move, now_ms: i64) -> Result<(), sqlx::Error> {
        let mut state = self.state.write().await;
        if state.active.as_ref().is_some_and(|active| active.identity.id == moving.id && active.step == Step::Importing)
            || self.finished_move(&moving.id).await?.is_some()
        {
            return Ok(());
        }
        // Its range without the slots: as recorded at its take, or as its
        // database holds it when that forgot the move altogether.
        let owned = match state.owned.without(moving.slots) {
            Ok(rest) => rest,
            Err(_) if state.owned.misses(moving.slots) => state.owned,
            Err(_) => return Ok(()),
        };
        let record = Record {
            identity: Identity {
                id: moving.id.clone(),
                slots: moving.slots,
                source: moving.source.clone(),
                target: moving.target.clone(),
            },
            role: Role::Target,
            step: Step::Importing,
            lease: Lease { epoch: 0, holder: String::new(), until_ms: 0 },
            abandoning: false,
            release_token: None,
            search_first: None,
            started_at_ms: now_ms,
            updated_at_ms: now_ms,
        };
        self.store(&record, Some(owned), now_ms).await?;
        tracing::warn!(move_id = %moving.id, slots = %moving.slots, "importing the moved slots again: this shard's database forgot its copy");
        state.owned = owned;
        state.active = Some(record);
        Ok(())
    }

    /// Under a topology, a move this shard's database still has in progress
    /// that the topology records as finished (the database was restored to
    /// before its end): its record ends as the topology says, its range
    /// becomes the grant (not what it serves now: on a start it serves
    /// nothing from the topology yet), and its rows of slots the topology
    /// grants elsewhere are stale copies, never served, to be deleted.
    pub(crate) async fn end_as_recorded(
        &self,
        finished: &pastebin_topology::Move,
        topology: &pastebin_topology::Topology,
        address: &str,
        now_ms: i64,
    ) -> Result<(), sqlx::Error> {
        let mut state = self.state.write().await;
        let Some(active) = state.active.clone().filter(|active| active.identity.id == finished.id) else {
            return Ok(());
        };
        let step = if finished.phase == pastebin_topology::Phase::Done { Step::Done } else { Step::Abandoned };
        let owned = topology.serving(address).owned;
        let record = Record { step, updated_at_ms: now_ms, ..active };
        self.store(&record, Some(owned), now_ms).await?;
        // A source past its release no longer records the slots, a target before its take not yet.
        let recorded = state.owned.with(finished.slots).unwrap_or(state.owned);
        self.given_away(crate::granted::stale_copies(recorded, topology, address));
        tracing::warn!(
            move_id = %finished.id, step = step.as_str(),
            "this shard's database had a move in progress that the topology records as finished: ended as recorded"
        );
        state.owned = owned;
        state.active = None;
        Ok(())
    }

    /// Slots whose rows here are stale copies of what the topology grants
    /// another shard: deleted by [`SlotMovesService`](crate::slot_moves)
    /// when it starts serving.
    pub(crate) fn given_away(&self, slots: impl IntoIterator<Item = SlotRange>) {
        self.stale_copies.lock().unwrap_or_else(std::sync::PoisonError::into_inner).extend(slots);
    }

    /// The slots whose stale copies are to be deleted (each handed out once).
    pub(crate) fn take_stale_copies(&self) -> Vec<SlotRange> {
        std::mem::take(&mut *self.stale_copies.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    /// Move `id` if this shard finished it: ctl asks for the move it runs,
    /// whose order among finished moves a clock that stepped back could hide.
    pub async fn finished_move(&self, id: &str) -> Result<Option<Record>, sqlx::Error> {
        Ok(recorded_move(&self.pool, id).await?.filter(|record| record.step.finished()))
    }

    /// The most recent move this shard finished (`--status`, and a rerun
    /// of a finished move).
    pub async fn last_finished(&self) -> Result<Option<Record>, sqlx::Error> {
        let row = sqlx::query(AssertSqlSafe(format!("{MOVE_COLUMNS} WHERE {FINISHED_LAST}")))
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(move_from_row).transpose()
    }

    /// The most recent move of exactly `slots` from `source` to `target`
    /// this shard finished: a rerun of it, typed again after later moves
    /// between the same shards, is recognised as done.
    pub async fn last_finished_like(
        &self,
        slots: SlotRange,
        source: &str,
        target: &str,
    ) -> Result<Option<Record>, sqlx::Error> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "{MOVE_COLUMNS} WHERE first_slot = $1 AND last_slot = $2 AND source = $3 AND target = $4 AND {FINISHED_LAST}"
        )))
        .bind(i64::from(slots.first().0))
        .bind(i64::from(slots.last().0))
        .bind(source)
        .bind(target)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(move_from_row).transpose()
    }
}

/// A move call's outcome: what the shard must still do, and the move's
/// record after it.
#[derive(Debug)]
pub struct Applied {
    pub effects: Vec<Effect>,
    pub record: Option<Record>,
}

impl Applied {
    pub fn has(&self, effect: &Effect) -> bool {
        self.effects.contains(effect)
    }
}

/// The statement an import runs first, in its own transaction: the write
/// goes on only while its run's epoch is still the move's and the target
/// still imports (a run taken over, or a take, in the meantime refuses it;
/// the UPDATE takes the row's lock, so the check holds until the commit).
pub const IMPORT_FENCE: &str = "UPDATE slot_moves SET lease_until = lease_until
     WHERE move_id = $1 AND epoch = $2 AND holder = $3 AND step = 'importing' AND abandoning = 0";

/// The last finished move first, by this shard's clock.
const FINISHED_LAST: &str = "step IN ('done', 'abandoned') ORDER BY updated_at DESC, move_id DESC LIMIT 1";

const MOVE_COLUMNS: &str = "SELECT move_id, role, first_slot, last_slot, peer, step, started_at, updated_at, source, \
                            target, epoch, holder, lease_until, abandoning, release_token, \
                            search_first_since, search_first_until FROM slot_moves";

fn move_from_row(row: &sqlx::any::AnyRow) -> Result<Record, sqlx::Error> {
    let corrupt = |what: String| sqlx::Error::Decode(what.into());
    let slots =
        stored_range(row.try_get("first_slot")?, row.try_get("last_slot")?).map_err(|e| corrupt(e.to_string()))?;
    let role = match row.try_get::<String, _>("role")?.as_str() {
        "source" => Role::Source,
        "target" => Role::Target,
        other => return Err(corrupt(format!("move role {other}"))),
    };
    let step = row.try_get::<String, _>("step")?;
    Ok(Record {
        identity: Identity {
            id: row.try_get("move_id")?,
            slots,
            source: row.try_get("source")?,
            target: row.try_get("target")?,
        },
        role,
        step: Step::parse(&step).ok_or_else(|| corrupt(format!("move step {step}")))?,
        lease: Lease {
            epoch: u64::try_from(row.try_get::<i64, _>("epoch")?).unwrap_or_default(),
            holder: row.try_get("holder")?,
            until_ms: row.try_get("lease_until")?,
        },
        abandoning: row.try_get::<i64, _>("abandoning")? != 0,
        release_token: row.try_get("release_token")?,
        search_first: row
            .try_get::<Option<i64>, _>("search_first_since")?
            .zip(row.try_get::<Option<i64>, _>("search_first_until")?),
        started_at_ms: row.try_get("started_at")?,
        updated_at_ms: row.try_get("updated_at")?,
    })
}

async fn recorded_move(pool: &AnyPool, id: &str) -> Result<Option<Record>, sqlx::Error> {
    let row =
        sqlx::query(AssertSqlSafe(format!("{MOVE_COLUMNS} WHERE move_id = $1"))).bind(id).fetch_optional(pool).await?;
    row.as_ref().map(move_from_row).transpose()
}

pub(crate) async fn active_move(pool: &AnyPool) -> Result<Option<Record>, sqlx::Error> {
    // At most one is unfinished; should a database hold more, every start
    // picks the same one (the oldest).
    let row = sqlx::query(AssertSqlSafe(format!(
        "{MOVE_COLUMNS} WHERE step NOT IN ('done', 'abandoned') ORDER BY started_at, move_id LIMIT 1"
    )))
    .fetch_optional(pool)
    .await?;
    row.as_ref().map(move_from_row).transpose()
}

/// The stored columns of `owned`: first slot, last slot, owns nothing.
/// Stores `owned` as this shard's range, one generation on.
async fn set_owned<'e>(
    executor: impl sqlx::Executor<'e, Database = sqlx::Any>,
    owned: OwnedSlots,
    now_ms: i64,
) -> Result<(), sqlx::Error> {
    let (first_slot, last_slot, nothing) = columns(owned);
    sqlx::query(
        "UPDATE shard_slots SET first_slot = $1, last_slot = $2, owns_nothing = $3, claimed_at = $4,
                generation = generation + 1 WHERE singleton = 1",
    )
    .bind(first_slot)
    .bind(last_slot)
    .bind(nothing)
    .bind(now_ms)
    .execute(executor)
    .await?;
    Ok(())
}

/// Stores the lost-commits window `since_ms`..`until_ms` for `slots` in a K
/// shard's database, which its next start holds. A window already stored for
/// the same slots that covers it is kept as it is, and one it covers is
/// replaced, in one transaction: every start with
/// `--may-have-lost-commits-since`, every rerun of a take and every restore
/// stores its window again, and must not add a row each time.
pub async fn store_window(pool: &AnyPool, slots: SlotRange, since_ms: i64, until_ms: i64) -> Result<(), sqlx::Error> {
    let (first, last) = (i64::from(slots.first().0), i64::from(slots.last().0));
    let window = |sql: &'static str| sqlx::query(sql).bind(first).bind(last).bind(since_ms).bind(until_ms);
    let mut tx = pool.begin().await?;
    let covered = window(
        "SELECT COUNT(*) AS n FROM slot_search_windows
         WHERE first_slot = $1 AND last_slot = $2 AND since <= $3 AND until >= $4",
    )
    .fetch_one(&mut *tx)
    .await?
    .try_get::<i64, _>("n")?;
    if covered == 0 {
        let covers = "DELETE FROM slot_search_windows
                      WHERE first_slot = $1 AND last_slot = $2 AND since >= $3 AND until <= $4";
        window(covers).execute(&mut *tx).await?;
        let insert = "INSERT INTO slot_search_windows (first_slot, last_slot, since, until) VALUES ($1, $2, $3, $4)";
        window(insert).execute(&mut *tx).await?;
    }
    tx.commit().await
}

/// Stores the window over the slots a stopped K shard's database says it
/// owns (a restore of it: docs/operations.md#backups); the slots, or `None`
/// for a shard that owns none and so needs no window.
pub async fn store_window_over_owned(
    pool: &AnyPool,
    since_ms: i64,
    until_ms: i64,
) -> Result<Option<SlotRange>, SlotClaimError> {
    let OwnedSlots::Range(owned) = stored_slots(pool).await?.0 else { return Ok(None) };
    store_window(pool, owned, since_ms, until_ms).await?;
    Ok(Some(owned))
}

fn columns(owned: OwnedSlots) -> (i64, i64, i64) {
    match owned {
        OwnedSlots::Nothing => (0, 0, 1),
        OwnedSlots::Range(range) => (i64::from(range.first().0), i64::from(range.last().0), 0),
    }
}

pub(crate) async fn stored_slots(pool: &AnyPool) -> Result<(OwnedSlots, u64), SlotClaimError> {
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

pub(crate) fn refusal(mut status: tonic::Status, why: &'static str, generation: u64) -> tonic::Status {
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

/// The refusal of a call for a slot the topology grants this shard while
/// its copy is not trusted (the database forgot since the move verified
/// it): nothing is read or written until the move copies it again.
fn held_refusal(slot: Slot, generation: u64) -> tonic::Status {
    refusal(
        tonic::Status::unavailable(format!(
            "slot {slot} is held on this shard until its move copies it again (the shard's database forgot rows \
             since): nothing was read or written; retry shortly, and finish the move with `pastebin ctl reshard`"
        )),
        "frozen",
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
    let (first_slot, last_slot, nothing) = columns(ownership.serves());
    let durability = pastebin_runtime::durability::current();
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
        colocated: false,
    }
}

/// The durability in a `Describe` answer; `None` when the shard has not read it.
pub fn described_durability(answer: &pb::ShardDescription) -> Option<pastebin_runtime::durability::Reported> {
    (!answer.durability.is_empty()).then(|| pastebin_runtime::durability::Reported {
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
    /// It serves both kinds for its slots on one database.
    pub colocated: bool,
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
    Ok(Described { owned, generation: answer.generation, frozen, colocated: answer.colocated })
}

fn span_of(answer: &pb::ShardDescription) -> pb::SlotSpan {
    pb::SlotSpan { first_slot: answer.first_slot, last_slot: answer.last_slot }
}

#[cfg(test)]
mod tests {
    use pastebin_core::{OwnedSlots, Slot, SlotRange};

    use super::*;

    fn range(first: u8, last: u8) -> OwnedSlots {
        OwnedSlots::Range(SlotRange::new(first, last).unwrap())
    }

    fn granted(owned: OwnedSlots) -> Option<Serving> {
        Some(Serving { owned, frozen: None, held: None })
    }

    /// The quorum test's double create: the source released 128-255 and
    /// deleted its copies, and its watch had not brought the cut-over yet.
    #[test]
    fn a_source_serves_nothing_it_released_while_its_grant_is_stale() {
        let released = Ownership { owned: range(0, 127), generation: 2, active: None, granted: granted(range(0, 255)) };
        assert_eq!(released.serves(), range(0, 127));
        assert!(released.check(Slot(200), true).is_err(), "no create for a slot given away");
        assert!(released.check(Slot(200), false).is_err(), "no read of rows deleted");
        assert!(released.check(Slot(100), true).is_ok());
    }

    #[test]
    fn a_grant_narrower_than_the_database_is_obeyed() {
        let restored = Ownership { owned: range(0, 255), generation: 1, active: None, granted: granted(range(0, 127)) };
        assert_eq!(restored.serves(), range(0, 127));
        let nothing =
            Ownership { owned: range(0, 255), generation: 1, active: None, granted: granted(OwnedSlots::Nothing) };
        assert_eq!(nothing.serves(), OwnedSlots::Nothing);
    }
}
