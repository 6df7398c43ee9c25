//! The colocated shard: one process serving both the key service and the
//! paste service for its slots, on one database that holds both kinds of
//! rows, and beside them the one-commit create
//! (docs/design.md#the-colocated-create).
//!
//! - [`MIGRATIONS`]: the schema, both kinds' migration sets with the
//!   ownership tables they share applied once.
//! - [`ColocatedStore`]: the commit that writes a paste row and its done key
//!   together.
//! - [`server`]: K's, P's and the colocated create's services on one server.
//! - [`ColocatedClient`]: what the gateway calls.

mod client;
mod service;
mod store;

use std::{collections::HashSet, sync::LazyLock};

use pastebin_keys::{KeyServiceImpl, KeyStore};
use pastebin_pastes::PasteStore;
use pastebin_slots::shard_slots::ShardSlots;
use sqlx::migrate::{Migration, Migrator};

pub use client::{ColocatedClient, Committed};
pub use service::ColocatedService;
pub use store::{ColocatedStore, Commit, CommitError};

/// The gRPC service name, for health reporting.
pub const SERVICE_NAME: &str = "pastebin.colocated.v1.ColocatedCreate";

/// A colocated shard's schema: every migration of P's set and of K's,
/// where a migration both sets hold byte for byte (the ownership tables:
/// `shard_slots`, `slot_moves`, `shard_marker`, …) is applied once. The two
/// sets number their migrations alike, so each keeps its order with a digit
/// of its own: P's `v` becomes `10v`, K's `10v + 1`. Derived, not copied:
/// a migration added to either set reaches colocated shards too.
pub static MIGRATIONS: LazyLock<Migrator> =
    LazyLock::new(|| Migrator::with_migrations(colocated(&pastebin_pastes::MIGRATIONS, &pastebin_keys::MIGRATIONS)));

fn colocated(pastes: &Migrator, keys: &Migrator) -> Vec<Migration> {
    let shared: HashSet<&[u8]> = pastes.iter().map(|m| &*m.checksum).collect();
    let renumbered =
        |migration: &Migration, digit: i64| Migration { version: migration.version * 10 + digit, ..migration.clone() };
    let own_keys = keys.iter().filter(|m| !shared.contains(&*m.checksum)).map(|m| renumbered(m, 1));
    pastes.iter().map(|m| renumbered(m, 0)).chain(own_keys).collect()
}

/// The colocated shard owning `slots`: K's and P's services over `keys` and
/// `pastes` (one database), and the one-commit create beside them, behind
/// gRPC (with health, and TLS and reflection as `options` say). Its slots
/// do not move: it serves no slot-move service, and `ctl reshard` naming it
/// is refused (docs/design.md#the-colocated-create).
pub async fn server(
    keys: KeyStore,
    pastes: PasteStore,
    slots: ShardSlots,
    options: pastebin_runtime::grpc::ServerOptions,
) -> anyhow::Result<pastebin_runtime::grpc::GrpcServer> {
    let (key_slots, paste_slots) = slots.colocated();
    let create = ColocatedService::new(ColocatedStore::new(keys.clone(), pastes.clone()), key_slots.clone());
    let routes = tonic::service::Routes::new(KeyServiceImpl::new(keys, key_slots).into_server())
        .add_service(pastebin_pastes::service(pastes, paste_slots))
        .add_service(create.into_server());
    let described = pastebin_runtime::grpc::Described {
        services: &[pastebin_keys::SERVICE_NAME, pastebin_pastes::SERVICE_NAME, SERVICE_NAME],
        descriptors: pastebin_proto::colocated::v1::FILE_DESCRIPTOR_SET,
    };
    pastebin_runtime::grpc::GrpcServer::new(routes, described, options).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schema_holds_both_sets_and_the_shared_ownership_tables_once() {
        let versions: Vec<i64> = MIGRATIONS.iter().map(|m| m.version).collect();
        let mut sorted = versions.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), versions.len(), "every version is its own");
        let sql: Vec<&str> = MIGRATIONS.iter().map(|m| m.sql.as_str()).collect();
        let creating = |table: &str| sql.iter().filter(|s| s.contains(&format!("CREATE TABLE {table} "))).count();
        for table in ["idempotency_keys", "pastes", "shard_slots", "slot_moves", "slot_search_windows", "shard_marker"]
        {
            assert_eq!(creating(table), 1, "{table} is made once");
        }
        let of_both = pastebin_pastes::MIGRATIONS.iter().count() + pastebin_keys::MIGRATIONS.iter().count();
        assert!(MIGRATIONS.iter().count() < of_both, "the shared migrations are not run twice");
    }
}
