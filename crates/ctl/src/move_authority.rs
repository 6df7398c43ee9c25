//! A move under a topology (`--topology`, docs/design.md#ownership-on-etcd):
//! ctl records each step of the move in the authority before the shards
//! take it, and the shards take only the steps recorded there. The cut-over
//! is one write of the topology that compares what was read, the digest of
//! the target's verified copy and the target's marker; the source deletes
//! its copies only once that write is there. ctl says `done` or `abandoned`
//! only after reading it back.

use std::sync::Arc;

use pastebin_handover::{Identity, Step};
use pastebin_proto::shard::v1 as pb;
use pastebin_topology::{
    change, patiently, Authority, ChangeError, Kind as TopologyKind, Move, Phase, Refused, Topology,
};
use sha2::{Digest, Sha256};

use crate::{reshard::Kind, CtlError};

pub(crate) struct MoveAuthority {
    authority: Arc<dyn Authority>,
    kind: TopologyKind,
}

/// Where the topology leaves the move a run is about.
pub(crate) enum Recorded {
    /// Run (or go on with) this move.
    Run(Identity),
    /// Finished, as the topology says: nothing to do.
    Finished(Move),
}

impl MoveAuthority {
    pub(crate) fn new(authority: Arc<dyn Authority>, kind: Kind) -> Self {
        let kind = match kind {
            Kind::Key => TopologyKind::Key,
            Kind::Paste => TopologyKind::Paste,
        };
        Self { authority, kind }
    }

    /// The topology as it is now; waits, saying so, while etcd does not
    /// answer: a move takes no step on a guess.
    pub(crate) async fn topology(&self) -> Result<Topology, CtlError> {
        let read = patiently(WAITS, || async { Ok(self.authority.read(self.kind).await?) }).await.map_err(failed)?;
        read.topology.ok_or_else(|| failed(ChangeError::NotInitialised(self.kind)))
    }

    /// The move this run is about, as the topology has it: the one in
    /// progress, which the command must name exactly; a finished one it
    /// names; or `asked`, recorded now. `in_shards` says whether `asked` is
    /// a move the shards already recorded (else it is new).
    pub(crate) async fn record(&self, asked: Identity, in_shards: bool, abandon: bool) -> Result<Recorded, CtlError> {
        let topology = self.topology().await?;
        if let Some(moving) = &topology.moving {
            if moving.id == asked.id || (!in_shards && moving.names(asked.slots, &asked.source, &asked.target)) {
                return Ok(Recorded::Run(Identity { id: moving.id.clone(), ..asked }));
            }
            return Err(CtlError::Failed(format!(
                "slots {} are being moved from {} to {} ({moving}), not slots {} from {} to {}: rerun with --from {} \
                 --to {} --slots {}, or add --abandon to undo it",
                moving.slots,
                moving.source,
                moving.target,
                asked.slots,
                asked.source,
                asked.target,
                moving.source,
                moving.target,
                moving.slots
            )));
        }
        if let Some(done) = topology.finished_like(asked.slots, &asked.source, &asked.target) {
            if (done.phase == Phase::Done) != abandon && (done.id == asked.id || !in_shards) {
                return Ok(Recorded::Finished(done.clone()));
            }
        }
        if in_shards {
            return Err(CtlError::Failed(format!(
                "the shards are in move {} but the topology records no move: it was begun without --topology; \
                 finish or --abandon it without --topology first",
                asked.id
            )));
        }
        if abandon {
            return Err(CtlError::Failed("no move is in progress: nothing to abandon".into()));
        }
        let (id, slots, source, target) = (asked.id.clone(), asked.slots, asked.source.clone(), asked.target.clone());
        self.change(move |topology| topology.record_move(&id, slots, &source, &target).map(Some)).await?;
        Ok(Recorded::Run(asked))
    }

    /// The move between `source` and `target` (of `slots`, if named) the
    /// topology records as copying when neither shard recorded it yet: a
    /// run stopped between its record in the topology and its first step
    /// on a shard. `--resume` finishes it and `--abandon` undoes it.
    pub(crate) async fn unrecorded(
        &self,
        source: &str,
        target: &str,
        slots: Option<pastebin_core::SlotRange>,
    ) -> Result<Option<Identity>, CtlError> {
        let topology = self.topology().await?;
        Ok(topology
            .moving
            .filter(|moving| moving.phase == Phase::Copying && moving.source == source && moving.target == target)
            .filter(|moving| slots.is_none_or(|slots| slots == moving.slots))
            .map(|moving| Identity {
                id: moving.id,
                slots: moving.slots,
                source: moving.source,
                target: moving.target,
            }))
    }

    /// The phase of move `id` now, `None` once it is no longer in progress.
    pub(crate) async fn phase(&self, id: &str) -> Result<Option<Phase>, CtlError> {
        let topology = self.topology().await?;
        Ok(topology.moving.filter(|moving| moving.id == id).map(|moving| moving.phase))
    }

    pub(crate) async fn freeze(&self, id: &str) -> Result<(), CtlError> {
        self.change(|topology| topology.freeze(id).map(Some)).await
    }

    /// The target's copy, verified at `marker`, is `digest`; then the
    /// cut-over, on that same digest.
    pub(crate) async fn cut_over(&self, id: &str, digest: &str, marker: &str) -> Result<(), CtlError> {
        self.change(|topology| match &topology.moving {
            Some(moving) if moving.id == id && matches!(moving.phase, Phase::Taken { .. }) => Ok(None),
            _ => topology.verified(id, digest, marker).map(Some),
        })
        .await?;
        self.change(|topology| match &topology.moving {
            Some(moving) if moving.id == id && matches!(moving.phase, Phase::Taken { .. }) => Ok(None),
            _ => topology.take(id, digest, None).map(Some),
        })
        .await
    }

    /// Whether the target forgot its copy since the cut-over (its marker
    /// changed): then it is copied and verified again before anything else.
    pub(crate) async fn target_forgot(&self, id: &str) -> Result<bool, CtlError> {
        let topology = self.topology().await?;
        Ok(topology.moving.as_ref().is_some_and(|moving| {
            moving.id == id
                && matches!(moving.phase, Phase::Taken { .. })
                && topology.serving(&moving.target).held.is_some()
        }))
    }

    /// The target's copy, made again after it forgot, matched: `digest` at
    /// its fresh `marker`.
    pub(crate) async fn taken_again(&self, id: &str, digest: &str, marker: &str) -> Result<(), CtlError> {
        self.change(|topology| topology.taken_again(id, digest, marker).map(Some)).await
    }

    /// The source is about to delete its copies: from then on the target's
    /// copy is the only one (a target that forgets is not copied again).
    pub(crate) async fn deleting(&self, id: &str) -> Result<(), CtlError> {
        self.change(|topology| match &topology.moving {
            Some(moving) if moving.id == id && moving.deleting => Ok(None),
            Some(moving) if moving.id == id => topology.deleting(id).map(Some),
            _ => Ok(None),
        })
        .await
    }

    /// The source deleted its copies: the move is done, as read back.
    pub(crate) async fn finish(&self, id: &str) -> Result<(), CtlError> {
        self.change(|topology| match &topology.moving {
            Some(moving) if moving.id == id => topology.finish(id).map(Some),
            _ => Ok(None),
        })
        .await?;
        self.read_back(id, Phase::Done).await
    }

    /// An abandon begins: refused once the slots were taken.
    pub(crate) async fn abandon(&self, id: &str) -> Result<(), CtlError> {
        self.change(|topology| match &topology.moving {
            Some(moving) if moving.id == id && moving.phase == Phase::Abandoning => Ok(None),
            _ => topology.abandon(id).map(Some),
        })
        .await
    }

    /// The target dropped its copies: abandoned, as read back.
    pub(crate) async fn abandoned(&self, id: &str) -> Result<(), CtlError> {
        self.change(|topology| match &topology.moving {
            Some(moving) if moving.id == id => topology.abandoned(id).map(Some),
            _ => Ok(None),
        })
        .await?;
        self.read_back(id, Phase::Abandoned).await
    }

    /// Both shards finished move `id` as `step` (done, abandoned): so must
    /// the topology, before ctl says it. A run stopped between the shards'
    /// last step and the topology's record left it in progress there; the
    /// topology's own checks decide whether it may end so (a finish still
    /// needs the take recorded and the target's copy as verified).
    pub(crate) async fn finished_as(&self, id: &str, step: Step) -> Result<(), CtlError> {
        match step {
            Step::Done => self.finish(id).await,
            _ => {
                // Neither shard recorded the abandon's start, or a run stopped before the topology did.
                if self.phase(id).await?.is_some_and(|phase| phase != Phase::Abandoning) {
                    self.abandon(id).await?;
                }
                self.abandoned(id).await
            }
        }
    }

    /// Whether move `id` is cut over and its source is deleting its
    /// copies: the topology's record of the take stands for the source's.
    pub(crate) async fn taken_and_deleting(&self, id: &str) -> Result<bool, CtlError> {
        Ok(self
            .moving()
            .await?
            .is_some_and(|moving| moving.id == id && moving.deleting && matches!(moving.phase, Phase::Taken { .. })))
    }

    /// The move the topology has in progress, if any.
    pub(crate) async fn moving(&self) -> Result<Option<Move>, CtlError> {
        Ok(self.topology().await?.moving)
    }

    async fn read_back(&self, id: &str, phase: Phase) -> Result<(), CtlError> {
        let topology = self.topology().await?;
        if topology.finished.iter().any(|done| done.id == id && done.phase == phase) {
            Ok(())
        } else {
            Err(CtlError::Failed(format!(
                "the topology does not record move {id} as {}: rerun the same command",
                phase.name()
            )))
        }
    }

    /// Stores what `decide` makes of the topology, waiting while etcd does
    /// not answer. A change whose answer was lost is decided again from
    /// what etcd holds then, so a step it already took is seen as taken.
    async fn change(&self, decide: impl FnMut(&Topology) -> Result<Option<Topology>, Refused>) -> Result<(), CtlError> {
        let decide = std::cell::RefCell::new(decide);
        let attempt = || change(&*self.authority, self.kind, |topology: &Topology| (decide.borrow_mut())(topology));
        patiently(WAITS, attempt).await.map(drop).map_err(failed)
    }
}

/// What a move says while it waits for etcd.
const WAITS: &str = "ctl reshard: the move's next step";

fn failed(error: ChangeError) -> CtlError {
    match error {
        ChangeError::Authority(error) => CtlError::Unreachable(format!("{error}: rerun once it answers")),
        other => CtlError::Failed(other.to_string()),
    }
}

/// One digest of a shard's rows of the moving slots: every state's count
/// and checksum, as `Digest` answers them.
pub(crate) fn copy_digest(states: &[pb::StateDigest]) -> String {
    let mut hasher = Sha256::new();
    for state in states {
        hasher.update(state.state.as_bytes());
        hasher.update(state.rows.to_be_bytes());
        hasher.update(&state.checksum);
    }
    hex::encode(hasher.finalize())
}
