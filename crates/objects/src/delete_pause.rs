//! A pause of the object deletes of a directory store, for `pastebin ctl
//! backup` (docs/operations.md#backups). The backup copies the objects after
//! P's snapshot; an object deleted in between (its paste deleted, expired,
//! burned or reaped after the snapshot) would come back as a live row
//! without its bytes. Every process that deletes from the directory (the
//! gateways, the sweepers, `ctl takedown`, `pastebin up`) reads the pause
//! before each delete; a paused delete is refused, and the object is left
//! to the reaper, which removes it in a round after the pause.
//!
//! The pause is a lease, so a backup that dies stops pausing by itself: the
//! file `deletes-paused-until` beside `pastes/` holds a time in Unix
//! milliseconds, renewed while the copy runs and removed when it ends.

use std::{
    fs::{self, OpenOptions},
    io::{self, ErrorKind, Write},
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

use chrono::{DateTime, Utc};

#[derive(Debug, Clone)]
pub struct DeletePause {
    file: PathBuf,
}

impl DeletePause {
    pub const FILE_NAME: &'static str = "deletes-paused-until";

    /// The pause of the objects directory `dir` (the one given to [`crate::LocalDirStore::open`]).
    pub fn of_dir(dir: &Path) -> Self {
        Self { file: dir.join(Self::FILE_NAME) }
    }

    /// Pauses deletes until `until`, or moves the end of a pause held.
    /// Written aside and renamed, so a reader never sees half a time.
    pub fn hold_until(&self, until: DateTime<Utc>) -> io::Result<()> {
        let aside = self.file.with_extension("new");
        let mut file = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&aside)?;
        file.write_all(until.timestamp_millis().to_string().as_bytes())?;
        file.sync_all()?;
        fs::rename(&aside, &self.file)
    }

    /// Ends the pause; deletes go on at once.
    pub fn lift(&self) -> io::Result<()> {
        match fs::remove_file(&self.file) {
            Err(error) if error.kind() != ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        }
    }

    /// The end of the pause in force at `now`, if one is. A file that does
    /// not hold a time pauses nothing: it was not written by a backup.
    pub fn paused_at(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let text = fs::read_to_string(&self.file).ok()?;
        let until = DateTime::from_timestamp_millis(text.trim().parse().ok()?)?;
        (now < until).then_some(until)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pause_holds_until_its_end_or_until_it_is_lifted() {
        let dir = tempfile::tempdir().unwrap();
        let pause = DeletePause::of_dir(dir.path());
        let now = Utc::now();
        assert_eq!(pause.paused_at(now), None);
        let until = now + chrono::Duration::seconds(60);
        pause.hold_until(until).unwrap();
        assert_eq!(pause.paused_at(now).map(|t| t.timestamp_millis()), Some(until.timestamp_millis()));
        assert_eq!(pause.paused_at(until), None, "a lease that ran out pauses nothing");
        pause.lift().unwrap();
        pause.lift().unwrap();
        assert_eq!(pause.paused_at(now), None);
        fs::write(dir.path().join(DeletePause::FILE_NAME), "soon").unwrap();
        assert_eq!(pause.paused_at(now), None, "a file that holds no time pauses nothing");
    }
}
