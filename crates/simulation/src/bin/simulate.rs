//! `simulate`: runs seeds of the deterministic simulation and prints every
//! seed that breaks an invariant (docs/testing.md#simulation).
//!
//!     simulate --seeds 10000 --jobs 2     # seeds 0..10000
//!     simulate --seed 4242 --history      # one seed, its whole history
//!     simulate --seed 4242 --replay       # run it twice: same history?
//!
//! Each seed runs in a process of its own. Within one process a second run
//! is not an exact replay: tokio numbers tasks with a process-wide counter
//! and shuts a crashed host's tasks down in an order that depends on those
//! numbers, and each closed connection draws from the network's seeded
//! generator. A fresh process starts the counter afresh.

use std::{
    process::Command,
    sync::atomic::{AtomicU64, AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use clap::Parser;
use pastebin_simulation::Report;

#[derive(Debug, Parser)]
#[command(about = "Deterministic simulation of the pastebin: gateway, K, P and sweepers under faults")]
struct Args {
    /// How many seeds to run, from `--from`.
    #[arg(long, default_value_t = 100, conflicts_with = "seed")]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Run this one seed only, in this process.
    #[arg(long)]
    seed: Option<u64>,
    /// Print the run's history: the clients' events and the faults (with `--seed`).
    #[arg(long, requires = "seed")]
    history: bool,
    /// Run the seed twice, each in its own process, and compare the histories.
    #[arg(long, requires = "seed")]
    replay: bool,
    /// Seeds run at once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    jobs: u64,
}

/// The line a single-seed run ends with, read back by `--seeds` runs.
const TOTALS: &str = "totals:";

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    // The real code's logs, when asked for (`RUST_LOG=pastebin_sweeper=debug`), to
    // see why a seed failed; their timestamps are wall-clock, not simulated.
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
    let ok = match (args.seed, args.replay) {
        (Some(seed), true) => replay(seed),
        (Some(seed), false) => one(seed, args.history),
        (None, _) => many(args.from, args.seeds, args.jobs),
    };
    if ok {
        std::process::ExitCode::SUCCESS
    } else {
        std::process::ExitCode::FAILURE
    }
}

fn one(seed: u64, history: bool) -> bool {
    let report = match pastebin_simulation::run(seed) {
        Ok(report) => report,
        Err(error) => {
            println!("seed {seed}: the simulation itself failed: {error:#}");
            return false;
        }
    };
    if history {
        print_history(&report);
    }
    let verdict = if report.violations.is_empty() { "ok" } else { "VIOLATED" };
    let totals = [
        report.creates(),
        report.deletes(),
        report.faults.len(),
        report.moves(),
        report.paste_moves(),
        report.ctl_crashes_mid_move(),
        report.mistakes(),
        report.rollbacks.len(),
        report.rollbacks_mid_move(),
    ];
    let [creates, deletes, faults, moves, paste_moves, crashed, mistakes, rollbacks, rollbacks_mid_move] = totals;
    println!(
        "seed {seed}: {verdict}: {creates} creates answered 201, {deletes} deleted, {faults} faults, {moves} slot moves \
         ({paste_moves} of P slots), {crashed} crashes of ctl mid-move, {mistakes} moves with an operator's mistake, \
         {rollbacks} shard databases rolled back ({rollbacks_mid_move} mid-move), {:?} simulated",
        report.simulated
    );
    for violation in &report.violations {
        println!("  seed {seed}: {violation}");
    }
    let totals = totals.map(|total| total.to_string()).join(" ");
    println!("{TOTALS} {totals} {}", report.simulated.as_millis());
    report.violations.is_empty()
}

/// The clients' events, the nemesis's faults and how the operator's moves
/// ended, in time order.
fn print_history(report: &Report) {
    let faults = report.faults.iter().map(|(when, fault)| (when.as_millis(), format!("nemesis: {fault:?}")));
    let moves = report.moves.iter().map(|(when, seen)| (when.as_millis(), format!("ctl: {seen}")));
    let rollbacks =
        report.rollbacks.iter().map(|(when, rollback)| (when.as_millis(), format!("amnesia: {rollback:?}")));
    let mut beside: Vec<(u128, String)> = faults.chain(moves).chain(rollbacks).collect();
    beside.sort_by_key(|(when, _)| *when);
    let mut beside = beside.into_iter().peekable();
    for entry in &report.history {
        let at = u128::try_from(entry.at_ms).unwrap_or(0);
        while let Some((when, what)) = beside.next_if(|(when, _)| *when <= at) {
            println!("{when:>7} ms  {what}");
        }
        println!("{:>7} ms  {:?}", entry.at_ms, entry.event);
    }
    for (when, what) in beside {
        println!("{when:>7} ms  {what}");
    }
}

/// One seed in a child process: whether it held, and what it printed.
fn child(seed: u64, history: bool) -> (bool, String) {
    let mut command = Command::new(std::env::current_exe().expect("the running binary has a path"));
    command.args(["--seed", &seed.to_string()]);
    if history {
        command.arg("--history");
    }
    match command.output() {
        Ok(output) => (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned()),
        Err(error) => (false, format!("seed {seed}: cannot start a run: {error}\n")),
    }
}

fn replay(seed: u64) -> bool {
    let ((held, first), (_, second)) = (child(seed, true), child(seed, true));
    print!("{first}");
    let same = first == second;
    println!("replay of seed {seed}: {}", if same { "the same history" } else { "A DIFFERENT HISTORY" });
    if let Some((a, b)) = first.lines().zip(second.lines()).find(|(a, b)| a != b) {
        println!("  first difference:\n    {a}\n    {b}");
    }
    same && held
}

fn many(from: u64, count: u64, jobs: u64) -> bool {
    let started = Instant::now();
    let next = AtomicU64::new(from);
    let failed = AtomicUsize::new(0);
    // Creates answered 201, pastes deleted, faults, slot moves, of P slots,
    // ctl crashes mid-move, moves with an operator's mistake, rollbacks,
    // rollbacks mid-move, simulated ms.
    let sums: [AtomicU64; 10] = Default::default();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let seed = next.fetch_add(1, Ordering::SeqCst);
                if seed >= from + count {
                    return;
                }
                let (held, output) = child(seed, false);
                if let Some(totals) = totals(&output) {
                    for (sum, value) in sums.iter().zip(totals) {
                        sum.fetch_add(value, Ordering::SeqCst);
                    }
                }
                if !held {
                    failed.fetch_add(1, Ordering::SeqCst);
                    print!(
                        "{}",
                        output
                            .lines()
                            .filter(|line| !line.starts_with(TOTALS))
                            .map(|l| format!("{l}\n"))
                            .collect::<String>()
                    );
                }
            });
        }
    });
    let failed = failed.into_inner();
    let [creates, deletes, faults, moves, paste_moves, crashed, mistakes, rollbacks, rollbacks_mid_move, simulated_ms] =
        sums.map(AtomicU64::into_inner);
    println!(
        "{count} seeds ({from}..{}): {failed} failing; {creates} creates answered 201, {deletes} pastes deleted, \
         {faults} faults injected, {moves} slot moves ({paste_moves} of P slots), {crashed} crashes of ctl mid-move, {mistakes} moves with an operator's mistake, \
         {rollbacks} shard databases rolled back ({rollbacks_mid_move} mid-move), {:?} simulated; {:.1} s wall with {jobs} jobs",
        from + count,
        Duration::from_millis(simulated_ms),
        started.elapsed().as_secs_f64(),
    );
    failed == 0
}

fn totals(output: &str) -> Option<[u64; 10]> {
    let line = output.lines().find_map(|line| line.strip_prefix(TOTALS))?;
    let numbers: Vec<u64> = line.split_whitespace().filter_map(|n| n.parse().ok()).collect();
    numbers.try_into().ok()
}
