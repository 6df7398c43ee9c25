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

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::client_shares::{Share, Shares};

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

/// What a body's charge ran short of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Short {
    /// Its client's share of body bytes in flight.
    ClientShare,
    /// The process's budget.
    Budget,
}

/// What one body in flight holds, HTTP or gRPC alike: of its client's
/// share, then of the budget, both given back when dropped.
#[derive(Debug)]
pub struct BodyCharge {
    _share: Option<Share>,
    _reservation: BodyReservation,
}

/// `bytes` for one body, from `client`'s share (on a public listener: the
/// shares and the client's address) and then from the budget, or what ran
/// short. The share comes first, so a client past it never holds bytes of
/// the budget everyone draws from. Each listener answers a shortfall in its
/// own protocol.
pub fn charge(client: Option<(&Arc<Shares>, IpAddr)>, bytes: usize) -> Result<BodyCharge, Short> {
    let share = match client {
        Some((shares, address)) => Some(shares.try_take(address, bytes).ok_or(Short::ClientShare)?),
        None => None,
    };
    let reservation = reserve(bytes).ok_or(Short::Budget)?;
    Ok(BodyCharge { _share: share, _reservation: reservation })
}
