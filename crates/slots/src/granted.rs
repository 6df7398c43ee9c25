//! A shard under a topology (`--topology`, docs/design.md#ownership-on-etcd):
//! it serves only what the authority grants it, confirms at start that its
//! database has not forgotten since it last said so (the marker), and
//! follows every change of its grant by a watch. While the authority is
//! unreachable it keeps the grant it confirmed last: a grant changes only
//! through a move, and a move needs this shard's own answers (its freeze).

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use pastebin_core::{OwnedSlots, SlotRange};
use pastebin_topology::{change, patiently, Authority, ChangeError, Confirmation, Kind, Topology};
use sqlx::{AnyPool, Row};

use crate::shard_slots::{Resharding, ShardSlots, SlotClaimError};

/// How long a move's step waits for the topology store before it is
/// refused as unavailable (ctl waits and asks again).
const AUTHORIZE_PATIENCE: Duration = Duration::from_secs(10);

/// Where this shard's grant is decided, and the name it has there.
#[derive(Clone)]
pub struct Granted {
    pub authority: Arc<dyn Authority>,
    pub kind: Kind,
    /// The address routers dial this shard at, as the topology lists it.
    pub address: String,
    /// Held while the marker is written (database, then topology): a
    /// confirmation and a stamp never interleave.
    marking: Arc<tokio::sync::Mutex<()>>,
    /// The marker this shard last confirmed its database holds: a new
    /// connection that finds another is to a database that forgot
    /// ([`crate::failover`]).
    pub(crate) confirmed_marker: Arc<std::sync::Mutex<Option<String>>>,
}

impl Granted {
    pub fn new(authority: Arc<dyn Authority>, kind: Kind, address: String) -> Self {
        Self { authority, kind, address, marking: Arc::default(), confirmed_marker: Arc::default() }
    }

    fn confirmed(&self, marker: Option<String>) {
        *self.confirmed_marker.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = marker;
    }

    /// Whether the database behind `conn` holds the marker this shard last
    /// confirmed (or none was confirmed yet).
    pub(crate) async fn holds_the_confirmed_marker(&self, conn: &mut sqlx::AnyConnection) -> Result<bool, sqlx::Error> {
        let Some(expected) = self.confirmed_marker.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
        else {
            return Ok(true);
        };
        let row = sqlx::query("SELECT marker FROM shard_marker WHERE singleton = 1").fetch_optional(&mut *conn).await?;
        let stored: Option<String> = row.map(|row| row.try_get("marker")).transpose()?;
        Ok(stored.as_deref() == Some(expected.as_str()))
    }

    /// A linearizable read of the topology for a move call, which `allowed`
    /// judges: a shard under a topology takes no step of a move that the
    /// topology does not record (docs/design.md#ownership-on-etcd).
    pub async fn authorize(&self, allowed: impl FnOnce(&Topology) -> Result<(), String>) -> Result<(), tonic::Status> {
        // A member that just came back may refuse a connection or two while
        // the others answer: ask again for a while before refusing the step.
        let what = format!("the {} shard {} checks a move's step", self.kind, self.address);
        let read = patiently(&what, || async { Ok(self.authority.read(self.kind).await?) });
        let read = match tokio::time::timeout(AUTHORIZE_PATIENCE, read).await {
            Ok(Ok(read)) => read,
            Ok(Err(error)) => {
                return Err(tonic::Status::unavailable(format!("{error}: a move waits for the topology store")))
            }
            Err(_) => {
                return Err(tonic::Status::unavailable(format!(
                    "the topology store at {} did not answer within {AUTHORIZE_PATIENCE:?}: a move waits for it",
                    self.authority.describe()
                )))
            }
        };
        let topology = read.topology.ok_or_else(|| {
            tonic::Status::failed_precondition(format!(
                "there is no {} topology yet: run `pastebin ctl topology init` first",
                self.kind
            ))
        })?;
        allowed(&topology).map_err(tonic::Status::failed_precondition)
    }
}

impl ShardSlots {
    /// Starts a shard under a topology. Before `ctl topology init` there is
    /// none: the shard claims `asked` (or its stored range) as
    /// [`ShardSlots::claim`] does, which `init` reads; from then on the
    /// topology alone says what it owns, an `asked` that differs is refused, and a range its
    /// database says otherwise is logged and replaced. Waits for the
    /// authority, saying so, rather than start on a guess.
    pub async fn claim_granted(
        pool: &AnyPool,
        kind: pastebin_proto::shard::v1::ShardKind,
        granted: Granted,
        asked: Option<OwnedSlots>,
        now_ms: i64,
    ) -> Result<Self, SlotClaimError> {
        let slots = Self::claim_granted_unfollowed(pool, kind, granted.clone(), asked, now_ms).await?;
        tokio::spawn(follow(slots.clone(), pool.clone(), granted));
        Ok(slots)
    }

    /// [`ShardSlots::claim_granted`] without following the topology: the
    /// caller hands each topology its own watch yields to
    /// [`ShardSlots::follow_change`] (the deterministic simulation runs
    /// each one as one step on its simulated disk).
    pub async fn claim_granted_unfollowed(
        pool: &AnyPool,
        kind: pastebin_proto::shard::v1::ShardKind,
        granted: Granted,
        asked: Option<OwnedSlots>,
        now_ms: i64,
    ) -> Result<Self, SlotClaimError> {
        let what = format!("the {} shard {} starts", granted.kind, granted.address);
        let read = patiently(&what, || async { Ok(granted.authority.read(granted.kind).await?) }).await?;
        let slots = match &read.topology {
            None => {
                tracing::warn!(
                    topology = %granted.authority.describe(),
                    "no {} topology yet: serving the range in this shard's database until `pastebin ctl topology init`",
                    granted.kind
                );
                Self::claim(pool, kind, asked, Resharding::Refuse, now_ms).await?
            }
            Some(topology) => {
                let owned = topology.serving(&granted.address).owned;
                // The range it was first started with (a Compose file's) is
                // accepted while etcd still grants exactly that; after a move it
                // is refused, as a stale --slots is without a topology.
                if let Some(asked) = asked.filter(|asked| *asked != owned) {
                    return Err(SlotClaimError::GrantedElsewhere { asked, granted: owned });
                }
                // The database's range is this shard's record for its moves; a
                // move in progress here keeps it until the move ends it.
                let claimed = Self::claim(pool, kind, None, Resharding::Refuse, now_ms).await?;
                let stored = claimed.state.read().await.clone();
                if stored.active.is_some() {
                    claimed
                } else {
                    let slots = Self::claim(pool, kind, Some(owned), Resharding::Obey, now_ms).await?;
                    slots.given_away(stale_copies(stored.owned, topology, &granted.address));
                    slots.release_forgotten(topology, &granted).await?;
                    slots
                }
            }
        };
        let confirmed = confirm(pool, &granted, false).await?;
        if let Some(topology) = &confirmed {
            slots.obey(topology, &granted.address).await;
        }
        let mut slots = slots;
        slots.granted = Some(granted);
        Ok(slots)
    }

    /// A source whose database forgot the move after the cut-over (restored
    /// to before it recorded the move): its rows of the moving slots are
    /// copies of what the target holds as verified, but its release, and
    /// the token the target took with, are gone, so the move's own delete
    /// step can never run. While the target still holds what was verified,
    /// the topology records that the source is deleting (from then on the
    /// target's copy is the only one) and the copies are deleted as stale;
    /// `ctl reshard` then records the move done.
    async fn release_forgotten(&self, topology: &Topology, granted: &Granted) -> Result<(), SlotClaimError> {
        let forgotten = topology.moving.as_ref().filter(|moving| {
            moving.source == granted.address && matches!(moving.phase, pastebin_topology::Phase::Taken { .. })
        });
        let Some(moving) = forgotten else { return Ok(()) };
        if self.finished_move(&moving.id).await?.is_some() || topology.may_delete_copies(&moving.id).is_err() {
            return Ok(());
        }
        let what = format!("the {} shard {} records that it deletes its copies", granted.kind, granted.address);
        let id = moving.id.clone();
        patiently(&what, || {
            let id = id.clone();
            async move {
                change(&*granted.authority, granted.kind, move |topology| match &topology.moving {
                    Some(moving) if moving.id == id && !moving.deleting => topology.deleting(&id).map(Some),
                    _ => Ok(None),
                })
                .await
            }
        })
        .await?;
        tracing::warn!(
            move_id = %moving.id, slots = %moving.slots,
            "this shard's database forgot a move the topology cut over from it: its copies of the moved slots are deleted"
        );
        self.given_away([moving.slots]);
        Ok(())
    }

    /// Takes up one topology the watch yielded: confirms this shard's
    /// marker again if the topology has none or another than its
    /// database's (initialised after this start, or the database forgot),
    /// then serves its grant. Nothing for a shard not under a topology.
    pub async fn follow_change(&self, pool: &AnyPool, topology: &Topology) {
        let Some(granted) = self.granted.clone() else { return };
        let known = topology.grant(&granted.address).and_then(|grant| grant.marker.clone());
        if known.is_none() || known != stored_marker(pool).await.ok().flatten() {
            match confirm(pool, &granted, false).await {
                Ok(Some(confirmed)) => self.obey(&confirmed, &granted.address).await,
                Ok(None) => {}
                Err(error) => tracing::error!(%error, "cannot confirm this shard's grant"),
            }
            return;
        }
        self.obey(topology, &granted.address).await;
    }

    /// Serves what `topology` grants `address`: its slots, frozen or held as
    /// a move says. The range in its database stays its record for the
    /// handover's own steps, which the topology gates (`slot_moves`). Taking the lock exclusively waits for the writes in
    /// flight, so none lands after a freeze the topology recorded.
    async fn obey(&self, topology: &Topology, address: &str) {
        let serving = topology.serving(address);
        let now = pastebin_core::to_millis(pastebin_core::Clock::now(&pastebin_core::SystemClock));
        // Held: its copy is copied and verified again. Deleting: the source's
        // copies are going, so the copy it has is the only one (an ordinary
        // failover); either way its record goes back to importing, for the
        // take to be recorded here again.
        let deleting = |moving: &&pastebin_topology::Move| {
            moving.target == address
                && moving.deleting
                && matches!(moving.phase, pastebin_topology::Phase::Taken { .. })
        };
        let forgotten = topology.moving.as_ref().filter(|moving| serving.held.is_some() || deleting(moving));
        if let Some(moving) = forgotten {
            if let Err(error) = self.import_again(moving, now).await {
                tracing::error!(%error, "cannot record the move's copy again: the slots stay held");
            }
        }
        let active = self.state.read().await.active.as_ref().map(|active| active.identity.id.clone());
        if let Some(finished) = topology.finished.iter().find(|done| Some(&done.id) == active.as_ref()) {
            if let Err(error) = self.end_as_recorded(finished, topology, address, now).await {
                tracing::error!(%error, move_id = %finished.id, "cannot end a finished move's record here");
            }
        }
        let mut state = self.state.write().await;
        if state.granted != Some(serving) {
            tracing::info!(
                version = topology.version,
                owned = %serving.owned,
                frozen = ?serving.frozen.map(|r| r.to_string()),
                held = ?serving.held.map(|r| r.to_string()),
                "serving the topology's grant"
            );
        }
        state.granted = Some(serving);
        state.publish();
    }
}

/// The runs of `recorded` (what this shard's database says it holds) that
/// `topology` grants another shard: a database restored to before a move
/// gave them away holds stale copies of them. The slots of a move this
/// shard takes part in are never among them: that move's own steps decide
/// what its rows are.
pub(crate) fn stale_copies(recorded: OwnedSlots, topology: &Topology, address: &str) -> Vec<SlotRange> {
    let beyond = recorded.beyond(topology.serving(address).owned);
    match topology.moving.as_ref().filter(|moving| moving.involves(address)) {
        Some(moving) => beyond.into_iter().flat_map(|run| OwnedSlots::from(run).beyond(moving.slots.into())).collect(),
        None => beyond,
    }
}

/// A target's copy was verified: a fresh marker, in its database, then in
/// the topology; a database that forgets the copy forgets it too.
pub async fn stamp(pool: &AnyPool, granted: &Granted) -> Result<String, SlotClaimError> {
    confirm(pool, granted, true).await?;
    Ok(stored_marker(pool).await?.expect("stamped just now"))
}

/// Confirms this shard's marker against the topology: if its database
/// holds another one (or none), or `fresh_anyway`, a fresh marker is
/// written to the database first, then to the topology. `None` while there
/// is no topology.
async fn confirm(pool: &AnyPool, granted: &Granted, fresh_anyway: bool) -> Result<Option<Topology>, SlotClaimError> {
    let _marking = granted.marking.lock().await;
    let what = format!("the {} shard {} confirms its grant", granted.kind, granted.address);
    let mut marker = if fresh_anyway { None } else { stored_marker(pool).await? };
    let fresh = uuid::Uuid::new_v4().simple().to_string();
    loop {
        let read = patiently(&what, || async { Ok(granted.authority.read(granted.kind).await?) }).await?;
        let Some(topology) = read.topology else { return Ok(None) };
        match topology.confirm(&granted.address, marker.as_deref(), &fresh) {
            Confirmation::Confirmed => {
                granted.confirmed(marker);
                return Ok(Some(topology));
            }
            Confirmation::Forgot { .. } => {
                if marker.as_deref() != Some(fresh.as_str()) {
                    match topology.grant(&granted.address).and_then(|grant| grant.marker.as_deref()) {
                        None => tracing::info!("first start under this topology: drawing this shard's marker"),
                        Some(_) if fresh_anyway => tracing::info!("a verified copy: drawing a fresh marker"),
                        Some(_) => tracing::warn!(
                            "this shard's database does not hold the marker the topology has for it: it forgot \
                             commits (a restore, a new volume, a standby promoted without the last ones); a fresh \
                             marker voids what a move verified here"
                        ),
                    }
                    store_marker(pool, &fresh).await?;
                    marker = Some(fresh.clone());
                }
            }
        }
        let (address, stored) = (granted.address.clone(), fresh.clone());
        let decided = patiently(&what, || {
            let (address, stored) = (address.clone(), stored.clone());
            async move {
                change(&*granted.authority, granted.kind, move |topology| {
                    Ok(match topology.confirm(&address, Some(&stored), &stored) {
                        Confirmation::Confirmed => None,
                        Confirmation::Forgot { next, .. } => Some(*next),
                    })
                })
                .await
            }
        })
        .await;
        match decided {
            Ok(topology) => {
                granted.confirmed(Some(fresh));
                return Ok(Some(topology));
            }
            // The topology vanished between the read and the change: read again.
            Err(ChangeError::NotInitialised(_)) => continue,
            Err(error) => return Err(error.into()),
        }
    }
}

/// Follows the topology for as long as the shard runs; a lost watch is
/// watched again, and the grant confirmed last stays meanwhile.
async fn follow(slots: ShardSlots, pool: AnyPool, granted: Granted) {
    let mut lost_since: Option<tokio::time::Instant> = None;
    loop {
        match granted.authority.watch(granted.kind).await {
            Ok(mut changes) => {
                while let Some(changed) = changes.next().await {
                    let Ok(topology) = changed else { break };
                    if lost_since.take().is_some() {
                        tracing::info!("the topology store answers again");
                    }
                    slots.follow_change(&pool, &topology).await;
                }
            }
            Err(error) if lost_since.is_none() => {
                tracing::warn!(%error, "cannot watch the topology: serving the grant confirmed last");
            }
            Err(_) => {}
        }
        lost_since.get_or_insert_with(tokio::time::Instant::now);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn stored_marker(pool: &AnyPool) -> Result<Option<String>, sqlx::Error> {
    let row = sqlx::query("SELECT marker FROM shard_marker WHERE singleton = 1").fetch_optional(pool).await?;
    row.map(|row| row.try_get("marker")).transpose()
}

async fn store_marker(pool: &AnyPool, marker: &str) -> Result<(), sqlx::Error> {
    let now = pastebin_core::to_millis(pastebin_core::Clock::now(&pastebin_core::SystemClock));
    sqlx::query(
        "INSERT INTO shard_marker (singleton, marker, written_at) VALUES (1, $1, $2)
         ON CONFLICT (singleton) DO UPDATE SET marker = excluded.marker, written_at = excluded.written_at",
    )
    .bind(marker)
    .bind(now)
    .execute(pool)
    .await?;
    Ok(())
}
