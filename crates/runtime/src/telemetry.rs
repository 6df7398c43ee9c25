use tracing_subscriber::EnvFilter;

/// Structured logs to stderr; `RUST_LOG` overrides the default `info`.
/// Safe to call twice (tests, `pastebin up`): the second call is a no-op.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
