//! A directory as the object store: `<dir>/pastes/<id>`, one file per paste.
//!
//! Create-only is a hard link: the bytes go to a temp file in the same directory, are
//! fsynced, then linked to the final name. `link(2)` fails with EEXIST instead of replacing,
//! so of any number of concurrent writers exactly one creates the object, and a reader
//! never sees a half-written file under the final name.

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Semaphore;

use crate::{DeletePause, ObjectError, ObjectInfo, ObjectStore, PutOutcome, PREFIX};

/// Longest id accepted. Real ids are 14 characters; the slack costs nothing.
const MAX_ID_LEN: usize = 64;

/// Temp files start with a character no valid id has, so `list` skips them.
const TEMP_PREFIX: &str = ".tmp-";

/// Makes temp names unique between concurrent puts of one process; the pid separates processes.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// PUTs writing at once. Each runs on the blocking pool holding its body;
/// on a slow disk, without a bound, they would pile up past the 2 s budget.
/// A PUT waiting for its turn is an async future the caller's deadline can
/// drop, so waiting costs no thread (docs/design.md#edge).
const MAX_CONCURRENT_PUTS: usize = 32;

#[derive(Debug, Clone)]
pub struct LocalDirStore {
    /// `<dir>/pastes`: the directory that holds the objects.
    objects: PathBuf,
    writers: Arc<Semaphore>,
    /// Read before every delete: a backup may be copying the objects.
    pause: DeletePause,
}

impl LocalDirStore {
    /// Opens (creating if needed) `<dir>/pastes`. Directories it creates are
    /// 0700 and `pastes` is made 0700 if it exists: pastes may be private.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, ObjectError> {
        let dir = dir.into();
        let pause = DeletePause::of_dir(&dir);
        let objects = dir.join(PREFIX.trim_end_matches('/'));
        let create_err = |e| io_error(&format!("create {}", objects.display()), e);
        DirBuilder::new().recursive(true).mode(0o700).create(&objects).map_err(create_err)?;
        fs::set_permissions(&objects, fs::Permissions::from_mode(0o700)).map_err(create_err)?;
        Ok(Self { objects, writers: Arc::new(Semaphore::new(MAX_CONCURRENT_PUTS)), pause })
    }

    /// The object's path, after checking the id cannot name anything outside `objects`.
    fn path_of(&self, paste_id: &str) -> Result<PathBuf, ObjectError> {
        if !is_valid_id(paste_id) {
            return Err(ObjectError::Refused(format!(
                "invalid paste id {paste_id:?}: want 1..={MAX_ID_LEN} characters of [0-9A-Za-z]"
            )));
        }
        Ok(self.objects.join(paste_id))
    }

    /// Runs blocking filesystem work off the async workers.
    async fn blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Path) -> Result<T, ObjectError> + Send + 'static,
    ) -> Result<T, ObjectError> {
        let objects = self.objects.clone();
        tokio::task::spawn_blocking(move || work(&objects))
            .await
            // The closure only panics on a bug; the operation may have run partway.
            .map_err(|e| ObjectError::Uncertain(format!("local object task failed: {e}")))?
    }
}

#[async_trait::async_trait]
impl ObjectStore for LocalDirStore {
    #[tracing::instrument(skip_all, fields(%paste_id), err)]
    async fn put(&self, paste_id: &str, content: Bytes) -> Result<PutOutcome, ObjectError> {
        let target = self.path_of(paste_id)?;
        let paste_id = paste_id.to_owned();
        // The semaphore is never closed, so acquiring only ever waits.
        let turn = self.writers.clone().acquire_owned().await.map_err(|e| ObjectError::Refused(e.to_string()))?;
        self.blocking(move |objects| {
            let outcome = put_create_only(objects, &paste_id, &target, &content);
            drop(turn);
            outcome
        })
        .await
    }

    async fn get(&self, paste_id: &str) -> Result<Option<Bytes>, ObjectError> {
        let path = self.path_of(paste_id)?;
        match tokio::fs::read(&path).await {
            Ok(content) => Ok(Some(Bytes::from(content))),
            Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_error(&format!("read {}", path.display()), e)),
        }
    }

    #[tracing::instrument(skip_all, fields(%paste_id), err)]
    async fn delete(&self, paste_id: &str) -> Result<(), ObjectError> {
        let path = self.path_of(paste_id)?;
        let pause = self.pause.clone();
        self.blocking(move |objects| {
            // Every caller leaves a refused delete to the reaper.
            if let Some(until) = pause.paused_at(chrono::Utc::now()) {
                return Err(ObjectError::Refused(format!(
                    "object deletes are paused until {until} while `pastebin ctl backup` copies the objects; \
                     the reaper deletes this one later"
                )));
            }
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(io_error(&format!("remove {}", path.display()), e)),
            }
            // The unlink is visible now; without the directory fsync it might not survive
            // a crash. Either way the name is gone or will be deleted again by the next
            // reaper round, so a failure here is "maybe", not "no".
            sync_dir(objects)
                .map_err(|e| ObjectError::Uncertain(format!("fsync {} after delete: {e}", objects.display())))
        })
        .await
    }

    async fn list(&self, after: Option<&str>, limit: usize) -> Result<Vec<ObjectInfo>, ObjectError> {
        let after = after.map(str::to_owned);
        self.blocking(move |objects| list_page(objects, after.as_deref(), limit)).await
    }
}

/// temp file → write → fsync → link to the final name → remove temp → fsync the directory.
fn put_create_only(objects: &Path, paste_id: &str, target: &Path, content: &[u8]) -> Result<PutOutcome, ObjectError> {
    let temp = objects.join(format!(
        "{TEMP_PREFIX}{paste_id}-{}-{}",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let linked =
        write_temp(&temp, content).map_err(|e| io_error(&format!("write {}", temp.display()), e)).and_then(|()| {
            match fs::hard_link(&temp, target) {
                Ok(()) => Ok(PutOutcome::Created),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => Ok(PutOutcome::AlreadyExists),
                Err(e) => Err(io_error(&format!("link {}", target.display()), e)),
            }
        });
    // Best effort: a leftover temp file is invisible to get/list and only costs space.
    if let Err(e) = fs::remove_file(&temp) {
        if e.kind() != ErrorKind::NotFound {
            tracing::warn!(temp = %temp.display(), error = %e, "could not remove temp object");
        }
    }
    let outcome = linked?;
    // Fsync the directory on AlreadyExists too: the winner of a concurrent put may not
    // have made its link durable yet, and we are about to report the object as stored.
    // The name is already visible, so a failure here leaves durability unknown.
    sync_dir(objects).map_err(|e| ObjectError::Uncertain(format!("fsync {} after put: {e}", objects.display())))?;
    Ok(outcome)
}

fn write_temp(temp: &Path, content: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(temp)?;
    file.write_all(content)?;
    file.sync_all()
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Reads the whole directory for each page: fine for the reaper's slow cadence and the
/// embedded default's size; a store with millions of objects belongs on S3.
fn list_page(objects: &Path, after: Option<&str>, limit: usize) -> Result<Vec<ObjectInfo>, ObjectError> {
    let read_err = |e| io_error(&format!("list {}", objects.display()), e);
    let mut ids: Vec<String> = Vec::new();
    for entry in fs::read_dir(objects).map_err(read_err)? {
        let entry = entry.map_err(read_err)?;
        // Non-UTF-8 names and temp files are not objects.
        let Ok(name) = entry.file_name().into_string() else {
            continue;
        };
        if is_valid_id(&name) && after.is_none_or(|after| name.as_str() > after) {
            ids.push(name);
        }
    }
    ids.sort_unstable();
    let mut page = Vec::with_capacity(limit.min(ids.len()));
    for paste_id in ids {
        if page.len() == limit {
            break;
        }
        let metadata = match fs::metadata(objects.join(&paste_id)) {
            Ok(m) => m,
            // Deleted between read_dir and here: it is simply not in this page.
            Err(e) if e.kind() == ErrorKind::NotFound => continue,
            Err(e) => return Err(io_error(&format!("stat {paste_id}"), e)),
        };
        // mtime is set by the write to the temp file, and the link shares its inode, so
        // it is the moment the bytes were written: what the reaper's age floor needs.
        let modified = metadata.modified().map_err(|e| io_error(&format!("mtime {paste_id}"), e))?;
        page.push(ObjectInfo { paste_id, created_at: modified.into(), size: metadata.len() });
    }
    Ok(page)
}

fn is_valid_id(paste_id: &str) -> bool {
    (1..=MAX_ID_LEN).contains(&paste_id.len()) && paste_id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// NotFound is handled by each call (it means different things to each). Of the rest,
/// errors that say "this cannot be done here" (permissions, a read-only or full disk, a
/// path that is not what we expect) are Refused: the local kernel answered and nothing
/// changed. Anything else (EIO, an interrupted or timed-out network filesystem, an error
/// kind we do not know) is Uncertain, because the write may have reached the disk or the
/// file server before the error was reported.
fn io_error(what: &str, e: io::Error) -> ObjectError {
    let message = format!("{what}: {e}");
    match e.kind() {
        ErrorKind::PermissionDenied
        | ErrorKind::InvalidInput
        | ErrorKind::InvalidData
        | ErrorKind::ReadOnlyFilesystem
        | ErrorKind::FileTooLarge
        | ErrorKind::NotADirectory
        | ErrorKind::IsADirectory
        | ErrorKind::NotFound => ObjectError::Refused(message),
        ErrorKind::StorageFull => ObjectError::StorageFull(message),
        _ => ObjectError::Uncertain(message),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn store() -> (tempfile::TempDir, LocalDirStore) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = LocalDirStore::open(dir.path()).expect("open");
        (dir, store)
    }

    #[tokio::test]
    async fn put_then_get_returns_the_bytes() {
        let (_dir, store) = store();
        let outcome = store.put("abc123", Bytes::from_static(b"hello")).await.unwrap();
        assert_eq!(outcome, PutOutcome::Created);
        assert_eq!(store.get("abc123").await.unwrap(), Some(Bytes::from_static(b"hello")));
    }

    #[tokio::test]
    async fn objects_are_private_whatever_the_umask() {
        let (dir, store) = store();
        store.put("abc123", Bytes::from_static(b"secret")).await.unwrap();
        let mode = |path: &Path| fs::metadata(path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir.path().join("pastes")), 0o700);
        assert_eq!(mode(&dir.path().join("pastes/abc123")), 0o600);
    }

    #[tokio::test]
    async fn puts_past_the_bound_wait_without_writing() {
        let (dir, store) = store();
        let all = store.writers.clone().acquire_many_owned(MAX_CONCURRENT_PUTS as u32).await.unwrap();
        let waiting = tokio::time::timeout(
            std::time::Duration::from_millis(50),
            store.put("abc123", Bytes::from_static(b"late")),
        )
        .await;
        assert!(waiting.is_err(), "no writer slot: the put waits");
        assert!(!dir.path().join("pastes/abc123").exists(), "a put given up on while waiting wrote nothing");
        drop(all);
        assert_eq!(store.put("abc123", Bytes::from_static(b"now")).await.unwrap(), PutOutcome::Created);
    }

    #[tokio::test]
    async fn second_put_is_already_exists_and_keeps_the_first_bytes() {
        let (_dir, store) = store();
        store.put("abc123", Bytes::from_static(b"first")).await.unwrap();
        let outcome = store.put("abc123", Bytes::from_static(b"second")).await.unwrap();
        assert_eq!(outcome, PutOutcome::AlreadyExists);
        assert_eq!(store.get("abc123").await.unwrap(), Some(Bytes::from_static(b"first")));
    }

    #[tokio::test]
    async fn put_leaves_no_temp_file_behind() {
        let (dir, store) = store();
        store.put("abc123", Bytes::from_static(b"x")).await.unwrap();
        store.put("abc123", Bytes::from_static(b"x")).await.unwrap();
        let names: Vec<_> = fs::read_dir(dir.path().join("pastes"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, vec!["abc123".to_owned()]);
    }

    #[tokio::test]
    async fn get_absent_is_none() {
        let (_dir, store) = store();
        assert_eq!(store.get("nothing").await.unwrap(), None);
    }

    #[tokio::test]
    async fn delete_removes_and_is_idempotent() {
        let (_dir, store) = store();
        store.put("abc123", Bytes::from_static(b"x")).await.unwrap();
        store.delete("abc123").await.unwrap();
        assert_eq!(store.get("abc123").await.unwrap(), None);
        store.delete("abc123").await.unwrap();
        store.delete("neverthere").await.unwrap();
    }

    #[tokio::test]
    async fn a_paused_delete_is_refused_and_keeps_the_object() {
        let (dir, store) = store();
        store.put("abc123", Bytes::from_static(b"x")).await.unwrap();
        let pause = DeletePause::of_dir(dir.path());
        pause.hold_until(chrono::Utc::now() + chrono::Duration::seconds(60)).unwrap();
        let refused = store.delete("abc123").await.unwrap_err();
        assert!(matches!(refused, ObjectError::Refused(ref why) if why.contains("paused")), "{refused:?}");
        assert_eq!(store.get("abc123").await.unwrap(), Some(Bytes::from_static(b"x")));
        pause.lift().unwrap();
        store.delete("abc123").await.unwrap();
        assert_eq!(store.get("abc123").await.unwrap(), None);
    }

    #[tokio::test]
    async fn empty_object_is_stored() {
        let (_dir, store) = store();
        assert_eq!(store.put("empty", Bytes::new()).await.unwrap(), PutOutcome::Created);
        assert_eq!(store.get("empty").await.unwrap(), Some(Bytes::new()));
    }

    #[tokio::test]
    async fn list_pages_in_id_order_after_the_cursor() {
        let (_dir, store) = store();
        // Uppercase sorts before lowercase bytewise, as S3 orders keys.
        for id in ["b", "a", "Z", "c2", "c10"] {
            store.put(id, Bytes::from(id.repeat(3))).await.unwrap();
        }
        let before = chrono::Utc::now();

        let first = store.list(None, 2).await.unwrap();
        let ids: Vec<_> = first.iter().map(|o| o.paste_id.as_str()).collect();
        assert_eq!(ids, ["Z", "a"]);
        assert_eq!(first[0].size, 3);
        let age = before - first[0].created_at;
        assert!(age >= chrono::Duration::zero() && age < chrono::Duration::seconds(60), "{age}");

        let second = store.list(Some("a"), 2).await.unwrap();
        let ids: Vec<_> = second.iter().map(|o| o.paste_id.as_str()).collect();
        assert_eq!(ids, ["b", "c10"]);

        let third = store.list(Some("c10"), 2).await.unwrap();
        let ids: Vec<_> = third.iter().map(|o| o.paste_id.as_str()).collect();
        assert_eq!(ids, ["c2"]);

        assert!(store.list(Some("c2"), 2).await.unwrap().is_empty());
        assert!(store.list(None, 0).await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn list_ignores_temp_and_foreign_files() {
        let (dir, store) = store();
        store.put("real", Bytes::from_static(b"x")).await.unwrap();
        fs::write(dir.path().join("pastes").join(".tmp-leftover-1-2"), b"x").unwrap();
        fs::write(dir.path().join("pastes").join("not-an-id"), b"x").unwrap();
        let ids: Vec<_> = store.list(None, 10).await.unwrap().into_iter().map(|o| o.paste_id).collect();
        assert_eq!(ids, ["real"]);
    }

    #[tokio::test]
    async fn ids_that_could_escape_the_directory_are_refused() {
        let (dir, store) = store();
        fs::write(dir.path().join("secret"), b"s").unwrap();
        let too_long = "a".repeat(MAX_ID_LEN + 1);
        for bad in ["", "../secret", "a/b", ".", "..", "a b", "é", too_long.as_str()] {
            let put = store.put(bad, Bytes::from_static(b"x")).await;
            assert!(matches!(put, Err(ObjectError::Refused(_))), "put {bad:?}: {put:?}");
            let get = store.get(bad).await;
            assert!(matches!(get, Err(ObjectError::Refused(_))), "get {bad:?}: {get:?}");
            let delete = store.delete(bad).await;
            assert!(matches!(delete, Err(ObjectError::Refused(_))), "delete {bad:?}: {delete:?}");
        }
        assert!(dir.path().join("secret").exists());
        assert!(store.put(&"a".repeat(MAX_ID_LEN), Bytes::new()).await.is_ok());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_puts_of_one_id_create_exactly_once() {
        let (_dir, store) = store();
        let store = Arc::new(store);
        let puts: Vec<_> = (0..16)
            .map(|i| {
                let store = Arc::clone(&store);
                tokio::spawn(async move { store.put("race", Bytes::from(format!("writer {i}"))).await })
            })
            .collect();
        let mut created = Vec::new();
        for (i, put) in puts.into_iter().enumerate() {
            if put.await.unwrap().unwrap() == PutOutcome::Created {
                created.push(i);
            }
        }
        assert_eq!(created.len(), 1, "created by {created:?}");
        let winner = format!("writer {}", created[0]);
        assert_eq!(store.get("race").await.unwrap(), Some(Bytes::from(winner)));
    }

    #[tokio::test]
    async fn missing_parent_is_created_and_unwritable_dir_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let nested = dir.path().join("a/b");
        LocalDirStore::open(&nested).unwrap();
        assert!(nested.join("pastes").is_dir());

        // A regular file where the directory should be: nothing can be created there.
        let file = dir.path().join("file");
        fs::write(&file, b"").unwrap();
        assert!(matches!(LocalDirStore::open(&file), Err(ObjectError::Refused(_))));
    }
}
