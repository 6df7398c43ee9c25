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

use pastebin_slots::{
    shard_slots::ShardSlots,
    slot_moves::{ColumnType, MovedTable, SlotMovesService},
};

pub use client::KeyClient;
pub use record::{Adopted, AppliedVerdicts, Begun, KeyRecord, NewKey, PendingKey, PendingStats, SlotKey};
pub use service::KeyServiceImpl;
pub use store::{KeyStore, KeyStoreError};

/// K's records on the wire, for a service that takes or answers them beside
/// the key service's own (the colocated create, docs/design.md#the-colocated-create).
pub mod wire {
    pub use crate::convert::{begin_request, record_from_pb, record_to_pb};

    /// A `BeginRequest` as the key service takes it, every field checked.
    pub fn new_key(
        request: pastebin_proto::keys::v1::BeginRequest,
    ) -> Result<crate::NewKey, pastebin_runtime::grpc::Malformed> {
        crate::convert::check_body_size(&request.response_body)?;
        crate::convert::new_key(request)
    }
}

/// Shard K's schema, run by [`pastebin_runtime::db::connect`] at start-up.
pub static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/keys");

/// The gRPC service name, for health reporting.
pub const SERVICE_NAME: &str = "pastebin.keys.v1.KeyService";

/// What a slot move copies of this shard: every row of `idempotency_keys`, whatever
/// its state (docs/design.md#moving-slots).
pub static MOVED_TABLE: MovedTable = MovedTable {
    table: "idempotency_keys",
    id: "key",
    state: "state",
    states: &["pending", "done", "aborted"],
    columns: &[
        ("key", ColumnType::Text),
        ("request_hash", ColumnType::Text),
        ("paste_id", ColumnType::Text),
        ("state", ColumnType::Text),
        ("response_body", ColumnType::Text),
        ("created_at", ColumnType::Integer),
        ("retain_until", ColumnType::Integer),
    ],
    slot_column: "paste_id",
    slot_of: |id| pastebin_core::IdempotencyKey::parse(id).ok().map(|key| key.slot()),
};

/// `store` as the K shard owning `slots`, behind gRPC with the slot-move
/// service beside it (with health, and TLS and reflection as `options`
/// say): to serve on a listener, to call in process, or both.
pub async fn server(
    store: KeyStore,
    slots: ShardSlots,
    options: pastebin_runtime::grpc::ServerOptions,
) -> anyhow::Result<pastebin_runtime::grpc::GrpcServer> {
    let moves = SlotMovesService::new(slots.clone(), store.database().clone(), &MOVED_TABLE, store.clock().clone());
    let routes =
        tonic::service::Routes::new(KeyServiceImpl::new(store, slots).into_server()).add_service(moves.into_server());
    let described = pastebin_runtime::grpc::Described {
        services: &[SERVICE_NAME, pastebin_slots::slot_moves::SERVICE_NAME],
        descriptors: pastebin_proto::keys::v1::FILE_DESCRIPTOR_SET,
    };
    pastebin_runtime::grpc::GrpcServer::new(routes, described, options).await
}
