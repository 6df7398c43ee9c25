//! One budget for the request bodies a process holds in flight, HTTP and
//! gRPC together (docs/security.md#total-bounds): every body is charged its
//! declared (or largest allowed) size before a byte of it is read, and past
//! the budget a new body is refused at once (503 + `Retry-After` over HTTP,
//! UNAVAILABLE over gRPC) rather than read. Without it each request is
//! bounded but their sum is not: 256 creates of 6 MiB each.

use std::{
    net::IpAddr,
    sync::{Arc, OnceLock},
};

pub use crate::budget::{Charge as BodyCharge, Short};
use crate::{budget::Budget, client_shares::Shares};

/// `--body-budget-bytes` when not given: 128 MiB.
pub const DEFAULT_BODY_BUDGET_BYTES: usize = 128 * 1024 * 1024;

static BUDGET: OnceLock<Budget> = OnceLock::new();

/// Sets the process's budget; the first call wins (`up` sets it once for
/// every part it runs). Later calls, and reservations before any call, use
/// what is set (or the default).
pub fn set_body_budget(bytes: usize) {
    let _ = BUDGET.set(Budget::of(bytes));
}

fn budget() -> &'static Budget {
    BUDGET.get_or_init(|| Budget::of(DEFAULT_BODY_BUDGET_BYTES))
}

/// The whole budget: a body larger than this can never be held, however
/// long its sender waits.
pub fn budget_bytes() -> usize {
    budget().total()
}

/// `bytes` for one body, from `client`'s share (on a public listener: the
/// shares and the client's address) and then from the budget, or what ran
/// short. Each listener answers a shortfall in its own protocol.
pub fn charge(client: Option<(&Arc<Shares>, IpAddr)>, bytes: usize) -> Result<BodyCharge, Short> {
    budget().charge(client, bytes)
}
