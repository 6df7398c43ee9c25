//! SQLite's WAL checkpoints, off the commit path (docs/operations.md#group-commit-on-sqlite).
//!
//! Left to itself, SQLite checkpoints inside the `COMMIT` that takes the WAL
//! past 1,000 pages: that commit copies the WAL's pages into the database
//! file and fsyncs it, and every write of its group, and every write queued
//! behind it, waits tens of milliseconds for a step no create needs. So the
//! group-commit writer turns its automatic checkpoint off, and this task,
//! on a connection of its own, checkpoints whenever the writer committed
//! since its last round, at most every [`EVERY`]. A PASSIVE checkpoint
//! never waits for the writer or a reader: it copies what no reader still
//! needs, and the writer starts the WAL over from its beginning once every
//! page is copied (SQLite does that at the next write). So the WAL holds
//! about one round of writes, as with the automatic checkpoint, while a
//! reader that holds an old snapshot keeps it from restarting (as it would
//! without this task); `journal_size_limit` gives the file's space back
//! once it restarts.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use sqlx::{AnyConnection, Executor, Row};
use tokio::sync::oneshot;

use crate::metrics::SQLITE_CHECKPOINT_SECONDS;

/// How often the checkpointer looks for new commits.
pub(crate) const EVERY: Duration = Duration::from_millis(250);

/// What the writer connection is set to besides the shared settings: no
/// checkpoint inside its commits, and a WAL file trimmed to 64 MiB when it
/// starts over.
pub(crate) const WRITER_SETTINGS: &str = "PRAGMA wal_autocheckpoint = 0; PRAGMA journal_size_limit = 67108864;";

/// The writer's side: counts commits, and stops the checkpointer when the
/// writer itself stops.
pub(crate) struct Committed {
    commits: Arc<AtomicU64>,
    _stop: oneshot::Sender<()>,
}

impl Committed {
    pub(crate) fn one_more(&self) {
        self.commits.fetch_add(1, Ordering::Relaxed);
    }
}

/// Starts the checkpointer on `conn`; the writer reports each commit to
/// what this returns, and dropping that stops the checkpointer.
pub(crate) fn start(conn: AnyConnection, database: String) -> Committed {
    let commits = Arc::new(AtomicU64::new(0));
    let (stop, stopped) = oneshot::channel();
    tokio::spawn(checkpoint_rounds(conn, commits.clone(), stopped, database));
    Committed { commits, _stop: stop }
}

async fn checkpoint_rounds(
    mut conn: AnyConnection,
    commits: Arc<AtomicU64>,
    mut stopped: oneshot::Receiver<()>,
    database: String,
) {
    let seconds = metrics::histogram!(SQLITE_CHECKPOINT_SECONDS, "database" => database);
    let mut seen = 0;
    let mut every = tokio::time::interval(EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = &mut stopped => return,
            _ = every.tick() => {}
        }
        let now = commits.load(Ordering::Relaxed);
        if now == seen {
            continue;
        }
        seen = now;
        let started = std::time::Instant::now();
        match conn.fetch_one("PRAGMA wal_checkpoint(PASSIVE)").await {
            Ok(row) => {
                seconds.record(started.elapsed().as_secs_f64());
                let (log, copied): (i64, i64) = (row.try_get(1).unwrap_or(-1), row.try_get(2).unwrap_or(-1));
                tracing::trace!(log, copied, "WAL checkpoint");
            }
            // The next round tries again; a database that keeps failing
            // fails its writes too, where it is reported.
            Err(error) => tracing::warn!(%error, "a WAL checkpoint failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    use sqlx::migrate::Migrator;

    use crate::db::connect;

    /// No migrations: the tests make their own table.
    static NONE: Migrator = Migrator::DEFAULT;

    /// The writer's commits never checkpoint (SQLite would, inside the
    /// commit that takes the WAL past 1,000 pages), and yet the database
    /// file receives the rows: the checkpointer copies them, on its own.
    #[tokio::test]
    async fn the_writer_never_checkpoints_inside_a_commit_and_the_rows_reach_the_file_all_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("rows.db");
        let db = connect(&format!("sqlite://{}", file.display()), 2, &NONE).await.unwrap();
        db.execute(sqlx::query("CREATE TABLE rows (body TEXT NOT NULL)")).await.unwrap();
        let in_commits: i64 = db
            .write(|conn| {
                Box::pin(async move { sqlx::query_scalar("PRAGMA wal_autocheckpoint").fetch_one(conn).await })
            })
            .await
            .unwrap();
        assert_eq!(in_commits, 0, "the writer's commits must not checkpoint");

        // 4 MiB of rows, 1,000 pages and more, in many groups.
        let body = "x".repeat(4096);
        for _ in 0..1024 {
            db.execute(sqlx::query("INSERT INTO rows (body) VALUES ($1)").bind(body.clone())).await.unwrap();
        }
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let size = std::fs::metadata(&file).unwrap().len();
            if size > 4 * 1024 * 1024 {
                break;
            }
            assert!(tokio::time::Instant::now() < deadline, "the rows never reached the file: {size} bytes");
            tokio::time::sleep(super::EVERY).await;
        }
    }
}
