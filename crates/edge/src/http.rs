//! Serving an axum router on a public listener with the limits such a
//! listener needs (docs/design.md#edge): a header-read timeout that is also
//! the idle timeout of a kept-alive connection, a total deadline for a
//! request's body, a whole request timeout, caps on requests in flight and
//! on connections, and each client address's share of both
//! ([`crate::client_shares`]). Past a limit the server answers at once (408,
//! or 503 with `Retry-After`) or closes the connection; it never queues
//! without bound.

use std::{
    future::Future,
    net::{IpAddr, SocketAddr},
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use axum::{
    body::Body,
    error_handling::HandleErrorLayer,
    extract::{connect_info::ConnectInfo, Request, State},
    http::{header, HeaderValue, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
    Router,
};
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper_util::{
    rt::{TokioIo, TokioTimer},
    server::graceful::GracefulShutdown,
    service::TowerToHyperService,
};
use ipnet::IpNet;
use tokio::{net::TcpListener, sync::Semaphore};
use tower::{limit::GlobalConcurrencyLimitLayer, load_shed::LoadShedLayer, ServiceBuilder};
use tower_http::timeout::TimeoutLayer;

use crate::{
    body_budget::Short,
    client_shares::{Share, Shares, DEFAULT_CONNECTIONS_PER_CLIENT, DEFAULT_REQUESTS_PER_CLIENT, SIZED_FOR_ADDRESSES},
    refusals::{refused, Protocol},
    send_timeout::{SendLimits, SendTimeout},
};

/// How long a client should wait before trying again after a 503 from a full server.
pub const OVERLOADED_RETRY_AFTER_SECONDS: u64 = 1;

/// `--max-connections` when not given: twice what the addresses the
/// defaults are sized for hold at their full share, so that as many again
/// (clients behind one NAT, everyone else) still get in.
pub const DEFAULT_MAX_CONNECTIONS: usize = 2048;

/// `--max-requests-in-flight` when not given, sized as the connections.
pub const DEFAULT_MAX_REQUESTS_IN_FLIGHT: usize = 1024;

const _: () = assert!(SIZED_FOR_ADDRESSES * DEFAULT_CONNECTIONS_PER_CLIENT < DEFAULT_MAX_CONNECTIONS);
const _: () = assert!(SIZED_FOR_ADDRESSES * DEFAULT_REQUESTS_PER_CLIENT < DEFAULT_MAX_REQUESTS_IN_FLIGHT);

/// The limits of one HTTP listener. The defaults suit a public instance.
#[derive(Debug, Clone)]
pub struct HttpLimits {
    /// Time to receive a request's headers, counted from when the server
    /// starts waiting for them: so it also closes an idle kept-alive connection.
    pub header_read_timeout: Duration,
    /// Longest time from a request's headers to the end of its body (then
    /// 408): a total deadline, so a body trickled a byte at a time ends too.
    pub body_read_timeout: Duration,
    /// Longest time from headers to the whole answer (then 408).
    pub request_timeout: Duration,
    /// Longest a write of an answer may wait for the client to read; then
    /// the connection is closed ([`crate::send_timeout`]).
    pub send_timeout: Duration,
    /// Bytes per second a client must read an answer at while the server
    /// waits to send it; slower, and its patience (the send timeout) runs
    /// out. 0 is no minimum.
    pub send_min_bytes_per_second: u64,
    /// Open connections; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// Requests being handled at once; one more is answered 503 at once.
    pub max_requests_in_flight: usize,
    /// Open connections from one client address (a trusted proxy's are
    /// counted only globally: it carries many clients).
    pub max_connections_per_client: usize,
    /// Requests being handled at once for one client address.
    pub max_requests_in_flight_per_client: usize,
    /// Request-body bytes in flight for one client address.
    pub max_body_bytes_in_flight_per_client: usize,
    /// The longest body any route takes: what a body of no declared length
    /// (chunked) is charged, and the most a longer declared one is.
    pub max_body_bytes: usize,
    /// Proxies whose `X-Forwarded-For` names the client.
    pub trusted_proxies: Vec<IpNet>,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            send_timeout: Duration::from_secs(10),
            send_min_bytes_per_second: 1024,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            max_requests_in_flight: DEFAULT_MAX_REQUESTS_IN_FLIGHT,
            max_connections_per_client: DEFAULT_CONNECTIONS_PER_CLIENT,
            max_requests_in_flight_per_client: DEFAULT_REQUESTS_PER_CLIENT,
            max_body_bytes_in_flight_per_client: crate::client_shares::DEFAULT_BODY_BYTES_PER_CLIENT,
            max_body_bytes: crate::client_shares::DEFAULT_BODY_BYTES_PER_CLIENT,
            trusted_proxies: Vec::new(),
        }
    }
}

/// Who sent a request, as every limit counts it: the socket peer, or the
/// address a trusted proxy forwarded. The router's handlers read it here
/// rather than work it out again.
#[derive(Debug, Clone)]
pub struct Client {
    pub address: IpAddr,
}

/// The shares every request of one listener draws from.
#[derive(Debug, Clone)]
struct ClientLimits {
    requests: Arc<Shares>,
    body_bytes: Arc<Shares>,
    max_body_bytes: usize,
    trusted_proxies: Arc<[IpNet]>,
}

/// `router` with the per-request limits: the client's share of requests in
/// flight (checked first, so a client past it never holds a global slot),
/// the whole-request timeout (408) and the global cap on requests in flight
/// (503 + `Retry-After`, without waiting); what an answer holds of the
/// answer budget is held by its body until it is dropped.
pub fn limited(router: Router, limits: &HttpLimits) -> Router {
    let shares = ClientLimits {
        requests: Shares::new(limits.max_requests_in_flight_per_client.max(1)),
        body_bytes: Shares::new(limits.max_body_bytes_in_flight_per_client),
        max_body_bytes: limits.max_body_bytes,
        trusted_proxies: limits.trusted_proxies.clone().into(),
    };
    router
        .layer(axum::middleware::map_response(crate::answer_budget::held_until_sent))
        .layer(
            ServiceBuilder::new()
                .layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, limits.request_timeout))
                .layer(HandleErrorLayer::new(|_: tower::BoxError| async { overloaded("overloaded") }))
                .layer(LoadShedLayer::new())
                .layer(GlobalConcurrencyLimitLayer::new(limits.max_requests_in_flight.max(1))),
        )
        .layer(axum::middleware::from_fn_with_state(shares, client_share))
}

/// Names the request's [`Client`] and holds one of its request slots, and
/// the charge for its body, for as long as the handler runs; past the
/// client's share of either, or the body budget, 503 at once, before a
/// byte of the body is read. Every body of every route is charged here, in
/// one place, so no route can forget to (docs/security.md#fair-shares).
async fn client_share(State(shares): State<ClientLimits>, mut request: Request, next: Next) -> Response {
    let Some(peer) = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|info| info.0.ip()) else {
        return next.run(request).await;
    };
    let forwarded: Vec<&str> =
        request.headers().get_all("x-forwarded-for").iter().filter_map(|value| value.to_str().ok()).collect();
    let address = crate::client_shares::client_address(peer, &forwarded, &shares.trusted_proxies);
    let Some(_slot) = shares.requests.try_take(address, 1) else {
        return overloaded("client_requests");
    };
    let _body = match body_bytes(request.body(), shares.max_body_bytes) {
        None => None,
        Some(bytes) => match crate::body_budget::charge(Some((&shares.body_bytes, address)), bytes) {
            Ok(charge) => Some(charge),
            Err(Short::ClientShare) => return overloaded("client_body_bytes"),
            Err(Short::Budget) => return overloaded("body_budget"),
        },
    };
    request.extensions_mut().insert(Client { address });
    next.run(request).await
}

/// What a request's body is charged before it is read: its declared
/// length, or the longest any route takes when it declares none (or more);
/// `None` for a request without a body.
fn body_bytes(body: &Body, max_body_bytes: usize) -> Option<usize> {
    if body.is_end_stream() {
        return None;
    }
    let declared = body.size_hint().exact().and_then(|length| usize::try_from(length).ok());
    Some(declared.map_or(max_body_bytes, |length| length.min(max_body_bytes))).filter(|bytes| *bytes > 0)
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

/// The 503 of a full server (or of a client past its share), counted by `reason`.
pub fn overloaded(reason: &'static str) -> Response {
    refused(Protocol::Http, reason);
    let mut response = StatusCode::SERVICE_UNAVAILABLE.into_response();
    response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(OVERLOADED_RETRY_AFTER_SECONDS));
    response
}

/// A place for a new connection from `peer` among all connections and among
/// its client's (a trusted proxy's are counted only globally), or `None`:
/// then the connection is closed unanswered, and the refusal counted.
fn connection_permits(
    connections: &Arc<Semaphore>,
    per_client: &Arc<Shares>,
    limits: &HttpLimits,
    peer: SocketAddr,
) -> Option<(tokio::sync::OwnedSemaphorePermit, Option<Share>)> {
    let Ok(permit) = connections.clone().try_acquire_owned() else {
        refused(Protocol::Http, "connection_cap");
        tracing::debug!(%peer, "connection cap reached; closing the new connection");
        return None;
    };
    if limits.trusted_proxies.iter().any(|proxy| proxy.contains(&peer.ip())) {
        return Some((permit, None));
    }
    let Some(share) = per_client.try_take(peer.ip(), 1) else {
        refused(Protocol::Http, "client_connections");
        tracing::debug!(%peer, "this client's connection share is full; closing the new connection");
        return None;
    };
    Some((permit, Some(share)))
}

/// Why a request body ended early: its total deadline passed.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0:?}")]
pub struct BodyDeadlineExceeded(Duration);

/// A request body that fails once its deadline, set when its headers
/// arrived, has passed: unlike a timeout between frames, a body that
/// trickles in a byte at a time still ends on time.
struct DeadlineBody<B> {
    inner: B,
    limit: Duration,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

impl<B> DeadlineBody<B> {
    fn new(inner: B, limit: Duration) -> Self {
        Self { inner, limit, deadline: Box::pin(tokio::time::sleep(limit)) }
    }
}

impl<B> HttpBody for DeadlineBody<B>
where
    B: HttpBody + Unpin,
    B::Error: Into<tower::BoxError>,
{
    type Data = B::Data;
    type Error = tower::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|frame| frame.map_err(Into::into)));
        }
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(BodyDeadlineExceeded(self.limit).into()))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What one connection buffers at most, each way: a request's headers
/// (more is answered 431), and the answer queued for the socket beyond the
/// chunk being written (hyper asks the body for more only below it), so an
/// answer streamed to a slow reader holds tens of KiB, not the answer.
const CONNECTION_BUFFER_BYTES: usize = 64 * 1024;

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
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_buf_size(CONNECTION_BUFFER_BYTES)
        .writev(true);
    // A permit per open connection: a connection cap has no tower layer,
    // because a layer only ever sees requests.
    let connections = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let connections_per_client = Shares::new(limits.max_connections_per_client.max(1));
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = accept(&listener) => accepted,
            () = &mut shutdown => break,
        };
        let Some(permits) = connection_permits(&connections, &connections_per_client, &limits, peer) else {
            continue;
        };
        let body_deadline = limits.body_read_timeout;
        let service = ServiceBuilder::new()
            .map_request(move |request: axum::http::Request<hyper::body::Incoming>| {
                let mut request = request.map(|body| Body::new(DeadlineBody::new(body, body_deadline)));
                request.extensions_mut().insert(ConnectInfo(peer));
                request
            })
            .service(app.clone());
        let send = SendLimits { timeout: limits.send_timeout, min_bytes_per_second: limits.send_min_bytes_per_second };
        let stream = TokioIo::new(SendTimeout::new(stream, send));
        let connection = graceful.watch(http1.serve_connection(stream, TowerToHyperService::new(service)));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%error, "connection ended with an error");
            }
            drop(permits);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.request_timeout, graceful.shutdown()).await.is_err() {
        tracing::warn!("requests still in flight at shutdown were cut off");
    }
    Ok(())
}
