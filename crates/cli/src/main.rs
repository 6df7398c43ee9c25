//! `pastebin`: one binary, a subcommand per part. See `pastebin --help`.

fn main() -> std::process::ExitCode {
    pastebin::ended(pastebin::main_from_args())
}
