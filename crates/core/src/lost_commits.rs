use chrono::{DateTime, Utc};

/// A K shard that may have lost commits since `since` (a failover to an
/// asynchronous standby, a restore from a backup): a key it does not know
/// may have had an earlier life whose record is gone while its paste lives
/// on P. Until [`Self::search_first_until`], creates search P before they
/// mint (docs/design.md#adopting-after-a-k-loss).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostCommits {
    pub since: DateTime<Utc>,
    until: DateTime<Utc>,
}

/// How long the search is needed after the last commit that may be lost:
/// a key lost then is retried within its 25 h retention (after that a
/// retry makes a new paste by contract), plus an hour for clocks that
/// disagree.
const SEARCH_WINDOW: std::time::Duration = std::time::Duration::from_secs(crate::KEY_RETENTION.as_secs() + 3600);

impl LostCommits {
    /// Told at `started` (the shard's start) that commits since `since` may
    /// be lost. Every commit up to the start may be among them (a restore
    /// loses everything after its backup), so the search lasts a window
    /// after the later of the two.
    pub fn new(since: DateTime<Utc>, started: DateTime<Utc>) -> Self {
        // 26 h is always representable; a time near the end of time saturates.
        let window = chrono::Duration::from_std(SEARCH_WINDOW).unwrap_or(chrono::Duration::MAX);
        let until = since.max(started).checked_add_signed(window).unwrap_or(DateTime::<Utc>::MAX_UTC);
        Self { since, until }
    }

    /// As a shard's `Describe` reports it.
    pub fn described(since: DateTime<Utc>, until: DateTime<Utc>) -> Self {
        Self { since, until }
    }

    pub fn search_first_until(&self) -> DateTime<Utc> {
        self.until
    }

    /// Whether a create at `now` of a key this shard has not finished must
    /// search P first.
    pub fn search_first(&self, now: DateTime<Utc>) -> bool {
        now < self.until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(hours: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_900_000_000, 0).unwrap() + chrono::Duration::hours(hours)
    }

    #[test]
    fn the_search_lasts_the_key_retention_and_an_hour_after_the_later_of_the_time_and_the_start() {
        let failover = LostCommits::new(at(0), at(0));
        assert!(failover.search_first(at(0)));
        assert!(failover.search_first(at(26) - chrono::Duration::seconds(1)));
        assert!(!failover.search_first(at(26)));
        // A backup six hours old: keys were lost up to the restore, so the search runs from it.
        let restore = LostCommits::new(at(0), at(6));
        assert_eq!(restore.search_first_until(), at(32));
        assert_eq!(LostCommits::new(DateTime::<Utc>::MAX_UTC, at(0)).search_first_until(), DateTime::<Utc>::MAX_UTC);
    }
}
