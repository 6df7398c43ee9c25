//! `pastebin bench`: measures a running deployment, never asserts speed in tests.
//!
//! - [`load`]: the load generator. A workload (`create`, `retry-storm`,
//!   `get`, `mixed`) produces operations; a driver sends them over HTTP or
//!   gRPC either in a closed loop (C connections, one request each in flight)
//!   or in an open loop at a fixed rate, where latency is measured from the
//!   *intended* send time so a stall is not hidden (coordinated omission).
//! - [`stats`]: HDR histograms, status counts, the table and JSON report.
//! - [`replay`]: every 201 for a key must equal the first 201 for it.
//! - [`steps`]: the per-step cost of the saga, timed by calling the key
//!   service, the object store and the paste service directly, plus the
//!   bare gRPC round trip and (optionally) the same SQL without gRPC.
//! - [`one_commit`]: the baseline of figure 3, the same HTTP create API done
//!   as one PostgreSQL transaction (key row and paste row in one commit).
//! - [`limit_server`]: the HTTP layer's own limit: a fixed 201 for every
//!   create, one 1 KiB body from memory for every `GET /raw`.

mod args;
mod limit_server;
mod load;
mod one_commit;
mod replay;
mod stats;
mod steps;

pub use args::{BenchArgs, BenchCommand, LoadArgs, Protocol};
pub use replay::{ReplayCheck, Verdict};
pub use stats::{Latencies, LatencySummary, Recorder, Report};

/// Runs one bench subcommand to completion (a server subcommand: until Ctrl-C).
pub async fn run(args: BenchArgs) -> anyhow::Result<()> {
    match args.command {
        BenchCommand::Create(a) => load::run(load::Workload::Create, a).await,
        BenchCommand::RetryStorm(a) => {
            let workload = load::Workload::RetryStorm { repeat: a.repeat.max(1), prime_keys: a.prime_keys };
            load::run(workload, a.load).await
        }
        BenchCommand::Get(a) => {
            load::run(load::Workload::Get { pastes: a.pastes.max(1), ids_file: a.ids_file }, a.load).await
        }
        BenchCommand::Mixed(a) => {
            let workload =
                load::Workload::Mixed { pastes: a.pastes.max(1), create_ratio: a.create_ratio.clamp(0.0, 1.0) };
            load::run(workload, a.load).await
        }
        BenchCommand::Steps(a) => steps::run(a).await,
        BenchCommand::OneCommitServer(a) => one_commit::run(a).await,
        BenchCommand::LimitServer(a) => limit_server::run(a).await,
    }
}
