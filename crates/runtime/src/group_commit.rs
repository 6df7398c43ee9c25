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
//!   writes before it in the same transaction.

use std::{future::Future, pin::Pin};

use sqlx::{AnyConnection, Executor};
use tokio::sync::{mpsc, oneshot};

use crate::{
    failpoints::{self, BEFORE_GROUP_COMMIT, MID_GROUP_COMMIT},
    metrics::GROUP_COMMIT_WRITES,
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
    pub(crate) fn start(conn: AnyConnection, database: String) -> Self {
        let (queue, waiting) = mpsc::channel(QUEUE);
        tokio::spawn(write_groups(conn, waiting, database));
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

async fn write_groups(mut conn: AnyConnection, mut waiting: mpsc::Receiver<Box<dyn GroupedWrite>>, database: String) {
    let group_sizes = metrics::histogram!(GROUP_COMMIT_WRITES, "database" => database);
    let mut group = Vec::with_capacity(MAX_GROUP);
    while waiting.recv_many(&mut group, MAX_GROUP).await > 0 {
        group_sizes.record(group.len() as f64);
        failpoints::hit(BEFORE_GROUP_COMMIT).await;
        let committed = commit_group(&mut conn, &mut group).await;
        if let Err(error) = &committed {
            tracing::error!(%error, writes = group.len(), "a SQLite group commit failed");
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
            if write.run(conn).await == Ran::Failed {
                return Err(uncertain("a statement failed in a way that may have ended its group".into()));
            }
            continue;
        }
        conn.execute("SAVEPOINT grouped_write").await?;
        if write.run(conn).await != Ran::Succeeded {
            conn.execute("ROLLBACK TO grouped_write").await?;
        }
        conn.execute("RELEASE grouped_write").await?;
    }
    Ok(())
}
