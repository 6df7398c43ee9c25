//! Retries inside one run: a bounded number of sends, exponential backoff
//! with full jitter (so many clients knocked over by one outage do not come
//! back in lockstep), never shorter than the server's `Retry-After`. The key
//! never changes between attempts: that is what makes retrying safe at all.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Sends per run, the first included (at least 1).
    pub attempts: u32,
    /// The backoff before the second send; doubles after each attempt.
    pub base_delay: Duration,
    /// The backoff's ceiling (jitter included).
    pub max_delay: Duration,
    /// The most a server's `Retry-After` can make one run wait.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 5,
            base_delay: Duration::from_millis(250),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// How long to wait after failed attempt number `attempt` (1-based).
    /// `jitter` is uniform in `0.0..1.0`; it is a parameter so tests can pin it.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>, jitter: f64) -> Duration {
        let exponent = attempt.saturating_sub(1).min(16);
        let ceiling = self.base_delay.saturating_mul(1 << exponent).min(self.max_delay);
        let backoff = ceiling.mul_f64(jitter.clamp(0.0, 1.0));
        let floor = retry_after.map_or(Duration::ZERO, |r| r.min(self.max_retry_after));
        backoff.max(floor)
    }

    pub fn jittered_delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        self.delay(attempt, retry_after, rand::random::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_ceiling_and_jitter_scales_it() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.delay(1, None, 1.0), Duration::from_millis(250));
        assert_eq!(policy.delay(2, None, 1.0), Duration::from_millis(500));
        assert_eq!(policy.delay(3, None, 0.5), Duration::from_millis(500));
        assert_eq!(policy.delay(30, None, 1.0), Duration::from_secs(8));
        assert_eq!(policy.delay(3, None, 0.0), Duration::ZERO);
    }

    #[test]
    fn retry_after_is_a_floor_with_a_cap() {
        let policy = RetryPolicy::default();
        assert_eq!(policy.delay(1, Some(Duration::from_secs(1)), 0.0), Duration::from_secs(1));
        assert_eq!(policy.delay(6, Some(Duration::from_secs(1)), 1.0), Duration::from_secs(8));
        assert_eq!(policy.delay(1, Some(Duration::from_secs(3600)), 0.0), Duration::from_secs(30));
    }
}
