//! `pastebin ctl reshard`: moves a slot range from one K (or P) shard to
//! another while gateways and sweepers keep running
//! (docs/design.md#moving-slots, docs/operations.md#moving-slots).
//!
//! The command keeps no state of its own: every step is recorded by the
//! shards before they answer, and `pastebin_handover::next` reads from both
//! shards' records which step comes next, so a rerun (or `--resume`) after a
//! crash of ctl or of a shard goes on where the move stands; `--abandon`
//! undoes it if the source has not given the slots up yet.
//!
//! Every call names the whole move (id, slots, source, target) and this
//! run's epoch: a shard refuses a call naming another move, peer or slots
//! (a typo in `--to` after a crash is refused, with what the shards have),
//! and a call of an older run. Each run takes a new epoch, holds its lease
//! by a heartbeat, and waits for (or is refused by) another live run's.
//!
//! 1. source: PrepareExport, target: PrepareImport (both record the move;
//!    the source still serves the slots and records the rows it changes;
//!    the source first, so that a rerun naming another target is refused);
//! 2. copy the bulk of the slots' rows, page by page (ExportRows →
//!    ImportRows), while creates for them go on; then copy again what the
//!    source changed meanwhile (ChangedRows) and compare every row
//!    (RowHashes on both sides);
//! 3. source: Freeze (writes for the slots refused as "not executed");
//! 4. catch up (the rows changed since, or every row that differs when the
//!    source's record is incomplete) and verify them, hash for hash;
//! 5. source: Release (it no longer owns the slots; its record is the
//!    receipt);
//! 6. target: Take, on that receipt (it owns them; creates go on there);
//! 7. source: DeleteMoved, page by page, on the target's record of the take.

use std::{
    collections::{BTreeMap, HashMap},
    io::Write,
    time::Duration,
};

use pastebin_core::{OwnedSlots, SlotRange};
use pastebin_handover::{refusal::check_asked, Identity, Next, Record, Role, Step};
use pastebin_proto::shard::v1::{self as pb, slot_moves_client::SlotMovesClient};
use pastebin_runtime::failpoints;
use pastebin_slots::shard_slots::{described, move_from_pb, move_to_pb, span};
use pastebin_topology::Phase;
use tonic::transport::Channel;

use crate::{
    move_authority::{copy_digest, MoveAuthority, Recorded},
    progress::{ProgressTo, RowProgress},
    CtlError, EndpointArgs, Exit,
};

/// Crash points between the steps, for the crash tests (`PASTEBIN_FAILPOINTS`).
pub mod failpoint {
    /// After the source recorded the move, before the target did.
    pub const AFTER_SOURCE_RECORDED: &str = "reshard_after_source_recorded";
    pub const AFTER_PREPARE: &str = "reshard_after_prepare";
    /// After the first page of the bulk copy was imported.
    pub const MID_COPY: &str = "reshard_mid_copy";
    pub const AFTER_COPY: &str = "reshard_after_copy";
    pub const AFTER_FREEZE: &str = "reshard_after_freeze";
    /// After the rows changed since the copy were copied again, before the verification.
    pub const AFTER_CATCH_UP: &str = "reshard_after_catch_up";
    pub const AFTER_RELEASE: &str = "reshard_after_release";
    pub const AFTER_TAKE: &str = "reshard_after_take";
    /// After the first page of the source's copies was deleted.
    pub const MID_CLEANUP: &str = "reshard_mid_cleanup";
    /// A page was exported and is not imported yet (not in [`ALL`]: a wait
    /// point, to stage a run that is taken over while it holds a page).
    pub const BEFORE_IMPORT: &str = "reshard_before_import";
    /// After the first call of an abandon (not in [`ALL`]).
    pub const MID_ABANDON: &str = "reshard_mid_abandon";
    pub const ALL: [&str; 9] = [
        AFTER_SOURCE_RECORDED,
        AFTER_PREPARE,
        MID_COPY,
        AFTER_COPY,
        AFTER_FREEZE,
        AFTER_CATCH_UP,
        AFTER_RELEASE,
        AFTER_TAKE,
        MID_CLEANUP,
    ];
}

/// `ctl reshard --help`'s list of the operator's mistakes it refuses
/// (docs/operations.md, "The mistakes it refuses").
pub const MISTAKES: &str = "\
Mistakes it refuses (nothing changes):
  a wrong --to, --from or --slots, or --from/--to swapped, while a move is in progress:
      `slots 128-255 are being moved from A to B (move ...), not to C: rerun with --to B, or add --abandon`
  a second run of a move while the first is alive (it waits one --lease-secs first):
      `ctl run ... (pid ...) is still moving these slots ...: let it finish, or stop it ...` (exit 3)
  a run that was taken over by a newer one: `... another `ctl reshard` run took this move over; this one stops`
  --abandon after the source gave the slots up: `... can no longer be abandoned: rerun without --abandon`
  an abandon that stopped half-way is finished by any rerun (--abandon, --resume or the move itself), never taken
  a --to of the other kind: `the target ... is a paste shard, not a key shard` (exit 2)
A rerun of a move that finished prints `... is already done on both shards: nothing to do` and exits 0.";

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// Key service shards (K).
    Key,
    /// Paste service shards (P).
    Paste,
}

impl Kind {
    pub fn shard_kind(self) -> pb::ShardKind {
        match self {
            Kind::Key => pb::ShardKind::Key,
            Kind::Paste => pb::ShardKind::Paste,
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Kind::Key => "key",
            Kind::Paste => "paste",
        })
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct ReshardArgs {
    /// Which kind of shard the slots move between.
    #[arg(long, value_enum, help_heading = "Required")]
    pub kind: Kind,
    /// HOST:PORT of the shard that owns the slots now, as the gateways and
    /// sweepers list it (--key-shards or --paste-shards, which ctl reads too).
    #[arg(long, value_name = "HOST:PORT", help_heading = "Required")]
    pub from: String,
    /// HOST:PORT of the shard that will own them, as the callers list it: one
    /// that owns nothing (`--slots none`) or the run next to them. A shard
    /// the lists do not name is refused.
    #[arg(long, value_name = "HOST:PORT", help_heading = "Required")]
    pub to: String,
    /// FIRST-LAST: the slots to move, at one end of the source's range.
    /// Not needed to resume a move.
    #[arg(long)]
    pub slots: Option<SlotRange>,
    /// Finish the move in progress between --from and --to (a rerun does the same).
    #[arg(long, conflicts_with_all = ["status", "abandon"])]
    pub resume: bool,
    /// Print both shards' ranges and the move in progress, and change nothing.
    #[arg(long, conflicts_with = "abandon")]
    pub status: bool,
    /// Undo the move in progress, if the source has not given the slots up yet.
    #[arg(long)]
    pub abandon: bool,
    /// Move without the topology store: the two shards' own records decide
    /// each step. That survives crashes and reruns but not a shard database
    /// that forgets commits (a restore, a new volume, a standby promoted
    /// without the last commits): only for a deployment without etcd.
    #[arg(long)]
    pub without_topology: bool,
    /// Rows per page of the copy.
    #[arg(long, help_heading = "Tuning", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=5000))]
    pub batch: u32,
    /// How long this run's lease on the move lasts without a heartbeat: a
    /// run that died holds the move this long, and a second run waits that
    /// long for it before it is refused.
    #[arg(long, help_heading = "Tuning", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=600))]
    pub lease_secs: u64,
}

/// The shortest deadline of one step's call, whatever `--timeout-secs`
/// says: a freeze waits for the writes in flight, and a prepare, a digest or
/// a page of deletes reads the whole range on a busy database. A shard that
/// is down still fails at once (the connection is refused).
const MIN_STEP_SECS: u64 = 30;

/// One end of the move.
struct End {
    name: &'static str,
    address: String,
    client: SlotMovesClient<Channel>,
    timeout: Duration,
}

/// A shard's answer to `MoveStatus`, checked.
struct Status {
    owned: OwnedSlots,
    generation: u64,
    frozen: Option<SlotRange>,
    /// The move in progress here.
    active: Option<Record>,
    /// The last move finished here.
    last: Option<Record>,
    now_ms: i64,
}

impl Status {
    /// What this shard recorded of move `id`, in progress or finished.
    fn of(&self, id: &str) -> Option<&Record> {
        self.active.iter().chain(&self.last).find(|record| record.identity.id == id)
    }
}

impl End {
    fn connect(name: &'static str, address: &str, args: &EndpointArgs) -> Result<Self, CtlError> {
        let tls = args.tls.load().map_err(|error| CtlError::Usage(error.to_string()))?;
        let channel =
            pastebin_shards::channel(address, tls.as_ref()).map_err(|error| CtlError::Usage(error.to_string()))?;
        Ok(Self::over(name, address, channel, Duration::from_secs(args.timeout_secs.max(MIN_STEP_SECS))))
    }

    fn over(name: &'static str, address: &str, channel: Channel, timeout: Duration) -> Self {
        Self { name, address: address.trim().to_owned(), client: SlotMovesClient::new(channel), timeout }
    }

    fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        request.set_timeout(self.timeout);
        request
    }

    fn failed(&self, step: &str, status: tonic::Status) -> CtlError {
        let what = format!("{step} on the {} {}: {}", self.name, self.address, status.message());
        match status.code() {
            // A call that outlived its timeout answers CANCELLED ("Timeout expired"): it may have run.
            tonic::Code::Unavailable
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Cancelled
            | tonic::Code::Unknown => {
                CtlError::Unreachable(format!("{what}; nothing is lost: rerun the same command when the shard answers"))
            }
            // Another run holds the move's lease.
            tonic::Code::Aborted => CtlError::Unreachable(what),
            tonic::Code::Unimplemented => CtlError::Usage(format!(
                "{what}: is it a shard of this version, serving slot moves? A colocated shard's slots do not \
                     move yet (docs/design.md#the-colocated-create)"
            )),
            _ => CtlError::Failed(what),
        }
    }

    /// The shard's ranges and moves; with `move_id` (a move this run knows
    /// of), that move's record whenever it finished.
    async fn status(&self, kind: Kind, move_id: &str) -> Result<Status, CtlError> {
        self.status_for(kind, pb::MoveStatusRequest { move_id: move_id.to_owned(), ..Default::default() }).await
    }

    async fn status_for(&self, kind: Kind, asked: pb::MoveStatusRequest) -> Result<Status, CtlError> {
        let reply = self
            .client
            .clone()
            .move_status(self.request(asked))
            .await
            .map_err(|s| self.failed("MoveStatus", s))?
            .into_inner();
        let shard = reply.shard.unwrap_or_default();
        let other = match kind {
            Kind::Key => (pb::ShardKind::Paste, "a paste shard"),
            Kind::Paste => (pb::ShardKind::Key, "a key shard"),
        };
        if shard.kind == i32::from(other.0) {
            return Err(CtlError::Usage(format!(
                "the {} {} is {}, not a {kind} shard: --kind {kind} moves slots between {kind} shards",
                self.name, self.address, other.1
            )));
        }
        let checked = described(kind.shard_kind(), &shard).map_err(|error| {
            CtlError::Usage(format!("the {} {} is not a {kind} shard: {error}", self.name, self.address))
        })?;
        let record =
            |found: Option<pb::Move>| {
                found.as_ref().map(move_from_pb).transpose().map_err(|error| {
                    CtlError::Failed(format!("MoveStatus on the {} {}: {error}", self.name, self.address))
                })
            };
        Ok(Status {
            owned: checked.owned,
            generation: checked.generation,
            frozen: checked.frozen,
            active: record(reply.r#move)?,
            last: record(reply.last)?,
            now_ms: shard.now_ms,
        })
    }
}

/// What the copy moved, per state.
#[derive(Debug, Default)]
struct Copied(BTreeMap<String, u64>);

impl Copied {
    fn total(&self) -> u64 {
        self.0.values().sum()
    }
}

impl std::fmt::Display for Copied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(state, rows)| format!("{state} {rows}")).collect();
        write!(f, "{}", if parts.is_empty() { "no rows".to_owned() } else { parts.join(", ") })
    }
}

pub async fn run(
    args: &ReshardArgs,
    endpoints: &EndpointArgs,
    progress: ProgressTo,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    let authority = crate::topology::authority(endpoints)?.map(|etcd| MoveAuthority::new(etcd, args.kind));
    check_authority(args, authority.is_some())?;
    crate::move_preflight::check(args, endpoints).await?;
    let source = End::connect("source", &args.from, endpoints)?;
    let target = End::connect("target", &args.to, endpoints)?;
    run_between(args, source, target, authority, progress, out, err).await
}

/// Who owns a slot is decided by a store no shard restore can roll back
/// (docs/design.md#ownership-on-etcd): a move names it, unless the operator
/// says, by its own flag, that the deployment has none. `--status` changes
/// nothing and needs neither.
fn check_authority(args: &ReshardArgs, named: bool) -> Result<(), CtlError> {
    match (named, args.without_topology) {
        (true, true) => Err(CtlError::Usage(
            "--without-topology and --topology name two ways to decide the move: drop one \
             (a deployment with a topology moves under it)"
                .into(),
        )),
        (false, false) if !args.status => Err(CtlError::Usage(
            "a move is decided by the topology store, which no shard restore can roll back: \
             add --topology etcd://HOST:PORT (or PASTEBIN_TOPOLOGY) naming the deployment's etcd; \
             a deployment without etcd moves with --without-topology, which does not survive \
             a shard database that forgets commits (docs/operations.md#moving-slots)"
                .into(),
        )),
        _ => Ok(()),
    }
}

/// The same command over two channels the caller made to `args.from` and
/// `args.to`, each step's call bounded by `timeout`, under `authority`
/// (the topology store; `None` with `--without-topology`): the
/// deterministic simulation moves slots this way over its simulated
/// network with its own stand-in for etcd, so a rerun there resumes a move
/// exactly as it does here (docs/testing.md#simulation).
pub async fn run_over(
    args: &ReshardArgs,
    channels: (Channel, Channel),
    timeout: Duration,
    authority: Option<std::sync::Arc<dyn pastebin_topology::Authority>>,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    check_authority(args, authority.is_some())?;
    let authority = authority.map(|authority| MoveAuthority::new(authority, args.kind));
    let source = End::over("source", &args.from, channels.0, timeout);
    let target = End::over("target", &args.to, channels.1, timeout);
    run_between(args, source, target, authority, ProgressTo::Lines, out, err).await
}

async fn run_between(
    args: &ReshardArgs,
    source: End,
    target: End,
    authority: Option<MoveAuthority>,
    progress: ProgressTo,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    if source.address == target.address {
        return Err(CtlError::Usage("--from and --to are the same shard".into()));
    }
    // Each shard's last finished move is the one the command names, if the
    // shard finished one like it: a rerun of any earlier move is then known
    // as done, not only of the last one.
    let typed = pb::MoveStatusRequest {
        slots: args.slots.map(span),
        source: source.address.clone(),
        target: target.address.clone(),
        ..Default::default()
    };
    let (mut from, mut to) =
        (source.status_for(args.kind, typed.clone()).await?, target.status_for(args.kind, typed).await?);
    if args.status {
        print_status(out, &source, &from)?;
        print_status(out, &target, &to)?;
        if let Some(moving) = authority.as_ref().map(MoveAuthority::moving) {
            match moving.await? {
                Some(moving) => writeln!(out, "the topology: {moving} is {}", moving.phase.name())?,
                None => writeln!(out, "the topology: no move in progress")?,
            }
        }
        return Ok(Exit::Ok);
    }
    if let Some(authority) = &authority {
        end_in_topology_what_ended_on_shards(authority, (&source, &target), args.kind, out).await?;
    }
    let in_shards = from.active.is_some() || to.active.is_some();
    let which = match (which_move(args, &source, &from, &target, &to), &authority) {
        // Stopped after the topology recorded the move and before either shard did.
        (Err(nothing @ CtlError::Failed(_)), Some(authority)) if !in_shards && (args.resume || args.abandon) => {
            match authority.unrecorded(&source.address, &target.address, args.slots).await? {
                Some(identity) => Chosen::Move(identity),
                None => return Err(nothing),
            }
        }
        (which, _) => which?,
    };
    let chosen = match (which, &authority) {
        (Chosen::Move(identity), Some(authority)) => match authority.record(identity, in_shards, args.abandon).await? {
            Recorded::Run(identity) => Chosen::Move(identity),
            Recorded::Finished(done) => {
                let what = if done.phase == Phase::Done { "done" } else { "abandoned" };
                writeln!(out, "{done} is already {what}, as the topology records: nothing to do")?;
                return Ok(Exit::Ok);
            }
        },
        (chosen, _) => chosen,
    };
    let identity = match chosen {
        Chosen::Move(identity) => identity,
        Chosen::Finished(record) => {
            let what = if record.step == Step::Done { "done" } else { "abandoned" };
            if let Some(authority) = &authority {
                authority.finished_as(&record.identity.id, record.step).await?;
            }
            let (source, target, identity) = (&source.address, &target.address, &record.identity);
            // `--resume` or `--abandon` alone names no move: say first that
            // none is in progress, then which one finished last.
            let named = match args.slots {
                Some(_) => identity.to_string(),
                None => format!("no move is in progress between {source} and {target}; the last one, {identity},"),
            };
            writeln!(out, "{named} is already {what} on both shards: nothing to do")?;
            return Ok(Exit::Ok);
        }
    };
    if wait_for_lease(out, &identity.id, (&source, &mut from), (&target, &mut to), args).await? {
        (from, to) = (source.status(args.kind, &identity.id).await?, target.status(args.kind, &identity.id).await?);
    }
    let epoch = [&from, &to].iter().filter_map(|s| s.of(&identity.id)).map(|r| r.lease.epoch).max().unwrap_or(0) + 1;
    let holder = holder();
    writeln!(
        out,
        "{} {} from {} to {} (move {}; run {holder}, epoch {epoch})",
        if args.abandon {
            format!("abandoning the move of {} slots", args.kind)
        } else {
            format!("moving {} slots", args.kind)
        },
        identity.slots,
        source.address,
        target.address,
        identity.id,
    )?;
    let call = pb::MoveCall {
        move_id: identity.id.clone(),
        slots: Some(span(identity.slots)),
        source: identity.source.clone(),
        target: identity.target.clone(),
        epoch,
        holder,
        lease_ms: u32::try_from(args.lease_secs * 1000).unwrap_or(u32::MAX),
    };
    let _heartbeat = Heartbeat::start(&source, &target, &call, Duration::from_secs(args.lease_secs));
    let abandoning = match &authority {
        Some(authority) => authority.phase(&identity.id).await? == Some(Phase::Abandoning),
        None => false,
    };
    let (batch, kind, abandon) = (args.batch, args.kind, args.abandon || abandoning);
    Handover {
        authority,
        out,
        err,
        progress,
        source: &source,
        target: &target,
        call,
        slots: identity.slots,
        batch,
        kind,
        abandon,
        since: None,
        bulk: None,
        recopied: None,
        frozen_since: None,
    }
    .run()
    .await
}

/// Who this run is, for the lease: shown to a second run that is refused.
fn holder() -> String {
    let run = pastebin_core::random_name(6);
    format!("ctl run {run} (pid {})", std::process::id())
}

/// Waits once for another run's lease on move `id` to run out (a run that
/// died holds it that long); a lease renewed meanwhile belongs to a run
/// still at work, and this one is refused, naming it. Returns whether it
/// waited (then the statuses are read again).
async fn wait_for_lease(
    out: &mut (dyn Write + Send),
    id: &str,
    source: (&End, &mut Status),
    target: (&End, &mut Status),
    args: &ReshardArgs,
) -> Result<bool, CtlError> {
    let held = |status: &Status| {
        status.active.as_ref().filter(|r| r.identity.id == id && r.lease.until_ms > status.now_ms).map(|r| {
            (r.lease.clone(), Duration::from_millis(u64::try_from(r.lease.until_ms - status.now_ms).unwrap_or(0)))
        })
    };
    let longest = [held(source.1), held(target.1)].into_iter().flatten().max_by_key(|(_, wait)| *wait);
    let Some((lease, wait)) = longest else { return Ok(false) };
    let wait = wait.min(Duration::from_secs(600));
    writeln!(
        out,
        "{} holds the lease of move {id} for {:.1} s more: waiting for it",
        lease.holder,
        wait.as_secs_f64()
    )?;
    tokio::time::sleep(wait + Duration::from_millis(200)).await;
    for (end, status) in [source, target] {
        *status = end.status(args.kind, id).await?;
        if let Some((renewed, _)) = held(status) {
            return Err(CtlError::Unreachable(format!(
                "{} is still moving these slots (move {id}, its lease renewed on the {} {}): let it finish, or stop \
                 it and rerun once its lease ran out (`--status` shows it)",
                renewed.holder, end.name, end.address
            )));
        }
    }
    Ok(true)
}

/// Renews this run's lease on both shards while it is alive, so a second
/// run waits for it and is then refused; aborted when the run ends.
struct Heartbeat(Vec<tokio::task::JoinHandle<()>>);

impl Heartbeat {
    fn start(source: &End, target: &End, call: &pb::MoveCall, lease: Duration) -> Self {
        let tasks = [source, target]
            .into_iter()
            .map(|end| {
                let (client, call, timeout) = (end.client.clone(), call.clone(), end.timeout.min(lease));
                tokio::spawn(async move {
                    loop {
                        tokio::time::sleep(lease / 3).await;
                        let mut request = tonic::Request::new(call.clone());
                        request.set_timeout(timeout);
                        // A refusal (no record yet, or taken over) is the main path's to report.
                        let _ = client.clone().renew(request).await;
                    }
                })
            })
            .collect();
        Self(tasks)
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.iter().for_each(tokio::task::JoinHandle::abort);
    }
}

fn print_status(out: &mut (dyn Write + Send), end: &End, status: &Status) -> Result<(), CtlError> {
    let frozen = status.frozen.map(|f| format!(", frozen {f}")).unwrap_or_default();
    writeln!(out, "{} {}: owns {}{frozen} (generation {})", end.name, end.address, status.owned, status.generation)?;
    match &status.active {
        Some(active) => {
            let step = pb::MoveStep::try_from(move_to_pb(active).step).map(|s| s.as_str_name()).unwrap_or("?");
            let age = (status.now_ms - active.updated_at_ms).max(0) / 1000;
            let abandoning = if active.abandoning { ", abandoning" } else { "" };
            writeln!(out, "  {} ({}): {step}{abandoning} (for {age} s)", active.identity, active.role.as_str())?;
            let lease = (active.lease.until_ms - status.now_ms) as f64 / 1000.0;
            let lease = if lease > 0.0 { format!("held for {lease:.1} s more") } else { "run out".to_owned() };
            writeln!(out, "  lease: epoch {} of {}, {lease}", active.lease.epoch, active.lease.holder)?;
        }
        None => writeln!(out, "  no move in progress")?,
    }
    if let Some(last) = &status.last {
        writeln!(out, "  last finished: {} ({}), {}", last.identity, last.role.as_str(), last.step.as_str())?;
    }
    Ok(())
}

/// What the command is about.
enum Chosen {
    Move(Identity),
    /// The move asked for finished already (a rerun whose terminal dropped).
    Finished(Record),
}

/// The move to run: the one in progress between these two shards, which
/// `--from`, `--to` and `--slots` must name exactly; a finished one they
/// name exactly; or a new one of `--slots` that leaves every slot with
/// exactly one owner.
fn which_move(args: &ReshardArgs, source: &End, from: &Status, target: &End, to: &Status) -> Result<Chosen, CtlError> {
    let (from_address, to_address) = (&source.address, &target.address);
    if let Some(active) = from.active.as_ref().or(to.active.as_ref()) {
        for (end, status) in [(source, from), (target, to)] {
            if let Some(other) = status.active.as_ref().filter(|m| m.identity.id != active.identity.id) {
                return Err(CtlError::Failed(format!(
                    "the {} {} is in another move ({}): finish that one first",
                    end.name, end.address, other.identity
                )));
            }
        }
        check_asked(&active.identity, from_address, to_address, args.slots)
            .map_err(|refused| CtlError::Failed(refused.to_string()))?;
        return Ok(Chosen::Move(active.identity.clone()));
    }
    let finished = from.last.as_ref().filter(|last| {
        to.last.as_ref().is_some_and(|other| other.identity == last.identity && other.step == last.step)
            && check_asked(&last.identity, from_address, to_address, args.slots).is_ok()
            && left_where_it_put_them(last, from, to)
    });
    // The same move again: done, or abandoned and asked to abandon (a new
    // move of the same slots after an abandon is a new move).
    if let Some(last) = finished.filter(|last| (last.step == Step::Done) != args.abandon) {
        return Ok(Chosen::Finished(last.clone()));
    }
    if args.resume || args.abandon {
        return Err(CtlError::Failed(format!(
            "no move is in progress between {from_address} and {to_address}: nothing to resume or abandon"
        )));
    }
    let slots = args.slots.ok_or_else(|| CtlError::Usage("say which slots to move: --slots FIRST-LAST".into()))?;
    let refused = |end: &End, error: pastebin_core::SlotMoveError| {
        CtlError::Failed(format!(
            "refusing to move slots {slots}: on the {} {}, {error}; no slot may be left with no owner or two",
            end.name, end.address
        ))
    };
    from.owned.without(slots).map_err(|e| refused(source, e))?;
    to.owned.with(slots).map_err(|e| refused(target, e))?;
    let id = pastebin_core::random_name(12);
    Ok(Chosen::Move(Identity {
        id: format!("move-{id}"),
        slots,
        source: from_address.clone(),
        target: to_address.clone(),
    }))
}

/// The slots of a finished move are still where it left them: on the
/// target after a take, on the source after an abandon. Moved away since
/// (back, say), the same command is a new move, not a rerun.
fn left_where_it_put_them(finished: &Record, from: &Status, to: &Status) -> bool {
    let slots = finished.identity.slots;
    let (holder, other) = if finished.step == Step::Done { (to, from) } else { (from, to) };
    holder.owned.covers(slots) && other.owned.misses(slots)
}

/// A move the topology has in progress between these two shards that the
/// shards finished: a run stopped after their last step and before the
/// topology's record of the end. Recorded now, as the shards ended it
/// (done on both; or abandoned on the source, which the target never
/// recorded or also abandoned), so that the next move is not refused as
/// busy forever; the topology's own checks decide whether it may end so.
async fn end_in_topology_what_ended_on_shards(
    authority: &MoveAuthority,
    (source, target): (&End, &End),
    kind: Kind,
    out: &mut (dyn Write + Send),
) -> Result<(), CtlError> {
    let Some(moving) = authority.moving().await? else { return Ok(()) };
    // The move may run the other way (a move back typed next).
    let (source, target) = match (moving.source == source.address, moving.target == target.address) {
        (true, true) => (source, target),
        _ if moving.source == target.address && moving.target == source.address => (target, source),
        _ => return Ok(()),
    };
    let (from, to) = (source.status(kind, &moving.id).await?, target.status(kind, &moving.id).await?);
    let ended = match (from.of(&moving.id).map(|r| r.step), to.of(&moving.id).map(|r| r.step)) {
        (Some(Step::Done), Some(Step::Done)) => Step::Done,
        // The source forgot the move after the cut-over and deletes its copies as stale.
        (None, Some(Step::Done)) if moving.deleting => Step::Done,
        (Some(Step::Abandoned), None | Some(Step::Abandoned)) => Step::Abandoned,
        _ => return Ok(()),
    };
    authority.finished_as(&moving.id, ended).await?;
    writeln!(
        out,
        "{moving} had ended on the shards ({}) but not in the topology (a run stopped before its last write): \
         the topology records it now",
        ended.as_str()
    )?;
    Ok(())
}

/// The steps of one move, each idempotent, run in the order
/// `pastebin_handover::next` reads from both shards' records.
struct Handover<'a> {
    /// Under a topology, where each step is recorded before the shards take it.
    authority: Option<MoveAuthority>,
    out: &'a mut (dyn Write + Send),
    err: &'a mut (dyn Write + Send),
    progress: ProgressTo,
    source: &'a End,
    target: &'a End,
    /// Every call's move and run.
    call: pb::MoveCall,
    slots: SlotRange,
    batch: u32,
    kind: Kind,
    /// The operator asked to undo the move.
    abandon: bool,
    /// Where the source's record of changes is trusted from (this run's settle).
    since: Option<u64>,
    /// How long this run's bulk copy took.
    bulk: Option<f64>,
    /// What this run's catch-up copied again.
    recopied: Option<Recopied>,
    /// When the source froze the slots, on its clock.
    frozen_since: Option<i64>,
}

/// Row hashes per page of the catch-up: small rows, so the shard's largest page.
const HASH_PAGE: u32 = 5000;

/// Rounds of copying again what changed, while the slots are still served,
/// before the last one runs frozen.
const SETTLE_ROUNDS: usize = 4;

/// What a copy by id did on the target.
#[derive(Debug, Default, Clone, Copy)]
struct Recopied {
    copied: u64,
    dropped: u64,
}

impl std::fmt::Display for Recopied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} rows copied again (changed since the copy), {} dropped (gone from the source)",
            self.copied, self.dropped
        )
    }
}

/// Each row of the moving slots on one side: its id, and its state and hash.
type RowHashes = HashMap<String, (String, Vec<u8>)>;

/// The ids whose rows differ between `source` and `target`, or are on one
/// side only, sorted: the copy runs in the same order on every run (the
/// deterministic simulation replays it).
fn differing(source: &RowHashes, target: &RowHashes) -> Vec<String> {
    let changed = source.iter().filter(|(id, row)| target.get(*id) != Some(*row)).map(|(id, _)| id);
    let gone = target.keys().filter(|id| !source.contains_key(*id));
    let mut ids: Vec<String> = changed.chain(gone).cloned().collect();
    ids.sort_unstable();
    ids
}

/// Where the catch-up left the two sides, for the verification.
struct CaughtUp {
    /// The source's rows that the verification compares (frozen: final).
    source_rows: RowHashes,
    /// The target's rows among those that the catch-up did not touch.
    untouched: RowHashes,
    /// The rows it wrote or dropped on the target: read back to verify.
    rewritten: Vec<String>,
    recopied: Recopied,
}

/// The summary's "rows moved" part: per state, and how the copy went.
fn summary(states: &[pb::StateDigest], recopied: Recopied, bulk_seconds: Option<f64>) -> String {
    let total = states.iter().map(|d| d.rows).sum::<u64>();
    let per_state: Vec<String> = states.iter().map(|d| format!("{} {}", d.state, d.rows)).collect();
    let copy = match bulk_seconds {
        Some(seconds) => {
            let rate = total as f64 / seconds.max(0.001);
            format!("copied in {seconds:.1} s while served, {rate:.0} rows/s")
        }
        None => "copied by an earlier run".to_owned(),
    };
    format!("{} ({total} in all, {copy}; {} copied again while frozen)", per_state.join(", "), recopied.copied)
}

impl<'a> Handover<'a> {
    fn call(&self) -> pb::MoveCall {
        self.call.clone()
    }

    async fn run(mut self) -> Result<Exit, CtlError> {
        let (source, target) = (self.source, self.target);
        let id = self.call.move_id.clone();
        loop {
            let (from, to) = (source.status(self.kind, &id).await?, target.status(self.kind, &id).await?);
            let taking = to.of(&id).filter(|r| matches!(r.step, Step::Importing | Step::Done));
            if let (None, Some(taking)) = (from.of(&id), taking) {
                if self.take_for_a_source_that_forgot(taking).await? {
                    return Ok(Exit::Ok);
                }
            }
            let next = pastebin_handover::next(from.of(&id), to.of(&id), self.abandon)
                .map_err(|refused| CtlError::Failed(refused.to_string()))?;
            match next {
                Next::PrepareExport => {
                    let call = source.request(self.call());
                    source.client.clone().prepare_export(call).await.map_err(|s| source.failed("PrepareExport", s))?;
                    failpoints::hit(failpoint::AFTER_SOURCE_RECORDED).await;
                }
                Next::PrepareImport => {
                    let call = target.request(self.call());
                    target.client.clone().prepare_import(call).await.map_err(|s| target.failed("PrepareImport", s))?;
                    writeln!(self.out, "[1/7] both shards recorded the move")?;
                    failpoints::hit(failpoint::AFTER_PREPARE).await;
                }
                Next::CopyThenFreeze => self.copy_then_freeze().await?,
                Next::VerifyThenRelease => {
                    let frozen_at = from.active.as_ref().map(|m| m.updated_at_ms);
                    self.frozen_since = self.frozen_since.or(frozen_at);
                    writeln!(self.out, "[3/7] slots {} frozen on the source: their writes wait", self.slots)?;
                    let caught_up = self.catch_up(self.since).await?;
                    failpoints::hit(failpoint::AFTER_CATCH_UP).await;
                    self.verify(&caught_up).await?;
                    self.cut_over().await?;
                    let call = source.request(self.call());
                    source.client.clone().release(call).await.map_err(|s| source.failed("Release", s))?;
                    writeln!(self.out, "[5/7] the source gave slots {} up to {}", self.slots, target.address)?;
                    failpoints::hit(failpoint::AFTER_RELEASE).await;
                    self.recopied = Some(caught_up.recopied);
                }
                Next::Take => {
                    self.copy_again_if_forgotten().await?;
                    self.take(from.of(&id)).await?
                }
                Next::DeleteCopies => return self.finish(to.of(&id)).await,
                Next::Done => {
                    if let Some(authority) = &self.authority {
                        authority.finish(&id).await?;
                    }
                    writeln!(
                        self.out,
                        "done: slots {} moved from {} to {}",
                        self.slots, source.address, target.address
                    )?;
                    return Ok(Exit::Ok);
                }
                Next::Abandon(role) => {
                    if let Some(authority) = &self.authority {
                        authority.abandon(&id).await?;
                    }
                    let end = self.end(role);
                    let call = end.request(self.call());
                    end.client.clone().abandon(call).await.map_err(|s| end.failed("Abandon", s))?;
                    writeln!(self.out, "abandoning: recorded on the {} {}", end.name, end.address)?;
                    failpoints::hit(failpoint::MID_ABANDON).await;
                }
                Next::Undo(role) => {
                    let end = self.end(role);
                    let call = end.request(self.call());
                    end.client.clone().undo(call).await.map_err(|s| end.failed("Undo", s))?;
                    writeln!(self.out, "abandoning: undone on the {} {}", end.name, end.address)?;
                }
                Next::Abandoned => {
                    if let Some(authority) = &self.authority {
                        authority.finished_as(&id, Step::Abandoned).await?;
                    }
                    writeln!(
                        self.out,
                        "move {id} abandoned: the source owns and serves its slots as before; the target's copies are gone"
                    )?;
                    return Ok(Exit::Ok);
                }
            }
        }
    }

    fn end(&self, role: Role) -> &'a End {
        match role {
            Role::Source => self.source,
            Role::Target => self.target,
        }
    }

    /// Steps 2 and 3: the bulk while the slots are still served (the freeze
    /// then only waits for the rows that changed since), then the freeze.
    async fn copy_then_freeze(&mut self) -> Result<(), CtlError> {
        let source = self.source;
        let total = self.digest(source).await?.iter().map(|d| d.rows).sum();
        let copying = std::time::Instant::now();
        self.copy(total).await?;
        self.bulk = Some(copying.elapsed().as_secs_f64());
        self.since = self.settle().await?;
        failpoints::hit(failpoint::AFTER_COPY).await;
        if let Some(authority) = &self.authority {
            authority.freeze(&self.call.move_id).await?;
        }
        source.client.clone().freeze(source.request(self.call())).await.map_err(|s| source.failed("Freeze", s))?;
        failpoints::hit(failpoint::AFTER_FREEZE).await;
        Ok(())
    }

    /// Step 6: the target takes the slots on the source's record of their
    /// release to it (the receipt).
    async fn take(&mut self, receipt: Option<&Record>) -> Result<(), CtlError> {
        let target = self.target;
        let receipt = receipt.map(move_to_pb);
        let request = target.request(pb::TakeRequest { call: Some(self.call()), receipt });
        let taken = target.client.clone().take(request).await.map_err(|s| target.failed("Take", s))?;
        failpoints::hit(failpoint::AFTER_TAKE).await;
        let owned = taken.into_inner().shard.map(|s| described(self.kind.shard_kind(), &s));
        let owned = owned.and_then(Result::ok).map(|d| d.owned.to_string()).unwrap_or_default();
        writeln!(self.out, "[6/7] the target owns slots {owned}: writes for them go on there")?;
        Ok(())
    }

    /// A source whose database forgot the move after the cut-over (it
    /// deletes its copies as stale: docs/design.md#ownership-on-etcd) has
    /// no release to hand the target, which has not taken yet. The
    /// topology's record of the take, with the source deleting, stands for
    /// it: the target takes on a receipt made from that record (unless it
    /// took already), and the move is done. `false` when the topology
    /// records no such take.
    async fn take_for_a_source_that_forgot(&mut self, target: &Record) -> Result<bool, CtlError> {
        let Some(authority) = &self.authority else { return Ok(false) };
        if !authority.taken_and_deleting(&target.identity.id).await? {
            return Ok(false);
        }
        writeln!(
            self.out,
            "the source {} forgot this move after the cut-over the topology records: the target takes on that record",
            self.source.address
        )?;
        if target.step == Step::Importing {
            let receipt = Record {
                role: Role::Source,
                step: Step::Released,
                release_token: Some(pastebin_core::random_name(16)),
                search_first: None,
                ..target.clone()
            };
            self.take(Some(&receipt)).await?;
        }
        if let Some(authority) = &self.authority {
            authority.finish(&target.identity.id).await?;
        }
        writeln!(self.out, "done: slots {} moved from {} to {}", self.slots, self.source.address, self.target.address)?;
        Ok(true)
    }

    /// Step 7 and the summary.
    async fn finish(&mut self, taken: Option<&Record>) -> Result<Exit, CtlError> {
        let source = self.source;
        let frozen_for = match (self.frozen_since, source.status(self.kind, &self.call.move_id).await) {
            (Some(since), Ok(now)) if self.recopied.is_some() => Some((now.now_ms - since).max(0) as f64 / 1000.0),
            _ => None,
        };
        // The rows moved, counted on the source: its copies stay, unchanged, until step 7.
        let moved = match self.recopied {
            Some(recopied) => summary(&self.digest(source).await?, recopied, self.bulk),
            None => "copied by an earlier run".to_owned(),
        };
        if let Some(authority) = &self.authority {
            authority.deleting(&self.call.move_id).await?;
        }
        let deleted = self.delete_copies(taken.map(move_to_pb)).await?;
        if let Some(authority) = &self.authority {
            authority.finish(&self.call.move_id).await?;
        }
        writeln!(
            self.out,
            "done: slots {} moved from {} to {}; rows moved: {moved}; copies deleted on the source: {deleted}; slots \
             frozen for {}",
            self.slots,
            source.address,
            self.target.address,
            frozen_for.map(|s| format!("{s:.1} s")).unwrap_or_else(|| "unknown (resumed)".into()),
        )?;
        Ok(Exit::Ok)
    }

    /// Under a topology, after the verification: the target stamps a fresh
    /// marker over its copy, both sides' digests must agree, and the
    /// topology records the cut-over on that digest and marker. A rerun
    /// after the cut-over finds it recorded and goes on.
    async fn cut_over(&mut self) -> Result<(), CtlError> {
        let Some(authority) = &self.authority else { return Ok(()) };
        let id = self.call.move_id.clone();
        if matches!(authority.phase(&id).await?, Some(Phase::Taken { .. })) {
            return Ok(());
        }
        let target = self.target;
        let stamped = target.client.clone().stamp_marker(target.request(self.call())).await;
        let marker = stamped.map_err(|s| target.failed("StampMarker", s))?.into_inner().marker;
        let (copy, original) = tokio::try_join!(self.digest(target), self.digest(self.source))?;
        let (copy, original) = (copy_digest(&copy), copy_digest(&original));
        if copy != original {
            return Err(CtlError::Failed(format!(
                "the target's copy (digest {copy}) is not the source's (digest {original}); nothing was switched: \
                 rerun to copy again, or --abandon"
            )));
        }
        let authority = self.authority.as_ref().expect("checked above");
        authority.cut_over(&id, &copy, &marker).await?;
        writeln!(self.out, "[5/7] the topology records the cut-over: slots {} are {}'s", self.slots, target.address)?;
        Ok(())
    }

    /// Under a topology, a target that forgot its copy after the cut-over
    /// (its database restored, a new volume, a standby without the last
    /// commits) holds the slots and serves none of them: the source, which
    /// deletes nothing until then, copies every row to it again, both sides
    /// are compared row by row, and the topology records the new copy
    /// under the target's fresh marker.
    async fn copy_again_if_forgotten(&mut self) -> Result<(), CtlError> {
        let Some(authority) = &self.authority else { return Ok(()) };
        let id = self.call.move_id.clone();
        if !authority.target_forgot(&id).await? {
            return Ok(());
        }
        writeln!(self.out, "the target {} forgot its copy since the cut-over: copying it again", self.target.address)?;
        let total = self.digest(self.source).await?.iter().map(|d| d.rows).sum();
        self.copy(total).await?;
        let caught_up = self.catch_up(None).await?;
        self.verify(&caught_up).await?;
        let target = self.target;
        let stamped = target.client.clone().stamp_marker(target.request(self.call())).await;
        let marker = stamped.map_err(|s| target.failed("StampMarker", s))?.into_inner().marker;
        let (copy, original) = tokio::try_join!(self.digest(target), self.digest(self.source))?;
        let (copy, original) = (copy_digest(&copy), copy_digest(&original));
        if copy != original {
            return Err(CtlError::Failed(format!(
                "the target's new copy (digest {copy}) is not the source's (digest {original}): rerun to copy again"
            )));
        }
        let authority = self.authority.as_ref().expect("checked above");
        authority.taken_again(&id, &copy, &marker).await?;
        writeln!(self.out, "[6/7] the target's copy is whole again: the topology records it")?;
        Ok(())
    }

    async fn digest(&self, end: &End) -> Result<Vec<pb::StateDigest>, CtlError> {
        let reply = end.client.clone().digest(end.request(self.call())).await.map_err(|s| end.failed("Digest", s))?;
        Ok(reply.into_inner().states)
    }

    /// Step 2: every row of the slots, every state, page by page.
    async fn copy(&mut self, total: u64) -> Result<(), CtlError> {
        let source = self.source;
        let (mut after, mut copied, mut pages) = (String::new(), Copied::default(), 0u64);
        let progress = RowProgress::new(self.progress, "[2/7] copying", total);
        loop {
            let request = pb::ExportRequest {
                call: Some(self.call()),
                after_id: after.clone(),
                limit: self.batch,
                ids: Vec::new(),
            };
            let page = source
                .client
                .clone()
                .export_rows(source.request(request))
                .await
                .map_err(|s| source.failed("ExportRows", s))?
                .into_inner();
            for row in &page.rows {
                *copied.0.entry(row.state.clone()).or_default() += 1;
            }
            if !page.rows.is_empty() {
                self.import(page.rows, Vec::new()).await?;
                pages += 1;
                if pages == 1 {
                    failpoints::hit(failpoint::MID_COPY).await;
                }
            }
            progress.rows_done(copied.total(), &copied.to_string(), self.err)?;
            if page.finished {
                progress.finish();
                return Ok(());
            }
            after = page.last_scanned_id;
        }
    }

    /// Step 2, after the bulk, still served: copies again the rows the
    /// source changed meanwhile, in rounds, then compares every row of both
    /// sides. Returns the point after which the source's changes are still
    /// to be copied, or `None` when its record of them cannot be trusted
    /// for this (it restarted, or a row differs that it did not record):
    /// then the catch-up compares every row while frozen.
    async fn settle(&mut self) -> Result<Option<u64>, CtlError> {
        let mut since = 0;
        for _ in 0..SETTLE_ROUNDS {
            let Some((ids, up_to)) = self.changed_since(since).await? else { return Ok(None) };
            let recopied = self.copy_rows(&ids).await?;
            writeln!(self.out, "[2/7] while served: {recopied}")?;
            since = up_to;
            if ids.len() <= self.batch as usize {
                break;
            }
        }
        let (source_rows, copies) =
            tokio::try_join!(self.all_row_hashes(self.source), self.all_row_hashes(self.target))?;
        let Some((pending, _)) = self.changed_since(since).await? else { return Ok(None) };
        let pending: std::collections::HashSet<String> = pending.into_iter().collect();
        let differ = differing(&source_rows, &copies);
        let untracked = differ.iter().filter(|id| !pending.contains(*id)).count();
        if untracked > 0 {
            writeln!(
                self.out,
                "[2/7] {untracked} rows differ that the source has not recorded as changed: the freeze compares every row"
            )?;
            return Ok(None);
        }
        writeln!(self.out, "[2/7] compared every row: the same on both shards but {} changed since", differ.len())?;
        Ok(Some(since))
    }

    /// Every row the source recorded as changed after `since`, and the
    /// point to ask after next; `None` when its record is incomplete.
    async fn changed_since(&self, mut since: u64) -> Result<Option<(Vec<String>, u64)>, CtlError> {
        let source = self.source;
        let mut ids = Vec::new();
        loop {
            let request = pb::ChangedRowsRequest { call: Some(self.call()), since, limit: HASH_PAGE };
            let reply = source.client.clone().changed_rows(source.request(request)).await;
            let page = reply.map_err(|s| source.failed("ChangedRows", s))?.into_inner();
            if !page.complete {
                return Ok(None);
            }
            ids.extend(page.ids);
            since = page.up_to;
            if !page.more {
                return Ok(Some((ids, since)));
            }
        }
    }

    /// The source's rows of `ids` onto the target, as they are now; those
    /// the source no longer has are dropped there.
    async fn copy_rows(&mut self, ids: &[String]) -> Result<Recopied, CtlError> {
        let source = self.source;
        let mut recopied = Recopied::default();
        for chunk in ids.chunks(self.batch as usize) {
            let request = pb::ExportRequest { call: Some(self.call()), ids: chunk.to_vec(), ..Default::default() };
            let reply = source.client.clone().export_rows(source.request(request)).await;
            let rows = reply.map_err(|s| source.failed("ExportRows", s))?.into_inner().rows;
            let found: std::collections::HashSet<&str> = rows.iter().map(|row| row.id.as_str()).collect();
            let gone: Vec<String> = chunk.iter().filter(|id| !found.contains(id.as_str())).cloned().collect();
            recopied.copied += rows.len() as u64;
            recopied.dropped += gone.len() as u64;
            self.import(rows, gone).await?;
        }
        Ok(recopied)
    }

    async fn import(&self, rows: Vec<pb::MovedRow>, deleted_ids: Vec<String>) -> Result<(), CtlError> {
        let target = self.target;
        failpoints::hit(failpoint::BEFORE_IMPORT).await;
        let import = pb::ImportRequest { call: Some(self.call()), rows, deleted_ids };
        target.client.clone().import_rows(target.request(import)).await.map_err(|s| target.failed("ImportRows", s))?;
        Ok(())
    }

    /// Step 4, first half, while the slots are frozen: the rows the source
    /// changed after `since` are copied again. Without a trusted record of
    /// changes (`None`: a rerun, or a source that restarted) both sides'
    /// rows are compared by hash instead, and what differs is copied; that
    /// holds one hash per row of the range in memory (about 100 bytes a row)
    /// and keeps the slots frozen for as long as reading them takes.
    async fn catch_up(&mut self, since: Option<u64>) -> Result<CaughtUp, CtlError> {
        let started = std::time::Instant::now();
        let changed = match since {
            Some(since) => self.changed_since(since).await?,
            None => None,
        };
        let caught_up = match changed {
            Some((ids, _)) => {
                let source_rows = self.row_hashes_of(self.source, &ids).await?;
                let recopied = self.copy_rows(&ids).await?;
                CaughtUp { source_rows, untouched: RowHashes::new(), rewritten: ids, recopied }
            }
            None => {
                let (source_rows, mut untouched) =
                    tokio::try_join!(self.all_row_hashes(self.source), self.all_row_hashes(self.target))?;
                let rewritten = differing(&source_rows, &untouched);
                let recopied = self.copy_rows(&rewritten).await?;
                for id in &rewritten {
                    untouched.remove(id);
                }
                CaughtUp { source_rows, untouched, rewritten, recopied }
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        writeln!(self.out, "[4/7] caught up in {seconds:.1} s: {}", caught_up.recopied)?;
        Ok(caught_up)
    }

    /// Every row of the moving slots on `end`, by hash, page by page.
    async fn all_row_hashes(&self, end: &End) -> Result<RowHashes, CtlError> {
        let (mut after, mut rows) = (String::new(), RowHashes::new());
        loop {
            let request =
                pb::ExportRequest { call: Some(self.call()), after_id: after, limit: HASH_PAGE, ids: Vec::new() };
            let page = self.row_hashes(end, request).await?;
            rows.extend(page.rows.into_iter().map(|row| (row.id, (row.state, row.hash))));
            if page.finished {
                return Ok(rows);
            }
            after = page.last_scanned_id;
        }
    }

    /// The rows of `ids` that `end` has, by hash.
    async fn row_hashes_of(&self, end: &End, ids: &[String]) -> Result<RowHashes, CtlError> {
        let mut rows = RowHashes::new();
        for chunk in ids.chunks(HASH_PAGE as usize) {
            let request = pb::ExportRequest { call: Some(self.call()), ids: chunk.to_vec(), ..Default::default() };
            let page = self.row_hashes(end, request).await?;
            rows.extend(page.rows.into_iter().map(|row| (row.id, (row.state, row.hash))));
        }
        Ok(rows)
    }

    async fn row_hashes(&self, end: &End, request: pb::ExportRequest) -> Result<pb::RowHashesResponse, CtlError> {
        let reply = end.client.clone().row_hashes(end.request(request)).await;
        Ok(reply.map_err(|s| end.failed("RowHashes", s))?.into_inner())
    }

    /// Step 4, second half: the rows the catch-up wrote, read back from
    /// the target, with the rest as it found them there, must be the
    /// source's rows, hash for hash.
    async fn verify(&mut self, caught_up: &CaughtUp) -> Result<(), CtlError> {
        let mut copies = caught_up.untouched.clone();
        copies.extend(self.row_hashes_of(self.target, &caught_up.rewritten).await?);
        let source_rows = &caught_up.source_rows;
        let differ = differing(source_rows, &copies).len();
        if differ > 0 {
            return Err(CtlError::Failed(format!(
                "the copies do not match the source ({differ} rows missing or different on the target); nothing was \
                 switched: rerun to copy again, or --abandon"
            )));
        }
        writeln!(self.out, "[4/7] verified: the {} rows compared are the same on both shards", source_rows.len())?;
        Ok(())
    }

    /// Step 7: the source's copies, last.
    async fn delete_copies(&mut self, taken: Option<pb::Move>) -> Result<u64, CtlError> {
        let source = self.source;
        let mut deleted = 0;
        loop {
            let request = pb::DeleteMovedRequest { call: Some(self.call()), limit: self.batch, taken: taken.clone() };
            let reply = source
                .client
                .clone()
                .delete_moved(source.request(request))
                .await
                .map_err(|s| source.failed("DeleteMoved", s))?
                .into_inner();
            deleted += reply.deleted;
            writeln!(self.out, "[7/7] deleted {deleted} copies on the source")?;
            if reply.finished {
                return Ok(deleted);
            }
            failpoints::hit(failpoint::MID_CLEANUP).await;
        }
    }
}
