//! The admin listener of a pastebin process: Prometheus metrics for every
//! service, and for a process that runs the sweeper, the pending-age alert
//! dashboard of docs/design.md#alert-card.
//!
//! [`AdminState`] holds the metrics handle and, with a sweeper, samples
//! [`pastebin_sweeper::Sweeper::observe`] every few seconds into a short
//! history and keeps the sweeper's recent round reports (pushed by the
//! process with [`AdminState::record_round`]). [`router`] serves them,
//! placed on the alert card of [`pastebin_core::alert`], and beside them
//! the process's [`traffic`] and storage, read from its own metrics.

mod routes;
mod state;
mod status;
mod traffic;

use std::future::Future;

pub use routes::{router, CONTENT_SECURITY_POLICY};
pub use state::{AdminState, DEFAULT_SAMPLE_INTERVAL};
pub use status::{climb_per_minute, Sample, Status};
pub use traffic::{Answered, Storage, TrafficStatus};

/// Serves the admin listener until `shutdown`, and meanwhile samples the
/// shards for the dashboard (when the state has a sweeper). In-flight
/// requests finish; the sampler simply stops.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AdminState,
    limits: pastebin_edge::http::HttpLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let app = pastebin_edge::http::limited(router(state.clone()), &limits);
    let server = pastebin_edge::http::serve(listener, app, limits, shutdown);
    tokio::select! {
        served = server => served,
        // The sampler loops until it is dropped here, with the server.
        () = state.run_sampler() => Ok(()),
    }
}

#[cfg(test)]
mod tests;
