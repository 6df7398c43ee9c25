//! The shards' storage, outside simulated time.
//!
//! K and P keep their real SQLite databases (real files, the real
//! migrations, the real group-commit writer). sqlx runs SQLite on threads
//! of its own, which a simulation cannot schedule; so each shard RPC runs
//! to completion on a separate runtime while the simulation waits for it:
//! one RPC is one atomic step in simulated time, as one transaction is in
//! the real system. Requests and replies still cross the simulated network,
//! where they can be delayed, lost or cut off.

use std::{future::Future, pin::Pin, sync::Arc, task::Poll};

use bytes::Bytes;
use futures::FutureExt;
use http_body_util::BodyExt;
use tonic::body::Body;

/// The runtime the shards' databases run on; it outlives every host restart,
/// as a disk outlives a process.
#[derive(Clone)]
pub struct Disk(Arc<tokio::runtime::Runtime>);

impl Disk {
    pub fn new() -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build()?;
        Ok(Self(Arc::new(runtime)))
    }

    /// Runs `work` to completion and waits for it, blocking the caller's
    /// thread (the simulation's) so no simulated time passes meanwhile.
    pub fn run<T: Send + 'static>(&self, work: impl Future<Output = T> + Send + 'static) -> T {
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.0.spawn(async move {
            let _ = answer.send(work.await);
        });
        answered.recv().expect("the disk's runtime lives as long as the simulation")
    }
}

/// Serves each request to a shard in one atomic step on the [`Disk`].
#[derive(Clone)]
pub struct OnDisk<S> {
    inner: S,
    disk: Disk,
}

#[derive(Clone)]
pub struct OnDiskLayer(pub Disk);

impl<S> tower::Layer<S> for OnDiskLayer {
    type Service = OnDisk<S>;

    fn layer(&self, inner: S) -> Self::Service {
        OnDisk { inner, disk: self.0.clone() }
    }
}

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl<S> tower::Service<http::Request<Body>> for OnDisk<S>
where
    S: tower::Service<http::Request<Body>, Response = http::Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send,
{
    type Response = http::Response<Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<Body>) -> Self::Future {
        let (inner, disk) = (self.inner.clone(), self.disk.clone());
        async move {
            // The request arrives over the simulated network first, whole.
            let (parts, body) = request.into_parts();
            let body = body.collect().await?.to_bytes();
            let request = http::Request::from_parts(parts, Body::new(http_body_util::Full::new(body)));
            let (parts, data, trailers) = disk.run(async move {
                let response = tower::ServiceExt::oneshot(inner, request).await.map_err(Into::into)?;
                let (parts, body) = response.into_parts();
                let collected = body.collect().await?;
                let trailers = collected.trailers().cloned();
                Ok::<_, BoxError>((parts, collected.to_bytes(), trailers))
            })?;
            Ok(http::Response::from_parts(parts, whole_body(data, trailers)))
        }
        .boxed()
    }
}

/// A collected body again, its trailers (the gRPC status) included.
fn whole_body(data: Bytes, trailers: Option<http::HeaderMap>) -> Body {
    let frames = [Some(http_body::Frame::data(data)), trailers.map(http_body::Frame::trailers)];
    let frames = frames.into_iter().flatten().map(Ok::<_, std::convert::Infallible>);
    Body::new(http_body_util::StreamBody::new(futures::stream::iter(frames)))
}
