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
}

impl From<CallError> for StepError {
    fn from(error: CallError) -> Self {
        match error {
            CallError::Refused(status) => Self::Refused(status.message().to_owned()),
            CallError::Uncertain(status) => Self::Uncertain(status.message().to_owned()),
        }
    }
}

impl From<ObjectError> for StepError {
    fn from(error: ObjectError) -> Self {
        match error {
            ObjectError::Refused(message) => Self::Refused(message),
            ObjectError::Uncertain(message) => Self::Uncertain(message),
        }
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
