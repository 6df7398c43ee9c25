//! `pastebin-bench`: the same subcommands as `pastebin bench`, for benchmark
//! runs without the main binary.

use clap::Parser;

#[derive(Debug, Parser)]
#[command(name = "pastebin-bench", version, about = "Load generator and benchmark harnesses for the pastebin")]
struct Cli {
    #[command(flatten)]
    bench: pastebin_bench::BenchArgs,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let _telemetry = pastebin_runtime::telemetry::init("pastebin-bench", Default::default());
    pastebin_bench::run(Cli::parse().bench).await
}
