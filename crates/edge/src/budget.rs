//! A process's budget of bytes of one kind (request bodies, answers): what
//! is held is paid for first from the client's share, then from the
//! budget, and given back when the charge is dropped. [`crate::body_budget`]
//! and [`crate::answer_budget`] are two of them.

use std::{net::IpAddr, sync::Arc};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::client_shares::{Share, Shares};

/// The budget's bytes in all, and what of them is free now.
#[derive(Debug)]
pub(crate) struct Budget {
    total: usize,
    free: Arc<Semaphore>,
}

impl Budget {
    pub(crate) fn of(bytes: usize) -> Self {
        let total = bytes.min(Semaphore::MAX_PERMITS).min(u32::MAX as usize);
        Self { total, free: Arc::new(Semaphore::new(total)) }
    }

    /// The whole budget: more than this can never be held at once.
    pub(crate) fn total(&self) -> usize {
        self.total
    }

    /// `bytes` of the budget, or `None` when it cannot cover them now.
    fn reserve(&self, bytes: usize) -> Option<OwnedSemaphorePermit> {
        let bytes = u32::try_from(bytes).ok()?;
        self.free.clone().try_acquire_many_owned(bytes).ok()
    }

    /// `bytes` from `client`'s share (the shares and the client's address),
    /// then from this budget, or what ran short. The share comes first, so a
    /// client past it never holds bytes of the budget everyone draws from.
    pub(crate) fn charge(&self, client: Option<(&Arc<Shares>, IpAddr)>, bytes: usize) -> Result<Charge, Short> {
        let share = match client {
            Some((shares, address)) => Some(shares.try_take(address, bytes).ok_or(Short::ClientShare)?),
            None => None,
        };
        let permit = self.reserve(bytes).ok_or(Short::Budget)?;
        Ok(Charge { _share: share, _permit: permit })
    }
}

/// What a charge ran short of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Short {
    /// Its client's share.
    ClientShare,
    /// The process's budget.
    Budget,
}

/// Bytes held of a client's share and of a budget, given back when dropped.
#[derive(Debug)]
pub struct Charge {
    _share: Option<Share>,
    _permit: OwnedSemaphorePermit,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_is_charged_before_the_budget_and_both_are_given_back() {
        let budget = Budget::of(100);
        let shares = Shares::new(60);
        let (a, b): (IpAddr, IpAddr) = ("192.0.2.1".parse().unwrap(), "192.0.2.2".parse().unwrap());
        let first = budget.charge(Some((&shares, a)), 50).unwrap();
        assert_eq!(budget.charge(Some((&shares, a)), 20).unwrap_err(), Short::ClientShare);
        let second = budget.charge(Some((&shares, b)), 50).unwrap();
        assert_eq!(budget.charge(None, 1).unwrap_err(), Short::Budget, "the budget is spent");
        drop((first, second));
        assert!(budget.charge(Some((&shares, a)), 60).is_ok());
        assert_eq!(budget.charge(None, 101).unwrap_err(), Short::Budget, "more than the whole budget");
    }
}
