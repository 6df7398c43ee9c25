use chrono::{DateTime, Utc};

/// A K shard that may have lost commits since `since` (a failover to an
/// asynchronous standby, a restore from a backup): a key it does not know
/// may have had an earlier life whose record is gone while its paste lives
/// on P. Until [`Self::search_first_until`], creates search P before they
/// mint (docs/design.md#adopting-after-a-k-loss).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostCommits {
    pub since: DateTime<Utc>,
}

/// How long after `since` the search is needed: a key lost at `since` is
/// retried within its 25 h retention (after that a retry makes a new paste
/// by contract), plus an hour for clocks that disagree.
const SEARCH_WINDOW: std::time::Duration = std::time::Duration::from_secs(crate::KEY_RETENTION.as_secs() + 3600);

impl LostCommits {
    pub fn search_first_until(&self) -> DateTime<Utc> {
        // 26 h is always representable; a `since` near the end of time saturates.
        let window = chrono::Duration::from_std(SEARCH_WINDOW).unwrap_or(chrono::Duration::MAX);
        self.since.checked_add_signed(window).unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    /// Whether a create at `now` of a key this shard has not finished must
    /// search P first.
    pub fn search_first(&self, now: DateTime<Utc>) -> bool {
        now < self.search_first_until()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_search_lasts_the_key_retention_and_an_hour() {
        let since = DateTime::from_timestamp(1_900_000_000, 0).unwrap();
        let lost = LostCommits { since };
        let hours = |h: i64| since + chrono::Duration::hours(h);
        assert!(lost.search_first(since));
        assert!(lost.search_first(hours(26) - chrono::Duration::seconds(1)));
        assert!(!lost.search_first(hours(26)));
        assert_eq!(LostCommits { since: DateTime::<Utc>::MAX_UTC }.search_first_until(), DateTime::<Utc>::MAX_UTC);
    }
}
