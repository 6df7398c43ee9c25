//! The operator moving slots between the two K shards: a turmoil host (`ctl`)
//! that runs the real `ctl reshard` driver over the simulated network for
//! each move the nemesis asks for, and reruns it after any failure, as an
//! operator would. The driver keeps nothing of its own: a crash of this host
//! loses only the running command, and the rerun resumes the move from what
//! the shards recorded (docs/design.md#moving-slots). What the operator
//! remembers, which moves it was asked for and which ones `ctl` said were
//! done, lives outside the host, as a person outlives a process.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex},
    time::Duration,
};

use pastebin_core::SlotRange;
use pastebin_ctl::{
    reshard::{Kind, ReshardArgs},
    CtlError,
};

use pastebin_proto::shard::v1::{slot_moves_client::SlotMovesClient, MoveStatusRequest, MoveStatusResponse, ShardKind};
use pastebin_slots::shard_slots::described;

use crate::{clock::SimTime, net};

/// The ctl host's name.
pub const CTL: &str = "ctl";

/// Each step's call is bounded like the gateway's budget, scaled down as the
/// sweeper's thresholds are: a call lost in a partition fails soon and is
/// rerun, which is the case the steps' idempotence exists for.
const STEP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the operator waits before rerunning a command that failed.
const RERUN_AFTER: Duration = Duration::from_millis(300);

/// One `ctl reshard --kind key --from … --to … --slots …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotsMove {
    pub from: &'static str,
    pub to: &'static str,
    pub slots: SlotRange,
    /// Rows per page of the copy, small so a copy takes many steps.
    pub batch: u32,
}

/// What the operator saw, for the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// `ctl` said done.
    Moved(SlotsMove),
    /// `ctl` stopped before the end; the operator reruns it.
    Stopped { slots: SlotRange, exit: &'static str },
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Seen::Moved(moved) => write!(f, "moved slots {} from {} to {}", moved.slots, moved.from, moved.to),
            Seen::Stopped { slots, exit } => write!(f, "reshard of slots {slots} stopped ({exit}); rerunning it"),
        }
    }
}

#[derive(Default)]
struct Book {
    /// The moves asked for and not yet done; the first is the one being run.
    asked: VecDeque<SlotsMove>,
    seen: Vec<(Duration, Seen)>,
    /// Stops that no fault explains: `ctl` refused or failed, not "unreachable".
    findings: Vec<String>,
}

/// The operator's memory, shared by the nemesis (which asks for moves) and
/// the ctl host (which runs them). Clones share it.
#[derive(Clone, Default)]
pub struct Operator(Arc<Mutex<Book>>);

impl Operator {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn ask(&self, to_move: SlotsMove) {
        self.book().asked.push_back(to_move);
    }

    /// Whether every move asked for is done.
    pub fn idle(&self) -> bool {
        self.book().asked.is_empty()
    }

    pub fn seen(&self) -> Vec<(Duration, Seen)> {
        self.book().seen.clone()
    }

    pub fn findings(&self) -> Vec<String> {
        self.book().findings.clone()
    }

    fn next(&self) -> Option<SlotsMove> {
        self.book().asked.front().cloned()
    }

    fn done(&self, at: Duration, moved: SlotsMove) {
        let mut book = self.book();
        book.asked.pop_front();
        book.seen.push((at, Seen::Moved(moved)));
    }

    fn stopped(&self, at: Duration, slots: SlotRange, error: &CtlError) {
        let exit = match error {
            CtlError::Unreachable(_) => "unreachable",
            CtlError::Usage(_) => "usage",
            CtlError::Failed(_) => "failed",
        };
        let mut book = self.book();
        book.seen.push((at, Seen::Stopped { slots, exit }));
        if !matches!(error, CtlError::Unreachable(_)) {
            book.findings.push(format!("ctl reshard of slots {slots} stopped: {error}"));
        }
    }
}

/// The ctl host's software: runs the first move asked for until `ctl`
/// says done, then the next. Started again after a crash, it reruns the
/// move it was running.
pub async fn run_operator(operator: Operator, time: SimTime) -> anyhow::Result<()> {
    loop {
        let Some(to_move) = operator.next() else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let args = ReshardArgs {
            kind: Kind::Key,
            from: format!("{}:{}", to_move.from, net::PORT),
            to: format!("{}:{}", to_move.to, net::PORT),
            slots: Some(to_move.slots),
            resume: false,
            status: false,
            abandon: false,
            batch: to_move.batch,
            lease_secs: 10,
        };
        let channels = (net::channel(to_move.from)?, net::channel(to_move.to)?);
        let (mut out, mut err) = (std::io::sink(), std::io::sink());
        let elapsed = || Duration::from_millis(u64::try_from(time.elapsed_ms()).unwrap_or(0));
        let error = match pastebin_ctl::reshard::run_over(&args, channels, STEP_TIMEOUT, &mut out, &mut err).await {
            Ok(_) => {
                operator.done(elapsed(), to_move);
                continue;
            }
            // The run before a crash finished the move, and the reply to its
            // last step was lost: the rerun refuses, the status says done.
            Err(error @ CtlError::Failed(_)) => match already_moved(&to_move).await {
                Some(true) => {
                    operator.done(elapsed(), to_move);
                    continue;
                }
                // A shard did not answer the status: the next rerun tells.
                None => CtlError::Unreachable(error.to_string()),
                Some(false) => error,
            },
            Err(error) => error,
        };
        operator.stopped(elapsed(), to_move.slots, &error);
        tokio::time::sleep(RERUN_AFTER).await;
    }
}

/// What `ctl reshard --status` would show the operator: the target owns
/// every slot of the move, the source none, and neither is in a move
/// (`None`: a shard did not answer).
async fn already_moved(to_move: &SlotsMove) -> Option<bool> {
    let (Ok(source), Ok(target)) = (move_status(to_move.from).await, move_status(to_move.to).await) else {
        return None;
    };
    let owns = |status: &MoveStatusResponse, slot| {
        let shard = status.shard.clone().unwrap_or_default();
        described(ShardKind::Key, &shard).is_ok_and(|d| d.owned.contains(slot))
    };
    let idle = source.r#move.is_none() && target.r#move.is_none();
    Some(idle && to_move.slots.slots().all(|slot| owns(&target, slot) && !owns(&source, slot)))
}

async fn move_status(host: &str) -> anyhow::Result<MoveStatusResponse> {
    let mut client = SlotMovesClient::new(net::channel(host)?);
    let mut request = tonic::Request::new(MoveStatusRequest::default());
    request.set_timeout(STEP_TIMEOUT);
    Ok(client.move_status(request).await?.into_inner())
}
