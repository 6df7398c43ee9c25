//! Whether a commit this shard acknowledged survives the loss of its
//! database server (docs/operations.md#durability-and-failover). Read at
//! start-up and every [`RECHECK_INTERVAL`]; shown in `Describe`, `/readyz`,
//! the metric [`crate::metrics::COMMITS_SURVIVE_SERVER_LOSS`] and `ctl
//! stats`; a configuration that can lose commits on failover is logged as a
//! warning, or refused with `--require-synchronous-standby`.
//!
//! On PostgreSQL a commit waits for a standby only when
//! `synchronous_standby_names` names one and `synchronous_commit` is `on`,
//! `remote_write` or `remote_apply`; it is then safe while such a standby
//! streams in `sync` (or `quorum`) state, and commits wait (they are not
//! lost) while none does. Anything else acknowledges a commit that only this
//! server holds: an asynchronous replica promoted after its loss has not got
//! it.

use std::{
    fmt,
    sync::{Mutex, OnceLock},
    time::Duration,
};

use sqlx::{AnyPool, Row};

use crate::db::Backend;

/// How often the configuration is read again: replicas come and go.
pub const RECHECK_INTERVAL: Duration = Duration::from_secs(30);

/// A shard's durability as `Describe` carries it to its callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reported {
    /// [`Durability::kind`].
    pub kind: String,
    /// [`Durability`]'s words.
    pub detail: String,
    /// [`Durability::survives_server_loss`].
    pub commits_survive_server_loss: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Durability {
    /// Commits wait for a synchronous standby, and `standbys` stream in sync now.
    SynchronousStandby { standbys: u64 },
    /// Commits wait for a synchronous standby and none streams now: they
    /// wait (creates answer 503 after their budget); none is lost.
    WaitingForStandby,
    /// Standbys stream asynchronously (or `synchronous_commit` does not wait
    /// for them): a failover to one loses the commits it had not received.
    AsynchronousStandbys { standbys: u64, synchronous_commit: String },
    /// No standby at all: the server's loss loses everything since the last backup.
    SingleServer { synchronous_commit: String },
    /// An embedded SQLite file: one machine's disk.
    SingleFile,
    /// The server would not say (e.g. `pg_stat_replication` hidden from this role).
    Unknown(String),
}

impl Durability {
    /// The label of `Describe`, `ctl stats` and the metric.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::SynchronousStandby { .. } => "synchronous_standby",
            Self::WaitingForStandby => "waiting_for_synchronous_standby",
            Self::AsynchronousStandbys { .. } => "asynchronous_standbys",
            Self::SingleServer { .. } => "single_server",
            Self::SingleFile => "single_file",
            Self::Unknown(_) => "unknown",
        }
    }

    /// Whether an acknowledged commit survives the loss of the server;
    /// `None` when that is not known.
    pub fn survives_server_loss(&self) -> Option<bool> {
        match self {
            Self::SynchronousStandby { .. } | Self::WaitingForStandby => Some(true),
            Self::AsynchronousStandbys { .. } | Self::SingleServer { .. } | Self::SingleFile => Some(false),
            Self::Unknown(_) => None,
        }
    }
}

impl fmt::Display for Durability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::SynchronousStandby { standbys } => {
                write!(f, "synchronous standby ({standbys} streaming in sync): commits survive a failover")
            }
            Self::WaitingForStandby => write!(
                f,
                "synchronous standby configured, none streaming: commits wait for one (none is lost)"
            ),
            Self::AsynchronousStandbys { standbys, synchronous_commit } => write!(
                f,
                "{standbys} asynchronous standby(s) (synchronous_commit={synchronous_commit}): a failover loses the commits they had not received"
            ),
            Self::SingleServer { synchronous_commit } => write!(
                f,
                "single server, no standby (synchronous_commit={synchronous_commit}): losing it loses every commit since the last backup"
            ),
            Self::SingleFile => write!(f, "single server (an SQLite file): losing its disk loses every commit since the last backup"),
            Self::Unknown(why) => write!(f, "unknown: {why}"),
        }
    }
}

/// Reads what the database server is configured to do with a commit.
pub async fn read(pool: &AnyPool, backend: Backend) -> Result<Durability, sqlx::Error> {
    if backend == Backend::Sqlite {
        return Ok(Durability::SingleFile);
    }
    let settings = sqlx::query(
        "SELECT current_setting('synchronous_commit') AS commit_mode,
                current_setting('synchronous_standby_names') AS standby_names",
    )
    .fetch_one(pool)
    .await?;
    let commit_mode: String = settings.try_get("commit_mode")?;
    let standby_names: String = settings.try_get("standby_names")?;
    // sync_state is NULL for a role that may not read replication details.
    let replication = sqlx::query(
        "SELECT COUNT(*) AS standbys,
                COUNT(sync_state) AS visible,
                COUNT(*) FILTER (WHERE sync_state IN ('sync', 'quorum')) AS synchronous
           FROM pg_stat_replication",
    )
    .fetch_one(pool)
    .await?;
    let standbys: i64 = replication.try_get("standbys")?;
    let visible: i64 = replication.try_get("visible")?;
    let synchronous: i64 = replication.try_get("synchronous")?;
    Ok(judge(&commit_mode, &standby_names, standbys as u64, visible as u64, synchronous as u64))
}

/// The rule above, on the values the server reported.
fn judge(commit_mode: &str, standby_names: &str, standbys: u64, visible: u64, synchronous: u64) -> Durability {
    let waits = !standby_names.trim().is_empty() && matches!(commit_mode, "on" | "remote_write" | "remote_apply");
    let synchronous_commit = commit_mode.to_owned();
    if standbys > visible {
        return Durability::Unknown(
            "pg_stat_replication's sync_state is hidden from this role (grant it pg_read_all_stats)".into(),
        );
    }
    match (waits, standbys, synchronous) {
        (true, _, 1..) => Durability::SynchronousStandby { standbys: synchronous },
        (true, _, 0) => Durability::WaitingForStandby,
        (false, 0, _) => Durability::SingleServer { synchronous_commit },
        (false, standbys, _) => Durability::AsynchronousStandbys { standbys, synchronous_commit },
    }
}

fn cell() -> &'static Mutex<Option<Durability>> {
    static CURRENT: OnceLock<Mutex<Option<Durability>>> = OnceLock::new();
    CURRENT.get_or_init(|| Mutex::new(None))
}

/// The last durability this process read of its shard's database; `None`
/// before the first read, and in processes that run no shard.
pub fn current() -> Option<Durability> {
    cell().lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
}

/// Records a fresh reading: the metric, the cell behind [`current`], and a
/// log line when it changed (a warning when commits can be lost).
fn record(what: &str, durability: Durability) {
    let previous = cell().lock().unwrap_or_else(std::sync::PoisonError::into_inner).replace(durability.clone());
    let value = match durability.survives_server_loss() {
        Some(true) => 1.0,
        Some(false) => 0.0,
        None => -1.0,
    };
    metrics::gauge!(crate::metrics::COMMITS_SURVIVE_SERVER_LOSS).set(value);
    if previous.as_ref() == Some(&durability) {
        return;
    }
    let (kind, detail) = (durability.kind(), durability.to_string());
    if durability.survives_server_loss() == Some(true) {
        tracing::info!(%what, durability = kind, "{detail}");
    } else {
        tracing::warn!(
            %what,
            durability = kind,
            "commits this shard acknowledges can be lost on a failover of its database: {detail} \
             (docs/operations.md#durability-and-failover; --require-synchronous-standby refuses to start)"
        );
    }
}

/// Reads the durability once (refusing to start when `require_synchronous`
/// and commits could be lost), then again every [`RECHECK_INTERVAL`].
pub async fn start_watching(
    what: &str,
    pool: AnyPool,
    backend: Backend,
    require_synchronous: bool,
) -> anyhow::Result<()> {
    let durability = read(&pool, backend)
        .await
        .map_err(|error| anyhow::anyhow!("cannot read the database's durability settings: {error}"))?;
    if require_synchronous && durability.survives_server_loss() != Some(true) {
        anyhow::bail!(
            "--require-synchronous-standby: commits on this database can be lost on failover ({durability}); \
             configure a synchronous standby (synchronous_standby_names, synchronous_commit=on) or drop the flag \
             (docs/operations.md#durability-and-failover)"
        );
    }
    record(what, durability);
    let what = what.to_owned();
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(RECHECK_INTERVAL);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            match read(&pool, backend).await {
                Ok(durability) => record(&what, durability),
                Err(error) => tracing::debug!(%error, "durability: cannot read the settings now; next time"),
            }
        }
    });
    Ok(())
}

/// The key service's search-first mode (`--may-have-lost-commits-since`,
/// docs/design.md#adopting-after-a-k-loss), noted for `/readyz`: an
/// operator must see that the shard searches P before minting.
pub fn note_lost_commits(lost: pastebin_core::LostCommits) {
    let _ = LOST_COMMITS.set(lost);
}

/// What [`note_lost_commits`] noted; `None` in every other process.
pub fn lost_commits() -> Option<pastebin_core::LostCommits> {
    LOST_COMMITS.get().copied()
}

static LOST_COMMITS: OnceLock<pastebin_core::LostCommits> = OnceLock::new();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_commit_that_waits_for_a_streaming_or_awaited_standby_is_safe() {
        let safe = judge("on", "FIRST 1 (s1)", 1, 1, 1);
        assert_eq!(safe, Durability::SynchronousStandby { standbys: 1 });
        assert_eq!(judge("remote_apply", "*", 2, 2, 1).survives_server_loss(), Some(true));
        assert_eq!(judge("on", "s1", 0, 0, 0), Durability::WaitingForStandby);
        assert_eq!(judge("on", "", 0, 0, 0), Durability::SingleServer { synchronous_commit: "on".into() });
        let asynchronous = judge("on", "", 2, 2, 0);
        assert_eq!(asynchronous.kind(), "asynchronous_standbys");
        assert_eq!(asynchronous.survives_server_loss(), Some(false));
        // A commit that does not wait for the named standby is not safe either.
        assert_eq!(judge("local", "s1", 1, 1, 1).kind(), "asynchronous_standbys");
        assert_eq!(judge("off", "", 0, 0, 0).kind(), "single_server");
        assert_eq!(judge("on", "s1", 1, 0, 0).survives_server_loss(), None, "hidden sync_state is not guessed");
    }
}
