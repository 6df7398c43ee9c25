//! `pastebin ctl restore DIR` (docs/operations.md#backups): puts a backup
//! `ctl backup` took back in place, with `pastebin up` (or the shards)
//! stopped. Everything is checked before anything is touched: the manifest,
//! the deployment, the order of the snapshots, the schemas, the checksums.
//! Then each database is copied beside its place and renamed over it, and
//! K's copy carries a lost-commits window from its snapshot time: for 26 h
//! a create of a key the restored K does not know searches P first and
//! adopts the paste an erased create made (docs/design.md#adopting-after-a-k-loss).
//! `--only key` restores K alone: its disk died, P and the objects are fine.

use std::{
    io::Write,
    path::{Path, PathBuf},
};

use chrono::{DateTime, Utc};
use pastebin_core::{to_millis, LostCommits};
use pastebin_runtime::lock::{beside, this_process, Guarded, Lock, Sharing, DIR_LOCK_FILE};
use pastebin_shards::DeploymentId;

use crate::{
    manifest::{check_sha256, DatabaseCopy, Manifest},
    CtlError, EndpointArgs, Exit,
};

/// This command, as the locks it holds name it.
const PART: &str = "pastebin ctl restore";

#[derive(Debug, Clone, clap::Args)]
pub struct RestoreArgs {
    /// The directory `pastebin ctl backup` wrote. It is restored into the
    /// data directory it was taken from, or into --data-dir.
    pub dir: PathBuf,
    /// Restore only K's databases (its disk died; P's and the objects are
    /// fine and stay as they are).
    #[arg(long, value_enum)]
    pub only: Option<Only>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Only {
    Key,
}

/// Where each copy goes.
struct Targets {
    data_dir: Option<PathBuf>,
    objects: PathBuf,
}

impl Targets {
    fn of(manifest: &Manifest, endpoints: &EndpointArgs) -> Result<Self, CtlError> {
        match (&manifest.data_dir, &endpoints.data_dir) {
            (None, Some(_)) => Err(CtlError::Usage(
                "this backup is of shards named one by one: it goes back to the files it was taken from; drop \
                 --data-dir"
                    .into(),
            )),
            (None, None) => Ok(Self { data_dir: None, objects: manifest.objects.source.clone() }),
            (Some(taken_from), given) => {
                let dir = std::path::absolute(given.as_deref().unwrap_or(taken_from))
                    .map_err(|error| CtlError::Usage(error.to_string()))?;
                Ok(Self { objects: dir.join(file_name(&manifest.objects.source)), data_dir: Some(dir) })
            }
        }
    }

    fn database(&self, copy: &DatabaseCopy) -> PathBuf {
        match &self.data_dir {
            Some(dir) => dir.join(file_name(&copy.source)),
            None => copy.source.clone(),
        }
    }
}

fn file_name(path: &Path) -> &std::ffi::OsStr {
    path.file_name().unwrap_or(path.as_os_str())
}

pub(crate) async fn run(
    args: &RestoreArgs,
    endpoints: &EndpointArgs,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    let backup = &args.dir;
    let manifest = Manifest::read(backup)?;
    let deployment = manifest.deployment()?;
    manifest.check_order()?;
    manifest.check_schemas(highest(&pastebin_keys::MIGRATIONS), highest(&pastebin_pastes::MIGRATIONS))?;
    let all = args.only.is_none();
    let targets = Targets::of(&manifest, endpoints)?;
    if let Some(dir) = &targets.data_dir {
        pastebin_runtime::files::private_dir(dir)
            .map_err(|error| CtlError::Failed(format!("cannot create {}: {error}", dir.display())))?;
    }
    let _locks = lock(&manifest, &targets, all)?;
    check_deployment(&deployment, &targets.objects)?;
    if !all {
        check_pastes_kept(&manifest, &targets)?;
    }

    let restored: Vec<&DatabaseCopy> = manifest.keys.iter().chain(manifest.pastes.iter().filter(|_| all)).collect();
    for copy in &restored {
        check_sha256(backup, &copy.file, &copy.sha256)?;
    }
    let objects = if all { Some(checked_objects(backup, &manifest)?) } else { None };

    let now = Utc::now();
    for copy in &manifest.keys {
        let window = LostCommits::new(copy.snapshot_at, now);
        put_key_in_place(&backup.join(&copy.file), &targets.database(copy), &window).await?;
        writeln!(
            err,
            "restore: K {} (taken at {}) is in place",
            copy.file,
            copy.snapshot_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        )?;
    }
    for copy in manifest.pastes.iter().filter(|_| all) {
        let target = targets.database(copy);
        put_in_place(&backup.join(&copy.file), &target)?;
        writeln!(
            err,
            "restore: P {} (taken at {}) is in place",
            copy.file,
            copy.snapshot_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        )?;
    }
    let merged = match objects {
        Some(objects) => Some(restore_objects(&objects, &targets.objects)?),
        None => None,
    };
    if DeploymentId::read(&targets.objects).map_err(|error| CtlError::Failed(error.to_string()))?.is_none() {
        pastebin_runtime::files::private_dir(&targets.objects)
            .and_then(|()| deployment.clone().write_new(&targets.objects).map_err(std::io::Error::other))
            .map_err(|error| CtlError::Failed(error.to_string()))?;
    }

    report(out, &manifest, &targets, merged, now)?;
    Ok(Exit::Ok)
}

/// The highest migration this binary knows.
fn highest(migrations: &sqlx::migrate::Migrator) -> i64 {
    migrations.iter().map(|migration| migration.version).max().unwrap_or_default()
}

/// Holds what a running `pastebin up` or shard holds, so neither runs
/// while files change under it, and refuses, naming it, if one does.
fn lock(manifest: &Manifest, targets: &Targets, all: bool) -> Result<Vec<Lock>, CtlError> {
    let refused = |error: pastebin_runtime::lock::LockError| CtlError::Failed(error.to_string());
    let holder = this_process(PART);
    let mut locks = Vec::new();
    if let Some(dir) = &targets.data_dir {
        let what = format!("the data directory {}", dir.display());
        let guarded = Guarded { what: &what, instead: "restore into another --data-dir" };
        locks.push(Lock::acquire(&dir.join(DIR_LOCK_FILE), Sharing::Exclusive, &holder, guarded).map_err(refused)?);
    }
    for copy in manifest.keys.iter().chain(manifest.pastes.iter().filter(|_| all)) {
        let file = targets.database(copy);
        let what = format!("the SQLite database {}", file.display());
        let guarded = Guarded { what: &what, instead: "stop every part that uses it before restoring" };
        locks.push(Lock::acquire(&beside(&file), Sharing::Exclusive, &holder, guarded).map_err(refused)?);
    }
    if all {
        let what = format!("the objects directory {}", targets.objects.display());
        let guarded = Guarded { what: &what, instead: "stop the gateways and sweepers that use it before restoring" };
        pastebin_runtime::files::private_dir(&targets.objects)
            .map_err(|error| CtlError::Failed(format!("cannot create {}: {error}", targets.objects.display())))?;
        let lock = Lock::acquire(&targets.objects.join(DIR_LOCK_FILE), Sharing::Exclusive, &holder, guarded);
        locks.push(lock.map_err(refused)?);
    }
    Ok(locks)
}

/// A backup goes back only into its own deployment, or into one that has
/// none yet (a new disk).
fn check_deployment(deployment: &DeploymentId, objects: &Path) -> Result<(), CtlError> {
    match DeploymentId::read(objects).map_err(|error| CtlError::Failed(error.to_string()))? {
        Some(found) if &found != deployment => Err(CtlError::Failed(format!(
            "this backup is of deployment {deployment}, but {} belongs to deployment {found}: restoring one \
             deployment's keys beside another's pastes would answer for pastes that are not there. Restore it \
             into the data directory it was taken from, or into an empty one (--data-dir NEW)",
            objects.display()
        ))),
        _ => Ok(()),
    }
}

/// K alone goes back only beside the P databases it was taken with, newer
/// than it: without them its done keys would name pastes nobody has.
fn check_pastes_kept(manifest: &Manifest, targets: &Targets) -> Result<(), CtlError> {
    match manifest.pastes.iter().map(|copy| targets.database(copy)).find(|file| !file.is_file()) {
        Some(missing) => Err(CtlError::Failed(format!(
            "--only key restores K beside the P databases that are there, and {} is not: restore the whole \
             backup (without --only)",
            missing.display()
        ))),
        None => Ok(()),
    }
}

/// The objects the listing names, each checked against its checksum.
fn checked_objects(backup: &Path, manifest: &Manifest) -> Result<Vec<(String, PathBuf)>, CtlError> {
    let copy = &manifest.objects;
    check_sha256(backup, &copy.listing, &copy.listing_sha256)?;
    let listing = std::fs::read_to_string(backup.join(&copy.listing))
        .map_err(|error| CtlError::Failed(format!("cannot read {}: {error}", copy.listing)))?;
    let mut objects = Vec::new();
    for line in listing.lines() {
        let damaged = || {
            CtlError::Failed(format!("{} has a line it cannot have: `{line}`; restore another backup", copy.listing))
        };
        let (sha256, relative) = line.split_once("  ").ok_or_else(damaged)?;
        let id = relative
            .strip_prefix(&format!("{}/pastes/", copy.dir))
            .filter(|id| is_object_name(id))
            .ok_or_else(damaged)?;
        check_sha256(backup, relative, sha256)?;
        objects.push((id.to_owned(), backup.join(relative)));
    }
    Ok(objects)
}

fn is_object_name(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Copies `from` beside `target` and renames it over it. The old
/// database's WAL and shared-memory files go first: replayed onto the
/// restored file they would corrupt it.
fn put_in_place(from: &Path, target: &Path) -> Result<(), CtlError> {
    let aside = aside(target);
    copy_private(from, &aside)?;
    replace(&aside, target)
}

fn aside(target: &Path) -> PathBuf {
    let mut aside = target.as_os_str().to_owned();
    aside.push(".restoring");
    aside.into()
}

fn copy_private(from: &Path, to: &Path) -> Result<(), CtlError> {
    let failed = |error: std::io::Error| {
        CtlError::Failed(format!("cannot copy {} to {}: {error}", from.display(), to.display()))
    };
    for stale in sqlite_companions(to) {
        remove_if_there(&stale)?;
    }
    let bytes = std::fs::read(from).map_err(failed)?;
    pastebin_runtime::files::write_private(to, &bytes).map_err(failed)
}

fn replace(aside: &Path, target: &Path) -> Result<(), CtlError> {
    for stale in sqlite_companions(target) {
        remove_if_there(&stale)?;
    }
    let failed = |error: std::io::Error| CtlError::Failed(format!("cannot put {} in place: {error}", target.display()));
    std::fs::rename(aside, target).map_err(failed)?;
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::File::open(dir).and_then(|dir| dir.sync_all()).map_err(failed)
}

/// `FILE-wal` and `FILE-shm`.
fn sqlite_companions(file: &Path) -> [PathBuf; 2] {
    ["-wal", "-shm"].map(|suffix| {
        let mut path = file.as_os_str().to_owned();
        path.push(suffix);
        PathBuf::from(path)
    })
}

fn remove_if_there(path: &Path) -> Result<(), CtlError> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
            Err(CtlError::Failed(format!("cannot remove {}: {error}", path.display())))
        }
        _ => Ok(()),
    }
}

/// K's copy, migrated and holding its lost-commits window before it is
/// renamed into place: the rename is the one moment the restore happens,
/// so a K without its window never serves.
async fn put_key_in_place(from: &Path, target: &Path, window: &LostCommits) -> Result<(), CtlError> {
    let aside = aside(target);
    copy_private(from, &aside)?;
    let failed = |error: String| CtlError::Failed(format!("cannot prepare {}: {error}", aside.display()));
    sqlx::any::install_default_drivers();
    let url = format!("sqlite://{}?mode=rw", aside.display());
    let pool = sqlx::any::AnyPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .map_err(|error| failed(error.to_string()))?;
    pastebin_keys::MIGRATIONS.run(&pool).await.map_err(|error| failed(error.to_string()))?;
    let (since, until) = (to_millis(window.since), to_millis(window.search_first_until()));
    pastebin_slots::shard_slots::store_window_over_owned(&pool, since, until)
        .await
        .map_err(|error| failed(error.to_string()))?;
    // Back to a rollback journal, so the file is whole on its own (the
    // shard sets WAL again when it opens it).
    sqlx::query("PRAGMA journal_mode = DELETE").execute(&pool).await.map_err(|error| failed(error.to_string()))?;
    pool.close().await;
    replace(&aside, target)
}

/// Copies the objects the directory lacks; one already there is the same
/// paste's bytes (ids are never reused) and stays.
fn restore_objects(objects: &[(String, PathBuf)], target: &Path) -> Result<(u64, u64), CtlError> {
    let pastes = target.join("pastes");
    pastebin_runtime::files::private_dir(&pastes)
        .map_err(|error| CtlError::Failed(format!("cannot create {}: {error}", pastes.display())))?;
    let (mut copied, mut there) = (0u64, 0u64);
    for (id, from) in objects {
        let to = pastes.join(id);
        if to.exists() {
            there += 1;
            continue;
        }
        // Written under a name `list` skips, then renamed: never half an object.
        let temp = pastes.join(format!(".tmp-restore-{id}"));
        copy_private(from, &temp)?;
        std::fs::rename(&temp, &to)
            .map_err(|error| CtlError::Failed(format!("cannot put {} in place: {error}", to.display())))?;
        copied += 1;
    }
    std::fs::File::open(&pastes)
        .and_then(|dir| dir.sync_all())
        .map_err(|error| CtlError::Failed(format!("cannot sync {}: {error}", pastes.display())))?;
    Ok((copied, there))
}

fn report(
    out: &mut (dyn Write + Send),
    manifest: &Manifest,
    targets: &Targets,
    objects: Option<(u64, u64)>,
    now: DateTime<Utc>,
) -> Result<(), CtlError> {
    let whereto = targets.data_dir.as_ref().map_or("the shards' files".to_owned(), |dir| dir.display().to_string());
    writeln!(out, "restored into {whereto} (deployment {}):", manifest.deployment)?;
    for copy in &manifest.keys {
        let until = LostCommits::new(copy.snapshot_at, now).search_first_until();
        writeln!(
            out,
            "  K {} taken at {}: until {} a create of a key it does not know searches P first and adopts the \
             paste an erased create made",
            copy.file,
            copy.snapshot_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            until.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        )?;
    }
    match objects {
        Some((copied, there)) => {
            for copy in &manifest.pastes {
                writeln!(
                    out,
                    "  P {} taken at {}",
                    copy.file,
                    copy.snapshot_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                )?;
            }
            writeln!(
                out,
                "  objects taken from {}: {copied} copied, {there} already there",
                manifest.objects.snapshot_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            )?;
        }
        None => writeln!(out, "  P and the objects: kept as they are (--only key)")?,
    }
    match &targets.data_dir {
        Some(dir) => writeln!(out, "start `pastebin up --data-dir {}` now", dir.display())?,
        None => writeln!(out, "start the shards now")?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use pastebin_core::{OwnedSlots, SlotRange};
    use pastebin_proto::shard::v1::ShardKind;
    use pastebin_slots::shard_slots::{Resharding, ShardSlots};

    use crate::Exit;

    /// A shard's SQLite database as a first start leaves it: migrated, owning every slot.
    async fn shard_database(file: &Path, kind: ShardKind) {
        let url = format!("sqlite://{}", file.display());
        let migrations = match kind {
            ShardKind::Key => &pastebin_keys::MIGRATIONS,
            _ => &pastebin_pastes::MIGRATIONS,
        };
        let database = pastebin_runtime::db::connect(&url, 1, migrations).await.unwrap();
        let every = Some(OwnedSlots::Range(SlotRange::ALL));
        ShardSlots::claim(database.pool(), kind, every, Resharding::Refuse, 0).await.unwrap();
        database.pool().close().await;
    }

    async fn ctl(args: &[&str]) -> (Exit, String, String) {
        crate::tests::run_args(&[&["pastebin ctl"][..], args].concat()).await
    }

    #[tokio::test]
    async fn sqlite_shards_named_one_by_one_go_back_to_their_files_with_k_s_window() {
        let dir = tempfile::tempdir().unwrap();
        let (keys, pastes, objects) = (dir.path().join("k1.db"), dir.path().join("p1.db"), dir.path().join("objects"));
        shard_database(&keys, ShardKind::Key).await;
        shard_database(&pastes, ShardKind::Paste).await;
        std::fs::create_dir_all(objects.join("pastes")).unwrap();
        std::fs::write(objects.join("pastes").join("0abc"), "bytes").unwrap();
        let backup = dir.path().join("backup");
        let (key_url, paste_url) = (format!("sqlite:{}", keys.display()), format!("sqlite:{}", pastes.display()));
        let (objects_dir, backup_dir) = (objects.to_str().unwrap(), backup.to_str().unwrap());
        let taken = ["backup", backup_dir, "--key-database", &key_url, "--paste-database", &paste_url];
        let (exit, out, err) = ctl(&[&taken[..], &["--objects-dir", objects_dir]].concat()).await;
        assert_eq!(exit, Exit::Ok, "{out}{err}");
        assert!(backup.join("key-0.db").is_file() && backup.join("paste-0.db").is_file(), "{out}");

        std::fs::remove_file(&keys).unwrap();
        std::fs::remove_file(&pastes).unwrap();
        std::fs::remove_file(objects.join("pastes").join("0abc")).unwrap();
        let (exit, _, err) = ctl(&["restore", backup_dir, "--only", "key"]).await;
        assert_eq!(exit, Exit::Failed, "{err}");
        assert!(err.contains("is not: restore the whole backup"), "K alone goes back only beside its P: {err}");
        let (exit, _, err) = ctl(&["restore", backup_dir, "--data-dir", dir.path().to_str().unwrap()]).await;
        assert_eq!(exit, Exit::Usage, "shards go back to their own files: {err}");
        let (exit, out, err) = ctl(&["restore", backup_dir]).await;
        assert_eq!(exit, Exit::Ok, "{out}{err}");
        assert_eq!(std::fs::read_to_string(objects.join("pastes").join("0abc")).unwrap(), "bytes");
        let restored = pastebin_runtime::db::connect(&key_url, 1, &pastebin_keys::MIGRATIONS).await.unwrap();
        let windows: Vec<(i64, i64)> = sqlx::query_as("SELECT first_slot, last_slot FROM slot_search_windows")
            .fetch_all(restored.pool())
            .await
            .unwrap();
        assert_eq!(windows, [(0, 255)], "K's window covers the slots it owns");
    }
}
