use tracing_subscriber::EnvFilter;

/// What is logged unless `RUST_LOG` says otherwise. tonic reports a refused
/// TLS handshake (no client certificate, a certificate from another CA, a
/// plaintext client) only at debug level, on its `io_stream` target; an
/// operator turning mutual TLS on needs to see those, so that target is on.
pub const DEFAULT_FILTER: &str = "info,sqlx=warn,tonic::transport::server::io_stream=debug";

/// Structured logs to stderr; `RUST_LOG` overrides [`DEFAULT_FILTER`].
/// Safe to call twice (tests, `pastebin up`): the second call is a no-op.
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
