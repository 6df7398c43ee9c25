use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

/// Where "now" comes from, so the 60 s recovery threshold and the 25 h
/// retention can be tested by moving a clock instead of sleeping.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> DateTime<Utc>;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that moves only when told to. Clones share the same time.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    pub fn starting_at(now: DateTime<Utc>) -> Self {
        Self(Arc::new(Mutex::new(now)))
    }

    pub fn advance(&self, by: std::time::Duration) {
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        let mut now = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `now - age`, or the earliest time there is when `age` reaches past it: an
/// age from a flag or an RPC field may be anything up to `u64::MAX` seconds,
/// and "older than longer than time itself" simply matches nothing.
pub fn saturating_ago(now: DateTime<Utc>, age: std::time::Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(age).ok().and_then(|age| now.checked_sub_signed(age)).unwrap_or(DateTime::<Utc>::MIN_UTC)
}
