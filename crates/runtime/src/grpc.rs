use std::{convert::Infallible, future::Future};

use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic_health::ServingStatus;

/// Serves `routes` on `listener` with `grpc.health.v1` and server reflection,
/// until `shutdown` resolves; in-flight calls are allowed to finish. Health
/// reports `services` and the server as a whole as serving while the process
/// is ready ([`crate::readiness`]), and not serving while it is not.
pub async fn serve(
    listener: TcpListener,
    routes: Routes,
    services: &[&str],
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (reporter, health) = tonic_health::server::health_reporter();
    let services: Vec<String> = std::iter::once("").chain(services.iter().copied()).map(str::to_owned).collect();
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pastebin_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    let server = tonic::transport::Server::builder()
        .trace_fn(request_span)
        .layer(tower::util::MapResponseLayer::new(client_errors_named_by_the_contract))
        .add_routes(routes.add_service(health).add_service(reflection))
        .serve_with_incoming_shutdown(incoming(listener), shutdown);
    tokio::select! {
        served = server => Ok(served?),
        never = follow_readiness(reporter, services) => match never {},
    }
}

/// The span a call runs in, a child of the caller's trace. Health checks
/// (every second, from each gateway) get none: they are not work to trace.
fn request_span(request: &http::Request<()>) -> tracing::Span {
    let method = request.uri().path();
    if method.starts_with("/grpc.health.v1.Health/") {
        return tracing::Span::none();
    }
    crate::telemetry::server_span(method, request.headers())
}

/// Keeps the health status of `services` equal to the process's readiness.
async fn follow_readiness(reporter: tonic_health::server::HealthReporter, services: Vec<String>) -> Infallible {
    let mut checks = crate::readiness::process().subscribe();
    loop {
        let status = if crate::readiness::all_pass(&checks.borrow_and_update()) {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        for service in &services {
            reporter.set_service_status(service, status).await;
        }
        if checks.changed().await.is_err() {
            // The readiness lives in a static and is never dropped.
            return std::future::pending().await;
        }
    }
}

/// Whether the server behind `channel` says, through `grpc.health.v1`, that
/// it serves: a shard whose database is down answers NOT_SERVING.
pub async fn check_serving(channel: tonic::transport::Channel) -> Result<(), String> {
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
/// contract (SPEC §7) calls them: a message over the decoding limit is
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
}

impl From<tonic::Status> for CallError {
    fn from(status: tonic::Status) -> Self {
        use tonic::Code::*;
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
            Self::Refused(status) | Self::Uncertain(status) => status,
        }
    }
}

/// A lazily connecting channel to `address` (`http://host:port`): a shard that
/// is down at start-up is an error per call, not a failure to start.
pub fn channel(address: &str) -> anyhow::Result<tonic::transport::Channel> {
    Ok(tonic::transport::Endpoint::from_shared(address.to_owned())?
        .connect_timeout(std::time::Duration::from_secs(1))
        .tcp_nodelay(true)
        .connect_lazy())
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
