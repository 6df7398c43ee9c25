//! What a gRPC server lets in (docs/security.md#total-bounds), connections
//! and calls alike, with the same shares per client address as HTTP
//! ([`crate::client_shares`]) checked before the process's caps:
//!
//! - connections: at most so many in all, and per client address, each
//!   closed as soon as it is accepted past either ([`GrpcLimits::admitted`]);
//!   on the public listener each is on a clock (`connection_clock`): its
//!   first call within the preface timeout of its accept, a call again
//!   within the idle timeout of its last one, and closed at its maximum age;
//! - calls: at most so many streams open at once per client address
//!   (RESOURCE_EXHAUSTED with a `retry-after` hint past it);
//! - request messages: each paid for, before it is read, from its client's
//!   share of message bytes in flight and then from the process's body
//!   budget ([`crate::body_budget`]); tonic's decoder reserves a message's
//!   declared length as soon as it sees the 5-byte prefix, so without a
//!   charge up front 64 half-sent 4 MiB messages on one connection would
//!   hold 256 MiB. A message longer than the server decodes is refused on
//!   its prefix, and one that has not arrived within the message deadline
//!   ends its call (DEADLINE_EXCEEDED) and gives its charge back at once,
//!   rather than hold it for the whole call timeout;
//! - answers: on the public listener what an answer hands over must be
//!   taken by the client within the send timeout, or its connection is
//!   closed ([`GrpcLimits::send_timeout`]); an answer that waits for its own
//!   next message (a health watch) is not on that clock;
//! - HTTP/2 itself: header lists, streams reset before they are served
//!   (rapid reset), streams the server resets for a client's error
//!   ([`GrpcLimits::server`]).

use std::{
    future::Future,
    net::IpAddr,
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use ipnet::IpNet;
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    sync::{OwnedSemaphorePermit, Semaphore},
};
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::{Connected, TcpConnectInfo, TlsConnectInfo};

use crate::{
    answer_budget::HeldAnswer,
    body_budget::{self, BodyCharge, Short},
    client_shares::{
        client_address, Share, Shares, DEFAULT_CONNECTIONS_PER_CLIENT, DEFAULT_REQUESTS_PER_CLIENT, SIZED_FOR_ADDRESSES,
    },
    connection_clock::{CallOnClock, ClockWatch, ConnectionClock, ConnectionRules},
    refusals::{refused, Protocol},
};

/// The length-prefixed message framing of gRPC: a compressed flag, then
/// the message length as 4 big-endian bytes.
const PREFIX_BYTES: usize = 5;

/// Seconds a client is told to wait (`retry-after` metadata) after a refusal
/// that passes once what is in flight ends.
pub const RETRY_AFTER_SECONDS: u64 = 1;

/// `--grpc-max-connections` when not given: as for HTTP
/// ([`crate::http::DEFAULT_MAX_CONNECTIONS`]), twice what the addresses the
/// defaults are sized for hold at their full share.
pub const DEFAULT_MAX_CONNECTIONS: usize = 2048;

const _: () = assert!(SIZED_FOR_ADDRESSES * DEFAULT_CONNECTIONS_PER_CLIENT < DEFAULT_MAX_CONNECTIONS);

/// The limits of one gRPC server (docs/design.md#edge). The defaults suit
/// the public gateway and the internal shards alike; only the public
/// listener counts shares per client ([`ClientLimits`]).
#[derive(Debug, Clone)]
pub struct GrpcLimits {
    /// Connections open at once; one more is closed as soon as it is accepted.
    pub max_connections: usize,
    /// HTTP/2 streams (calls) open at once on one connection.
    pub max_concurrent_streams: u32,
    /// Calls handled at once per connection; more wait for a slot.
    pub max_calls_per_connection: usize,
    /// A ping after this much silence; no answer within the same time closes the connection.
    pub keepalive_interval: Duration,
    /// A call with no `grpc-timeout` of its own ends DEADLINE_EXCEEDED after this.
    pub call_timeout: Duration,
    /// Longest a request message may take to arrive, from the call's start
    /// for the first message and from the first byte of its prefix for the
    /// next ones; then the call ends DEADLINE_EXCEEDED and its charge is given back.
    pub message_deadline: Duration,
    /// The longest message the server decodes, when it says: a prefix that
    /// declares more is refused (RESOURCE_EXHAUSTED) before anything is charged.
    pub max_message_bytes: Option<usize>,
    /// Longest an answer may wait for its client to take what it handed
    /// over (its headers, then each message) before hyper asks it for
    /// more; past it the answer's connection is closed, ending its calls
    /// and giving their shares back. An answer waiting for its own next
    /// message (a health watch between two changes) is not waiting for the
    /// client and is not on this clock. `None` on the internal listeners,
    /// whose one client (the gateway) reads as fast as its callers do.
    ///
    /// A client that sets its HTTP/2 window to 0 is never sent a byte, so
    /// hyper never polls the answer's body and no timer inside it could
    /// fire; the connection, which is polled while it reads, keeps the
    /// clock (`connection_clock`).
    pub send_timeout: Option<Duration>,
    /// Longest a new connection may take, from its accept, to open its
    /// first call (TLS handshake, HTTP/2 preface and the call's headers);
    /// then it is closed. `None` on the internal listeners.
    pub preface_timeout: Option<Duration>,
    /// Longest a connection may stay open with no call open, after its
    /// last call ended; then it is closed. An HTTP/2 connection that only
    /// answers pings is idle. `None` on the internal listeners.
    pub idle_timeout: Option<Duration>,
    /// Age at which a connection is told to go (a graceful GOAWAY: calls
    /// open finish, new ones go to a new connection); the call timeout
    /// later it is closed, whatever is still open on it (a watch).
    /// `None` on the internal listeners.
    pub max_connection_age: Option<Duration>,
    /// Bytes of one request's header list (HTTP/2 `SETTINGS_MAX_HEADER_LIST_SIZE`).
    pub max_header_list_bytes: u32,
    /// Streams a client may open and reset before the server has served
    /// them (rapid reset, CVE-2023-44487); past it the connection is closed (GOAWAY).
    pub max_pending_accept_reset_streams: usize,
    /// Streams the server may reset for a client's protocol errors on one
    /// connection; past it the connection is closed (GOAWAY).
    pub max_local_error_reset_streams: usize,
    /// Each client address's share, on a public listener; `None` on the
    /// internal ones, whose one client (the gateway) carries everyone's calls.
    pub per_client: Option<ClientLimits>,
}

impl Default for GrpcLimits {
    fn default() -> Self {
        Self {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            // HTTP/2's advised minimum: enough for a gateway's calls to a
            // shard, few enough that one connection's half-sent messages
            // cannot take the whole body budget alone.
            max_concurrent_streams: 100,
            max_calls_per_connection: 100,
            keepalive_interval: Duration::from_secs(30),
            call_timeout: Duration::from_secs(30),
            message_deadline: Duration::from_secs(5),
            max_message_bytes: None,
            send_timeout: None,
            preface_timeout: None,
            idle_timeout: None,
            max_connection_age: None,
            // hyper's own default, set here so that it is written down.
            max_header_list_bytes: 16 * 1024,
            // h2's own default.
            max_pending_accept_reset_streams: 20,
            // hyper's default, which tonic turns off unless it is set.
            max_local_error_reset_streams: 1024,
            per_client: None,
        }
    }
}

/// What one client address may hold of a public gRPC listener: the same
/// rule (and flags) as the HTTP listener's shares.
#[derive(Debug, Clone)]
pub struct ClientLimits {
    /// Open connections (a trusted proxy's are counted only globally).
    pub connections: usize,
    /// Calls (HTTP/2 streams) open at once, over all its connections.
    pub streams: usize,
    /// Request-message bytes in flight, as their prefixes declare them.
    pub message_bytes: usize,
    /// Proxies whose `x-forwarded-for` names the client.
    pub trusted_proxies: Vec<IpNet>,
}

impl Default for ClientLimits {
    fn default() -> Self {
        Self {
            connections: DEFAULT_CONNECTIONS_PER_CLIENT,
            streams: DEFAULT_REQUESTS_PER_CLIENT,
            message_bytes: crate::client_shares::DEFAULT_BODY_BYTES_PER_CLIENT,
            trusted_proxies: Vec::new(),
        }
    }
}

impl GrpcLimits {
    /// A tonic server with these limits' HTTP/2 bounds and call timeout set.
    pub fn server(&self) -> tonic::transport::Server {
        let server = tonic::transport::Server::builder();
        // Tonic's GOAWAY at the age, and no grace of tonic's: with one it
        // skips the GOAWAY; the connection's clock closes it a call timeout
        // later instead (`ConnectionRules::closed_at`).
        let server = match self.max_connection_age {
            Some(age) => server.max_connection_age(age),
            None => server,
        };
        server
            .max_concurrent_streams(self.max_concurrent_streams.max(1))
            .concurrency_limit_per_connection(self.max_calls_per_connection.max(1))
            .http2_keepalive_interval(Some(self.keepalive_interval))
            .http2_keepalive_timeout(Some(self.keepalive_interval))
            .http2_max_header_list_size(self.max_header_list_bytes)
            .http2_max_pending_accept_reset_streams(Some(self.max_pending_accept_reset_streams))
            .http2_max_local_error_reset_streams(Some(self.max_local_error_reset_streams))
            .timeout(self.call_timeout)
    }

    /// The layer that admits each call: its client's stream share, then
    /// each of its messages charged as its prefix arrives.
    pub fn admission(&self) -> Admission {
        let shares = self.per_client.as_ref().map(|limits| {
            Arc::new(CallShares {
                streams: Shares::new(limits.streams.max(1)),
                message_bytes: Shares::new(limits.message_bytes),
                trusted_proxies: limits.trusted_proxies.clone().into(),
            })
        });
        Admission {
            shares,
            messages: MessageRules { deadline: self.message_deadline, max_bytes: self.max_message_bytes },
        }
    }

    /// `incoming` with at most `max_connections` open at once, and at most
    /// the client's share from one address: one more is closed as soon as
    /// it is accepted (a cap has no tower layer: layers only see requests),
    /// and counted.
    pub fn admitted<IO: PeerAddress, E>(
        &self,
        incoming: impl Stream<Item = Result<IO, E>>,
    ) -> impl Stream<Item = Result<AdmittedConnection<IO>, E>> {
        let open = Arc::new(Semaphore::new(self.max_connections.max(1)));
        let per_client = self.per_client.as_ref().map(|limits| {
            let trusted: Arc<[IpNet]> = limits.trusted_proxies.clone().into();
            (Shares::new(limits.connections.max(1)), trusted)
        });
        let rules = ConnectionRules {
            preface_timeout: self.preface_timeout,
            idle_timeout: self.idle_timeout,
            send_timeout: self.send_timeout,
            closed_at: self.max_connection_age.map(|age| age + self.call_timeout),
        };
        incoming.filter_map(move |accepted| match accepted {
            Err(error) => Some(Err(error)),
            Ok(io) => {
                let Ok(permit) = open.clone().try_acquire_owned() else {
                    refused(Protocol::Grpc, "connection_cap");
                    tracing::debug!("gRPC connection cap reached; closing the new connection");
                    return None;
                };
                let share = match (&per_client, io.peer_ip()) {
                    (Some((shares, trusted)), Some(peer)) if !trusted.iter().any(|proxy| proxy.contains(&peer)) => {
                        let Some(share) = shares.try_take(peer, 1) else {
                            refused(Protocol::Grpc, "client_connections");
                            tracing::debug!(%peer, "this client's gRPC connection share is full; closing");
                            return None;
                        };
                        Some(share)
                    }
                    _ => None,
                };
                let clock = ConnectionClock::start(rules).map(ClockWatch::new);
                Some(Ok(AdmittedConnection { io, clock, _held: (permit, share) }))
            }
        })
    }
}

/// The IP address at the other end of an accepted connection, if it has one.
pub trait PeerAddress {
    fn peer_ip(&self) -> Option<IpAddr>;
}

impl PeerAddress for tokio::net::TcpStream {
    fn peer_ip(&self) -> Option<IpAddr> {
        self.peer_addr().ok().map(|peer| peer.ip())
    }
}

/// A Unix socket's peer is a process of the same account: no address, no share.
impl PeerAddress for tokio::net::UnixStream {
    fn peer_ip(&self) -> Option<IpAddr> {
        None
    }
}

/// The client a call was admitted as: the socket peer, or the address a
/// trusted proxy forwarded. Handlers read it from the request's extensions
/// rather than work it out again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Client(pub IpAddr);

/// The per-client tables every call of one listener draws from.
#[derive(Debug)]
struct CallShares {
    streams: Arc<Shares>,
    message_bytes: Arc<Shares>,
    trusted_proxies: Arc<[IpNet]>,
}

/// How every request message is bounded.
#[derive(Debug, Clone, Copy)]
struct MessageRules {
    deadline: Duration,
    max_bytes: Option<usize>,
}

/// The tower layer of [`GrpcLimits::admission`].
#[derive(Debug, Clone)]
pub struct Admission {
    shares: Option<Arc<CallShares>>,
    messages: MessageRules,
}

impl<S> tower::Layer<S> for Admission {
    type Service = Admitted<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Admitted { inner, admission: self.clone() }
    }
}

/// A gRPC service behind [`Admission`].
#[derive(Debug, Clone)]
pub struct Admitted<S> {
    inner: S,
    admission: Admission,
}

type Call<E> = Pin<Box<dyn Future<Output = Result<http::Response<tonic::body::Body>, E>> + Send>>;

impl<S> tower::Service<http::Request<tonic::body::Body>> for Admitted<S>
where
    S: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Call<S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<tonic::body::Body>) -> Self::Future {
        let connection = connection_of(&request).cloned();
        let client = client_of(&request, connection.as_ref(), self.admission.shares.as_deref());
        let mut stream = None;
        let mut bytes = None;
        if let (Some(shares), Some(client)) = (&self.admission.shares, client) {
            let Some(share) = shares.streams.try_take(client, 1) else {
                let refusal = refusal(
                    "client_streams",
                    tonic::Status::resource_exhausted(
                        "this address has as many calls open as it may; retry when one has ended",
                    ),
                );
                return Box::pin(std::future::ready(Ok(refusal.into_http())));
            };
            stream = Some(share);
            bytes = Some((shares.message_bytes.clone(), client));
        }
        if let Some(client) = client {
            request.extensions_mut().insert(Client(client));
        }
        let clock = connection.and_then(|connection| {
            // tonic's `Request::remote_addr` finds the peer here.
            request.extensions_mut().insert(connection.inner);
            connection.clock
        });
        // The call is open on its connection from here until its answer is dropped.
        let mut on_clock = clock.as_ref().map(ConnectionClock::call_opened);
        let messages = self.admission.messages;
        let request = request.map(|body| tonic::body::Body::new(ChargedMessages::new(body, messages, bytes)));
        // The service that was polled ready answers this call; its clone waits for the next.
        let ready = self.inner.clone();
        let call = std::mem::replace(&mut self.inner, ready).call(request);
        Box::pin(async move {
            let response = call.await?;
            // The stream's share, and what the answer holds of the answer
            // budget, are held until the answer has been sent whole; its
            // headers are handed over, for the client to take.
            if let Some(on_clock) = &mut on_clock {
                on_clock.handed_over();
            }
            let mut response = response;
            let held = response.extensions_mut().remove::<HeldAnswer>();
            Ok(response.map(|body| tonic::body::Body::new(Holding { body, _share: stream, _held: held, on_clock })))
        })
    }
}

/// The admitted TCP connection a call came on, over TLS or not; `None` on a Unix socket.
fn connection_of<B>(request: &http::Request<B>) -> Option<&ConnectionInfo<TcpConnectInfo>> {
    let extensions = request.extensions();
    extensions
        .get::<ConnectionInfo<TcpConnectInfo>>()
        .or_else(|| extensions.get::<TlsConnectInfo<ConnectionInfo<TcpConnectInfo>>>().map(TlsConnectInfo::get_ref))
}

/// The call's client: the connection's peer, or behind a trusted proxy the
/// address it forwarded (`x-forwarded-for`); `None` on a Unix socket.
fn client_of<B>(
    request: &http::Request<B>,
    connection: Option<&ConnectionInfo<TcpConnectInfo>>,
    shares: Option<&CallShares>,
) -> Option<IpAddr> {
    let peer = connection?.inner.remote_addr()?.ip();
    let Some(shares) = shares else { return Some(peer) };
    let forwarded: Vec<&str> =
        request.headers().get_all("x-forwarded-for").iter().filter_map(|value| value.to_str().ok()).collect();
    Some(client_address(peer, &forwarded, &shares.trusted_proxies))
}

/// `status` with the retry hint, counted by `reason`.
fn refusal(reason: &'static str, mut status: tonic::Status) -> tonic::Status {
    refused(Protocol::Grpc, reason);
    status.metadata_mut().insert("retry-after", RETRY_AFTER_SECONDS.into());
    status
}

/// An answer's body holding the call's stream share, what it holds of the
/// answer budget, and its place on its connection's clock, until it is dropped.
struct Holding {
    body: tonic::body::Body,
    _share: Option<Share>,
    _held: Option<HeldAnswer>,
    on_clock: Option<CallOnClock>,
}

impl HttpBody for Holding {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        // Hyper asks for more only once the client has taken what it had.
        if let Some(on_clock) = &mut self.on_clock {
            on_clock.taken();
        }
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let (Some(on_clock), Poll::Ready(Some(Ok(frame)))) = (&mut self.on_clock, &polled) {
            if frame.is_data() {
                on_clock.handed_over();
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// A gRPC request body that holds, for the message now arriving, as many
/// bytes as its prefix declares: of its client's share, then of the body
/// budget. One message at a time: a message's bytes are all through before
/// the next prefix, and tonic decodes a message as soon as its last byte is in.
struct ChargedMessages<B> {
    inner: B,
    rules: MessageRules,
    /// The client's share of message bytes, on a public listener.
    client: Option<(Arc<Shares>, IpAddr)>,
    prefix: [u8; PREFIX_BYTES],
    prefix_read: usize,
    message_left: usize,
    charge: Option<BodyCharge>,
    /// When the message now arriving must be in; `None` between messages.
    due: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<B> ChargedMessages<B> {
    fn new(inner: B, rules: MessageRules, client: Option<(Arc<Shares>, IpAddr)>) -> Self {
        Self {
            inner,
            rules,
            client,
            prefix: [0; PREFIX_BYTES],
            prefix_read: 0,
            message_left: 0,
            charge: None,
            // The first message is due from the call's start.
            due: Some(Box::pin(tokio::time::sleep(rules.deadline))),
        }
    }

    /// Follows the framing through `data`, charging each message whose
    /// prefix completes in it; a refusal ends the call before tonic reads on.
    fn follow(&mut self, mut data: &[u8]) -> Result<(), tonic::Status> {
        while !data.is_empty() {
            if self.message_left > 0 {
                let passed = self.message_left.min(data.len());
                self.message_left -= passed;
                data = &data[passed..];
                if self.message_left == 0 {
                    self.due = None;
                }
                continue;
            }
            if self.prefix_read == 0 && self.due.is_none() {
                self.due = Some(Box::pin(tokio::time::sleep(self.rules.deadline)));
            }
            let taken = (PREFIX_BYTES - self.prefix_read).min(data.len());
            self.prefix[self.prefix_read..self.prefix_read + taken].copy_from_slice(&data[..taken]);
            self.prefix_read += taken;
            data = &data[taken..];
            if self.prefix_read == PREFIX_BYTES {
                self.prefix_read = 0;
                let [_, length @ ..] = self.prefix;
                self.message_left = u32::from_be_bytes(length) as usize;
                // The last message is decoded: its charge is spent.
                self.charge = None;
                self.charge = Some(self.charge_for(self.message_left)?);
                if self.message_left == 0 {
                    self.due = None;
                }
            }
        }
        Ok(())
    }

    /// `bytes` for one message, or the refusal: a message longer than the
    /// server decodes, or than the whole budget, is too large
    /// (RESOURCE_EXHAUSTED, as tonic's decoder says); past the client's
    /// share RESOURCE_EXHAUSTED with a retry hint; past what the process
    /// has free now UNAVAILABLE, to be retried.
    fn charge_for(&self, bytes: usize) -> Result<BodyCharge, tonic::Status> {
        let largest = self.rules.max_bytes.unwrap_or(usize::MAX).min(body_budget::budget_bytes());
        if bytes > largest {
            refused(Protocol::Grpc, "message_too_large");
            return Err(tonic::Status::resource_exhausted(format!(
                "a message of {bytes} bytes is longer than this server takes ({largest} bytes)"
            )));
        }
        let client = self.client.as_ref().map(|(shares, client)| (shares, *client));
        body_budget::charge(client, bytes).map_err(|short| match short {
            Short::ClientShare => refusal(
                "client_message_bytes",
                tonic::Status::resource_exhausted(
                    "this address has as many request bytes in flight as it may; retry when a call has ended",
                ),
            ),
            Short::Budget => refusal(
                "body_budget",
                tonic::Status::unavailable("the server holds as many request bytes as it may; retry shortly"),
            ),
        })
    }

    /// The message that was due has not arrived: its charge goes back now.
    fn overdue(&mut self) -> tonic::Status {
        self.charge = None;
        self.due = None;
        refused(Protocol::Grpc, "message_deadline");
        tonic::Status::deadline_exceeded(format!(
            "the request message did not arrive within {} s (--grpc-message-deadline-secs)",
            self.rules.deadline.as_secs_f64()
        ))
    }
}

impl<B> HttpBody for ChargedMessages<B>
where
    B: HttpBody<Data = Bytes, Error = tonic::Status> + Unpin,
{
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let frame = match Pin::new(&mut self.inner).poll_frame(cx) {
            Poll::Ready(frame) => frame,
            Poll::Pending => {
                if let Some(due) = self.due.as_mut() {
                    ready!(due.as_mut().poll(cx));
                    return Poll::Ready(Some(Err(self.overdue())));
                }
                return Poll::Pending;
            }
        };
        match frame.as_ref().map(|frame| frame.as_ref().map(Frame::data_ref)) {
            Some(Ok(Some(data))) => {
                if let Err(refusal) = self.follow(data) {
                    self.charge = None;
                    self.due = None;
                    return Poll::Ready(Some(Err(refusal)));
                }
            }
            // The body ended, or failed: nothing more is due.
            None | Some(Err(_)) => self.due = None,
            Some(Ok(None)) => {}
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A connection holding its place under the caps until it closes, and, on
/// the public listener, closing itself once its clock runs out.
pub struct AdmittedConnection<IO> {
    io: IO,
    clock: Option<ClockWatch>,
    _held: (OwnedSemaphorePermit, Option<Share>),
}

impl<IO> AdmittedConnection<IO> {
    fn overdue(&mut self, cx: &mut Context<'_>) -> std::io::Result<()> {
        self.clock.as_mut().map_or(Ok(()), |clock| clock.overdue(cx))
    }
}

/// What tonic puts in each call's extensions for an [`AdmittedConnection`]:
/// the connection's own info, and its clock, which the call joins.
#[derive(Debug, Clone)]
pub struct ConnectionInfo<I> {
    pub inner: I,
    clock: Option<Arc<ConnectionClock>>,
}

impl<IO: Connected> Connected for AdmittedConnection<IO> {
    type ConnectInfo = ConnectionInfo<IO::ConnectInfo>;

    fn connect_info(&self) -> Self::ConnectInfo {
        ConnectionInfo { inner: self.io.connect_info(), clock: self.clock.as_ref().map(|watch| watch.clock().clone()) }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for AdmittedConnection<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        self.overdue(cx)?;
        Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for AdmittedConnection<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.overdue(cx)?;
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        self.overdue(cx)?;
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.overdue(cx)?;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prefixed(length: u32) -> Vec<u8> {
        let mut prefix = vec![0];
        prefix.extend_from_slice(&length.to_be_bytes());
        prefix
    }

    fn rules(max_bytes: Option<usize>) -> MessageRules {
        MessageRules { deadline: Duration::from_secs(1), max_bytes }
    }

    #[tokio::test]
    async fn each_message_is_charged_its_declared_length_as_its_prefix_arrives() {
        let mut body = ChargedMessages::new((), rules(None), None);
        let first = prefixed(3);
        body.follow(&first[..2]).unwrap();
        assert!(body.charge.is_none(), "half a prefix charges nothing yet");
        body.follow(&first[2..]).unwrap();
        assert_eq!(body.message_left, 3);
        let mut rest = b"abc".to_vec();
        rest.extend(prefixed(7));
        rest.extend(b"1234");
        body.follow(&rest).unwrap();
        assert_eq!(body.message_left, 3, "the second message's prefix was found inside the same frame");
    }

    #[tokio::test]
    async fn a_message_longer_than_the_server_takes_is_refused_on_its_prefix() {
        let mut body = ChargedMessages::new((), rules(None), None);
        let refusal = body.follow(&prefixed(u32::MAX)).unwrap_err();
        assert_eq!(refusal.code(), tonic::Code::ResourceExhausted, "larger than the whole budget");
        let mut body = ChargedMessages::new((), rules(Some(1000)), None);
        let refusal = body.follow(&prefixed(1001)).unwrap_err();
        assert_eq!(refusal.code(), tonic::Code::ResourceExhausted, "larger than the server decodes");
        assert!(body.charge.is_none(), "nothing was charged for it");
    }

    #[tokio::test]
    async fn a_client_past_its_share_of_message_bytes_is_refused_with_a_retry_hint() {
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        let shares = Shares::new(100);
        let mut first = ChargedMessages::new((), rules(None), Some((shares.clone(), client)));
        first.follow(&prefixed(80)).unwrap();
        let mut second = ChargedMessages::new((), rules(None), Some((shares.clone(), client)));
        let refusal = second.follow(&prefixed(30)).unwrap_err();
        assert_eq!(refusal.code(), tonic::Code::ResourceExhausted);
        assert_eq!(refusal.metadata().get("retry-after").unwrap(), "1");
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        let mut elsewhere = ChargedMessages::new((), rules(None), Some((shares.clone(), other)));
        elsewhere.follow(&prefixed(30)).expect("another address has its own share");
        drop(first);
        let mut again = ChargedMessages::new((), rules(None), Some((shares, client)));
        again.follow(&prefixed(30)).expect("the first message's charge was given back");
    }

    /// A request body that sends `sent` and then nothing, ever.
    struct Stalled(Option<Bytes>);

    impl HttpBody for Stalled {
        type Data = Bytes;
        type Error = tonic::Status;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
            match self.0.take() {
                Some(sent) => Poll::Ready(Some(Ok(Frame::data(sent)))),
                None => Poll::Pending,
            }
        }
    }

    #[tokio::test]
    async fn a_message_that_stalls_ends_its_call_at_the_deadline_and_gives_its_charge_back() {
        use http_body_util::BodyExt;
        let client: IpAddr = "192.0.2.1".parse().unwrap();
        let shares = Shares::new(2000);
        let mut sent = prefixed(1000);
        sent.push(b'a');
        let mut body = ChargedMessages::new(Stalled(Some(sent.into())), rules(None), Some((shares.clone(), client)));
        let started = tokio::time::Instant::now();
        body.frame().await.unwrap().expect("the first byte passes");
        assert!(shares.try_take(client, 1500).is_none(), "the declared 1000 bytes are held");
        let ended = tokio::time::timeout(Duration::from_secs(60), body.frame()).await.expect("ended by the server");
        assert_eq!(ended.unwrap().unwrap_err().code(), tonic::Code::DeadlineExceeded);
        assert!(started.elapsed() >= Duration::from_secs(1), "not before its deadline");
        assert!(shares.try_take(client, 2000).is_some(), "given back at the deadline, with the body still alive");
    }

    #[tokio::test]
    async fn a_connection_fails_once_an_answer_handed_over_while_it_waited_is_not_taken() {
        use tokio::io::AsyncReadExt;
        let (near, _far) = tokio::io::duplex(64);
        let rules = ConnectionRules { send_timeout: Some(Duration::from_secs(1)), ..ConnectionRules::default() };
        let clock = ConnectionClock::start(rules).unwrap();
        let permit = Arc::new(Semaphore::new(1)).try_acquire_owned().unwrap();
        let mut connection =
            AdmittedConnection { io: near, clock: Some(ClockWatch::new(clock.clone())), _held: (permit, None) };
        let mut buffer = [0; 8];
        // The read waits with nothing due (no timer), then an answer is handed over and wakes it.
        let started = tokio::time::Instant::now();
        let handed_over = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let mut call = clock.call_opened();
            call.handed_over();
            call
        };
        let (read, _call) =
            tokio::join!(tokio::time::timeout(Duration::from_secs(60), connection.read(&mut buffer)), handed_over);
        let failed = read.expect("cut off by the server").unwrap_err();
        assert_eq!(failed.kind(), std::io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(1200), "not before the answer's timeout");
    }

    #[tokio::test]
    async fn a_message_that_arrives_whole_has_no_deadline_after_it() {
        use http_body_util::BodyExt;
        let mut whole = prefixed(1);
        whole.push(b'a');
        let mut body = ChargedMessages::new(Stalled(Some(whole.into())), rules(None), None);
        body.frame().await.unwrap().unwrap();
        // Three times the deadline: had one been armed, it would have fired.
        let waited = tokio::time::timeout(Duration::from_secs(3), body.frame()).await;
        assert!(waited.is_err(), "between messages a call may wait (streaming calls do)");
    }
}
