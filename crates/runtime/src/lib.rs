//! What every pastebin service shares: [`db`] opens a shard's database (one
//! code path for PostgreSQL and SQLite) and runs its migrations, [`grpc`]
//! serves a service with `grpc.health.v1` and reflection beside it,
//! [`telemetry`] sets up `tracing`, and [`shutdown_signal`] is the one place
//! SIGINT and SIGTERM are turned into a drain, [`metrics`] names
//! every Prometheus metric the services export, and [`readiness`] is what
//! `/readyz` and gRPC health say about whether the process can work.

pub mod db;
pub mod grpc;
pub mod metrics;
pub mod readiness;
mod shutdown;
pub mod telemetry;

pub use shutdown::shutdown_signal;
