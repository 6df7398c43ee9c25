//! The key service, shard K: idempotency records.
//!
//! [`KeyStore`] is the storage (portable SQL over PostgreSQL or SQLite);
//! [`KeyServiceImpl`] exposes it over gRPC; [`KeyClient`] is what the gateway,
//! the sweeper and the operator CLI use to talk to a K shard, in domain types.
//! Every state change is a single guarded update that reports whether it
//! changed a row: that is what makes a gateway and sweepers racing on one key
//! harmless.

mod client;
mod convert;
mod record;
mod service;
mod store;

pub use client::KeyClient;
pub use record::{AppliedVerdicts, Begun, KeyRecord, NewKey, PendingKey, PendingStats, SlotKey};
pub use service::KeyServiceImpl;
pub use store::{KeyStore, KeyStoreError};

/// Shard K's schema, run by [`pastebin_runtime::db::connect`] at start-up.
pub static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/keys");

/// The gRPC service name, for health reporting.
pub const SERVICE_NAME: &str = "pastebin.keys.v1.KeyService";

/// `store` as the K shard owning `slots`, behind gRPC (with health, and
/// TLS and reflection as `options` say): to serve on a listener, to call in
/// process, or both.
pub async fn server(
    store: KeyStore,
    slots: pastebin_core::SlotRange,
    options: pastebin_runtime::grpc::ServerOptions,
) -> anyhow::Result<pastebin_runtime::grpc::GrpcServer> {
    let routes = tonic::service::Routes::new(KeyServiceImpl::new(store, slots).into_server());
    let described = pastebin_runtime::grpc::Described {
        services: &[SERVICE_NAME],
        descriptors: pastebin_proto::keys::v1::FILE_DESCRIPTOR_SET,
    };
    pastebin_runtime::grpc::GrpcServer::new(routes, described, options).await
}
