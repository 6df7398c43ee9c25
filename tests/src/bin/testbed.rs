//! The `pastebin` binary under a name of the tests package, for crash tests.
//! `scripts/test` builds it with `--cfg pastebin_failpoints`; otherwise it is
//! `pastebin` exactly.

fn main() -> std::process::ExitCode {
    pastebin::ended(refuse_unbuilt_failpoints().and_then(|()| pastebin::main_from_args()))
}

/// A testbed without failpoints would answer where a crash test expects it to
/// die, and the test would fail far from the cause: say it here instead.
fn refuse_unbuilt_failpoints() -> anyhow::Result<()> {
    let armed = std::env::var("PASTEBIN_FAILPOINTS").is_ok_and(|names| !names.trim().is_empty());
    if armed && !cfg!(pastebin_failpoints) {
        anyhow::bail!(
            "PASTEBIN_FAILPOINTS is set but this testbed was built without failpoints: \
             run the tests with scripts/test, or with RUSTFLAGS=\"--cfg pastebin_failpoints\""
        );
    }
    Ok(())
}
