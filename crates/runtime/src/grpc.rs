use std::{convert::Infallible, future::Future, time::Duration};

use anyhow::Context;
use tokio::net::{TcpListener, UnixListener};
use tonic::{service::Routes, transport::ServerTlsConfig};
use tonic_health::ServingStatus;

pub use pastebin_edge::grpc::GrpcLimits;

/// What a server serves, for `grpc.health.v1` and reflection: the names of
/// its services and the encoded descriptor set of its own API.
#[derive(Debug, Clone, Copy)]
pub struct Described<'a> {
    pub services: &'a [&'a str],
    pub descriptors: &'a [u8],
}

/// How a server presents itself: over TLS or plaintext, whether it answers
/// reflection, and within which limits. The default is plaintext without
/// reflection, within the default limits.
#[derive(Debug, Clone, Default)]
pub struct ServerOptions {
    pub tls: Option<ServerTlsConfig>,
    /// Off for K and P unless asked for: reflection would list every
    /// internal method to whoever reaches the port (docs/design.md#mtls).
    pub reflection: bool,
    pub limits: GrpcLimits,
}

/// A gRPC server's services with `grpc.health.v1` and, if asked,
/// reflection over both `grpc.reflection.v1` and `v1alpha` (grpcio's and
/// several GUI clients speak only v1alpha), before it listens. Health
/// reports the described services and the server as a whole as serving
/// while the process is ready ([`crate::readiness`]), and not serving while
/// it is not.
pub struct GrpcServer {
    routes: Routes,
    health: tonic_health::server::HealthReporter,
    services: Vec<String>,
    options: ServerOptions,
}

impl GrpcServer {
    /// Health already answers for every described service when this
    /// returns: an in-process caller may ask before [`Self::serve`] runs.
    pub async fn new(routes: Routes, described: Described<'_>, options: ServerOptions) -> anyhow::Result<Self> {
        let (health, health_service) = tonic_health::server::health_reporter();
        let services: Vec<String> =
            std::iter::once("").chain(described.services.iter().copied()).map(str::to_owned).collect();
        report_health(
            &health,
            &services,
            crate::readiness::all_pass(&crate::readiness::process().subscribe().borrow()),
        )
        .await;
        let mut routes = routes.add_service(health_service);
        if options.reflection {
            let reflection = || {
                tonic_reflection::server::Builder::configure()
                    .register_encoded_file_descriptor_set(described.descriptors)
                    .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
            };
            routes = routes.add_service(reflection().build_v1()?).add_service(reflection().build_v1alpha()?);
        }
        Ok(Self { routes, health, services, options })
    }

    /// The same services, called from inside this process without a socket:
    /// a call is the same request through the same handlers, run on the
    /// caller's task, with no connection, no HTTP/2 framing and no thread
    /// hand-off (docs/design.md#in-process-shards). A call is bounded as
    /// over the network: by the caller's `grpc-timeout`, at most the
    /// server's call timeout, and ends as tonic's server ends it, so a
    /// stalled shard fails a call instead of holding its caller forever.
    /// Health answers follow readiness while [`Self::serve`] runs.
    pub fn in_process(&self) -> ShardChannel {
        let routes = self.routes.clone();
        let call_timeout = self.options.limits.call_timeout;
        ShardChannel::new(tower::service_fn(move |request: http::Request<tonic::body::Body>| {
            let span = request_span(&request);
            let timeout = caller_timeout(request.headers()).map_or(call_timeout, |asked| asked.min(call_timeout));
            let call = tower::ServiceExt::oneshot(routes.clone(), request);
            tracing::Instrument::instrument(
                async move {
                    let response = match tokio::time::timeout(timeout, call).await {
                        Ok(answered) => answered.unwrap_or_else(|never: Infallible| match never {}),
                        Err(_) => timed_out(),
                    };
                    Ok::<_, Infallible>(client_errors_named_by_the_contract(response))
                },
                span,
            )
        }))
    }

    /// Serves on `listener` within the options' limits until `shutdown`
    /// resolves; in-flight calls are allowed to finish.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        self.serve_connections(incoming(listener), shutdown).await
    }

    /// Like [`Self::serve`], on a Unix socket: `pastebin up`'s K and P, which
    /// only processes of the same account may reach (docs/security.md#local-sockets).
    pub async fn serve_unix(
        self,
        listener: UnixListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        self.serve_connections(tokio_stream::wrappers::UnixListenerStream::new(listener), shutdown).await
    }

    async fn serve_connections<Connection, AcceptError>(
        self,
        incoming: impl tokio_stream::Stream<Item = Result<Connection, AcceptError>>,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()>
    where
        Connection: tokio::io::AsyncRead
            + tokio::io::AsyncWrite
            + tonic::transport::server::Connected
            + pastebin_edge::grpc::PeerAddress
            + Unpin
            + Send
            + 'static,
        AcceptError: Into<tower::BoxError>,
    {
        let limits = self.options.limits;
        let mut server = limits.server();
        if let Some(tls) = self.options.tls {
            server = server
                .tls_config(tls)
                .context("cannot serve TLS with --tls-cert and --tls-key (is the key the certificate's?)")?;
        }
        let server = server
            .trace_fn(request_span)
            .layer(tower::util::MapResponseLayer::new(client_errors_named_by_the_contract))
            .layer(limits.admission())
            .add_routes(self.routes)
            .serve_with_incoming_shutdown(limits.admitted(incoming), shutdown);
        tokio::select! {
            served = server => Ok(served?),
            never = follow_readiness(self.health, self.services) => match never {},
        }
    }
}

/// How a client reaches a K or P shard: over the network (a tonic
/// [`Channel`](tonic::transport::Channel)) or, for the shards of the same
/// process, in process ([`GrpcServer::in_process`]). Clients are written once
/// against this and cannot tell the two apart.
#[derive(Clone)]
pub struct ShardChannel(
    tower::util::BoxCloneSyncService<
        http::Request<tonic::body::Body>,
        http::Response<tonic::body::Body>,
        tower::BoxError,
    >,
);

impl ShardChannel {
    fn new<S>(service: S) -> Self
    where
        S: tower::Service<http::Request<tonic::body::Body>, Response = http::Response<tonic::body::Body>>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Error: Into<tower::BoxError>,
        S::Future: Send + 'static,
    {
        Self(tower::util::BoxCloneSyncService::new(tower::ServiceExt::map_err(service, Into::into)))
    }
}

impl From<tonic::transport::Channel> for ShardChannel {
    fn from(channel: tonic::transport::Channel) -> Self {
        Self::new(channel)
    }
}

impl tower::Service<http::Request<tonic::body::Body>> for ShardChannel {
    type Response = http::Response<tonic::body::Body>;
    type Error = tower::BoxError;
    type Future = std::pin::Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.0.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        self.0.call(request)
    }
}

/// The span a call runs in, a child of the caller's trace. Health checks
/// (every second, from each gateway) get none: they are not work to trace.
fn request_span<B>(request: &http::Request<B>) -> tracing::Span {
    let method = request.uri().path();
    if method.starts_with("/grpc.health.v1.Health/") {
        return tracing::Span::none();
    }
    crate::telemetry::server_span(method, request.headers())
}

/// The time a caller gives its call, from the `grpc-timeout` header it
/// sent (an integer of at most 8 digits and a unit, as gRPC over HTTP/2
/// defines it); `None` when it gave none or wrote something else, which
/// tonic's server also reads as no deadline of the caller's.
fn caller_timeout(headers: &http::HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let (amount, unit) = value.split_at_checked(value.len().checked_sub(1)?)?;
    if amount.is_empty() || amount.len() > 8 {
        return None;
    }
    let amount: u64 = amount.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(amount * 3600),
        "M" => Duration::from_secs(amount * 60),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return None,
    })
}

/// The answer tonic's server gives a call that outlived its timeout
/// (CANCELLED, "Timeout expired"): in process as over the network, the
/// caller reads it as uncertain.
fn timed_out() -> http::Response<tonic::body::Body> {
    tonic::Status::from_error(Box::new(tonic::TimeoutExpired(()))).into_http()
}

/// Keeps the health status of `services` equal to the process's readiness.
async fn follow_readiness(reporter: tonic_health::server::HealthReporter, services: Vec<String>) -> Infallible {
    let mut checks = crate::readiness::process().subscribe();
    loop {
        let ready = crate::readiness::all_pass(&checks.borrow_and_update());
        report_health(&reporter, &services, ready).await;
        if checks.changed().await.is_err() {
            // The readiness lives in a static and is never dropped.
            return std::future::pending().await;
        }
    }
}

/// Sets the health of every one of `services` to serving or not.
async fn report_health(reporter: &tonic_health::server::HealthReporter, services: &[String], ready: bool) {
    let status = if ready { ServingStatus::Serving } else { ServingStatus::NotServing };
    for service in services {
        reporter.set_service_status(service, status).await;
    }
}

/// Whether the server behind `channel` says, through `grpc.health.v1`, that
/// it serves: a shard whose database is down answers NOT_SERVING.
pub async fn check_serving(channel: ShardChannel) -> Result<(), String> {
    use tonic_health::pb::{health_check_response::ServingStatus as Answer, health_client::HealthClient};
    let request = tonic_health::pb::HealthCheckRequest { service: String::new() };
    match HealthClient::new(channel).check(request).await {
        Ok(reply) if reply.get_ref().status() == Answer::Serving => Ok(()),
        Ok(reply) => Err(format!("reports {:?}", reply.get_ref().status())),
        Err(status) => Err(format!("unreachable ({:?})", status.code())),
    }
}

/// Accepted connections with `TCP_NODELAY`: without it a small reply can
/// wait for the peer's delayed ACK (~40 ms), which a lone create pays on
/// every K and P call (BENCHMARKS.md, figure 2).
fn incoming(listener: TcpListener) -> tonic::transport::server::TcpIncoming {
    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// Two refusals tonic makes before any handler runs, renamed to what the
/// contract calls them (docs/design.md#status-codes): a message over the decoding limit is
/// OUT_OF_RANGE in tonic and RESOURCE_EXHAUSTED here, and a message that does
/// not decode (e.g. a string that is not UTF-8) is INTERNAL in tonic and
/// INVALID_ARGUMENT here: it is the caller's input, not our fault.
fn client_errors_named_by_the_contract(
    mut response: http::Response<tonic::body::Body>,
) -> http::Response<tonic::body::Body> {
    let headers = response.headers_mut();
    let message = headers.get("grpc-message").and_then(|m| m.to_str().ok()).unwrap_or("").replace("%20", " ");
    let renamed = match headers.get("grpc-status").and_then(|s| s.to_str().ok()) {
        Some("11") if message.contains("message length too large") => Some("8"),
        Some("13") if message.starts_with("failed to decode Protobuf message") => Some("3"),
        _ => None,
    };
    if let Some(status) = renamed {
        headers.insert("grpc-status", http::HeaderValue::from_static(status));
    }
    response
}

/// The prefix of a Unix socket address, as tonic's endpoints read it.
pub const UNIX_SCHEME: &str = "unix:";

/// The address a client dials for the Unix socket at `path`.
pub fn unix_address(path: &std::path::Path) -> String {
    format!("{UNIX_SCHEME}{}", path.display())
}

/// How a failed call to another service is to be read by a saga: the callee
/// definitely did not act, or we cannot know whether it did.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The service answered and refused before acting (bad input, not found,
    /// permission). Safe to compensate.
    #[error("refused: {}", .0.message())]
    Refused(tonic::Status),
    /// Timeout, connection loss, an internal error: the call may have
    /// committed. Never compensate on this; leave the saga pending.
    #[error("uncertain: {}", .0.message())]
    Uncertain(tonic::Status),
    /// The shard answered that it did not act and that the same call will
    /// work later: the slot is frozen by a move, or owned elsewhere now (the
    /// caller's slot map is out of date). Retry, after discovering the slot
    /// map again; never compensate (docs/design.md#moving-slots).
    #[error("not executed: {}", .0.message())]
    NotExecuted(tonic::Status),
}

/// Metadata on a refusal that says the call was not executed and may be
/// retried (after discovering the slot map again): `frozen` or `not-owned`.
pub const NOT_EXECUTED: &str = "pastebin-not-executed";
/// Metadata on those refusals: the refusing shard's generation.
pub const GENERATION: &str = "pastebin-generation";
/// Metadata on a refusal (RESOURCE_EXHAUSTED) that says the shard's storage
/// is full and the write did not happen: a definite failure, which a saga
/// may compensate (docs/operations.md#a-full-disk).
pub const STORAGE_FULL: &str = "pastebin-storage-full";

impl From<tonic::Status> for CallError {
    fn from(status: tonic::Status) -> Self {
        use tonic::Code::*;
        if status.metadata().contains_key(NOT_EXECUTED) {
            return Self::NotExecuted(status);
        }
        if status.metadata().contains_key(STORAGE_FULL) {
            return Self::Refused(status);
        }
        match status.code() {
            InvalidArgument | NotFound | AlreadyExists | PermissionDenied | FailedPrecondition | OutOfRange
            | Unimplemented | Unauthenticated => Self::Refused(status),
            Ok | Cancelled | Unknown | DeadlineExceeded | ResourceExhausted | Aborted | Internal | Unavailable
            | DataLoss => Self::Uncertain(status),
        }
    }
}

impl CallError {
    pub fn status(&self) -> &tonic::Status {
        match self {
            Self::Refused(status) | Self::Uncertain(status) | Self::NotExecuted(status) => status,
        }
    }

    /// Whether the callee refused because its storage is full (nothing was written).
    pub fn is_storage_full(&self) -> bool {
        matches!(self, Self::Refused(status) if status.metadata().contains_key(STORAGE_FULL))
    }

    /// The refusing shard's generation, on a "not executed" refusal: a
    /// caller whose slot map is older discovers it again.
    pub fn generation(&self) -> Option<u64> {
        let Self::NotExecuted(status) = self else { return None };
        status.metadata().get(GENERATION)?.to_str().ok()?.parse().ok()
    }
}

/// The URL a client dials for `address`: `http://` and `https://` are
/// taken as written, and a bare `host:port` means TLS exactly when this
/// client has TLS files. An address that contradicts the TLS setting is an
/// error, so a configured client never falls back to plaintext by accident.
/// `unix:PATH` is a Unix socket of `pastebin up`, reached without TLS: its
/// file mode is the credential (docs/security.md#local-sockets).
pub fn shard_url(address: &str, tls: bool) -> anyhow::Result<String> {
    let address = address.trim();
    if address.starts_with(UNIX_SCHEME) {
        anyhow::ensure!(!tls, "{address}: a Unix socket is reached without TLS; drop --tls-cert for it");
        return Ok(address.to_owned());
    }
    match (address.split_once("://"), tls) {
        (None, false) => Ok(format!("http://{address}")),
        (None, true) => Ok(format!("https://{address}")),
        (Some(("http", _)), false) | (Some(("https", _)), true) => Ok(address.to_owned()),
        (Some(("https", _)), false) => {
            anyhow::bail!("{address}: https:// needs this part's --tls-cert, --tls-key and --tls-ca")
        }
        (Some(("http", _)), true) => {
            anyhow::bail!(
                "{address}: http:// would be plaintext although --tls-cert is set; write https:// or host:port"
            )
        }
        (Some((scheme, _)), _) => anyhow::bail!("{address}: unknown scheme {scheme}:// (use host:port or https://)"),
    }
}

/// The deadline a client carries into every call it makes: what is left of
/// it travels as `grpc-timeout`, so the callee stops working on a call its
/// caller has given up on. `Deadline::default()` is no deadline.
#[derive(Debug, Clone, Copy, Default)]
pub struct Deadline(Option<tokio::time::Instant>);

impl Deadline {
    pub fn at(instant: tokio::time::Instant) -> Self {
        Self(Some(instant))
    }

    /// Wraps `message` in a request that carries the time left, and the
    /// trace it is part of.
    pub fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        crate::telemetry::inject(request.metadata_mut());
        if let Some(deadline) = self.0 {
            request.set_timeout(deadline.saturating_duration_since(tokio::time::Instant::now()));
        }
        request
    }
}

/// A protobuf field that does not convert to its domain type, and why. On a
/// service it is the caller's bad input; in a reply it means the reply
/// cannot be trusted, so nothing can be concluded from it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Malformed(pub String);

impl From<Malformed> for tonic::Status {
    fn from(malformed: Malformed) -> Self {
        tonic::Status::invalid_argument(malformed.0)
    }
}

impl Malformed {
    /// The same field, found in a reply from `service`: uncertain, because
    /// the callee may have acted before answering with something unreadable.
    pub fn in_reply_from(self, service: &str) -> CallError {
        CallError::Uncertain(tonic::Status::internal(format!("malformed reply from the {service}: {}", self.0)))
    }
}

/// A shard store's failure, as the one mapping to gRPC needs to see it.
pub trait StoreFailure: std::fmt::Display {
    /// The database error underneath, if that is what failed.
    fn database(&self) -> Option<&sqlx::Error>;
}

/// Every shard's store errors as gRPC status, in one place: a database whose
/// storage is full ([`crate::db::storage_full`]: nothing was written) is
/// RESOURCE_EXHAUSTED marked [`STORAGE_FULL`], which callers read as a
/// definite refusal; losing the database (pool timeout, I/O, closed pool, a
/// server that takes no writes or is going away) is UNAVAILABLE, anything
/// else INTERNAL. Callers read both as uncertain: the write may have
/// committed. That stays exact when the statement provably never ran
/// (docs/design.md#database-failover): reading "not run" as "unknown" costs
/// at most a pending key that recovery settles, never a wrong compensation.
pub fn store_status(error: &impl StoreFailure) -> tonic::Status {
    match error.database() {
        Some(database) if crate::db::storage_full(database) => {
            let mut status = tonic::Status::resource_exhausted(format!("the shard's storage is full: {error}"));
            status.metadata_mut().insert(STORAGE_FULL, tonic::metadata::MetadataValue::from_static("true"));
            status
        }
        Some(database)
            if crate::reconnect::lost_the_server(database) || matches!(database, sqlx::Error::PoolClosed) =>
        {
            tonic::Status::unavailable(error.to_string())
        }
        _ => tonic::Status::internal(error.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::{caller_timeout, shard_url, Duration};

    #[test]
    fn a_caller_timeout_is_read_as_grpc_over_http2_writes_it() {
        let read = |value: &str| {
            let mut headers = http::HeaderMap::new();
            headers.insert("grpc-timeout", http::HeaderValue::from_str(value).unwrap());
            caller_timeout(&headers)
        };
        assert_eq!(read("5S"), Some(Duration::from_secs(5)));
        assert_eq!(read("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(read("99999999m"), Some(Duration::from_millis(99_999_999)));
        assert_eq!(read("250u"), Some(Duration::from_micros(250)));
        for unreadable in ["", "S", "5", "5s", "123456789S", "-1S", "1.5S"] {
            assert_eq!(read(unreadable), None, "{unreadable:?}");
        }
        assert_eq!(caller_timeout(&http::HeaderMap::new()), None);
    }

    /// A store failure that is the database error `0`.
    struct Failed(sqlx::Error);

    impl std::fmt::Display for Failed {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            self.0.fmt(f)
        }
    }

    impl super::StoreFailure for Failed {
        fn database(&self) -> Option<&sqlx::Error> {
            Some(&self.0)
        }
    }

    #[test]
    fn losing_the_database_is_unavailable_and_a_caller_reads_it_as_uncertain() {
        let lost = [
            sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset)),
            sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
        ];
        for error in lost {
            let status = super::store_status(&Failed(error));
            assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
            // Even where the statement provably never ran, never a definite refusal that
            // a saga would compensate: at worst a key stays pending until a retry settles it.
            assert!(matches!(super::CallError::from(status), super::CallError::Uncertain(_)));
        }
        let other = super::store_status(&Failed(sqlx::Error::RowNotFound));
        assert_eq!(other.code(), tonic::Code::Internal);
    }

    #[test]
    fn a_full_database_is_a_definite_refusal_and_an_fsync_failure_stays_uncertain() {
        let full = super::store_status(&Failed(crate::db::storage_full_error("no room".into())));
        assert_eq!(full.code(), tonic::Code::ResourceExhausted, "{full:?}");
        let call = super::CallError::from(full);
        assert!(matches!(call, super::CallError::Refused(_)) && call.is_storage_full(), "{call:?}");
        // A bare RESOURCE_EXHAUSTED (a limit, not a full disk) stays uncertain.
        let limited = super::CallError::from(tonic::Status::resource_exhausted("too many calls"));
        assert!(matches!(limited, super::CallError::Uncertain(_)) && !limited.is_storage_full());
        let fsync = std::io::Error::other("fsync failed: EIO");
        let call = super::CallError::from(super::store_status(&Failed(sqlx::Error::Io(fsync))));
        assert!(matches!(call, super::CallError::Uncertain(_)), "{call:?}");
    }

    #[test]
    fn a_bare_address_means_tls_exactly_when_the_client_has_tls_files() {
        assert_eq!(shard_url("127.0.0.1:50061", false).unwrap(), "http://127.0.0.1:50061");
        assert_eq!(shard_url(" k1.internal:50061 ", true).unwrap(), "https://k1.internal:50061");
        assert_eq!(shard_url("https://k1:1", true).unwrap(), "https://k1:1");
        assert_eq!(shard_url("http://k1:1", false).unwrap(), "http://k1:1");
        assert_eq!(shard_url("unix:/data/keys.sock", false).unwrap(), "unix:/data/keys.sock");
        assert!(shard_url("unix:/data/keys.sock", true).is_err(), "a socket is never dialled with TLS");
    }

    #[test]
    fn an_address_that_contradicts_the_tls_setting_is_refused() {
        let plaintext = shard_url("http://k1:1", true).unwrap_err().to_string();
        assert!(plaintext.contains("http:// would be plaintext although --tls-cert is set"), "{plaintext}");
        let no_files = shard_url("https://k1:1", false).unwrap_err().to_string();
        assert!(no_files.contains("https:// needs this part's --tls-cert"), "{no_files}");
        assert!(shard_url("ftp://k1:1", false).is_err());
    }
}
