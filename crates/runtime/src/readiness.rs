//! Readiness: whether this process can do its work right now, as opposed to
//! whether it is alive. Each part reports named checks (a shard's database,
//! the gateway's shards and object store, the sweeper's last round); the
//! process is ready when every check passes. The admin listener serves the
//! verdict as `/readyz` and every gRPC server of the process follows it in
//! `grpc.health.v1` (docs/deployment.md#readiness).
//!
//! Readiness belongs to the process, like its metrics recorder: an
//! orchestrator probes a process, and `pastebin up` runs several parts in one.
//!
//! A check is *required* (failing, the process is not ready) or *advisory*
//! (failing, the process is still ready and `/readyz` says what is
//! degraded). A gateway's shards are advisory: one shard's outage must not
//! take every gateway out of service while the calls that need other shards
//! still work (docs/deployment.md#readiness).

use std::{collections::BTreeMap, future::Future, sync::OnceLock, time::Duration};

use tokio::sync::watch;

/// Whether a failing check makes the process not ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    /// The process cannot do its work without it.
    Required,
    /// Only some calls need it: shown, never a reason to be not ready.
    Advisory,
}

/// A check's last outcome: `Err` holds why the part cannot work, in words
/// safe to show anyone (never a URL, a key or a token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Check {
    pub outcome: Result<(), String>,
    pub weight: Weight,
}

impl Check {
    /// A failing required check.
    fn blocks(&self) -> bool {
        self.weight == Weight::Required && self.outcome.is_err()
    }
}

pub type Checks = BTreeMap<&'static str, Check>;

/// The process's checks. A process that never reports any is ready.
pub struct Readiness {
    checks: watch::Sender<Checks>,
}

/// The one [`Readiness`] of this process.
pub fn process() -> &'static Readiness {
    static READINESS: OnceLock<Readiness> = OnceLock::new();
    READINESS.get_or_init(|| Readiness { checks: watch::Sender::new(Checks::new()) })
}

/// Ready when no required check failed.
pub fn all_pass(checks: &Checks) -> bool {
    !checks.values().any(Check::blocks)
}

/// Ready, but some advisory check fails: some calls answer 503.
pub fn degraded(checks: &Checks) -> bool {
    all_pass(checks) && checks.values().any(|check| check.outcome.is_err())
}

impl Readiness {
    /// Records the outcome of the required `check`, logging when it flips.
    pub fn report(&self, check: &'static str, outcome: Result<(), String>) {
        self.record(check, Check { outcome, weight: Weight::Required });
    }

    fn record(&self, name: &'static str, check: Check) {
        self.checks.send_if_modified(|checks| {
            let previous = checks.insert(name, check.clone());
            if previous.as_ref() == Some(&check) {
                return false;
            }
            match (&check.outcome, check.weight) {
                (Ok(()), _) => tracing::info!(check = name, "ready"),
                (Err(reason), Weight::Required) => tracing::warn!(check = name, %reason, "not ready"),
                (Err(reason), Weight::Advisory) => tracing::warn!(check = name, %reason, "degraded, still ready"),
            }
            true
        });
    }

    pub fn checks(&self) -> Checks {
        self.checks.borrow().clone()
    }

    pub fn is_ready(&self) -> bool {
        all_pass(&self.checks.borrow())
    }

    /// Sees every change of the checks (the gRPC health service follows it).
    pub fn subscribe(&self) -> watch::Receiver<Checks> {
        self.checks.subscribe()
    }
}

/// How often a part re-runs its check: a failure shows within about this
/// plus [`CHECK_TIMEOUT`].
pub const CHECK_INTERVAL: Duration = Duration::from_secs(1);
/// A check that has not answered by then has failed: a database or a shard
/// that hangs is as unable to work as one that refuses.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs `check` once and reports it as `name`, then spawns a task that runs
/// it every [`CHECK_INTERVAL`], forever. Call it before the part starts
/// listening: its first health answer is then already the truth, never a
/// "serving" that nothing has shown yet.
pub async fn start_checking<F, Fut>(name: &'static str, weight: Weight, mut check: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let run = move |outcome| process().record(name, Check { outcome, weight });
    run(within_timeout(check()).await);
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(CHECK_INTERVAL);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            run(within_timeout(check()).await);
        }
    });
}

async fn within_timeout(check: impl Future<Output = Result<(), String>>) -> Result<(), String> {
    tokio::time::timeout(CHECK_TIMEOUT, check)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", CHECK_TIMEOUT.as_secs())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_only_while_every_check_passes() {
        let readiness = Readiness { checks: watch::Sender::new(Checks::new()) };
        assert!(readiness.is_ready(), "no check yet");
        readiness.report("database", Ok(()));
        readiness.report("objects", Err("the object store does not answer".into()));
        assert!(!readiness.is_ready());
        readiness.report("objects", Ok(()));
        assert!(readiness.is_ready());
    }

    #[test]
    fn a_failing_advisory_check_leaves_the_process_ready_but_degraded() {
        let readiness = Readiness { checks: watch::Sender::new(Checks::new()) };
        readiness.report("slot map", Ok(()));
        readiness
            .record("shards", Check { outcome: Err("key shard 1 does not answer".into()), weight: Weight::Advisory });
        assert!(readiness.is_ready());
        assert!(degraded(&readiness.checks()));
        readiness.report("slot map", Err("no slot map yet".into()));
        assert!(!readiness.is_ready());
        assert!(!degraded(&readiness.checks()), "not ready is not degraded");
    }

    #[test]
    fn subscribers_see_a_flip_but_not_a_repeat() {
        let readiness = Readiness { checks: watch::Sender::new(Checks::new()) };
        let mut seen = readiness.subscribe();
        readiness.report("database", Err("down".into()));
        assert!(seen.has_changed().unwrap());
        seen.mark_unchanged();
        readiness.report("database", Err("down".into()));
        assert!(!seen.has_changed().unwrap());
    }
}
