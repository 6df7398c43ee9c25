//! What every pastebin service shares: [`db`] opens a shard's database (one
//! code path for PostgreSQL and SQLite) and runs its migrations, [`grpc`]
//! serves a service with `grpc.health.v1` and reflection beside it,
//! [`telemetry`] sets up `tracing`, and [`shutdown_signal`] is the one place
//! SIGINT and SIGTERM are turned into a drain, and [`metrics`] names
//! every Prometheus metric the services export.

pub mod db;
pub mod files;
pub mod grpc;
pub mod http;
pub mod metrics;
mod shutdown;
pub mod telemetry;

pub use shutdown::shutdown_signal;
