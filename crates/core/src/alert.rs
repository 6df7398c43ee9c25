//! The pending-age alert card (docs/design.md#alert-card), as data and as one
//! function, so the dashboard, `pastebin ctl stats`, the key shards' pending
//! statistics and the tests agree on the boundaries. The boundaries are not
//! numbers of their own: a pending key younger than the create budget is a
//! create in flight, and one older than the recovery threshold is the
//! sweeper's to resolve.

use std::time::Duration;

use serde::Serialize;

use crate::{CREATE_BUDGET, RECOVERY_THRESHOLD};

/// Below this, a pending key is an ordinary create in flight.
pub const SLOW_AFTER: Duration = CREATE_BUDGET;
/// Above this, the sweeper may recover the key.
pub const RECOVERY_AFTER: Duration = RECOVERY_THRESHOLD;
/// Growth of stale (older than [`SLOW_AFTER`]) pendings per minute that means
/// creates are getting stuck rather than slow. Healthy stale counts sit near
/// zero and stay flat; a one-minute outage at peak adds ~21,000. The
/// Prometheus rule `PastebinPendingCountClimbing` uses the same figure.
pub const CLIMBING_PER_MINUTE: f64 = 300.0;

/// A slot move whose step has not changed for this long has stopped (its
/// `ctl reshard` was killed, or waits for a shard): rerun it or abandon it.
/// A bulk copy that takes longer trips it too; ctl's progress lines tell
/// the two apart. The rule `PastebinSlotMoveStalled` uses the same figure.
pub const MOVE_STALLED_AFTER: Duration = Duration::from_secs(15 * 60);
/// Slots frozen (or released and not yet taken) for this long: their
/// creates have been answering 503 since. A move's freeze normally lasts
/// under a second. The rule `PastebinSlotsUnserved` uses the same figure.
pub const MOVE_UNSERVED_AFTER: Duration = Duration::from_secs(2 * 60);

/// Whether a slot move that last changed step `step_age_seconds` ago has
/// stopped: sooner when its slots are `unserved` (frozen, or released and
/// not taken yet).
pub fn move_stalled(unserved: bool, step_age_seconds: f64) -> bool {
    let limit = if unserved { MOVE_UNSERVED_AFTER } else { MOVE_STALLED_AFTER };
    step_age_seconds > limit.as_secs_f64()
}

/// A row of the alert card.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Oldest pending younger than the create budget: creates in flight.
    Healthy,
    /// Between the budget and the recovery threshold: slow creates; watch P
    /// and the object store.
    Slow,
    /// Past the recovery threshold: the sweeper reads P before it aborts.
    Recovery,
    /// The pending count is climbing: creates are stuck. Page; never mass-abort.
    Stuck,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Healthy => "healthy",
            Level::Slow => "slow",
            Level::Recovery => "recovery",
            Level::Stuck => "stuck",
        }
    }

    /// The card row for this level.
    pub fn card_row(self) -> &'static CardRow {
        &CARD[self as usize]
    }
}

impl std::fmt::Display for Level {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of the card: what the operator sees and what they should do.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CardRow {
    pub level: Level,
    pub signal: &'static str,
    pub meaning: &'static str,
    pub action: &'static str,
}

/// The card, in [`Level`] order. The signals spell out [`SLOW_AFTER`] and
/// [`RECOVERY_AFTER`]; a test keeps them in step.
pub const CARD: [CardRow; 4] = [
    CardRow { level: Level::Healthy, signal: "Oldest pending < 2 s", meaning: "Healthy in-flight", action: "None" },
    CardRow {
        level: Level::Slow,
        signal: "Oldest pending 2 s – 60 s",
        meaning: "Slow creates",
        action: "Watch P and the object store",
    },
    CardRow {
        level: Level::Recovery,
        signal: "Oldest pending > 60 s",
        meaning: "Recovery territory",
        action: "The sweeper reads P before it aborts; let it",
    },
    CardRow {
        level: Level::Stuck,
        signal: "Pending count climbing (~ the create rate)",
        meaning: "Creates stuck",
        action: "Page. Never mass-abort: fix P or the object store",
    },
];

/// Where the oldest pending key's age and the count's trend put us on the card.
/// A climbing count wins over any age: it is the one that pages.
pub fn alert_level(oldest_age_seconds: f64, count_climbing: bool) -> Level {
    if count_climbing {
        Level::Stuck
    } else if oldest_age_seconds > RECOVERY_AFTER.as_secs_f64() {
        Level::Recovery
    } else if oldest_age_seconds >= SLOW_AFTER.as_secs_f64() {
        Level::Slow
    } else {
        Level::Healthy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_map_to_the_card_rows() {
        assert_eq!(alert_level(0.0, false), Level::Healthy);
        assert_eq!(alert_level(1.999, false), Level::Healthy);
        assert_eq!(alert_level(2.0, false), Level::Slow);
        assert_eq!(alert_level(30.0, false), Level::Slow);
        assert_eq!(alert_level(60.0, false), Level::Slow, "the card says > 60 s");
        assert_eq!(alert_level(60.001, false), Level::Recovery);
        assert_eq!(alert_level(86_400.0, false), Level::Recovery);
    }

    #[test]
    fn a_climbing_count_pages_whatever_the_age() {
        for age in [0.0, 5.0, 600.0] {
            assert_eq!(alert_level(age, true), Level::Stuck);
        }
    }

    #[test]
    fn a_move_has_stalled_after_fifteen_minutes_on_one_step_or_two_with_its_slots_unserved() {
        assert!(!move_stalled(false, 900.0));
        assert!(move_stalled(false, 900.5));
        assert!(!move_stalled(true, 120.0));
        assert!(move_stalled(true, 121.0));
    }

    #[test]
    fn card_rows_are_in_level_order() {
        for level in [Level::Healthy, Level::Slow, Level::Recovery, Level::Stuck] {
            assert_eq!(level.card_row().level, level);
        }
        assert!(Level::Stuck.card_row().action.contains("Never mass-abort"));
    }

    #[test]
    fn the_signals_name_the_budget_and_the_recovery_threshold() {
        let slow = format!("{} s", SLOW_AFTER.as_secs());
        let recovery = format!("{} s", RECOVERY_AFTER.as_secs());
        assert_eq!(Level::Healthy.card_row().signal, format!("Oldest pending < {slow}"));
        assert_eq!(Level::Slow.card_row().signal, format!("Oldest pending {slow} – {recovery}"));
        assert_eq!(Level::Recovery.card_row().signal, format!("Oldest pending > {recovery}"));
    }
}
