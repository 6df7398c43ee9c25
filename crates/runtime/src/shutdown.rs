//! SIGINT and SIGTERM, turned into a drain that ends (docs/operations.md#stopping).
//!
//! A part stops in three ways, whatever state it is in:
//! - a wait before there is anything to drain (for its slot map, for a
//!   database at start-up) is wrapped in [`unless_stopped`] and ends at the signal;
//! - its servers and loops take [`shutdown_signal`] and drain what is in flight;
//! - [`with_drain_timeout`] around the whole part ends it when the drain
//!   outlasts the drain timeout (a call stuck on a frozen database, a
//!   sweeper round that does not return), so no state can keep it running.

use std::{future::Future, sync::OnceLock, time::Duration};

/// Whether a shutdown signal has come, for every waiter in the process.
/// Each [`shutdown_signal`] also listens to the OS itself, but a listener
/// hears only signals sent after it was made: a server started after the
/// signal (a gateway that was still waiting for its shards) learns it here.
fn stopping() -> &'static tokio::sync::watch::Sender<bool> {
    static STOPPING: OnceLock<tokio::sync::watch::Sender<bool>> = OnceLock::new();
    STOPPING.get_or_init(|| tokio::sync::watch::Sender::new(false))
}

/// Resolves at the first SIGINT or SIGTERM the process receives, at once
/// if one already came.
pub async fn shutdown_signal() {
    let mut heard = stopping().subscribe();
    tokio::select! {
        () = os_signal() => {
            if !stopping().send_replace(true) {
                tracing::info!("shutdown signal received; draining");
            }
        }
        _ = heard.wait_for(|stopping| *stopping) => {}
    }
}

async fn os_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::error!(%error, "cannot listen for SIGINT");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::error!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = terminate => {},
    }
}

/// `wait`'s output, or `None` when a shutdown signal comes first: a wait
/// has nothing in flight to drain, so it ends at once.
pub async fn unless_stopped<T>(wait: impl Future<Output = T>) -> Option<T> {
    tokio::select! {
        output = wait => Some(output),
        () = shutdown_signal() => None,
    }
}

/// The part stopped because its drain outlasted the drain timeout.
#[derive(Debug, thiserror::Error)]
#[error(
    "still draining {0:?} after the shutdown signal: stopped with work in flight \
     (clients retry it; raise --drain-timeout-secs to let a drain take longer)"
)]
pub struct DrainTimedOut(pub Duration);

/// Runs `part` until it ends by itself, or until `drain_timeout` after the
/// first shutdown signal, whichever comes first. The signal handlers are
/// installed before `part` is first polled, so from here on a signal is
/// never the default "die at once" either.
pub async fn with_drain_timeout<E: From<DrainTimedOut>>(
    part: impl Future<Output = Result<(), E>>,
    drain_timeout: Duration,
) -> Result<(), E> {
    let deadline = async {
        shutdown_signal().await;
        tokio::time::sleep(drain_timeout).await;
    };
    tokio::select! {
        ended = part => ended,
        () = deadline => {
            tracing::warn!(?drain_timeout, "the drain outlasted the drain timeout; stopping now");
            Err(DrainTimedOut(drain_timeout).into())
        }
    }
}
