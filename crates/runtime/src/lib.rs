//! What every pastebin service shares: [`db`] opens a shard's database (one
//! code path for PostgreSQL and SQLite, writes grouped into one commit on
//! SQLite) and runs its migrations, [`failpoints`] are crash points for tests,
//! [`grpc`] serves a service with `grpc.health.v1` (and reflection, if asked)
//! beside it and makes the channels clients call through, [`tls`] loads the
//! mutual-TLS files every server and client of K and P is given,
//! [`telemetry`] sets up `tracing`, and [`shutdown_signal`] is the one place
//! SIGINT and SIGTERM are turned into a drain, and [`metrics`] names
//! every Prometheus metric the services export.

pub mod db;
pub mod failpoints;
mod group_commit;
pub mod grpc;
pub mod metrics;
mod shutdown;
pub mod telemetry;
pub mod tls;

pub use shutdown::shutdown_signal;
