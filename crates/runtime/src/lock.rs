//! Advisory locks on what two processes must never share by mistake
//! (docs/operations.md#locks): a `pastebin up` data directory, a SQLite
//! database file, an objects directory. Each is an `flock(2)` on a lock
//! file, held for the life of the process: the kernel drops it however the
//! process ends, so a crash never leaves a stale lock behind.
//!
//! An exclusive holder writes who it is into the lock file (its pid, and
//! its addresses once it listens), so the process refused can name it.

use std::{
    fs::{File, OpenOptions, TryLockError},
    io::{self, Read, Seek, Write},
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

/// Whether others may hold the lock at the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sharing {
    /// One holder only: `pastebin up`'s directory, a SQLite file.
    Exclusive,
    /// Any number of holders, but never beside an exclusive one: the
    /// gateways and sweepers of one deployment share its objects directory.
    Shared,
}

/// What is being locked, for the refusal: `the data directory pastebin-data`
/// and what to do instead (`pass another --data-dir`).
#[derive(Debug, Clone, Copy)]
pub struct Guarded<'a> {
    pub what: &'a str,
    pub instead: &'a str,
}

#[derive(Debug, thiserror::Error)]
pub enum LockError {
    #[error("{what} is in use by {holder}: stop that process first, or {instead}")]
    Held { what: String, holder: String, instead: String },
    #[error("cannot lock {path}: {error}")]
    Io { path: PathBuf, error: io::Error },
}

/// A held lock; dropping it (or the process ending) releases it.
#[derive(Debug)]
pub struct Lock {
    file: File,
}

impl Lock {
    /// Takes the lock on `path` (created 0600 if missing) at once, or says
    /// who holds it. `holder` is this process as the refused one would read
    /// it, e.g. `pid 1234 (pastebin up)`; only an exclusive holder writes it.
    pub fn acquire(path: &Path, sharing: Sharing, holder: &str, guarded: Guarded<'_>) -> Result<Lock, LockError> {
        let io_error = |error| LockError::Io { path: path.to_owned(), error };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(io_error)?;
        let taken = match sharing {
            Sharing::Exclusive => file.try_lock(),
            Sharing::Shared => file.try_lock_shared(),
        };
        match taken {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut written = String::new();
                // An unreadable description still refuses: the lock is what counts.
                let _ = file.read_to_string(&mut written);
                let written = written.trim();
                let holder = if written.is_empty() {
                    "another process (a gateway or sweeper of a deployment)".to_owned()
                } else {
                    written.lines().map(str::trim).collect::<Vec<_>>().join("; ")
                };
                return Err(LockError::Held {
                    what: guarded.what.to_owned(),
                    holder,
                    instead: guarded.instead.to_owned(),
                });
            }
            Err(TryLockError::Error(error)) => return Err(io_error(error)),
        }
        let mut lock = Lock { file };
        // A shared holder leaves no description: several hold it at once,
        // and a stale one from an earlier exclusive holder must not stay.
        let description = if sharing == Sharing::Exclusive { holder } else { "" };
        lock.describe(description).map_err(io_error)?;
        Ok(lock)
    }

    /// Replaces the description the refused read (e.g. with the addresses
    /// this process now listens on).
    pub fn describe(&mut self, holder: &str) -> io::Result<()> {
        self.file.set_len(0)?;
        self.file.rewind()?;
        self.file.write_all(holder.as_bytes())?;
        self.file.flush()
    }
}

/// The lock file's name in a data or objects directory.
pub const DIR_LOCK_FILE: &str = "pastebin.lock";

/// Where the lock of the SQLite database `file` is: `keys.db.lock` beside `keys.db`.
pub fn beside(file: &Path) -> PathBuf {
    let mut lock_path = file.to_owned().into_os_string();
    lock_path.push(".lock");
    lock_path.into()
}

/// This process as a lock holder names it: `pid 1234 (pastebin up)`.
pub fn this_process(part: &str) -> String {
    format!("pid {} ({part})", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GUARDED: Guarded<'static> = Guarded { what: "the data directory d", instead: "pass another --data-dir" };

    #[test]
    fn a_second_exclusive_holder_is_refused_with_the_first_ones_description() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pastebin.lock");
        let mut first = Lock::acquire(&path, Sharing::Exclusive, "pid 1 (pastebin up)", GUARDED).unwrap();
        first.describe("pid 1 (pastebin up)\nweb http://127.0.0.1:8080").unwrap();
        let refused = Lock::acquire(&path, Sharing::Exclusive, "pid 2 (pastebin up)", GUARDED).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "the data directory d is in use by pid 1 (pastebin up); web http://127.0.0.1:8080: \
             stop that process first, or pass another --data-dir"
        );
        assert!(Lock::acquire(&path, Sharing::Shared, "", GUARDED).is_err(), "nor shared beside it");
        drop(first);
        Lock::acquire(&path, Sharing::Exclusive, "pid 2 (pastebin up)", GUARDED).expect("free once the first is gone");
    }

    #[test]
    fn shared_holders_coexist_and_keep_an_exclusive_one_out() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pastebin.lock");
        drop(Lock::acquire(&path, Sharing::Exclusive, "pid 9 (pastebin up)", GUARDED).unwrap());
        let _gateway = Lock::acquire(&path, Sharing::Shared, "pid 3 (pastebin gateway)", GUARDED).unwrap();
        let _sweeper = Lock::acquire(&path, Sharing::Shared, "pid 4 (pastebin sweeper)", GUARDED).unwrap();
        let refused = Lock::acquire(&path, Sharing::Exclusive, "pid 5 (pastebin up)", GUARDED).unwrap_err();
        let message = refused.to_string();
        assert!(message.contains("in use by another process"), "{message}");
        assert!(!message.contains("pid 9"), "an earlier holder's description is never shown: {message}");
    }
}
