//! `pastebin`: one binary, a subcommand per part. See `pastebin --help`.

fn main() -> anyhow::Result<()> {
    pastebin::main_from_args()
}
