//! `pastebin`: one binary, a subcommand per part. See `pastebin --help`.

use clap::Parser;

fn main() -> anyhow::Result<()> {
    pastebin::run(pastebin::Cli::parse())
}
