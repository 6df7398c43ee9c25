use std::future::Future;

use tokio::net::TcpListener;
use tonic::service::Routes;
use tonic_health::ServingStatus;

/// Serves `routes` on `listener` with `grpc.health.v1` (reporting `services`
/// and the server as a whole as serving) and server reflection, until
/// `shutdown` resolves; in-flight calls are allowed to finish.
pub async fn serve(
    listener: TcpListener,
    routes: Routes,
    services: &[&str],
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_service_status("", ServingStatus::Serving).await;
    for service in services {
        reporter.set_service_status(*service, ServingStatus::Serving).await;
    }
    let reflection = tonic_reflection::server::Builder::configure()
        .register_encoded_file_descriptor_set(pastebin_proto::FILE_DESCRIPTOR_SET)
        .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
        .build_v1()?;
    tonic::transport::Server::builder()
        .layer(tower::util::MapResponseLayer::new(oversized_is_resource_exhausted))
        .add_routes(routes.add_service(health).add_service(reflection))
        .serve_with_incoming_shutdown(incoming(listener), shutdown)
        .await?;
    Ok(())
}

/// Accepted connections with `TCP_NODELAY`: without it a small reply can
/// wait for the peer's delayed ACK (~40 ms), which a lone create pays on
/// every K and P call (BENCHMARKS.md, figure 2).
fn incoming(listener: TcpListener) -> tonic::transport::server::TcpIncoming {
    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// tonic refuses a message over the decoding limit with OUT_OF_RANGE before
/// any handler runs; the contract (SPEC §7) calls a too-large request
/// RESOURCE_EXHAUSTED, so that one status is renamed on its way out.
fn oversized_is_resource_exhausted(
    mut response: http::Response<tonic::body::Body>,
) -> http::Response<tonic::body::Body> {
    let headers = response.headers_mut();
    let out_of_range = headers.get("grpc-status").is_some_and(|s| s == "11");
    let too_large = headers
        .get("grpc-message")
        .and_then(|m| m.to_str().ok())
        .is_some_and(|m| m.contains("message%20length%20too%20large") || m.contains("message length too large"));
    if out_of_range && too_large {
        headers.insert("grpc-status", http::HeaderValue::from_static("8"));
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

    /// Wraps `message` in a request that carries the time left.
    pub fn request<T>(&self, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        if let Some(deadline) = self.0 {
            request.set_timeout(deadline.saturating_duration_since(tokio::time::Instant::now()));
        }
        request
    }
}
