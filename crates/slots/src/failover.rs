//! A shard whose PostgreSQL database failed over under it
//! (docs/design.md#ownership-on-etcd): the server found again may be a
//! standby promoted without the last commits, or a restore, so what the
//! shard read of its range, its move and its marker may no longer be what
//! its database holds. A server found behind the same address may not even
//! break a connection: under a topology every new connection first checks
//! that its database holds the marker the shard last confirmed, and one that
//! does not counts as a loss of the link. From the moment the link is lost
//! until the shard has
//! read its database again and confirmed its marker against the topology,
//! it serves nothing; then it serves what it confirmed.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, OnceLock,
    },
    time::Duration,
};

use pastebin_runtime::{db::Database, reconnect::Failovers};
use pastebin_topology::patiently;

use crate::shard_slots::{active_move, refusal, stored_slots, ShardSlots, SlotClaimError};

tokio::task_local! {
    /// Set in the task that confirms the shard again: its connections may
    /// reach a database that forgot, which is what it is there to find out.
    static CONFIRMING: bool;
}

/// The losses of the database link this shard has confirmed itself after.
#[derive(Default)]
pub(crate) struct FailoverGate {
    /// The link's count of losses, once the shard watches it.
    losses: OnceLock<Arc<AtomicU64>>,
    confirmed: AtomicU64,
}

impl FailoverGate {
    /// Refuses a call, retryably and before anything is read or written,
    /// while the link was lost since the shard last confirmed itself.
    pub(crate) fn check(&self, generation: u64) -> Result<(), tonic::Status> {
        let Some(losses) = self.losses.get() else { return Ok(()) };
        if losses.load(Ordering::SeqCst) == self.confirmed.load(Ordering::SeqCst) {
            return Ok(());
        }
        Err(refusal(
            tonic::Status::unavailable(
                "this shard's database failed over: it reads its slots again and confirms its grant before it \
                 serves; nothing was read or written, retry shortly",
            ),
            "frozen",
            generation,
        ))
    }
}

impl ShardSlots {
    /// Under a topology, confirms this shard again after each loss of its
    /// database link (PostgreSQL only: a SQLite file does not change under
    /// the process). Without one the database is the shard's only record,
    /// and a failover that lost commits is adopt's and reconcile's
    /// (docs/design.md#adopting-after-a-k-loss).
    pub fn confirm_after_failovers(&self, database: &Database) {
        let Some(granted) = self.granted.clone() else { return };
        let Some(Failovers { losses, mut link }) = database.failovers() else { return };
        database.check_new_connections(Arc::new(move |conn| {
            let granted = granted.clone();
            // The confirmation itself reads the other database, and writes it a fresh marker.
            let confirming = CONFIRMING.try_with(|confirming| *confirming).unwrap_or(false);
            Box::pin(async move { Ok(confirming || granted.holds_the_confirmed_marker(conn).await?) })
        }));
        self.failover.confirmed.store(losses.load(Ordering::SeqCst), Ordering::SeqCst);
        if self.failover.losses.set(losses.clone()).is_err() {
            return;
        }
        let slots = self.clone();
        tokio::spawn(async move {
            loop {
                let seen = losses.load(Ordering::SeqCst);
                let found_again = link.borrow_and_update().is_none();
                if seen != slots.failover.confirmed.load(Ordering::SeqCst) && found_again {
                    match CONFIRMING.scope(true, slots.confirm_again()).await {
                        Ok(()) => slots.failover.confirmed.store(seen, Ordering::SeqCst),
                        Err(error) => {
                            tracing::warn!(%error, "cannot confirm this shard again after its database failed over; retrying");
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    }
                    continue;
                }
                if link.changed().await.is_err() {
                    return;
                }
            }
        });
    }

    /// Takes what the database holds now as this shard's record (its range
    /// and its move), then, under a topology, confirms its marker and serves
    /// what the topology grants: a database that forgot a take holds the
    /// slots until the move copies them again.
    async fn confirm_again(&self) -> Result<(), SlotClaimError> {
        let ((owned, generation), active) = (stored_slots(&self.pool).await?, active_move(&self.pool).await?);
        {
            let mut state = self.state.write().await;
            if owned != state.owned || active != state.active {
                tracing::warn!(
                    database = %owned, memory = %state.owned,
                    active = ?active.as_ref().map(|a| (a.identity.id.as_str(), a.step.as_str())),
                    "after a failover the database holds another range or step of a move than this shard read: \
                     following the database"
                );
                state.owned = owned;
                state.active = active;
                state.generation = state.generation.max(generation) + 1;
                state.publish();
            }
        }
        if let Some(granted) = self.granted.clone() {
            let what = format!("the {} shard {} confirms its grant after a failover", granted.kind, granted.address);
            let read = patiently(&what, || async { Ok(granted.authority.read(granted.kind).await?) }).await?;
            if let Some(topology) = read.topology {
                self.follow_change(&self.pool, &topology).await;
            }
        }
        tracing::info!("confirmed this shard again after its database failed over");
        Ok(())
    }
}
