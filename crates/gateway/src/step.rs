//! One call of a saga step, however it ends: against the request's deadline
//! ([`within`]), timed for the step histogram ([`timed`]), and failing as a
//! [`StepError`] that keeps "refused" apart from "uncertain" because the saga
//! may compensate only the first (docs/design.md#compensations). Shared by the
//! saga and by reads and deletes.

use std::future::Future;

use pastebin_objects::ObjectError;
use pastebin_runtime::grpc::CallError;
use tokio::time::Instant;

/// A failed step, split the way the saga must treat it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StepError {
    /// The other side answered: it did not act. Compensating is safe.
    #[error("refused: {0}")]
    Refused(String),
    /// Timeout or no answer: it may have acted. Only waiting is safe.
    #[error("uncertain: {0}")]
    Uncertain(String),
    /// The shard did not act because the slot is moving (frozen, or owned
    /// elsewhere now): the same step succeeds on the map's next owner.
    #[error("not executed: {0}")]
    NotExecuted(String),
    /// The other side had no room and did not act: refused, so compensating
    /// is safe, and the client hears that the storage is full.
    #[error("storage full: {0}")]
    StorageFull(String),
}

impl From<CallError> for StepError {
    fn from(error: CallError) -> Self {
        match error {
            CallError::Refused(status) if status.metadata().contains_key(pastebin_runtime::grpc::STORAGE_FULL) => {
                Self::StorageFull(status.message().to_owned())
            }
            CallError::Refused(status) => Self::Refused(status.message().to_owned()),
            CallError::Uncertain(status) => Self::Uncertain(status.message().to_owned()),
            CallError::NotExecuted(status) => Self::NotExecuted(status.message().to_owned()),
        }
    }
}

impl From<ObjectError> for StepError {
    fn from(error: ObjectError) -> Self {
        match error {
            ObjectError::Refused(message) => Self::Refused(message),
            ObjectError::Uncertain(message) => Self::Uncertain(message),
            ObjectError::StorageFull(message) => Self::StorageFull(message),
        }
    }
}

/// The first wait before a call refused as "not executed" (its slot is
/// moving) is made again; it doubles up to [`MAX_MOVING_PAUSE`].
const FIRST_MOVING_PAUSE: std::time::Duration = std::time::Duration::from_millis(25);
const MAX_MOVING_PAUSE: std::time::Duration = std::time::Duration::from_millis(200);

/// Following a slot that moves while a request runs: after a "not
/// executed" refusal, discover the slot map again, wait a little, and say
/// whether the request's budget leaves time to try again (docs/design.md#moving-slots).
pub(crate) struct FollowMoves {
    pause: std::time::Duration,
}

impl FollowMoves {
    pub(crate) fn new() -> Self {
        Self { pause: FIRST_MOVING_PAUSE }
    }

    pub(crate) async fn again(&mut self, slots: &pastebin_shards::SlotMapCell, deadline: Instant) -> bool {
        if Instant::now() + self.pause >= deadline {
            return false;
        }
        let _ = tokio::time::timeout_at(deadline, slots.refresh()).await;
        tokio::time::sleep(self.pause).await;
        self.pause = (self.pause * 2).min(MAX_MOVING_PAUSE);
        true
    }
}

/// Runs one call against the request's deadline; running out of time is
/// uncertain, never refused.
pub(crate) async fn within<T, E: Into<StepError>>(
    deadline: Instant,
    call: impl Future<Output = Result<T, E>>,
) -> Result<T, StepError> {
    match tokio::time::timeout_at(deadline, call).await {
        Ok(result) => result.map_err(Into::into),
        Err(_) => Err(StepError::Uncertain("deadline exceeded".into())),
    }
}

/// Records how long one saga step took, whatever its outcome.
pub(crate) async fn timed<T>(step: &'static str, call: impl Future<Output = T>) -> T {
    let started = std::time::Instant::now();
    let result = call.await;
    metrics::histogram!(pastebin_runtime::metrics::SAGA_STEP_SECONDS, "step" => step)
        .record(started.elapsed().as_secs_f64());
    result
}
