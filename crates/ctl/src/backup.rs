//! `pastebin ctl backup DIR` (docs/operations.md#backups): an online backup
//! of a `pastebin up` data directory, or of SQLite shards named one by one,
//! while creates go on. Every K database, then every P database, each copied
//! consistently by SQLite's `VACUUM INTO`, then the objects, with object
//! deletes paused while they are copied ([`DeletePause`]), then the
//! manifest. P no older than K and objects no older than P is what makes a
//! restore lose no paste a key names; the manifest records each copy's time
//! so a restore can check it. PostgreSQL shards and S3 stores have tools
//! made for this: the command prints the order and their commands instead
//! of pretending (exit 7).

use std::{
    io::Write,
    path::{Path, PathBuf},
    time::Duration,
};

use chrono::Utc;
use futures::StreamExt;
use pastebin_objects::{DeletePause, LocalDirStore, ObjectInfo, ObjectStore};
use pastebin_runtime::db::{sqlite_file, Backend};
use pastebin_shards::{DeploymentId, Endpoints, ObjectStoreConfig, DEFAULT_DATA_DIR};
use sha2::{Digest, Sha256};
use sqlx::Connection;

use crate::{
    manifest::{sha256_of, DatabaseCopy, Manifest, ObjectsCopy},
    progress::{ProgressTo, RowProgress},
    CtlError, EndpointArgs, Exit,
};

/// Failpoints between the steps, where a test creates pastes that fall
/// between two snapshots (docs/testing.md).
pub const AFTER_KEY_SNAPSHOTS: &str = "backup_after_key_snapshots";
pub const AFTER_PASTE_SNAPSHOTS: &str = "backup_after_paste_snapshots";

#[derive(Debug, Clone, clap::Args)]
pub struct BackupArgs {
    /// A new or empty directory to write the backup into. It is made 0700
    /// and its files 0600: K's database holds raw delete tokens.
    pub dir: PathBuf,
    /// A K shard's database, instead of a `pastebin up` data directory's:
    /// `sqlite:FILE` (copied), or a PostgreSQL URL (the commands to use are
    /// printed). Repeat it for every K shard.
    #[arg(long = "key-database", value_name = "URL", help_heading = pastebin_runtime::help::SHARDS)]
    pub key_databases: Vec<String>,
    /// A P shard's database, as --key-database; repeat it for every P shard.
    #[arg(long = "paste-database", value_name = "URL", help_heading = pastebin_runtime::help::SHARDS)]
    pub paste_databases: Vec<String>,
}

/// Where one shard's database is.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    Sqlite(PathBuf),
    Postgres(String),
}

/// What a backup takes, in the order it takes it.
#[derive(Debug)]
pub(crate) struct Sources {
    /// The `pastebin up` data directory, when it is one.
    data_dir: Option<PathBuf>,
    keys: Vec<Source>,
    pastes: Vec<Source>,
    objects: ObjectStoreConfig,
}

impl Sources {
    fn resolve(args: &BackupArgs, endpoints: &EndpointArgs) -> Result<Self, CtlError> {
        if args.key_databases.is_empty() && args.paste_databases.is_empty() {
            return Self::of_data_dir(endpoints.data_dir.as_deref().unwrap_or(Path::new(DEFAULT_DATA_DIR)));
        }
        if args.key_databases.is_empty() || args.paste_databases.is_empty() {
            return Err(CtlError::Usage(
                "name every K and every P database (--key-database and --paste-database), or neither for a \
                 `pastebin up` data directory (--data-dir)"
                    .into(),
            ));
        }
        let objects = endpoints
            .objects
            .config()
            .ok_or_else(|| CtlError::Usage("name the objects too: --objects-dir DIR, or --s3-bucket NAME".into()))?;
        let sources = |urls: &[String]| urls.iter().map(|url| Source::parse(url)).collect::<Result<Vec<_>, _>>();
        Ok(Self {
            data_dir: None,
            keys: sources(&args.key_databases)?,
            pastes: sources(&args.paste_databases)?,
            objects,
        })
    }

    /// `pastebin up`'s layout: `keys.db`, `pastes.db` and the objects
    /// directory `endpoints.json` names (`objects/` unless it says otherwise).
    fn of_data_dir(dir: &Path) -> Result<Self, CtlError> {
        let dir = absolute(dir)?;
        if dir.join("colocated.db").is_file() {
            return Err(CtlError::Usage(format!(
                "{} is a colocated data directory (colocated.db), which ctl backup does not know yet: stop \
                 `pastebin up` and copy the directory whole (docs/operations.md#known-gaps)",
                dir.display()
            )));
        }
        if !dir.join("keys.db").is_file() || !dir.join("pastes.db").is_file() {
            return Err(CtlError::Usage(format!(
                "{} is not a `pastebin up` data directory (it has no keys.db and pastes.db): pass --data-dir, or \
                 name the shards' databases with --key-database and --paste-database",
                dir.display()
            )));
        }
        let objects = Endpoints::read(&dir).ok().and_then(|written| written.objects_dir).unwrap_or(dir.join("objects"));
        Ok(Self {
            keys: vec![Source::Sqlite(dir.join("keys.db"))],
            pastes: vec![Source::Sqlite(dir.join("pastes.db"))],
            objects: ObjectStoreConfig::Dir(objects),
            data_dir: Some(dir),
        })
    }

    /// The files this command can copy itself: SQLite databases and an
    /// objects directory; `None` if any part needs the tools made for it.
    fn copyable(&self) -> Option<(Vec<&Path>, Vec<&Path>, &Path)> {
        fn files(sources: &[Source]) -> Option<Vec<&Path>> {
            sources
                .iter()
                .map(|source| match source {
                    Source::Sqlite(path) => Some(path.as_path()),
                    Source::Postgres(_) => None,
                })
                .collect()
        }
        let ObjectStoreConfig::Dir(objects) = &self.objects else { return None };
        Some((files(&self.keys)?, files(&self.pastes)?, objects.as_path()))
    }
}

impl Source {
    fn parse(url: &str) -> Result<Self, CtlError> {
        match Backend::of_url(url) {
            Ok(Backend::Postgres) => Ok(Self::Postgres(url.to_owned())),
            Ok(Backend::Sqlite) => sqlite_file(url)
                .map(|file| absolute(&file).map(Self::Sqlite))
                .unwrap_or_else(|| Err(CtlError::Usage(format!("{url} names no database file")))),
            Err(error) => Err(CtlError::Usage(format!("{url}: {error}"))),
        }
    }
}

fn absolute(path: &Path) -> Result<PathBuf, CtlError> {
    std::path::absolute(path).map_err(|error| CtlError::Usage(format!("{}: {error}", path.display())))
}

pub(crate) async fn run(
    args: &BackupArgs,
    endpoints: &EndpointArgs,
    progress: ProgressTo,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    let sources = Sources::resolve(args, endpoints)?;
    let Some((keys, pastes, objects)) = sources.copyable() else {
        print_plan(&sources, &args.dir, out)?;
        return Ok(Exit::OtherTools);
    };
    let backup = new_backup_dir(&args.dir)?;
    let deployment = DeploymentId::read_or_create(objects).map_err(|error| CtlError::Failed(error.to_string()))?;
    let unfinished = |error: CtlError| {
        CtlError::Failed(format!(
            "{error}. {} holds an unfinished backup (it has no manifest.json): remove it",
            backup.display()
        ))
    };

    let names = FileNames::of(&sources);
    let mut key_copies = Vec::new();
    for (index, source) in keys.iter().enumerate() {
        key_copies.push(snapshot(source, &backup, &names.key(index, source), err).await.map_err(unfinished)?);
    }
    pastebin_runtime::failpoints::hit(AFTER_KEY_SNAPSHOTS).await;
    // Paused before P's snapshot: an object whose paste P's copy holds live
    // can then only be deleted after the objects are copied.
    let paused = PausedDeletes::hold(objects).map_err(unfinished)?;
    let mut paste_copies = Vec::new();
    for (index, source) in pastes.iter().enumerate() {
        paste_copies.push(snapshot(source, &backup, &names.paste(index, source), err).await.map_err(unfinished)?);
    }
    pastebin_runtime::failpoints::hit(AFTER_PASTE_SNAPSHOTS).await;
    let objects_copy = copy_objects(objects, &backup, progress, err).await.map_err(unfinished);
    paused.lift().await;
    let manifest = Manifest::new(&deployment, sources.data_dir.clone(), key_copies, paste_copies, objects_copy?);
    manifest.write(&backup).map_err(unfinished)?;

    writeln!(out, "backup of deployment {deployment} in {}:", backup.display())?;
    for (part, copy) in manifest.keys.iter().map(|c| ("K", c)).chain(manifest.pastes.iter().map(|c| ("P", c))) {
        writeln!(
            out,
            "  {part} {}  taken at {}  schema {}  {} bytes",
            copy.file,
            copy.snapshot_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            copy.schema_version,
            copy.bytes
        )?;
    }
    let objects = &manifest.objects;
    writeln!(
        out,
        "  {} objects  taken from {}  {} bytes",
        objects.count,
        objects.snapshot_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        objects.bytes
    )?;
    writeln!(out, "restore it with `pastebin ctl restore {}` once `pastebin up` is stopped", backup.display())?;
    Ok(Exit::Ok)
}

/// Each database's name in the backup: `keys.db` and `pastes.db` for
/// `pastebin up`, `key-0.db`, `paste-0.db`… for shards named one by one.
struct FileNames {
    up: bool,
}

impl FileNames {
    fn of(sources: &Sources) -> Self {
        Self { up: sources.data_dir.is_some() }
    }

    fn key(&self, index: usize, source: &Path) -> String {
        self.name("key", index, source)
    }

    fn paste(&self, index: usize, source: &Path) -> String {
        self.name("paste", index, source)
    }

    fn name(&self, kind: &str, index: usize, source: &Path) -> String {
        match source.file_name().and_then(|name| name.to_str()).filter(|_| self.up) {
            Some(name) => name.to_owned(),
            None => format!("{kind}-{index}.db"),
        }
    }
}

/// `DIR`, made 0700 if it is new; an earlier backup is never overwritten.
fn new_backup_dir(dir: &Path) -> Result<PathBuf, CtlError> {
    let dir = absolute(dir)?;
    let occupied = std::fs::read_dir(&dir).map(|mut entries| entries.next().is_some()).unwrap_or(false);
    if occupied {
        return Err(CtlError::Usage(format!(
            "{} is not empty: give the backup a new directory (an earlier backup is never overwritten)",
            dir.display()
        )));
    }
    pastebin_runtime::files::private_dir(&dir)
        .map_err(|error| CtlError::Failed(format!("cannot create {}: {error}", dir.display())))?;
    Ok(dir)
}

/// One SQLite database, copied by `VACUUM INTO` from a connection of its
/// own: a read transaction, so the writer goes on (WAL) and the copy is one
/// consistent snapshot, whatever is committed meanwhile.
async fn snapshot(
    source: &Path,
    backup: &Path,
    file: &str,
    err: &mut (dyn Write + Send),
) -> Result<DatabaseCopy, CtlError> {
    let failed =
        |what: &str, error: sqlx::Error| CtlError::Failed(format!("cannot {what} {}: {error}", source.display()));
    let target = backup.join(file);
    // VACUUM INTO fills an empty file: made first, so it is private from the start.
    pastebin_runtime::files::private_file(&target)
        .map_err(|error| CtlError::Failed(format!("cannot create {}: {error}", target.display())))?;
    let url = format!("sqlite://{}?mode=rw", source.display());
    sqlx::any::install_default_drivers();
    let mut connection = sqlx::AnyConnection::connect(&url).await.map_err(|error| failed("open", error))?;
    sqlx::query("PRAGMA busy_timeout = 5000").execute(&mut connection).await.map_err(|e| failed("open", e))?;
    let schema_version: i64 =
        sqlx::query_scalar("SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success")
            .fetch_one(&mut connection)
            .await
            .map_err(|error| failed("read the schema version of", error))?;
    let snapshot_at = Utc::now();
    let into = target.to_str().ok_or_else(|| CtlError::Usage("the backup directory's path must be UTF-8".into()))?;
    sqlx::query("VACUUM INTO $1")
        .bind(into.to_owned())
        .execute(&mut connection)
        .await
        .map_err(|e| failed("copy", e))?;
    connection.close().await.map_err(|error| failed("close", error))?;
    let (sha256, bytes) =
        sha256_of(&target).map_err(|error| CtlError::Failed(format!("cannot read {}: {error}", target.display())))?;
    writeln!(
        err,
        "backup: {file} taken at {} from {} ({bytes} bytes)",
        snapshot_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        source.display()
    )?;
    Ok(DatabaseCopy { file: file.to_owned(), source: source.to_owned(), snapshot_at, schema_version, sha256, bytes })
}

/// How long a pause lasts unless renewed: a backup that dies stops
/// pausing deletes this long after.
const PAUSE_LEASE: Duration = Duration::from_secs(60);

/// Object deletes paused in a directory for as long as this is held,
/// renewed every quarter of the lease.
struct PausedDeletes {
    pause: DeletePause,
    renewal: Option<tokio::task::JoinHandle<()>>,
}

impl PausedDeletes {
    fn hold(objects: &Path) -> Result<Self, CtlError> {
        let pause = DeletePause::of_dir(objects);
        let until = || Utc::now() + chrono::Duration::from_std(PAUSE_LEASE).unwrap_or(chrono::Duration::MAX);
        pause.hold_until(until()).map_err(|error| {
            CtlError::Failed(format!("cannot pause the object deletes in {}: {error}", objects.display()))
        })?;
        let renewed = pause.clone();
        let renewal = tokio::spawn(async move {
            loop {
                tokio::time::sleep(PAUSE_LEASE / 4).await;
                if let Err(error) = renewed.hold_until(until()) {
                    tracing::warn!(%error, "cannot renew the pause of the object deletes");
                }
            }
        });
        Ok(Self { pause, renewal: Some(renewal) })
    }

    /// Deletes go on; the objects left meanwhile are the reaper's. The
    /// renewal is waited for, so none writes the pause again after this.
    async fn lift(mut self) {
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
            let _ = renewal.await;
        }
    }
}

impl Drop for PausedDeletes {
    fn drop(&mut self) {
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
        }
        if let Err(error) = self.pause.lift() {
            tracing::warn!(%error, "cannot lift the pause of the object deletes; it ends with its lease");
        }
    }
}

/// Objects copied per blocking task, between two progress reports.
const OBJECTS_PER_STEP: usize = 256;

/// Blocking tasks copying objects at once.
const STEPS_AT_ONCE: usize = 8;

/// Copies every paste object of `objects` (as listed when the copy began)
/// into `backup/objects`, each 0600, and lists their checksums.
async fn copy_objects(
    objects: &Path,
    backup: &Path,
    progress: ProgressTo,
    err: &mut (dyn Write + Send),
) -> Result<ObjectsCopy, CtlError> {
    let snapshot_at = Utc::now();
    let store = LocalDirStore::open(objects).map_err(|error| CtlError::Failed(error.to_string()))?;
    let mut listed: Vec<ObjectInfo> = Vec::new();
    loop {
        let page = store
            .list(listed.last().map(|object| object.paste_id.as_str()), 10_000)
            .await
            .map_err(|error| CtlError::Failed(error.to_string()))?;
        if page.is_empty() {
            break;
        }
        listed.extend(page);
    }
    let (from, to) = (objects.join("pastes"), backup.join("objects").join("pastes"));
    pastebin_runtime::files::private_dir(&to)
        .map_err(|error| CtlError::Failed(format!("cannot create {}: {error}", to.display())))?;
    let listing = "objects.sha256";
    let mut lines = String::new();
    let (mut count, mut bytes) = (0u64, 0u64);
    let bar = RowProgress::counting(progress, "backup: objects", "objects", listed.len() as u64);
    // A few steps at once: each object is fsynced, and fsyncs from several
    // threads share the filesystem's journal commits.
    let mut steps = futures::stream::iter(listed.chunks(OBJECTS_PER_STEP).map(|step| {
        let ids: Vec<String> = step.iter().map(|object| object.paste_id.clone()).collect();
        let (from, to) = (from.clone(), to.clone());
        tokio::task::spawn_blocking(move || copy_files(&from, &to, &ids))
    }))
    .buffered(STEPS_AT_ONCE);
    while let Some(copied) = steps.next().await {
        let copied = copied.map_err(|error| CtlError::Failed(format!("the object copy failed: {error}")))??;
        for (id, sha256, size) in copied {
            lines.push_str(&format!("{sha256}  objects/pastes/{id}\n"));
            count += 1;
            bytes += size;
        }
        bar.rows_done(count, &format!("{bytes} bytes"), err)?;
    }
    bar.finish();
    let listing_path = backup.join(listing);
    pastebin_runtime::files::write_private(&listing_path, lines.as_bytes())
        .map_err(|error| CtlError::Failed(format!("cannot write {}: {error}", listing_path.display())))?;
    let listing_sha256 = hex::encode(Sha256::digest(lines.as_bytes()));
    writeln!(err, "backup: {count} objects copied from {} ({bytes} bytes)", objects.display())?;
    Ok(ObjectsCopy {
        dir: "objects".into(),
        source: objects.to_owned(),
        snapshot_at,
        count,
        bytes,
        listing: listing.into(),
        listing_sha256,
    })
}

/// Copies the objects `ids` from `from` to `to`: (id, sha256, bytes) of
/// each. One gone meanwhile was deleted before the pause, behind a
/// tombstone P's copy holds: it is not needed.
fn copy_files(from: &Path, to: &Path, ids: &[String]) -> Result<Vec<(String, String, u64)>, CtlError> {
    let mut copied = Vec::with_capacity(ids.len());
    for id in ids {
        let bytes = match std::fs::read(from.join(id)) {
            Ok(bytes) => bytes,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => continue,
            Err(error) => return Err(CtlError::Failed(format!("cannot read the object {id}: {error}"))),
        };
        let target = to.join(id);
        pastebin_runtime::files::write_private(&target, &bytes)
            .map_err(|error| CtlError::Failed(format!("cannot write {}: {error}", target.display())))?;
        copied.push((id.clone(), hex::encode(Sha256::digest(&bytes)), bytes.len() as u64));
    }
    Ok(copied)
}

/// For PostgreSQL shards and S3 stores: the order, and the commands of the
/// tools made for them. Nothing is copied.
fn print_plan(sources: &Sources, dir: &Path, out: &mut (dyn Write + Send)) -> Result<(), CtlError> {
    writeln!(
        out,
        "nothing was copied: PostgreSQL databases and S3 buckets are backed up by their own tools, which take them \
         consistently while they serve. Take them in this order, each step begun after the one before it ended \
         (docs/operations.md#backups):"
    )?;
    let dir = dir.display();
    let step = |out: &mut (dyn Write + Send), n: usize, what: &str, sources: &[Source]| -> std::io::Result<()> {
        writeln!(out, "{n}. every {what} shard's database:")?;
        for (index, source) in sources.iter().enumerate() {
            match source {
                Source::Postgres(url) => writeln!(
                    out,
                    "   pg_basebackup -d '{}' -D {dir}/{what}-{index} -X stream -c fast -P\n   \
                     (or `pgbackrest --stanza=NAME backup` with its repository; one server's databases are taken at one point)",
                    without_password(url)
                )?,
                Source::Sqlite(file) => writeln!(
                    out,
                    "   sqlite3 {} \"VACUUM INTO '{dir}/{what}-{index}.db'\"",
                    file.display()
                )?,
            }
        }
        writeln!(out, "   note when the step began: that is the {what} snapshot's time")
    };
    step(out, 1, "key", &sources.keys)?;
    step(out, 2, "paste", &sources.pastes)?;
    match &sources.objects {
        ObjectStoreConfig::Dir(objects) => writeln!(
            out,
            "3. the objects, after every paste database: stop the gateways' and sweepers' deletes (or stop them), then \
             cp -a {}/pastes {dir}/objects",
            objects.display()
        )?,
        ObjectStoreConfig::S3(settings) => writeln!(
            out,
            "3. the objects of bucket {}, after every paste database: keep versioning on (a deleted object stays \
             restorable, so deletes need no pause) and replicate or copy the bucket with the store's own tools \
             (bucket replication, `rclone sync`, `aws s3 sync s3://{}/pastes {dir}/objects/pastes`)",
            settings.bucket, settings.bucket
        )?,
    }
    writeln!(
        out,
        "After restoring them, start every K shard once with --may-have-lost-commits-since set to the K snapshot's \
         time, so a retry of a key made after it adopts its paste (docs/operations.md#after-an-unsafe-failover)."
    )?;
    Ok(())
}

/// A PostgreSQL URL as it may be printed: without its password.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    match rest.split_once('@') {
        Some((user, host)) => {
            let user = user.split_once(':').map_or(user, |(name, _)| name);
            format!("{scheme}://{user}@{host}")
        }
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn ctl(args: &[&str]) -> (Exit, String, String) {
        crate::tests::run_args(&[&["pastebin ctl"][..], args].concat()).await
    }

    #[test]
    fn a_printed_url_has_no_password() {
        assert_eq!(without_password("postgres://pb:s3cret@db1:5432/keys"), "postgres://pb@db1:5432/keys");
        assert_eq!(without_password("postgres://db1/keys"), "postgres://db1/keys");
    }

    #[tokio::test]
    async fn postgres_and_s3_get_the_order_and_their_tools_commands_and_nothing_is_copied() {
        let dir = tempfile::tempdir().unwrap();
        let backup = dir.path().join("backup");
        let args = [
            "backup",
            backup.to_str().unwrap(),
            "--key-database",
            "postgres://pb:s3cret@db1:5432/keys",
            "--paste-database",
            "postgres://pb:s3cret@db1:5432/pastes",
            "--s3-bucket",
            "pastes",
        ];
        let (exit, out, _) = ctl(&args).await;
        assert_eq!(exit, Exit::OtherTools);
        assert_eq!(exit.code(), 7);
        let (k, p, objects) = (out.find("every key shard"), out.find("every paste shard"), out.find("3. the objects"));
        assert!(k < p && p < objects && k.is_some(), "K, then P, then the objects: {out}");
        assert!(out.contains("pg_basebackup -d 'postgres://pb@db1:5432/keys'"), "{out}");
        assert!(!out.contains("s3cret"), "no password is printed: {out}");
        assert!(out.contains("--may-have-lost-commits-since"), "{out}");
        assert!(!backup.exists(), "nothing was copied");
    }
}
