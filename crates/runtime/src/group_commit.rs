//! Group commit for a SQLite shard: one writer connection takes every write
//! waiting at that moment into one transaction, so a group pays for one
//! fsync instead of one each (BENCHMARKS.md, "Where the create tail came
//! from"). Without it, each pooled connection commits on its own and the
//! losers of SQLite's single write lock sleep in the busy handler, which
//! backs off up to 100 ms a try.
//!
//! Every write keeps the guarantees of a statement run on its own:
//! - it runs inside its own savepoint, so a failed statement rolls back only
//!   itself and fails only its own request. A write of one statement needs
//!   no savepoint: SQLite undoes a statement that broke a constraint by
//!   itself and keeps the transaction. Any other failure of it may have
//!   ended the transaction, so it fails the whole group (nobody has been
//!   told anything yet). Each savepoint costs two trips to SQLite's thread,
//!   and the saga's writes are all single statements;
//! - its caller hears the outcome only after the group's `COMMIT` returned:
//!   a crash before that loses the whole group, and no caller was told
//!   anything (the failpoint [`MID_GROUP_COMMIT`] tests exactly this);
//! - guarded updates still decide per row, in queue order, each seeing the
//!   writes before it in the same transaction;
//! - a group that failed for lack of room (`SQLITE_FULL`) is rolled back
//!   whole, and every write in it hears that it did not happen
//!   ([`crate::db::storage_full`]): a definite failure, unlike a failed
//!   `COMMIT` for any other reason, which may have reached the disk.

use std::{future::Future, pin::Pin};

use sqlx::{AnyConnection, Executor};
use tokio::sync::{mpsc, oneshot};

use crate::{
    checkpoint::Committed,
    failpoints::{self, BEFORE_GROUP_COMMIT, MID_GROUP_COMMIT},
    metrics::{GROUP_COMMIT_WRITES, SQLITE_COMMIT_SECONDS},
};

/// The most writes one transaction takes; the rest wait for the next group.
const MAX_GROUP: usize = 256;
/// Writes that may wait for the writer before submitting waits too.
const QUEUE: usize = 4096;

/// A write's statements, run on the writer's connection inside the group's
/// transaction. It must not commit or roll back itself.
pub type Statement<'c, T> = Pin<Box<dyn Future<Output = Result<T, sqlx::Error>> + Send + 'c>>;

/// What running one write's statements left in the group's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ran {
    Succeeded,
    /// Failed on a constraint: SQLite undid the statement, the transaction stands.
    BrokeAConstraint,
    /// Found no room (`SQLITE_FULL`): the group is rolled back, nothing in it happened.
    FoundNoRoom,
    /// Failed otherwise: the transaction may be gone.
    Failed,
}

/// One queued write, its result type erased so a group can hold any mix.
trait GroupedWrite: Send {
    /// Runs the statements; the caller rolls back a failed one's savepoint.
    fn run<'c>(&'c mut self, conn: &'c mut AnyConnection) -> Pin<Box<dyn Future<Output = Ran> + Send + 'c>>;
    /// One SQL statement: atomic by itself, so it runs without a savepoint.
    fn is_one_statement(&self) -> bool;
    /// Tells the caller, once the group's fate is known.
    fn answer(self: Box<Self>, group: Result<(), &sqlx::Error>);
}

struct Write<T, F> {
    statement: Option<F>,
    one_statement: bool,
    outcome: Option<Result<T, sqlx::Error>>,
    reply: oneshot::Sender<Result<T, sqlx::Error>>,
}

impl<T, F> GroupedWrite for Write<T, F>
where
    T: Send,
    F: for<'c> FnOnce(&'c mut AnyConnection) -> Statement<'c, T> + Send,
{
    fn run<'c>(&'c mut self, conn: &'c mut AnyConnection) -> Pin<Box<dyn Future<Output = Ran> + Send + 'c>> {
        Box::pin(async move {
            let Some(statement) = self.statement.take() else { return Ran::Failed };
            let outcome = statement(conn).await;
            let ran = match &outcome {
                Ok(_) => Ran::Succeeded,
                Err(error) if crate::db::storage_full(error) => Ran::FoundNoRoom,
                Err(sqlx::Error::Database(error)) if error.kind() != sqlx::error::ErrorKind::Other => {
                    Ran::BrokeAConstraint
                }
                Err(_) => Ran::Failed,
            };
            self.outcome = Some(outcome);
            ran
        })
    }

    fn is_one_statement(&self) -> bool {
        self.one_statement
    }

    fn answer(self: Box<Self>, group: Result<(), &sqlx::Error>) {
        let outcome = match (group, self.outcome) {
            (Ok(()), Some(outcome)) => outcome,
            // Rolled back for lack of room: nothing in the group happened.
            (Err(error), _) if crate::db::storage_full(error) => Err(no_room()),
            // The transaction did not commit: none of its writes happened,
            // but an I/O failure at COMMIT cannot promise that, so the
            // caller hears "uncertain".
            (Err(error), _) => Err(uncertain(format!("the group commit failed: {error}"))),
            (Ok(()), None) => Err(uncertain("the write was never run".into())),
        };
        // The caller may have given up (its deadline passed); the write
        // stands either way.
        let _ = self.reply.send(outcome);
    }
}

/// A write of the group found the database full: the group ends, rolled back.
fn no_room() -> sqlx::Error {
    crate::db::storage_full_error("a write found the database full, and its group was rolled back".into())
}

fn uncertain(message: String) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::other(message))
}

/// The handle callers submit writes through. Cheap to clone; the writer
/// stops when the last handle is dropped.
#[derive(Clone)]
pub(crate) struct GroupCommit {
    queue: mpsc::Sender<Box<dyn GroupedWrite>>,
}

impl GroupCommit {
    /// Starts the writer on `conn`, a connection used for nothing else;
    /// `database` names it in the group-size metric.
    /// Starts the writer on `conn`; each group it commits is told to
    /// `checkpoints` (the checkpointer that runs off its commits, if any).
    pub(crate) fn start(conn: AnyConnection, database: String, checkpoints: Option<Committed>) -> Self {
        let (queue, waiting) = mpsc::channel(QUEUE);
        tokio::spawn(write_groups(conn, waiting, database, checkpoints));
        Self { queue }
    }

    /// Queues `statement` for the next group and waits until that group committed.
    pub(crate) async fn write<T, F>(&self, statement: F) -> Result<T, sqlx::Error>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut AnyConnection) -> Statement<'c, T> + Send + 'static,
    {
        self.submit(statement, false).await
    }

    /// Like [`GroupCommit::write`], for a `statement` that runs exactly one SQL statement.
    pub(crate) async fn write_one_statement<T, F>(&self, statement: F) -> Result<T, sqlx::Error>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut AnyConnection) -> Statement<'c, T> + Send + 'static,
    {
        self.submit(statement, true).await
    }

    async fn submit<T, F>(&self, statement: F, one_statement: bool) -> Result<T, sqlx::Error>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut AnyConnection) -> Statement<'c, T> + Send + 'static,
    {
        let (reply, answered) = oneshot::channel();
        let write = Box::new(Write { statement: Some(statement), one_statement, outcome: None, reply });
        self.queue.send(write).await.map_err(|_| sqlx::Error::PoolClosed)?;
        answered.await.map_err(|_| sqlx::Error::PoolClosed)?
    }
}

async fn write_groups(
    mut conn: AnyConnection,
    mut waiting: mpsc::Receiver<Box<dyn GroupedWrite>>,
    database: String,
    checkpoints: Option<Committed>,
) {
    let group_sizes = metrics::histogram!(GROUP_COMMIT_WRITES, "database" => database.clone());
    let group_seconds = metrics::histogram!(SQLITE_COMMIT_SECONDS, "database" => database);
    let mut group = Vec::with_capacity(MAX_GROUP);
    while waiting.recv_many(&mut group, MAX_GROUP).await > 0 {
        group_sizes.record(group.len() as f64);
        failpoints::hit(BEFORE_GROUP_COMMIT).await;
        let started = std::time::Instant::now();
        let committed = commit_group(&mut conn, &mut group).await;
        group_seconds.record(started.elapsed().as_secs_f64());
        match &committed {
            Ok(()) => checkpoints.iter().for_each(Committed::one_more),
            Err(error) => tracing::error!(%error, writes = group.len(), "a SQLite group commit failed"),
        }
        for write in group.drain(..) {
            write.answer(committed.as_ref().map(drop));
        }
    }
}

/// One transaction for the whole group; each write in its own savepoint.
async fn commit_group(conn: &mut AnyConnection, group: &mut [Box<dyn GroupedWrite>]) -> Result<(), sqlx::Error> {
    // IMMEDIATE takes the write lock now, so no statement in the group can
    // fail later on a lock upgrade.
    conn.execute("BEGIN IMMEDIATE").await?;
    let ran = run_each(conn, group).await;
    if ran.is_ok() {
        failpoints::hit(MID_GROUP_COMMIT).await;
    }
    let committed = match ran {
        Ok(()) => conn.execute("COMMIT").await.map(drop),
        Err(error) => Err(error),
    };
    if committed.is_err() {
        // Usually SQLite has already rolled back; this makes sure.
        let _ = conn.execute("ROLLBACK").await;
    }
    committed
}

async fn run_each(conn: &mut AnyConnection, group: &mut [Box<dyn GroupedWrite>]) -> Result<(), sqlx::Error> {
    for write in group.iter_mut() {
        if write.is_one_statement() {
            match write.run(conn).await {
                Ran::Failed => {
                    return Err(uncertain("a statement failed in a way that may have ended its group".into()))
                }
                Ran::FoundNoRoom => return Err(no_room()),
                Ran::Succeeded | Ran::BrokeAConstraint => {}
            }
            continue;
        }
        conn.execute("SAVEPOINT grouped_write").await?;
        let ran = write.run(conn).await;
        if ran == Ran::FoundNoRoom {
            return Err(no_room());
        }
        if ran != Ran::Succeeded {
            conn.execute("ROLLBACK TO grouped_write").await?;
        }
        conn.execute("RELEASE grouped_write").await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use sqlx::{AnyConnection, Connection, Executor};

    use super::GroupCommit;

    /// A writer on a fresh SQLite file that holds at most `pages` pages: a
    /// full disk without filling one (SQLite answers `SQLITE_FULL` alike).
    async fn small_database(dir: &std::path::Path, pages: u32) -> (GroupCommit, sqlx::AnyPool) {
        sqlx::any::install_default_drivers();
        let url = format!("sqlite://{}?mode=rwc", dir.join("small.db").display());
        let pool = sqlx::AnyPool::connect(&url).await.unwrap();
        pool.execute("PRAGMA journal_mode = WAL; CREATE TABLE rows (body TEXT NOT NULL)").await.unwrap();
        let mut writer = AnyConnection::connect(&url).await.unwrap();
        writer.execute(sqlx::raw_sql(sqlx::AssertSqlSafe(format!("PRAGMA max_page_count = {pages}")))).await.unwrap();
        (GroupCommit::start(writer, "small.db".into(), None), pool)
    }

    fn insert(writer: &GroupCommit, body: String) -> impl std::future::Future<Output = Result<u64, sqlx::Error>> {
        let writer = writer.clone();
        async move {
            writer
                .write_one_statement(move |conn| {
                    Box::pin(async move {
                        Ok(sqlx::query("INSERT INTO rows (body) VALUES ($1)")
                            .bind(body)
                            .execute(conn)
                            .await?
                            .rows_affected())
                    })
                })
                .await
        }
    }

    #[tokio::test]
    async fn a_group_that_finds_the_database_full_is_rolled_back_and_each_write_hears_it_did_not_happen() {
        let dir = tempfile::tempdir().unwrap();
        let (writer, pool) = small_database(dir.path(), 8).await;
        let mut written = 0;
        let refused = loop {
            // Writes queued together share a group: the one that finds no room fails them all.
            let group: Vec<_> = (0..4).map(|_| insert(&writer, "x".repeat(2000))).collect();
            let outcomes = futures::future::join_all(group).await;
            if let Some(refused) = outcomes.iter().find_map(|o| o.as_ref().err()) {
                assert!(outcomes.iter().all(Result::is_err), "a failed group fails every write in it: {outcomes:?}");
                break refused.to_string();
            }
            written += outcomes.len() as i64;
            assert!(written < 1000, "8 pages never hold this much");
        };
        let outcome = insert(&writer, "x".repeat(2000)).await.unwrap_err();
        assert!(crate::db::storage_full(&outcome), "{outcome} ({refused})");
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM rows").fetch_one(&pool).await.unwrap();
        assert_eq!(rows, written, "nothing of a refused group was written");
    }
}
