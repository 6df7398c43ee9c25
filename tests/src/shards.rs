//! Shard stores and shard services for integration tests, on either backend.
//!
//! * [`key_store`] / [`paste_store`] open a brand-new, migrated database per call:
//!   PostgreSQL through [`crate::postgres::fresh_database_url`], SQLite as a new file in one
//!   process-wide temporary directory.
//! * [`spawn_key_service`] / [`spawn_paste_service`] serve a store over real gRPC (with
//!   health, and reflection or TLS as the options say) on `127.0.0.1:0` in the current tokio runtime and hand back
//!   its address and a typed client. The `_over` variants hand back a channel over a
//!   [`Transport`] instead: the network, or in process as `pastebin up` calls its shards. The `_over` variants hand back a channel over a
//!   [`Transport`] instead: the network, or in process as `pastebin up` calls its shards. The server lives until the test's runtime is dropped.
//!   The `_owning` variants serve a shard that owns only some slots; [`even_split`] is
//!   the range of one of N shards.
//! * [`both_backends!`](crate::both_backends) runs one async test body as two
//!   `#[tokio::test]`s, `<name>::postgres` and `<name>::sqlite`.
//!
//! The SQLite directory (`pastebin-sqlite-tests-*` in the system temp dir) is a
//! [`tempfile::TempDir`] kept in a `static` for the whole test process. Rust never drops
//! statics, so, like the PostgreSQL harness, a detached watchdog shell removes the
//! directory once the test process has exited. If the watchdog cannot be spawned the
//! directory is simply left behind (a few small files, safe to delete).

use std::{
    future::pending,
    path::Path,
    sync::{Arc, OnceLock},
};

use chrono::{DateTime, Utc};
use pastebin_core::{
    Clock, DeleteToken, IdempotencyKey, OwnedSlots, PasteId, RequestHash, ResponseBody, SlotRange, SLOT_COUNT,
};
use pastebin_keys::{KeyClient, KeyStore, NewKey};
use pastebin_pastes::{NewPaste, PasteClient, PasteStore};
use pastebin_proto::shard::v1::ShardKind;
use pastebin_runtime::{
    db::{self, Database},
    grpc::{GrpcServer, ServerOptions, ShardChannel},
};
use pastebin_slots::shard_slots::{Resharding, ShardSlots};
use sqlx::migrate::Migrator;
use tokio::net::TcpListener;

/// The database a shard store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

/// Connections per pool unless a test asks for more.
pub const DEFAULT_POOL_SIZE: u32 = 5;

static SQLITE_DIR: OnceLock<tempfile::TempDir> = OnceLock::new();

/// The process-wide directory that holds every SQLite test database.
fn sqlite_dir() -> &'static Path {
    SQLITE_DIR
        .get_or_init(|| {
            let dir = tempfile::Builder::new()
                .prefix("pastebin-sqlite-tests-")
                .tempdir()
                .expect("create the SQLite test directory");
            remove_after_exit(dir.path());
            dir
        })
        .path()
}

/// Spawns a detached shell that waits for this process to exit and then deletes `dir`.
/// It has its own process group (Ctrl-C on the test run leaves it alone) and none of our
/// stdio (so `cargo test` does not wait for it).
fn remove_after_exit(dir: &Path) {
    use std::os::unix::process::CommandExt;
    let quoted = format!("'{}'", dir.to_string_lossy().replace('\'', r"'\''"));
    let script =
        format!("while kill -0 {pid} 2>/dev/null; do sleep 1; done; rm -rf {quoted}", pid = std::process::id());
    let _ = std::process::Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn();
}

/// URL of a brand-new, empty database on `backend`.
pub async fn fresh_url(backend: Backend) -> String {
    match backend {
        Backend::Postgres => crate::postgres::fresh_database_url().await,
        Backend::Sqlite => {
            let name = format!("{}.db", uuid::Uuid::new_v4().simple());
            crate::postgres::sqlite_url(sqlite_dir(), &name)
        }
    }
}

/// A shard database (a pool of up to `max_connections`, and the SQLite writer) on a fresh
/// database with `migrations` applied.
pub async fn fresh_pool(backend: Backend, migrations: &Migrator, max_connections: u32) -> Database {
    let url = fresh_url(backend).await;
    db::connect(&url, max_connections, migrations)
        .await
        .unwrap_or_else(|e| panic!("cannot open a fresh {backend:?} database: {e:#}"))
}

/// A key store (shard K) on a fresh database.
pub async fn key_store(backend: Backend, clock: Arc<dyn Clock>) -> KeyStore {
    KeyStore::new(fresh_pool(backend, &pastebin_keys::MIGRATIONS, DEFAULT_POOL_SIZE).await, clock)
}

/// A paste store (shard P) on a fresh database.
pub async fn paste_store(backend: Backend, clock: Arc<dyn Clock>) -> PasteStore {
    PasteStore::new(fresh_pool(backend, &pastebin_pastes::MIGRATIONS, DEFAULT_POOL_SIZE).await, clock)
}

async fn local_listener() -> (TcpListener, String) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1:0");
    let address = format!("http://{}", listener.local_addr().expect("local address"));
    (listener, address)
}

/// How a test reaches a shard service it spawned: over real gRPC on its
/// port, or in process, as `pastebin up`'s gateway and sweeper do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    Network,
    InProcess,
}

impl Transport {
    pub const BOTH: [Transport; 2] = [Transport::Network, Transport::InProcess];
}

/// Serves `server` on a free port until the runtime ends (health follows
/// readiness while it does), and hands back its address and a channel to it
/// over `transport`. The listener is bound before this returns, so the
/// channel can be used at once.
async fn spawn_server(server: GrpcServer, transport: Transport, what: &'static str) -> (String, ShardChannel) {
    let (listener, address) = local_listener().await;
    let in_process = server.in_process();
    tokio::spawn(async move {
        if let Err(e) = server.serve(listener, pending()).await {
            panic!("{what} stopped: {e:#}");
        }
    });
    let channel = match transport {
        Transport::Network => pastebin_shards::channel(&address, None).expect("channel to the service").into(),
        Transport::InProcess => in_process,
    };
    (address, channel)
}

/// Serves `store` as a key service owning every slot on a free port until the runtime
/// ends, with a client over the network.
pub async fn spawn_key_service(store: KeyStore, options: ServerOptions) -> (String, KeyClient) {
    spawn_key_service_owning(store, SlotRange::ALL, options).await
}

/// [`spawn_key_service`] for a shard that owns only `slots`.
pub async fn spawn_key_service_owning(
    store: KeyStore,
    slots: SlotRange,
    options: ServerOptions,
) -> (String, KeyClient) {
    let (address, channel) = spawn_key_service_over(store, slots, options, Transport::Network).await;
    (address, KeyClient::new(channel))
}

/// A key service owning `slots`, reached over `transport`.
pub async fn spawn_key_service_over(
    store: KeyStore,
    slots: SlotRange,
    options: ServerOptions,
    transport: Transport,
) -> (String, ShardChannel) {
    let slots = claimed(store.database(), ShardKind::Key, slots).await;
    spawn_server(pastebin_keys::server(store, slots, options).await.expect("key service"), transport, "key service")
        .await
}

/// Serves `store` as a paste service owning every slot on a free port until the runtime
/// ends, with a client over the network.
pub async fn spawn_paste_service(store: PasteStore, options: ServerOptions) -> (String, PasteClient) {
    spawn_paste_service_owning(store, SlotRange::ALL, options).await
}

/// [`spawn_paste_service`] for a shard that owns only `slots`.
pub async fn spawn_paste_service_owning(
    store: PasteStore,
    slots: SlotRange,
    options: ServerOptions,
) -> (String, PasteClient) {
    let (address, channel) = spawn_paste_service_over(store, slots, options, Transport::Network).await;
    (address, PasteClient::new(channel))
}

/// A paste service owning `slots`, reached over `transport`.
pub async fn spawn_paste_service_over(
    store: PasteStore,
    slots: SlotRange,
    options: ServerOptions,
    transport: Transport,
) -> (String, ShardChannel) {
    let slots = claimed(store.database(), ShardKind::Paste, slots).await;
    let server = pastebin_pastes::server(store, slots, options).await.expect("paste service");
    spawn_server(server, transport, "paste service").await
}

/// `slots` stored as the shard's range in `db`, as a shard started with
/// `--slots` (replacing what a test stored before) would own them.
pub async fn claimed(db: &Database, kind: ShardKind, slots: impl Into<OwnedSlots>) -> ShardSlots {
    ShardSlots::claim(db.pool(), kind, Some(slots.into()), Resharding::Allow, 0).await.expect("store the slot range")
}

/// The range of shard `index` of `count` when the 256 slots are split evenly in
/// contiguous runs (shard `i` owns the slots `s` with `s * count / 256 == i`).
pub fn even_split(index: usize, count: usize) -> SlotRange {
    let first = (index * SLOT_COUNT).div_ceil(count);
    let last = ((index + 1) * SLOT_COUNT).div_ceil(count) - 1;
    SlotRange::new(first as u8, last as u8).expect("an even split of 256 slots")
}

/// A request hash no other call will produce.
pub fn random_hash() -> RequestHash {
    let mut bytes = [0u8; 32];
    bytes[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    bytes[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    RequestHash(bytes)
}

/// A fresh key with a random hash, a paste id minted for the key's slot and `body`.
pub fn new_key(body: &str) -> NewKey {
    let key = IdempotencyKey::new_random();
    NewKey {
        key,
        request_hash: random_hash(),
        paste_id: PasteId::mint(key.slot()),
        response_body: ResponseBody::new(body.to_owned()),
    }
}

/// A paste row with a fresh id, created at `now` and expiring `ttl` later, and the token
/// that deletes it.
pub fn new_paste(now: DateTime<Utc>, ttl: chrono::Duration) -> (NewPaste, DeleteToken) {
    let token = DeleteToken::generate();
    let paste = NewPaste {
        id: PasteId::mint(IdempotencyKey::new_random().slot()),
        delete_token_hash: token.hash(),
        created_at: now,
        expires_at: now + ttl,
        size: 11,
        content_sha256: random_hash().0,
        attributes: Default::default(),
        origin: None,
    };
    (paste, token)
}

/// Runs each async test body on both backends. Each
/// `async fn name(backend: Backend) { ... }` becomes a module `name` holding two
/// `#[tokio::test]`s, `postgres` and `sqlite` (so `cargo test sqlite` picks one backend).
/// The body sees the enclosing file's items through `use super::*`.
///
/// ```text
/// pastebin_tests::both_backends! {
///     async fn begin_inserts_pending(backend: Backend) {
///         let store = key_store(backend, clock).await;
///         // ...
///     }
/// }
/// ```
#[macro_export]
macro_rules! both_backends {
    ($( $(#[$meta:meta])* async fn $name:ident($backend:ident : $ty:ty) $body:block )*) => {
        $(
            $(#[$meta])*
            mod $name {
                #[allow(unused_imports)]
                use super::*;

                async fn body($backend: $crate::shards::Backend) $body

                #[::tokio::test]
                async fn postgres() {
                    body($crate::shards::Backend::Postgres).await
                }

                #[::tokio::test]
                async fn sqlite() {
                    body($crate::shards::Backend::Sqlite).await
                }
            }
        )*
    };
}
