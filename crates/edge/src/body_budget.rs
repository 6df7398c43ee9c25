//! One budget for the request bodies a process holds in flight, HTTP and
//! gRPC together (docs/security.md#total-bounds): every body is charged its
//! declared (or largest allowed) size before a byte of it is read, and past
//! the budget a new body is refused at once (503 + `Retry-After` over HTTP,
//! UNAVAILABLE over gRPC) rather than read. Without it each request is
//! bounded but their sum is not: 256 creates of 6 MiB each.

use std::sync::{Arc, OnceLock};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// `--body-budget-bytes` when not given: 128 MiB.
pub const DEFAULT_BODY_BUDGET_BYTES: usize = 128 * 1024 * 1024;

/// The budget's bytes in all, and what of them is free now.
struct Budget {
    total: usize,
    free: Arc<Semaphore>,
}

static BUDGET: OnceLock<Budget> = OnceLock::new();

/// Sets the process's budget; the first call wins (`up` sets it once for
/// every part it runs). Later calls, and reservations before any call, use
/// what is set (or the default).
pub fn set_body_budget(bytes: usize) {
    let _ = BUDGET.set(Budget::of(bytes));
}

impl Budget {
    fn of(bytes: usize) -> Self {
        let total = bytes.min(Semaphore::MAX_PERMITS).min(u32::MAX as usize);
        Self { total, free: Arc::new(Semaphore::new(total)) }
    }
}

fn budget() -> &'static Budget {
    BUDGET.get_or_init(|| Budget::of(DEFAULT_BODY_BUDGET_BYTES))
}

/// The whole budget: a body larger than this can never be held, however
/// long its sender waits.
pub fn budget_bytes() -> usize {
    budget().total
}

/// `bytes` of the budget, held until dropped, or `None` when the budget
/// cannot cover them now.
pub fn reserve(bytes: usize) -> Option<BodyReservation> {
    let bytes = u32::try_from(bytes).ok()?;
    budget().free.clone().try_acquire_many_owned(bytes).ok().map(|permit| BodyReservation { _permit: permit })
}

/// Bytes of the budget that a body in flight holds.
#[derive(Debug)]
pub struct BodyReservation {
    _permit: OwnedSemaphorePermit,
}
