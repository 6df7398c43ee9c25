//! The free-space watermark (docs/operations.md#a-full-disk). Below
//! `min_free_bytes` free on a watched filesystem (`up`'s data directory, a
//! gateway's local objects directory), a create is refused with 507 before
//! anything is written: no key begun, no object PUT. The space left is kept
//! for the writes that keep promises already made (the fences and aborts of
//! creates under way, the sweeper's recovery, deletes' tombstones), and
//! reads and deletes go on. Once space is freed, the next reading admits
//! creates again.
//!
//! The free space is read with `statvfs` at most once a second; between two
//! readings each admitted create counts against it, so a burst cannot run
//! past the watermark on one stale reading.

use std::{
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use pastebin_runtime::metrics as names;

use crate::ApiError;

/// How long one reading of the free space is used.
const READING_LIFETIME: Duration = Duration::from_secs(1);
/// What an admitted create is counted as taking beyond its content until
/// the next reading: its key and paste rows, and the filesystem's rounding.
const ROWS_ROOM: u64 = 8 * 1024;

/// The free space of the watched filesystems against the watermark.
#[derive(Clone)]
pub(crate) struct StorageWatermark {
    paths: Arc<[PathBuf]>,
    min_free_bytes: u64,
    reading: Arc<Mutex<Reading>>,
}

#[derive(Default)]
struct Reading {
    /// Free bytes on the fullest watched filesystem; `None` if none could be read.
    free: Option<u64>,
    taken_at: Option<Instant>,
    /// Bytes admitted since the reading was taken.
    admitted: u64,
}

impl Reading {
    /// Whether a create of `content_bytes` leaves `min_free_bytes` free by
    /// this reading; if so, it counts against the reading from now on. No
    /// reading admits: the writes themselves still refuse for lack of room.
    fn admit(&mut self, content_bytes: usize, min_free_bytes: u64) -> bool {
        let Some(free) = self.free else { return true };
        let needed = (content_bytes as u64).saturating_add(ROWS_ROOM);
        if free.saturating_sub(self.admitted).saturating_sub(needed) < min_free_bytes {
            return false;
        }
        self.admitted = self.admitted.saturating_add(needed);
        true
    }
}

impl StorageWatermark {
    /// Watches `paths` (none: no watermark) against `min_free_bytes`.
    pub(crate) fn new(paths: Vec<PathBuf>, min_free_bytes: u64) -> Self {
        Self { paths: paths.into(), min_free_bytes, reading: Arc::default() }
    }

    /// Free bytes on the fullest watched filesystem, read now. A path that
    /// cannot be read is left out: the watermark is a guard, and a write that
    /// finds no room is still refused as storage full.
    fn read_free(&self) -> Option<u64> {
        self.paths
            .iter()
            .filter_map(|path| match rustix::fs::statvfs(path) {
                Ok(stat) => Some(stat.f_bavail.saturating_mul(stat.f_frsize)),
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "cannot read the free space of a watched directory");
                    None
                }
            })
            .min()
    }

    fn reading(&self) -> std::sync::MutexGuard<'_, Reading> {
        // A reading is plain numbers: a panic elsewhere cannot leave it half written.
        self.reading.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Reads the free space again and exports it; returns it.
    pub(crate) fn refresh(&self) -> Option<u64> {
        if self.paths.is_empty() {
            return None;
        }
        let free = self.read_free();
        *self.reading() = Reading { free, taken_at: Some(Instant::now()), admitted: 0 };
        if let Some(free) = free {
            metrics::gauge!(names::STORAGE_FREE_BYTES).set(free as f64);
        }
        metrics::gauge!(names::STORAGE_MIN_FREE_BYTES).set(self.min_free_bytes as f64);
        free
    }

    /// Admits a create of `content_bytes`, or refuses it (507) when it would
    /// leave less than the watermark free.
    pub(crate) fn admit(&self, content_bytes: usize) -> Result<(), ApiError> {
        if self.paths.is_empty() {
            return Ok(());
        }
        let stale = self.reading().taken_at.is_none_or(|at| at.elapsed() >= READING_LIFETIME);
        if stale {
            self.refresh();
        }
        if self.reading().admit(content_bytes, self.min_free_bytes) {
            Ok(())
        } else {
            Err(ApiError::StorageFull)
        }
    }

    /// Keeps the exported free space fresh while no create asks, every
    /// `every`, forever.
    pub(crate) async fn watch(&self, every: Duration) {
        if self.paths.is_empty() {
            return std::future::pending().await;
        }
        loop {
            self.refresh();
            tokio::time::sleep(every).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_admits_creates_until_they_would_leave_less_than_the_watermark() {
        let mut reading = Reading { free: Some(100 * 1024), taken_at: None, admitted: 0 };
        assert!(reading.admit(20 * 1024, 50 * 1024), "100 KiB free, 28 KiB needed: 72 KiB stay");
        assert!(!reading.admit(20 * 1024, 50 * 1024), "what the first took counts: only 44 KiB would stay");
        assert!(reading.admit(0, 50 * 1024), "a smaller create still fits");
        assert!(Reading::default().admit(usize::MAX, u64::MAX), "no reading: the writes themselves guard");
    }

    #[test]
    fn the_watermark_reads_the_watched_filesystem() {
        let dir = tempfile::tempdir().unwrap();
        let watched = || vec![dir.path().to_owned()];
        assert!(StorageWatermark::new(watched(), 0).refresh().is_some_and(|free| free > 0));
        StorageWatermark::new(watched(), 0).admit(1).expect("no watermark to keep");
        assert!(matches!(StorageWatermark::new(watched(), u64::MAX).admit(1), Err(ApiError::StorageFull)));
        StorageWatermark::new(Vec::new(), u64::MAX).admit(usize::MAX).expect("no watched path: no watermark");
    }
}
