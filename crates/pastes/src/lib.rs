//! The paste service, shard P: paste rows and id tombstones.
//!
//! [`PasteStore`] is the storage (portable SQL over PostgreSQL or SQLite),
//! [`PasteServiceImpl`] serves it over gRPC and [`PasteClient`] is how the
//! gateway, the sweeper and operators call a P shard. A paste id is live or
//! tombstoned in one table keyed by id, so the primary key serializes the
//! saga's insert against an abort's tombstone: [`PasteStore::tombstone_unless_live`]
//! is the fence that makes "no paste can ever appear for this id" true.

mod client;
mod convert;
mod record;
mod service;
mod store;

pub use client::PasteClient;
pub use record::{BurnClaim, DeleteOutcome, IdFate, InsertOutcome, NewPaste, PasteRow, SlotRow};
pub use service::PasteServiceImpl;
pub use store::{PasteStore, PasteStoreError, MIN_TOMBSTONE_AGE};

/// Shard P's schema, run by [`pastebin_runtime::db::connect`] at start-up.
pub static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/pastes");

/// The gRPC service name, for health reporting.
pub const SERVICE_NAME: &str = "pastebin.pastes.v1.PasteService";

/// `store` as the P shard owning `slots`, behind gRPC (with health, and
/// TLS and reflection as `options` say): to serve on a listener, to call in
/// process, or both.
pub async fn server(
    store: PasteStore,
    slots: pastebin_core::SlotRange,
    options: pastebin_runtime::grpc::ServerOptions,
) -> anyhow::Result<pastebin_runtime::grpc::GrpcServer> {
    let routes = tonic::service::Routes::new(PasteServiceImpl::new(store, slots).into_server());
    let described = pastebin_runtime::grpc::Described {
        services: &[SERVICE_NAME],
        descriptors: pastebin_proto::pastes::v1::FILE_DESCRIPTOR_SET,
    };
    pastebin_runtime::grpc::GrpcServer::new(routes, described, options).await
}
