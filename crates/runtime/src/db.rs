//! One database path for both backends: the shard stores speak portable SQL
//! through `sqlx::Any`, so every storage behaviour is the same code on
//! PostgreSQL and on SQLite and is tested on both. The schemas are not here:
//! each shard crate owns its migrations (`pastebin_keys::MIGRATIONS`,
//! `pastebin_pastes::MIGRATIONS`) and hands them to [`connect`].

use std::{future::Future, sync::Arc, time::Duration};

use anyhow::Context;
use sqlx::{
    any::AnyArguments,
    any::{install_default_drivers, AnyPoolOptions},
    migrate::Migrator,
    query::Query,
    Any, AnyConnection, AnyPool, Connection, Executor,
};

pub use crate::group_commit::Statement;
use crate::{
    checkpoint,
    database_url::DatabaseUrl,
    group_commit::GroupCommit,
    reconnect::{ConnectionCheck, Failovers, Reconnect},
};

/// How long a pool waits for a connection, and a start-up for a server to use.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    pub fn of_url(url: &str) -> anyhow::Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres)
        } else if url.starts_with("sqlite:") {
            Ok(Self::Sqlite)
        } else {
            anyhow::bail!("unsupported database URL scheme (use postgres:// or sqlite:)")
        }
    }
}

/// What a SQLite connection is set to: WAL (readers never wait for the
/// writer) and `synchronous=FULL` (a commit the saga relies on must survive a
/// crash of the process and of the machine).
const SQLITE_SETTINGS: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;";

/// A shard's database: a pool for reads and, on SQLite, one group-commit
/// writer for every write ([`crate::group_commit`]). On PostgreSQL writes
/// take a pooled connection each: the server already shares one WAL flush
/// among the commits that arrive together, and every call goes through
/// [`Reconnect`], which finds the server again when it is lost.
#[derive(Clone)]
pub struct Database {
    pool: AnyPool,
    writer: Option<GroupCommit>,
    reconnect: Option<Arc<Reconnect>>,
}

impl Database {
    /// The pool, for what runs once at start-up or in tests; a shard's calls
    /// go through [`Self::read`], [`Self::write`] or [`Self::execute`].
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// On PostgreSQL, how many times the shard lost its server so far and
    /// its link to it ([`Reconnect::failovers`]); `None` on SQLite, whose
    /// file does not change under a running process.
    pub fn failovers(&self) -> Option<Failovers> {
        self.reconnect.as_ref().map(|reconnect| reconnect.failovers())
    }

    /// On PostgreSQL, has every connection opened from now on checked first
    /// ([`Reconnect::check_new_connections`]).
    pub fn check_new_connections(&self, check: ConnectionCheck) {
        if let Some(reconnect) = &self.reconnect {
            reconnect.check_new_connections(check);
        }
    }

    /// Runs `call` on the pool: fails at once while the shard looks for its
    /// server, and starts that search if `call` finds the server gone.
    pub async fn read<'a, T, Fut>(&'a self, call: impl FnOnce(&'a AnyPool) -> Fut) -> Result<T, sqlx::Error>
    where
        Fut: Future<Output = Result<T, sqlx::Error>> + 'a,
    {
        match &self.reconnect {
            Some(reconnect) => reconnect.call(&self.pool, call(&self.pool)).await,
            None => call(&self.pool).await,
        }
    }

    /// Runs `statement` (one or more SQL statements) as one write, committed
    /// before this returns: in its own transaction (PostgreSQL), or in the
    /// writer's next group, inside its own savepoint (SQLite). A write that
    /// fails changes nothing and fails nothing else.
    pub async fn write<T, F>(&self, statement: F) -> Result<T, sqlx::Error>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut AnyConnection) -> Statement<'c, T> + Send + 'static,
    {
        match &self.writer {
            Some(writer) => writer.write(statement).await,
            None => {
                self.read(|pool| async move {
                    let mut transaction = pool.begin().await?;
                    let outcome = statement(&mut transaction).await?;
                    transaction.commit().await?;
                    Ok(outcome)
                })
                .await
            }
        }
    }

    /// One statement with its arguments bound, as a write: the rows it
    /// changed. On PostgreSQL it runs in autocommit (one statement is atomic
    /// on its own, and a transaction around it would cost two round trips).
    pub async fn execute(&self, statement: Query<'static, Any, AnyArguments>) -> Result<u64, sqlx::Error> {
        match &self.writer {
            Some(writer) => {
                writer
                    .write_one_statement(move |conn| {
                        Box::pin(async move { Ok(statement.execute(conn).await?.rows_affected()) })
                    })
                    .await
            }
            None => self.read(|pool| async move { Ok(statement.execute(pool).await?.rows_affected()) }).await,
        }
    }
}

/// SQLite's primary result code for a write that found no room: the disk
/// (or the file's `max_page_count`) is full.
const SQLITE_FULL: i32 = 13;

/// Whether `error` says the database's storage is full (SQLite's
/// `SQLITE_FULL`, or a group commit that failed on it). Such a write did
/// not happen: SQLite rolls the statement (or its transaction) back, and
/// the group commit rolls its whole group back, so nobody is told "maybe".
/// An fsync failure or a lost PostgreSQL server is not this: those stay
/// uncertain (docs/operations.md#a-full-disk).
pub fn storage_full(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(error) => error.kind() == std::io::ErrorKind::StorageFull,
        sqlx::Error::Database(error) => {
            matches!(error.code().and_then(|code| code.parse::<i32>().ok()), Some(code) if code & 0xff == SQLITE_FULL)
                && error.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some()
        }
        _ => false,
    }
}

/// The error every write of a group that failed for lack of room hears.
pub(crate) fn storage_full_error(message: String) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(std::io::ErrorKind::StorageFull, message))
}

/// `count` comma-separated SQL fragments for a statement over many rows,
/// `fragment` getting each row's index: e.g. `placeholders(2, |i| format!("(${})", i + 3))`
/// is `($3), ($4)`. Numbered parameters work the same on PostgreSQL and SQLite.
pub fn placeholders(count: usize, fragment: impl Fn(usize) -> String) -> String {
    (0..count).map(fragment).collect::<Vec<_>>().join(", ")
}

/// Opens a shard's database and runs `migrations`. SQLite files are created
/// if missing and get their own writer connection beside the pool.
pub async fn connect(url: &str, max_connections: u32, migrations: &Migrator) -> anyhow::Result<Database> {
    install_default_drivers();
    let backend = Backend::of_url(url)?;
    let url = match backend {
        Backend::Sqlite if !url.contains("mode=") => {
            format!("{url}{}mode=rwc", if url.contains('?') { '&' } else { '?' })
        }
        _ => url.to_owned(),
    };
    if backend == Backend::Sqlite {
        make_sqlite_files_private(&url)?;
    }
    let options = AnyPoolOptions::new().max_connections(max_connections).acquire_timeout(ACQUIRE_TIMEOUT);
    let (pool, reconnect) = match backend {
        Backend::Sqlite => {
            let options = options.after_connect(|conn, _meta| {
                Box::pin(async move {
                    conn.execute(SQLITE_SETTINGS).await?;
                    Ok(())
                })
            });
            (options.connect(&url).await.context("cannot connect to the database")?, None)
        }
        Backend::Postgres => {
            let servers = DatabaseUrl::parse(&url)?;
            let (pool, reconnect) = Reconnect::open(servers, options, ACQUIRE_TIMEOUT).await?;
            (pool, Some(reconnect))
        }
    };
    migrations.run(&pool).await.context("cannot run database migrations")?;
    let writer = match backend {
        Backend::Sqlite => {
            let mut conn = AnyConnection::connect(&url).await.context("cannot open the SQLite writer")?;
            conn.execute(SQLITE_SETTINGS).await.context("cannot set up the SQLite writer")?;
            conn.execute(checkpoint::WRITER_SETTINGS).await.context("cannot set up the SQLite writer")?;
            let checkpointer = AnyConnection::connect(&url).await.context("cannot open the SQLite checkpointer")?;
            let checkpoints = checkpoint::start(checkpointer, sqlite_file_name(&url));
            Some(GroupCommit::start(conn, sqlite_file_name(&url), Some(checkpoints)))
        }
        Backend::Postgres => None,
    };
    Ok(Database { pool, writer, reconnect })
}

/// Creates the SQLite database file as 0600 before SQLite does (it would
/// use 0644 less the umask), and tightens an existing one and its `-wal`
/// and `-shm` files. SQLite gives new `-wal` and `-shm` files the mode of
/// the database file, so they are 0600 too.
fn make_sqlite_files_private(url: &str) -> anyhow::Result<()> {
    let path = sqlite_path(url);
    if path.is_empty() || path == ":memory:" {
        return Ok(());
    }
    let path = std::path::Path::new(path);
    crate::files::private_file(path).with_context(|| format!("cannot create {}", path.display()))?;
    for suffix in ["-wal", "-shm"] {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        let side = std::path::Path::new(&side);
        if side.exists() {
            crate::files::private_file(side).with_context(|| format!("cannot make {} private", side.display()))?;
        }
    }
    Ok(())
}

/// The database file a SQLite URL names; `None` for PostgreSQL and for an
/// in-memory SQLite database.
pub fn sqlite_file(url: &str) -> Option<std::path::PathBuf> {
    let path = sqlite_path(url);
    let named = Backend::of_url(url).is_ok_and(|backend| backend == Backend::Sqlite);
    (named && !path.is_empty() && path != ":memory:").then(|| path.into())
}

/// The file path in a SQLite URL (empty or `:memory:` for none).
fn sqlite_path(url: &str) -> &str {
    let path = url.trim_start_matches("sqlite:").trim_start_matches("//");
    path.split('?').next().unwrap_or_default()
}

/// Names a SQLite database in metrics by its file name (e.g. `keys.db`):
/// the directory can name a user, the file name names only the shard's role.
fn sqlite_file_name(url: &str) -> String {
    let path = std::path::Path::new(sqlite_path(url));
    path.file_name().map_or_else(|| "memory".to_owned(), |name| name.to_string_lossy().into_owned())
}

/// Whether the database answers a trivial query now (a check that finds
/// the server gone starts the search for it). The error says only that it
/// does not: the driver's message is logged, never shown, as it can name
/// the server.
pub async fn check_reachable(database: &Database) -> Result<(), String> {
    // The pool keeps retrying a refused connection until its acquire timeout;
    // a readiness check wants the answer sooner.
    let query = database.read(|pool| async move { sqlx::query("SELECT 1").execute(pool).await.map(drop) });
    match tokio::time::timeout(Duration::from_secs(1), query).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => {
            tracing::debug!(%error, "readiness: database query failed");
            Err("the database does not answer".to_owned())
        }
        Err(_elapsed) => Err("the database does not answer".to_owned()),
    }
}
