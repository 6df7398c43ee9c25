//! What every pastebin service shares: [`db`] opens a shard's database (one
//! code path for PostgreSQL and SQLite, writes grouped into one commit on
//! SQLite) and runs the migrations it is given, on the server of a
//! [`database_url`] that takes writes, found again by [`reconnect`] when lost, [`failpoints`] are crash points
//! for tests, [`grpc`] serves a service with `grpc.health.v1` (and reflection,
//! if asked) beside it, [`tls`] loads the mutual-TLS files every server and
//! client of K and P is given, [`operator`] names who made an operator-only
//! call as the connection proves it,
//! [`telemetry`] sets up `tracing`, and [`shutdown_signal`] is the one place
//! SIGINT and SIGTERM are turned into a drain ([`with_drain_timeout`] bounds it), [`metrics`] names
//! every Prometheus metric the services export, and [`THEME_JS`] is the
//! light/dark switch every part's HTML pages load.
//! [`readiness`] is what `/readyz` and gRPC health say about whether the
//! process can work, [`help`] names the headings `--help` groups flags
//! under, and [`lock`] keeps two processes off one data directory, SQLite
//! file or objects directory. What a client may hold of a listener — the
//! HTTP listener, each client address's shares, the body budget, the send
//! timeout, the gRPC admission [`grpc`] serves behind — is the edge, in
//! pastebin-edge; which slots a shard serves, and its side of moving them,
//! is pastebin-slots.

mod checkpoint;
pub mod database_url;
pub mod db;
pub mod durability;
pub mod failpoints;
pub mod files;
mod group_commit;
pub mod grpc;
pub mod help;
pub mod lock;
pub mod metrics;
pub mod operator;
pub mod readiness;
pub mod reconnect;
mod shutdown;
pub mod telemetry;
pub mod tls;

pub use shutdown::{shutdown_signal, unless_stopped, with_drain_timeout, DrainTimedOut};

/// Light or dark for every HTML page any part serves (the gateway's pages,
/// the admin dashboard): the system's `prefers-color-scheme` unless the
/// page's `#theme-toggle` chose one, remembered in `localStorage`. Served as
/// a file (the pages' CSP allows no inline script) and loaded in `<head>`
/// without `defer`, so a chosen theme never flashes the other one.
pub const THEME_JS: &str = include_str!("assets/theme.js");
