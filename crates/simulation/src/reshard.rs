//! The operator moving slots between the two K shards or the two P shards: a
//! turmoil host (`ctl`)
//! that runs the real `ctl reshard` driver over the simulated network for
//! each move the nemesis asks for, and reruns it after any failure, as an
//! operator would; and the operator's mistakes on the way ([`Mistake`]): a
//! run stopped at any step and abandoned, a `--resume` after an abandon, a
//! typo in `--to`, a second terminal running the same move. The driver keeps nothing of its own: a crash of this host
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

use pastebin_proto::shard::v1::{slot_moves_client::SlotMovesClient, MoveStatusRequest, MoveStatusResponse};
use pastebin_slots::shard_slots::described;

use std::pin::pin;

use futures::future::{join, select, Either};

use crate::{clock::SimTime, net, topology};

/// The ctl host's name.
pub const CTL: &str = "ctl";

/// Each step's call is bounded like the gateway's budget, scaled down as the
/// sweeper's thresholds are: a call lost in a partition fails soon and is
/// rerun, which is the case the steps' idempotence exists for.
const STEP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the operator waits before rerunning a command that failed.
const RERUN_AFTER: Duration = Duration::from_millis(300);

/// One `ctl reshard --kind … --from … --to … --slots …`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotsMove {
    pub kind: Kind,
    pub from: &'static str,
    pub to: &'static str,
    pub slots: SlotRange,
    /// Rows per page of the copy, small so a copy takes many steps.
    pub batch: u32,
    /// What the operator gets wrong on the way, if anything.
    pub mistake: Option<Mistake>,
}

/// An operator's mistake while moving slots, drawn with the move by the
/// nemesis (docs/operations.md#the-mistakes-it-refuses). The
/// shards' records must refuse or absorb each one: every slot keeps one
/// owner, and an abandon that either shard recorded never ends in a take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mistake {
    /// Stops the run (Ctrl-C) `after` it began, at whatever step, then runs
    /// `--abandon`. With `halfway`, that is stopped too once it printed its
    /// first step, and the operator changes their mind: `--resume`, which
    /// must finish the abandon, never take. With `then_resume`, a
    /// `--resume` after the abandon answered, which has nothing to resume.
    Abandon { after: Duration, halfway: bool, then_resume: bool },
    /// Stops the run `after` it began, then reruns it with `--to` the spare
    /// shard (a typo), which must be refused, then reruns it right.
    WrongTo { after: Duration },
    /// The same command in a second terminal, `after` the first began.
    TwoRuns { after: Duration },
}

/// What the operator types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Command {
    /// The move's own command (a rerun resumes the move in progress).
    Move,
    Abandon,
    Resume,
    /// The move's command with `--to` the spare shard.
    WrongTo,
    /// `--status`: which end owns the slots, when no output said so.
    Status,
}

impl Command {
    fn as_str(self) -> &'static str {
        match self {
            Command::Move => "ctl reshard",
            Command::Abandon => "ctl reshard --abandon",
            Command::Resume => "ctl reshard --resume",
            Command::WrongTo => "ctl reshard --to k2",
            Command::Status => "ctl reshard --status",
        }
    }

    /// Whether `refusal` is what the shards must answer this command,
    /// nothing having changed: the operator reads it and goes on.
    fn refused_as_it_must(self, refusal: &str) -> bool {
        match self {
            // Whatever the reason (another move, slots it does not own): refused.
            Command::WrongTo => true,
            Command::Abandon => [GIVEN_UP, NOTHING_IN_PROGRESS].iter().any(|said| refusal.contains(said)),
            Command::Resume => refusal.contains(NOTHING_IN_PROGRESS),
            Command::Move | Command::Status => false,
        }
    }
}

/// ctl's words for an abandon after the source released the slots.
const GIVEN_UP: &str = "can no longer be abandoned";
/// ctl's words for a `--resume` or `--abandon` of a move that finished.
const NOTHING_IN_PROGRESS: &str = "nothing to resume or abandon";
/// ctl's words when two runs of one move meet (a second terminal).
const RUNS_MET: [&str; 2] = ["took this move over", "is in another move"];

/// When the operator stops a command that is still running (Ctrl-C).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    After(Duration),
    /// Once ctl printed this.
    Printed(&'static str),
}

/// The first step of an abandon, as ctl prints it.
const ABANDON_RECORDED: &str = "abandoning: recorded on";

/// What the operator types for `to_move`, in order. A command with a cut
/// is stopped then if still running, and typed once; one without is rerun
/// until it answers. The last tells which end owns the slots.
fn script(to_move: &SlotsMove) -> VecDeque<(Command, Option<Cut>)> {
    let mut typed = match to_move.mistake {
        None | Some(Mistake::TwoRuns { .. }) => vec![(Command::Move, None)],
        Some(Mistake::Abandon { after, halfway: false, then_resume }) => {
            let resume = then_resume.then_some((Command::Resume, None));
            [(Command::Move, Some(Cut::After(after))), (Command::Abandon, None)].into_iter().chain(resume).collect()
        }
        Some(Mistake::Abandon { after, halfway: true, .. }) => vec![
            (Command::Move, Some(Cut::After(after))),
            (Command::Abandon, Some(Cut::Printed(ABANDON_RECORDED))),
            (Command::Resume, None),
        ],
        Some(Mistake::WrongTo { after }) => {
            vec![(Command::Move, Some(Cut::After(after))), (Command::WrongTo, None), (Command::Move, None)]
        }
    };
    typed.push((Command::Status, None));
    typed.into()
}

/// Where a move's slots ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Moved,
    /// With the source: abandoned, or never begun.
    Kept,
}

/// What the operator saw, for the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// `ctl` said done.
    Moved(SlotsMove),
    /// The slots stayed with the source: `ctl` said abandoned, or `--status`
    /// showed the move never began.
    Kept(SlotsMove),
    /// `ctl` stopped before the end; the operator reruns it.
    Stopped { slots: SlotRange, exit: &'static str },
    /// The operator stopped a command that was still running.
    Cut { slots: SlotRange, command: &'static str },
    /// The shards refused the command, as they must.
    Refused { slots: SlotRange, command: &'static str, why: String },
    /// The second terminal's run ended.
    SecondRun { slots: SlotRange, exit: &'static str },
    /// The source was in no move when the operator would have typed
    /// `--to k2`: that would be a new move, so they did not.
    NoTypo { slots: SlotRange },
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Seen::Moved(moved) => write!(f, "moved slots {} from {} to {}", moved.slots, moved.from, moved.to),
            Seen::Kept(kept) => write!(f, "slots {} stay on {}: not moved to {}", kept.slots, kept.from, kept.to),
            Seen::Stopped { slots, exit } => write!(f, "reshard of slots {slots} stopped ({exit}); rerunning it"),
            Seen::Cut { slots, command } => write!(f, "{command} of slots {slots} stopped by the operator (Ctrl-C)"),
            Seen::Refused { slots, command, why } => write!(f, "{command} of slots {slots} refused: {why}"),
            Seen::SecondRun { slots, exit } => write!(f, "a second ctl reshard of slots {slots} ended: {exit}"),
            Seen::NoTypo { slots } => write!(f, "no --to k2 typo for slots {slots}: the source is in no move"),
        }
    }
}

#[derive(Default)]
struct Book {
    /// The moves asked for and not yet done; the first is the one being run.
    asked: VecDeque<SlotsMove>,
    /// What is left to type for the first move asked.
    script: VecDeque<(Command, Option<Cut>)>,
    /// When to start the second terminal's run of the first move, once.
    second_run: Option<Duration>,
    /// Where the first move's slots are, as ctl last said.
    outcome: Option<Outcome>,
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
        let mut book = self.book();
        if book.asked.is_empty() {
            book.begin(&to_move);
        }
        book.asked.push_back(to_move);
    }

    /// Whether every move asked for is done.
    pub fn idle(&self) -> bool {
        self.book().asked.is_empty()
    }

    /// Whether the last move that ended moved its slots (`false`: they
    /// stayed with the source, or no move ended yet).
    pub fn last_moved(&self) -> bool {
        let book = self.book();
        let mut ended = book.seen.iter().rev().filter_map(|(_, seen)| match seen {
            Seen::Moved(_) => Some(true),
            Seen::Kept(_) => Some(false),
            _ => None,
        });
        ended.next().unwrap_or(false)
    }

    pub fn seen(&self) -> Vec<(Duration, Seen)> {
        self.book().seen.clone()
    }

    pub fn findings(&self) -> Vec<String> {
        self.book().findings.clone()
    }

    /// The move being run and what to type next for it.
    fn next(&self) -> Option<(SlotsMove, Command, Option<Cut>)> {
        let book = self.book();
        let (command, cut) = *book.script.front()?;
        Some((book.asked.front()?.clone(), command, cut))
    }

    fn see(&self, at: Duration, seen: Seen) {
        self.book().seen.push((at, seen));
    }

    fn found(&self, finding: String) {
        self.book().findings.push(finding);
    }

    /// The command typed is behind the operator; with `then` first among what is left.
    fn typed(&self, then: Option<Command>) {
        let mut book = self.book();
        book.script.pop_front();
        if let Some(command) = then {
            book.script.push_front((command, None));
        }
    }

    fn said(&self, outcome: Outcome) {
        self.book().outcome = Some(outcome);
    }

    fn outcome(&self) -> Option<Outcome> {
        self.book().outcome
    }

    fn second_run_due(&self) -> Option<Duration> {
        self.book().second_run.take()
    }

    /// The move being run ended with its slots where `outcome` says.
    fn ended(&self, at: Duration, outcome: Outcome) {
        let mut book = self.book();
        let Some(ended) = book.asked.pop_front() else { return };
        book.seen.push((at, if outcome == Outcome::Moved { Seen::Moved(ended) } else { Seen::Kept(ended) }));
        if let Some(next) = book.asked.front().cloned() {
            book.begin(&next);
        }
    }
}

impl Book {
    fn begin(&mut self, to_move: &SlotsMove) {
        self.script = script(to_move);
        self.second_run = match to_move.mistake {
            Some(Mistake::TwoRuns { after }) => Some(after),
            _ => None,
        };
        self.outcome = None;
    }
}

fn exit_of(error: &CtlError) -> &'static str {
    match error {
        CtlError::Unreachable(_) => "unreachable",
        CtlError::Usage(_) => "usage",
        CtlError::Failed(_) => "failed",
    }
}

/// The ctl host's software: types what the operator's script for the
/// first move asked says, then the next move's. Started again after a
/// crash, it goes on with the command it was running.
pub async fn run_operator(operator: Operator, time: SimTime, store: topology::Store) -> anyhow::Result<()> {
    let elapsed = move || Duration::from_millis(u64::try_from(time.elapsed_ms()).unwrap_or(0));
    loop {
        let Some((to_move, command, cut)) = operator.next() else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if command == Command::Status {
            let outcome = match operator.outcome() {
                Some(said) => Some(said),
                None => where_slots_are(&to_move, &store).await,
            };
            match outcome {
                Some(outcome) => operator.ended(elapsed(), outcome),
                // A shard did not answer the status: ask again.
                None => tokio::time::sleep(RERUN_AFTER).await,
            }
            continue;
        }
        if command == Command::WrongTo {
            match move_status(to_move.from).await {
                Ok(status) if status.r#move.is_some() => {}
                // With no move on the source, `--to k2` is a new move, not a typo ctl could tell.
                Ok(_) => {
                    operator.see(elapsed(), Seen::NoTypo { slots: to_move.slots });
                    operator.typed(None);
                    continue;
                }
                Err(_) => {
                    tokio::time::sleep(RERUN_AFTER).await;
                    continue;
                }
            }
        }
        let second = if command == Command::Move { operator.second_run_due() } else { None };
        let screen = Screen::default();
        // The operator reads the first terminal once both have ended.
        let typed = async {
            match second {
                Some(after) => {
                    let first = ctl(&to_move, command, screen.clone(), &store);
                    join(first, second_run(&operator, &to_move, after, &elapsed, &store)).await.0
                }
                None => ctl(&to_move, command, screen.clone(), &store).await,
            }
        };
        let answer = match cut {
            Some(cut) => match select(pin!(typed), pin!(screen.until(cut))).await {
                Either::Left((answer, _)) => answer,
                Either::Right(_) => {
                    operator.see(elapsed(), Seen::Cut { slots: to_move.slots, command: command.as_str() });
                    operator.typed(None);
                    continue;
                }
            },
            None => typed.await,
        };
        if !answered(&operator, elapsed(), &to_move, command, cut, answer, &store).await {
            tokio::time::sleep(RERUN_AFTER).await;
        }
    }
}

/// Reads what ctl answered `command`; `false` when the operator reruns it.
async fn answered(
    operator: &Operator,
    at: Duration,
    to_move: &SlotsMove,
    command: Command,
    cut: Option<Cut>,
    answer: Result<String, CtlError>,
    store: &topology::Store,
) -> bool {
    let slots = to_move.slots;
    let error = match answer {
        Ok(output) if command == Command::WrongTo => {
            operator.found(format!("{} of slots {slots} was accepted:\n{output}", command.as_str()));
            operator.typed(None);
            return true;
        }
        Ok(output) => {
            // A `--resume` names no slots: with no move in progress it answers
            // for the last move between the two shards, which may be another.
            if output.contains(&format!("slots {slots} ")) {
                operator.said(if output.contains("abandoned") { Outcome::Kept } else { Outcome::Moved });
            }
            operator.typed(None);
            return true;
        }
        Err(CtlError::Failed(why)) if command.refused_as_it_must(&why) => {
            operator.see(at, Seen::Refused { slots, command: command.as_str(), why: without_move_ids(&why) });
            // The refusal says to finish the move instead, and the operator does.
            operator.typed(why.contains(GIVEN_UP).then_some(Command::Move));
            return true;
        }
        // The run before a crash finished the move, and the reply to its
        // last step was lost: the rerun refuses, the status says done.
        Err(error @ CtlError::Failed(_)) if command == Command::Move => match where_slots_are(to_move, store).await {
            Some(Outcome::Moved) => {
                operator.said(Outcome::Moved);
                operator.typed(None);
                return true;
            }
            // A shard did not answer the status: the next rerun tells.
            None => CtlError::Unreachable(error.to_string()),
            Some(Outcome::Kept) => error,
        },
        Err(error) => error,
    };
    operator.see(at, Seen::Stopped { slots, exit: exit_of(&error) });
    let two_runs = matches!(to_move.mistake, Some(Mistake::TwoRuns { .. }));
    let runs_met = two_runs && RUNS_MET.iter().any(|said| error.to_string().contains(said));
    if !matches!(error, CtlError::Unreachable(_)) && !runs_met {
        operator.found(format!("{} of slots {slots} stopped: {error}", command.as_str()));
    }
    // A command the operator stops at a point in time is typed once; one
    // stopped at a step is rerun until it gets there.
    if matches!(cut, Some(Cut::After(_))) {
        operator.typed(None);
        return true;
    }
    false
}

/// ctl's words with each move's id left out: ctl draws ids from the
/// operating system, and a seed's history must replay the same.
fn without_move_ids(said: &str) -> String {
    let words = said.split(' ').map(|word| match word.find("move-") {
        Some(at) => {
            let tail = word[at + "move-".len()..].trim_start_matches(|c: char| c.is_ascii_alphanumeric());
            format!("{}move-…{tail}", &word[..at])
        }
        None => word.to_owned(),
    });
    words.collect::<Vec<_>>().join(" ")
}

/// The second terminal: the same command, typed once `after` the first
/// began, while it runs. Whatever it ends with, the shards' leases and
/// epochs must keep the two runs from both acting.
async fn second_run(
    operator: &Operator,
    to_move: &SlotsMove,
    after: Duration,
    elapsed: &impl Fn() -> Duration,
    store: &topology::Store,
) {
    tokio::time::sleep(after).await;
    let exit = match ctl(to_move, Command::Move, Screen::default(), store).await {
        Ok(output) if output.contains("abandoned") => "abandoned",
        Ok(_) => "done",
        Err(error) => exit_of(&error),
    };
    operator.see(elapsed(), Seen::SecondRun { slots: to_move.slots, exit });
}

/// ctl's output as the operator reads it while it runs.
#[derive(Clone, Default)]
struct Screen(Arc<Mutex<Vec<u8>>>);

impl Screen {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())).into_owned()
    }

    /// Returns once the operator would stop the command (Ctrl-C).
    async fn until(&self, cut: Cut) {
        match cut {
            Cut::After(after) => tokio::time::sleep(after).await,
            Cut::Printed(text) => {
                while !self.text().contains(text) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    }
}

impl std::io::Write for Screen {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `command` for `to_move` with the real `ctl reshard` driver, its
/// output on `screen`: that output, or why it stopped.
async fn ctl(
    to_move: &SlotsMove,
    command: Command,
    mut screen: Screen,
    store: &topology::Store,
) -> Result<String, CtlError> {
    let to = if command == Command::WrongTo { topology::SPARE_KEY_SHARD } else { to_move.to };
    let args = ReshardArgs {
        kind: to_move.kind,
        from: format!("{}:{}", to_move.from, net::PORT),
        to: format!("{to}:{}", net::PORT),
        slots: (command != Command::Resume).then_some(to_move.slots),
        resume: command == Command::Resume,
        status: false,
        abandon: command == Command::Abandon,
        // The move is decided by the topology store, as with `--topology`.
        without_topology: false,
        batch: to_move.batch,
        lease_secs: 10,
    };
    let channel = |host| net::channel(host).map_err(|error| CtlError::Usage(error.to_string()));
    let channels = (channel(to_move.from)?, channel(to)?);
    let authority: Arc<dyn pastebin_topology::Authority> = store.clone();
    let sink = &mut std::io::sink();
    pastebin_ctl::reshard::run_over(&args, channels, STEP_TIMEOUT, Some(authority), &mut screen, sink).await?;
    Ok(screen.text())
}

/// What `ctl reshard --status` would show the operator: the target owns
/// every slot of the move and the source none, or the other way round, and
/// neither is in a move (`None`: a shard did not answer, or a move is in
/// progress).
async fn where_slots_are(to_move: &SlotsMove, store: &topology::Store) -> Option<Outcome> {
    let (Ok(source), Ok(target)) = (move_status(to_move.from).await, move_status(to_move.to).await) else {
        return None;
    };
    // What `ctl reshard --status` shows of the topology: a move it still
    // records is not over, whatever the shards say (the next rerun ends it).
    let kind = match to_move.kind {
        Kind::Key => pastebin_topology::Kind::Key,
        Kind::Paste => pastebin_topology::Kind::Paste,
    };
    let recorded = pastebin_topology::Authority::read(&**store, kind).await.ok()?;
    if recorded.topology.is_some_and(|topology| topology.moving.is_some()) {
        return None;
    }
    let kind = to_move.kind.shard_kind();
    let owns = |status: &MoveStatusResponse, slot| {
        let shard = status.shard.clone().unwrap_or_default();
        described(kind, &shard).is_ok_and(|d| d.owned.contains(slot))
    };
    let owner = |status: &MoveStatusResponse| to_move.slots.slots().all(|slot| owns(status, slot));
    let idle = source.r#move.is_none() && target.r#move.is_none();
    match (idle, owner(&target), owner(&source)) {
        (true, true, false) => Some(Outcome::Moved),
        (true, false, true) => Some(Outcome::Kept),
        _ => None,
    }
}

async fn move_status(host: &str) -> anyhow::Result<MoveStatusResponse> {
    let mut client = SlotMovesClient::new(net::channel(host)?);
    let mut request = tonic::Request::new(MoveStatusRequest::default());
    request.set_timeout(STEP_TIMEOUT);
    Ok(client.move_status(request).await?.into_inner())
}
