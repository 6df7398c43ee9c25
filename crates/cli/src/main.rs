//! `pastebin`: one binary, a subcommand per part. See `pastebin --help`.

/// An error ends the process as one line on stderr (its causes joined with
/// `: `) and exit code 1, never as a backtrace, whatever `RUST_BACKTRACE`
/// says: an error here is a person's mistake or the world's (a second `up`
/// on one data directory, a port in use), and the line says what to do.
/// Returning the error from `main` would print anyhow's captured backtrace.
fn main() -> std::process::ExitCode {
    match pastebin::main_from_args() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
