//! The paste service, shard P: paste rows and id tombstones.
//!
//! [`PasteStore`] is the storage (portable SQL over PostgreSQL or SQLite),
//! [`PasteServiceImpl`] serves it over gRPC and [`PasteClient`] is how the
//! gateway, the sweeper and operators call a P shard. A paste id is live or
//! tombstoned in one table keyed by id, so the primary key serializes the
//! saga's insert against an abort's tombstone: [`PasteStore::tombstone_unless_live`]
//! is the fence that makes "no paste can ever appear for this id" true.

mod client;
mod record;
mod service;
mod store;
mod wire;

pub use client::PasteClient;
pub use record::{BurnClaim, DeleteOutcome, IdFate, InsertOutcome, NewPaste, PasteRow};
pub use service::PasteServiceImpl;
pub use store::{PasteStore, PasteStoreError, MIN_TOMBSTONE_AGE};

/// The gRPC service name, for health reporting.
pub const SERVICE_NAME: &str = "pastebin.pastes.v1.PasteService";

/// Serves `store` over gRPC on `listener` (with health and reflection)
/// until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: PasteStore,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let routes = tonic::service::Routes::new(PasteServiceImpl::new(store).into_server());
    pastebin_runtime::grpc::serve(listener, routes, &[SERVICE_NAME], shutdown).await
}
