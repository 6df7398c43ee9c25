//! Serving an axum router on a public listener with the limits such a
//! listener needs (docs/design.md#edge): a header-read timeout that is also
//! the idle timeout of a kept-alive connection, a body-read timeout, a whole
//! request timeout, a cap on requests in flight and a cap on connections.
//! Past a limit the server answers at once (408, or 503 with `Retry-After`)
//! or closes the connection; it never queues without bound.

use std::{future::Future, sync::Arc, time::Duration};

use axum::{
    error_handling::HandleErrorLayer,
    extract::connect_info::ConnectInfo,
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Router,
};
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
    service::TowerToHyperService,
};
use tokio::{net::TcpListener, sync::Semaphore};
use tower::{limit::GlobalConcurrencyLimitLayer, load_shed::LoadShedLayer, ServiceBuilder};
use tower_http::timeout::{RequestBodyTimeoutLayer, TimeoutLayer};

/// How long a client should wait before trying again after a 503 from a full server.
pub const OVERLOADED_RETRY_AFTER_SECONDS: u64 = 1;

/// The limits of one HTTP listener. The defaults suit a public instance.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Time to receive a request's headers, counted from when the server
    /// starts waiting for them: so it also closes an idle kept-alive connection.
    pub header_read_timeout: Duration,
    /// Longest silence between two pieces of a request body (then 408).
    pub body_read_timeout: Duration,
    /// Longest time from headers to the whole answer (then 408).
    pub request_timeout: Duration,
    /// Open connections; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// Requests being handled at once; one more is answered 503 at once.
    pub max_requests_in_flight: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_requests_in_flight: 256,
        }
    }
}

/// `router` with the per-request limits: the whole-request timeout (408)
/// and the cap on requests in flight (503 + `Retry-After`, without waiting).
pub fn limited(router: Router, limits: &HttpLimits) -> Router {
    router.layer(
        ServiceBuilder::new()
            .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, limits.request_timeout))
            .layer(HandleErrorLayer::new(|_: tower::BoxError| async { overloaded() }))
            .layer(LoadShedLayer::new())
            .layer(GlobalConcurrencyLimitLayer::new(limits.max_requests_in_flight.max(1))),
    )
}

/// The next connection, with `TCP_NODELAY` (a 201 is a few hundred bytes:
/// no Nagle delay). A failed accept (out of file descriptors and the like)
/// pauses rather than spins.
async fn accept(listener: &TcpListener) -> (tokio::net::TcpStream, std::net::SocketAddr) {
    loop {
        match listener.accept().await {
            Ok((stream, peer)) => {
                if let Err(error) = stream.set_nodelay(true) {
                    tracing::debug!(%error, "cannot set TCP_NODELAY");
                }
                return (stream, peer);
            }
            Err(error) => {
                tracing::warn!(%error, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

fn overloaded() -> Response {
    metrics::counter!(crate::metrics::EDGE_REFUSALS, "reason" => "overloaded").increment(1);
    let mut response = StatusCode::SERVICE_UNAVAILABLE.into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(OVERLOADED_RETRY_AFTER_SECONDS));
    response
}

/// Serves `app` (HTTP/1.1) on `listener` until `shutdown` resolves, then
/// lets requests in flight finish for at most the request timeout. Each
/// request carries its peer address as [`ConnectInfo<SocketAddr>`].
///
/// HTTP/1.1 only: a protocol-sniffing server waits for the first bytes with
/// no timeout, which is exactly the slow client this listener must drop.
/// HTTP/2 clients use the gRPC listener or a TLS-terminating proxy.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: HttpLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    // A permit per open connection: a connection cap has no tower layer,
    // because a layer only ever sees requests.
    let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = accept(&listener) => accepted,
            () = &mut shutdown => break,
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            metrics::counter!(crate::metrics::EDGE_REFUSALS, "reason" => "connection_cap").increment(1);
            tracing::debug!(%peer, "connection cap reached; closing the new connection");
            continue;
        };
        let service = ServiceBuilder::new()
            .layer(RequestBodyTimeoutLayer::new(limits.body_read_timeout))
            .map_request(move |mut request: axum::http::Request<_>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                request
            })
            .service(app.clone());
        let connection =
            graceful.watch(http1.serve_connection(TokioIo::new(stream), TowerToHyperService::new(service)));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.request_timeout, graceful.shutdown()).await.is_err() {
        tracing::warn!("requests still in flight at shutdown were cut off");
    }
    Ok(())
}
