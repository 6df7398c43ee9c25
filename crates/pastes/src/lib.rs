//! The paste service, shard P: paste rows and id tombstones.
//!
//! [`PasteStore`] is the storage (portable SQL over PostgreSQL or SQLite),
//! [`PasteServiceImpl`] serves it over gRPC and [`PasteClient`] is how the
//! gateway, the sweeper and operators call a P shard. A paste id is live or
//! tombstoned in one table keyed by id, so the primary key serializes the
//! saga's insert against an abort's tombstone: [`PasteStore::tombstone_unless_live`]
//! is the fence that makes "no paste can ever appear for this id" true.
//! [`stored`] exports how many live pastes the shard holds and their bytes.

mod client;
mod convert;
mod record;
mod service;
mod store;
mod stored;

use pastebin_slots::{
    shard_slots::ShardSlots,
    slot_moves::{ColumnType, MovedTable, SlotMovesService},
};

pub use client::{PasteClient, ResolvedBatch};
pub use record::{
    BurnClaim, DeleteOutcome, DismissOutcome, Dismissal, IdFate, InsertOutcome, KeyedPaste, NewPaste, PasteRead,
    PasteRow, Report, ReportOrder, ReportedPaste, SlotRow, TakedownOutcome,
};
pub use service::PasteServiceImpl;
pub use store::{insert_paste, PasteStore, PasteStoreError, MIN_TOMBSTONE_AGE};

/// P's rows on the wire, for a service that takes them beside the paste
/// service's own (the colocated create, docs/design.md#the-colocated-create).
pub mod wire {
    pub use crate::convert::{insert_request, new_paste};
}

/// Shard P's schema, run by [`pastebin_runtime::db::connect`] at start-up.
pub static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/pastes");

/// The gRPC service name, for health reporting.
pub const SERVICE_NAME: &str = "pastebin.pastes.v1.PasteService";

/// What a slot move copies of this shard: every row of `pastes`, whatever
/// its state (docs/design.md#moving-slots).
pub static MOVED_TABLE: MovedTable = MovedTable {
    table: "pastes",
    id: "id",
    state: "state",
    states: &["live", "tombstoned"],
    columns: &[
        ("id", ColumnType::Text),
        ("state", ColumnType::Text),
        ("created_at", ColumnType::Integer),
        ("delete_token_sha256", ColumnType::Text),
        ("expires_at", ColumnType::Integer),
        ("size", ColumnType::Integer),
        ("content_sha256", ColumnType::Text),
        ("tombstoned_at", ColumnType::Integer),
        ("tombstone_reason", ColumnType::Text),
        ("media_type", ColumnType::Text),
        ("file_name", ColumnType::Text),
        ("language", ColumnType::Text),
        ("burn_after_reading", ColumnType::Integer),
        ("key_sha256", ColumnType::Text),
        ("request_sha256", ColumnType::Text),
        ("sealed", ColumnType::Integer),
        ("removed_because", ColumnType::Text),
        ("report_count", ColumnType::Integer),
        ("last_reported_at", ColumnType::Integer),
        ("reports", ColumnType::Text),
        ("dismissed_reports", ColumnType::Integer),
    ],
    slot_column: "id",
    slot_of: |id| pastebin_core::PasteId::parse(id).ok().map(|id| id.slot()),
};

/// The paste service over `store` for `slots`, with the totals it exports
/// counted while the process runs.
pub fn service(
    store: PasteStore,
    slots: ShardSlots,
) -> pastebin_proto::pastes::v1::paste_service_server::PasteServiceServer<PasteServiceImpl> {
    // The totals are the shard's own: they stop with the process.
    tokio::spawn(stored::keep_counting(store.clone(), store.totals().clone()));
    PasteServiceImpl::new(store, slots).into_server()
}

/// `store` as the P shard owning `slots`, behind gRPC with the slot-move
/// service beside it (with health, and TLS and reflection as `options`
/// say): to serve on a listener, to call in process, or both.
pub async fn server(
    store: PasteStore,
    slots: ShardSlots,
    options: pastebin_runtime::grpc::ServerOptions,
) -> anyhow::Result<pastebin_runtime::grpc::GrpcServer> {
    let moves = SlotMovesService::new(slots.clone(), store.database().clone(), &MOVED_TABLE, store.clock().clone());
    let routes = tonic::service::Routes::new(service(store, slots)).add_service(moves.into_server());
    let described = pastebin_runtime::grpc::Described {
        services: &[SERVICE_NAME, pastebin_slots::slot_moves::SERVICE_NAME],
        descriptors: pastebin_proto::pastes::v1::FILE_DESCRIPTOR_SET,
    };
    pastebin_runtime::grpc::GrpcServer::new(routes, described, options).await
}
