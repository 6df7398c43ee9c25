//! The locks a part takes before it touches state another process could
//! be using by mistake (docs/operations.md#locks), held until it exits.

use std::path::Path;

use pastebin_runtime::lock::{beside, this_process, Guarded, Lock, Sharing, DIR_LOCK_FILE};

/// `pastebin up`'s data directory: one `up` per directory.
pub(crate) fn data_dir(dir: &Path, part: &str) -> anyhow::Result<Lock> {
    let what = format!("the data directory {}", dir.display());
    let guarded = Guarded { what: &what, instead: "pass another --data-dir" };
    Ok(Lock::acquire(&dir.join(DIR_LOCK_FILE), Sharing::Exclusive, &this_process(part), guarded)?)
}

/// A SQLite database file, locked beside it (`keys.db.lock`): two writers
/// of one file would each think their group commit is the only one.
/// PostgreSQL URLs need no lock.
pub(crate) fn sqlite_file(database_url: &str, part: &str) -> anyhow::Result<Option<Lock>> {
    let Some(file) = pastebin_runtime::db::sqlite_file(database_url) else { return Ok(None) };
    let what = format!("the SQLite database {}", file.display());
    let guarded = Guarded { what: &what, instead: "give this part a database of its own (--database-url)" };
    Ok(Some(Lock::acquire(&beside(&file), Sharing::Exclusive, &this_process(part), guarded)?))
}

/// An objects directory. `pastebin up` holds its own exclusively: its
/// sweeper reaps every object its own P shard does not name, so a part of
/// another deployment writing there would lose its objects. The gateways
/// and sweepers of one deployment share theirs.
pub(crate) fn objects_dir(dir: &Path, sharing: Sharing, part: &str) -> anyhow::Result<Lock> {
    let what = format!("the objects directory {}", dir.display());
    let guarded = Guarded { what: &what, instead: "give this part an objects directory of its own (--objects-dir)" };
    Ok(Lock::acquire(&dir.join(DIR_LOCK_FILE), sharing, &this_process(part), guarded)?)
}

/// The shared lock of a deployment part's `--objects-dir`, if it keeps its
/// objects in a directory (taken after the store created it).
pub(crate) fn deployment_objects(
    objects: &pastebin_shards::ObjectStoreArgs,
    part: &str,
) -> anyhow::Result<Option<Lock>> {
    match objects.config() {
        Some(pastebin_shards::ObjectStoreConfig::Dir(dir)) => Ok(Some(objects_dir(&dir, Sharing::Shared, part)?)),
        _ => Ok(None),
    }
}
