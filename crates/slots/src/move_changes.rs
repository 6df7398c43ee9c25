//! The rows a move's source changed while its slots were still served
//! (docs/design.md#moving-slots): every write names the rows it touches,
//! and when it ends (committed, or failed) the ones in the moving slots are
//! recorded here with a sequence number. After the freeze the copy then
//! re-reads only the rows changed since it last looked, so the slots stay
//! frozen for as long as those few rows take, not the whole range.
//!
//! In memory only: a source that restarts in the middle of a move does not
//! know what changed before, and says so (`complete = false`); the move then
//! compares every row while frozen instead.

use std::{collections::HashMap, sync::Mutex};

use pastebin_core::{IdempotencyKey, PasteId, Slot, SlotRange};

/// A row a write changes, as the moved table names it: its slot and its
/// primary key.
pub trait MovedRowKey {
    fn moved_row(&self) -> (Slot, String);
}

impl MovedRowKey for PasteId {
    fn moved_row(&self) -> (Slot, String) {
        (self.slot(), self.as_str().to_owned())
    }
}

impl MovedRowKey for IdempotencyKey {
    fn moved_row(&self) -> (Slot, String) {
        (self.slot(), self.canonical())
    }
}

/// Past this many distinct changed rows the log gives up (and says it is
/// incomplete): memory stays bounded, the move compares every row instead.
const MAX_ROWS: usize = 500_000;

/// What changed since a point the caller saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedRows {
    /// Rows changed after `since`, oldest change first.
    pub ids: Vec<String>,
    /// Ask after this next time.
    pub up_to: u64,
    /// Whether more changes follow `up_to` already.
    pub more: bool,
    /// False when changes may be missing (a restart, or too many rows).
    pub complete: bool,
}

#[derive(Debug, Default)]
struct Log {
    /// The slots of the move being recorded (`None`: none is).
    moving: Option<SlotRange>,
    complete: bool,
    seq: u64,
    /// Each changed row and the number of its last change.
    rows: HashMap<String, u64>,
}

/// Shared by a shard's write permits and its `SlotMoves` service.
#[derive(Debug, Default)]
pub struct ChangeLog(Mutex<Log>);

impl ChangeLog {
    fn log(&self) -> std::sync::MutexGuard<'_, Log> {
        // A panic while holding it cannot leave the log inconsistent: each
        // change is one insert.
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Starts recording `slots` afresh: `complete` when the move begins
    /// now, not when a restarted shard resumes one it was already in.
    pub fn start(&self, slots: SlotRange, complete: bool) {
        *self.log() = Log { moving: Some(slots), complete, ..Log::default() };
    }

    /// Stops recording and forgets (the source gave its slots up, or the move was undone).
    pub fn stop(&self) {
        *self.log() = Log::default();
    }

    /// A write ended: the rows it named in the moving slots changed.
    pub fn record(&self, rows: impl IntoIterator<Item = (Slot, String)>) {
        let mut log = self.log();
        let Some(moving) = log.moving else { return };
        for (slot, id) in rows {
            if !moving.contains(slot) || !log.complete {
                continue;
            }
            log.seq += 1;
            let seq = log.seq;
            log.rows.insert(id, seq);
            if log.rows.len() > MAX_ROWS {
                tracing::warn!(
                    rows = MAX_ROWS,
                    "too many rows changed during a slot move to track: it will compare every row"
                );
                log.rows = HashMap::new();
                log.complete = false;
            }
        }
    }

    /// Up to `limit` rows changed after `since`, oldest change first.
    pub fn since(&self, since: u64, limit: usize) -> ChangedRows {
        let log = self.log();
        let mut changed: Vec<(u64, &String)> =
            log.rows.iter().filter(|(_, seq)| **seq > since).map(|(id, seq)| (*seq, id)).collect();
        changed.sort_unstable();
        let more = changed.len() > limit;
        changed.truncate(limit);
        let up_to = if more { changed.last().map_or(since, |(seq, _)| *seq) } else { log.seq.max(since) };
        ChangedRows {
            ids: changed.into_iter().map(|(_, id)| id.clone()).collect(),
            up_to,
            more,
            complete: log.complete && log.moving.is_some(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(slot: u8, id: &str) -> (Slot, String) {
        (Slot(slot), id.to_owned())
    }

    #[test]
    fn records_the_moving_slots_rows_once_each_in_order_of_their_last_change() {
        let log = ChangeLog::default();
        log.record([row(200, "before")]);
        log.start("128-255".parse().unwrap(), true);
        log.record([row(200, "a"), row(3, "elsewhere"), row(130, "b")]);
        log.record([row(200, "a")]);
        let all = log.since(0, 10);
        assert_eq!(all.ids, ["b", "a"], "not the rows outside the move, nor before it began");
        assert!(all.complete && !all.more);
        assert_eq!(log.since(all.up_to, 10).ids, Vec::<String>::new());
        let first = log.since(0, 1);
        assert_eq!((first.ids.as_slice(), first.more), (&["b".to_owned()][..], true));
        assert_eq!(log.since(first.up_to, 1).ids, ["a"]);
    }

    #[test]
    fn a_resumed_or_stopped_log_says_it_is_incomplete() {
        let log = ChangeLog::default();
        log.start("0-9".parse().unwrap(), false);
        log.record([row(1, "a")]);
        assert!(!log.since(0, 10).complete, "a restarted source does not know what changed before");
        log.start("0-9".parse().unwrap(), true);
        log.stop();
        assert!(!log.since(0, 10).complete);
    }
}
