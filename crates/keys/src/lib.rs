//! The key service, shard K: idempotency records.
//!
//! [`KeyStore`] is the storage (portable SQL over PostgreSQL or SQLite);
//! [`KeyServiceImpl`] exposes it over gRPC; [`KeyClient`] is what the gateway,
//! the sweeper and the operator CLI use to talk to a K shard, in domain types.
//! Every state change is a single guarded update that reports whether it
//! changed a row: that is what makes a gateway and sweepers racing on one key
//! harmless.

mod client;
mod record;
mod service;
mod store;

pub use client::KeyClient;
pub use record::{Begun, KeyRecord, NewKey, PendingKey, PendingStats};
pub use service::KeyServiceImpl;
pub use store::{KeyStore, KeyStoreError};

/// The gRPC service name, for health reporting.
pub const SERVICE_NAME: &str = "pastebin.keys.v1.KeyService";

/// Serves `store` over gRPC on `listener` (with health and reflection)
/// until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    store: KeyStore,
    limits: pastebin_runtime::grpc::GrpcLimits,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let routes = tonic::service::Routes::new(KeyServiceImpl::new(store).into_server());
    pastebin_runtime::grpc::serve(listener, routes, &[SERVICE_NAME], limits, shutdown).await
}
