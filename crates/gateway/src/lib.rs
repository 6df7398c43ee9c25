//! The gateway: the create saga, reads and deletes, over HTTP and gRPC.
//!
//! A request enters through [`http`] (axum) or [`grpc`] (tonic), both thin
//! translators onto [`Gateway`]. A create runs [`saga`]: K begin → object PUT
//! → P insert → K done → 201, with the compensations of SPEC §4. The
//! [`SlotMap`] routes a key's slot to its K shard and a paste id's prefix to
//! its P shard. Every failure is an [`ApiError`], mapped to HTTP and gRPC in
//! one place each. Reads go through [`reader`] for pages (burn notices,
//! binary descriptions, [`highlight`]ed text kept in [`rendered`]) and
//! [`read_answers`] for the JSON and raw answers. [`failpoints`] are crash
//! points at each saga step boundary, compiled in only with
//! `--cfg pastebin_failpoints`.

mod created;
mod error;
pub mod failpoints;
mod gateway;
mod grpc;
mod highlight;
mod http;
mod pages;
mod read_answers;
mod reader;
mod rendered;
mod saga;
mod step;

pub use created::Created;
pub use error::ApiError;
pub use gateway::{CreateCommand, Gateway, GatewaySettings, PasteView, ReadPaste};
pub use grpc::PasteApiService;
pub use pastebin_shards::{SlotMap, SlotMapCell};

use std::future::Future;

use tokio::net::TcpListener;

/// Serves the HTTP API on `listener` until `shutdown` resolves.
pub async fn serve_http(
    listener: TcpListener,
    gateway: Gateway,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    use axum::serve::ListenerExt;
    // No Nagle delay on small answers (a 201 is a few hundred bytes).
    let listener = listener.tap_io(|tcp| {
        if let Err(error) = tcp.set_nodelay(true) {
            tracing::warn!(%error, "cannot set TCP_NODELAY");
        }
    });
    axum::serve(listener, http::router(gateway)).with_graceful_shutdown(shutdown).await?;
    Ok(())
}

/// Serves the public gRPC API (with health, reflection of the public API
/// alone, and TLS as `options` say) until `shutdown`.
pub async fn serve_grpc(
    listener: TcpListener,
    gateway: Gateway,
    options: pastebin_runtime::grpc::ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let routes = tonic::service::Routes::new(PasteApiService::new(gateway).into_server());
    let described = pastebin_runtime::grpc::Described {
        services: &[grpc::SERVICE_NAME],
        descriptors: pastebin_proto::api::v1::FILE_DESCRIPTOR_SET,
    };
    pastebin_runtime::grpc::serve(listener, routes, described, options, shutdown).await
}
