//! The gateway: the create saga, reads and deletes, over HTTP and gRPC.
//!
//! A request enters through [`http`] (axum) or [`grpc`] (tonic), both thin
//! translators onto [`Gateway`]. A create runs [`saga`]: K begin → object PUT
//! → P insert → K done → 201, with the compensations of docs/design.md#compensations. The
//! [`SlotMap`] routes a key's slot to its K shard and a paste id's prefix to
//! its P shard. Reads are served from a bounded [`cache`] while P keeps
//! confirming the paste live. Every failure is an [`ApiError`], mapped to HTTP and gRPC in
//! one place each. [`router`] routes the API to the handlers of [`http`], and
//! [`read_answers`] shapes the JSON and raw answers. A sealed paste's
//! envelope is checked by [`sealed`] and otherwise stored and served as
//! opaque bytes (docs/api.md#sealed-pastes). The browser's pages are
//! pastebin-pages, built on this crate's read API ([`Gateway::describe`],
//! [`Gateway::get`], [`Gateway::delete`]); the binary merges its router with
//! [`api_router`] for [`serve_http`]. [`failpoints`] are crash
//! points at each saga step boundary, compiled in only with
//! `--cfg pastebin_failpoints`. Before any create, the
//! admission gate checks the caller's [`create_tokens`] and its address's
//! [`RateLimit`]; the public listener's limits and headers are set where
//! the router is served (docs/design.md#edge), where [`access_log`] logs
//! and counts every request by its route's template.
//! [`Gateway::check_ready`] says whether the gateway can work at all (its
//! slot map, the object store); [`Gateway::check_shards`] names the shards
//! that cannot, without making the gateway not ready. Below the free-space
//! watermark of [`storage`] a create is refused with 507 before anything is
//! written (docs/operations.md#a-full-disk).

mod access_log;
mod admission;
mod cache;
mod colocated;
mod create_request;
pub mod create_tokens;
mod created;
mod error;
pub mod failpoints;
mod gateway;
mod grpc;
mod http;
mod read_answers;
mod readiness;
mod router;
mod saga;
mod sealed;
mod step;
mod storage;

pub use admission::{Delete, RateLimit, RateLimitedAction, Report, WithinRate};
pub use create_request::largest_body_bytes;
pub use created::Created;
pub use error::{ApiError, ErrorLine, RETRY_AFTER_SECONDS};
pub use gateway::{
    CreateCommand, Gateway, GatewaySettings, PasteView, ReadPaste, CREATES_IN_FLIGHT_PER_SHARD,
    DEFAULT_DELETE_RATE_LIMIT, DEFAULT_MIN_FREE_BYTES, DEFAULT_REPORT_RATE_LIMIT,
};
pub use grpc::PasteApiService;
pub use http::{accepts_html, shared_link_raw, wants_text};
pub use pastebin_shards::{SlotMap, SlotMapCell};
pub use router::{api_router, traced, ClientAddress, PasteIdParam, API_ROUTES, OPENAPI};

use std::future::Future;

use pastebin_edge::http::HttpLimits;
use tokio::net::TcpListener;

/// Serves `routes` (the [`api_router`], merged with the pages' router by the
/// binary) on the public `listener`, within `limits`, until `shutdown` resolves.
pub async fn serve_http(
    listener: TcpListener,
    routes: axum::Router,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    pastebin_edge::http::serve(listener, router::public_router(routes, &limits), limits, shutdown).await
}

/// Serves the public gRPC API (with health, reflection of the public API
/// alone, and TLS and limits as `options` say) until `shutdown`. A message
/// longer than the API decodes is refused on its prefix.
pub async fn serve_grpc(
    listener: TcpListener,
    gateway: Gateway,
    mut options: pastebin_runtime::grpc::ServerOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    options.limits.max_message_bytes = Some(grpc::max_message_bytes(gateway.settings().max_content_bytes));
    let routes = tonic::service::Routes::new(PasteApiService::new(gateway).into_server());
    let described = pastebin_runtime::grpc::Described {
        services: &[grpc::SERVICE_NAME],
        descriptors: pastebin_proto::api::v1::FILE_DESCRIPTOR_SET,
    };
    pastebin_runtime::grpc::GrpcServer::new(routes, described, options).await?.serve(listener, shutdown).await
}
