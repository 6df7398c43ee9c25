//! Losing the database and finding it again (docs/design.md#database-failover).
//!
//! While the database is reachable every call goes straight to the pool.
//! The first call that finds the server gone (a dead connection, a refused
//! one, a server that no longer takes writes) turns the shard to *lost*:
//! from then on every call fails at once, before sending anything, and one
//! task looks for a server to use, trying each server of the URL in turn with
//! a jittered exponential back-off up to a cap. Without it every call opened
//! its own connection during an outage (hundreds a second, growing with
//! traffic: a thundering herd the moment the new primary comes up); with it a
//! process makes at most one attempt per server per back-off step, and
//! processes that lost the same server spread their attempts apart.
//!
//! A call can also just hang: the pool retries a refused connection by itself
//! until its acquire timeout, longer than any caller waits, and a caller that
//! gives up drops the call before it fails. So a call still running after
//! [`SLOW_CALL`] has the current server checked on a connection of its own
//! (one check at a time): a server that is gone or no longer takes writes
//! turns the shard to lost there and then, and every call still under way
//! is given up as uncertain (it may have committed) instead of going on
//! knocking at a server that is gone.
//!
//! When the task finds a server, the pool is pointed at it
//! (`Pool::set_connect_options`) and every connection opened before the
//! switch is discarded the next time it would be handed out: it may lead to
//! the old primary, still up but now read-only.

use std::{
    future::Future,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use tokio::sync::watch;

use sqlx::{
    any::{AnyConnectOptions, AnyPoolOptions},
    pool::PoolConnectionMetadata,
    AnyConnection, AnyPool, ConnectOptions, Connection,
};

use crate::database_url::{DatabaseUrl, Server, SessionTarget};

/// The first wait after losing the server: a restart or a promotion takes
/// a fraction of a second, so look again soon.
const FIRST_WAIT: Duration = Duration::from_millis(50);
/// The longest wait between two rounds: also the longest a shard stays
/// unavailable after a server came back.
const LONGEST_WAIT: Duration = Duration::from_secs(1);
/// How long one connection attempt (and its check) may take: a server that
/// does not answer is as good as gone.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
/// A call running longer than this has the server checked: a healthy
/// server answers a shard's statements in milliseconds.
const SLOW_CALL: Duration = Duration::from_millis(500);

/// The SQLSTATE of a write refused by a read-only server (a standby, or a
/// demoted primary): the statement did not run.
const READ_ONLY_TRANSACTION: &str = "25006";
/// SQLSTATE class 57P: the server is shutting down, crashed or not yet
/// accepting connections (a standby being promoted).
const OPERATOR_INTERVENTION: &str = "57P";
/// SQLSTATE class 08: the connection failed.
const CONNECTION_EXCEPTION: &str = "08";

/// The wait before round `round` (0-based) of looking for a server:
/// exponential up to [`LONGEST_WAIT`], each wait drawn from its upper half so
/// that processes which lost the server together do not retry together.
fn wait_before(round: u32) -> Duration {
    let ceiling = FIRST_WAIT.saturating_mul(2u32.saturating_pow(round)).min(LONGEST_WAIT);
    ceiling.mul_f64(rand::random_range(0.5..=1.0))
}

/// Whether `error` says the server is gone or is no longer one this shard may
/// use, so that the shard should look for one again.
pub fn lost_the_server(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::Tls(_) | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(error) => error.code().is_some_and(|code| {
            code == READ_ONLY_TRANSACTION
                || code.starts_with(OPERATOR_INTERVENTION)
                || code.starts_with(CONNECTION_EXCEPTION)
        }),
        _ => false,
    }
}

/// What every call gets while the shard looks for its server.
fn looking_for_the_server() -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::NotConnected,
        "the database is unreachable and this shard is looking for it again; nothing was sent, retry shortly",
    ))
}

/// What a call under way gets when the shard loses its server: it may have
/// committed, so it is read as uncertain, like any lost connection.
fn given_up_with_the_server() -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        "the database server was lost while this call ran; it may or may not have committed, retry shortly",
    ))
}

/// What a shard watches to know that its database may be another one now.
pub struct Failovers {
    /// How many times the shard lost its server so far, counted the moment
    /// it does (before any call can reach a server found again).
    pub losses: Arc<AtomicU64>,
    /// Since when the shard has been looking for a server; `None` while one
    /// is in use.
    pub link: watch::Receiver<Option<Instant>>,
}

/// One shard's link to its database servers.
pub struct Reconnect {
    url: DatabaseUrl,
    /// Since when the shard has been looking for a server, if it is; calls
    /// under way watch it to give up when it turns.
    lost_since: watch::Sender<Option<Instant>>,
    /// How many times the shard lost its server, counted the moment it
    /// does: a shard that trusts what it read before compares this count
    /// with the one it last confirmed itself at (its database may be
    /// another one now, that forgot commits).
    losses: Arc<AtomicU64>,
    /// Run on every new connection, once the shard installs it.
    new_connections: std::sync::OnceLock<ConnectionCheck>,
    state: Mutex<State>,
}

/// Whether a new connection reached the database the shard confirmed
/// itself on (`false`: another one, which may have forgotten commits).
pub type ConnectionCheck = Arc<
    dyn for<'c> Fn(
            &'c mut AnyConnection,
        ) -> std::pin::Pin<Box<dyn Future<Output = Result<bool, sqlx::Error>> + Send + 'c>>
        + Send
        + Sync,
>;

#[derive(Default)]
struct State {
    /// The server the pool is pointed at (an index into the URL's servers).
    current: usize,
    /// Whether a check of the current server is under way.
    checking: bool,
    /// When the pool was last pointed at a server: connections older than
    /// this may lead to the old one.
    switched_at: Option<Instant>,
}

impl Reconnect {
    /// Finds a server of `url` to use (trying every server in rounds, for at
    /// most `patience`) and opens a pool on it that follows the server from
    /// then on.
    pub async fn open(
        url: DatabaseUrl,
        options: AnyPoolOptions,
        patience: Duration,
    ) -> anyhow::Result<(AnyPool, Arc<Reconnect>)> {
        let reconnect = Arc::new(Reconnect {
            url,
            lost_since: watch::Sender::new(None),
            losses: Arc::default(),
            new_connections: std::sync::OnceLock::new(),
            state: Mutex::default(),
        });
        let deadline = Instant::now() + patience;
        let mut round = 0;
        let (current, connect_options) = loop {
            if let Some(found) = reconnect.find_server().await {
                break found;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "none of the database servers {} could be used; start one that takes writes, or fix --database-url",
                reconnect.url
            );
            tokio::time::sleep(wait_before(round)).await;
            round += 1;
        };
        reconnect.state.lock().expect("no panic while holding the state").current = current;
        tracing::info!(server = %reconnect.url.servers[current].address, "using this database server");
        let following = reconnect.clone();
        let options = options.before_acquire(move |_conn, meta| {
            let fresh = following.opened_after_the_switch(&meta);
            Box::pin(async move { Ok(fresh) })
        });
        let checking = reconnect.clone();
        let options = options.after_connect(move |conn, _meta| {
            let checking = checking.clone();
            Box::pin(async move { checking.check_new_connection(conn).await })
        });
        Ok((options.connect_with(connect_options).await?, reconnect))
    }

    /// Has every connection opened from now on checked by `check` first
    /// (once; later calls change nothing).
    pub fn check_new_connections(&self, check: ConnectionCheck) {
        let _ = self.new_connections.set(check);
    }

    /// A new connection whose database is not the one the shard confirmed
    /// itself on (a server found behind the same address after a failover,
    /// a restore) counts as a loss of the link, as if the old server had
    /// been seen to go, and is refused: the call that opened it fails, and
    /// the shard confirms itself again before it serves (the check lets the
    /// confirmation's own connections through).
    async fn check_new_connection(&self, conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
        let Some(check) = self.new_connections.get() else { return Ok(()) };
        if check(conn).await? {
            return Ok(());
        }
        self.losses.fetch_add(1, Ordering::SeqCst);
        self.lost_since.send_modify(|_| {});
        tracing::warn!("a new database connection reached a database this shard has not confirmed itself on: refused");
        Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "the database is not the one this shard confirmed itself on (it may have forgotten commits): the shard \
             confirms itself again; retry shortly",
        )))
    }

    /// How many times the link was lost so far, and the link itself.
    pub fn failovers(&self) -> Failovers {
        Failovers { losses: self.losses.clone(), link: self.lost_since.subscribe() }
    }

    /// Runs `call` unless the shard is looking for its server (then it fails
    /// at once, sending nothing); a call that finds the server gone starts
    /// the search, and one still under way when another finds it gives up.
    pub async fn call<T>(
        self: &Arc<Self>,
        pool: &AnyPool,
        call: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, sqlx::Error> {
        let mut lost = self.lost_since.subscribe();
        if lost.borrow_and_update().is_some() {
            return Err(looking_for_the_server());
        }
        let outcome = tokio::select! {
            biased;
            outcome = self.checked_if_slow(pool, call) => outcome,
            () = async { drop(lost.wait_for(Option::is_some).await) } => Err(given_up_with_the_server()),
        };
        if let Err(error) = &outcome {
            if lost_the_server(error) {
                self.lose(pool, error);
            }
        }
        outcome
    }

    /// Runs `call`, having the current server checked if it takes longer
    /// than [`SLOW_CALL`].
    async fn checked_if_slow<T>(
        self: &Arc<Self>,
        pool: &AnyPool,
        call: impl Future<Output = Result<T, sqlx::Error>>,
    ) -> Result<T, sqlx::Error> {
        let mut call = std::pin::pin!(call);
        match tokio::time::timeout(SLOW_CALL, &mut call).await {
            Ok(outcome) => outcome,
            Err(_slow) => {
                self.check_current_server(pool);
                call.await
            }
        }
    }

    /// Checks the current server on a connection of its own, unless a check
    /// or a search is under way, and turns the shard to lost if it is gone.
    fn check_current_server(self: &Arc<Self>, pool: &AnyPool) {
        let current = {
            let mut state = self.state.lock().expect("no panic while holding the state");
            if state.checking || self.lost_since.borrow().is_some() {
                return;
            }
            state.checking = true;
            state.current
        };
        let (reconnect, pool) = (self.clone(), pool.clone());
        tokio::spawn(async move {
            let server = &reconnect.url.servers[current];
            let verdict = match tokio::time::timeout(ATTEMPT_TIMEOUT, usable(server, reconnect.url.target)).await {
                Ok(Ok(Some(_))) => None,
                Ok(Ok(None)) => Some("the server takes no writes".to_owned()),
                Ok(Err(error)) => Some(error.to_string()),
                Err(_) => Some("the server did not answer".to_owned()),
            };
            reconnect.state.lock().expect("no panic while holding the state").checking = false;
            if let Some(error) = verdict {
                reconnect.lose(&pool, &error);
            }
        });
    }

    fn opened_after_the_switch(&self, meta: &PoolConnectionMetadata) -> bool {
        let switched_at = self.state.lock().expect("no panic while holding the state").switched_at;
        switched_at.is_none_or(|at| meta.age <= at.elapsed())
    }

    /// Turns the shard to lost and starts the one search, unless one runs.
    fn lose(self: &Arc<Self>, pool: &AnyPool, error: &dyn std::fmt::Display) {
        let turned = self.lost_since.send_if_modified(|since| {
            let was_serving = since.is_none();
            since.get_or_insert_with(Instant::now);
            was_serving
        });
        if !turned {
            return;
        }
        self.losses.fetch_add(1, Ordering::SeqCst);
        tracing::warn!(%error, servers = %self.url, "lost the database server; calls fail at once while looking for one");
        tokio::spawn(self.clone().search(pool.clone()));
    }

    /// Looks for a server in rounds with a growing wait until one is found,
    /// then points `pool` at it.
    async fn search(self: Arc<Self>, pool: AnyPool) {
        let mut round = 0;
        loop {
            tokio::time::sleep(wait_before(round)).await;
            round = round.saturating_add(1);
            let Some((current, options)) = self.find_server().await else { continue };
            pool.set_connect_options(options);
            {
                let mut state = self.state.lock().expect("no panic while holding the state");
                state.switched_at = Some(Instant::now());
                state.current = current;
            }
            // Only now do calls go through again: onto connections opened after the switch.
            let lost_for = self.lost_since.send_replace(None).map(|since| since.elapsed()).unwrap_or_default();
            let server = &self.url.servers[current].address;
            tracing::info!(%server, rounds = round, ?lost_for, "found a database server to use");
            return;
        }
    }

    /// The first server, in the URL's order, that accepts a connection and
    /// is what the URL's target asks for (its index); one attempt each.
    async fn find_server(&self) -> Option<(usize, AnyConnectOptions)> {
        for (index, server) in self.url.servers.iter().enumerate() {
            match tokio::time::timeout(ATTEMPT_TIMEOUT, usable(server, self.url.target)).await {
                Ok(Ok(Some(options))) => return Some((index, options)),
                Ok(Ok(None)) => tracing::debug!(server = %server.address, "this database server takes no writes"),
                Ok(Err(error)) => {
                    tracing::debug!(server = %server.address, %error, "cannot reach this database server")
                }
                Err(_) => tracing::debug!(server = %server.address, "this database server did not answer in time"),
            }
        }
        None
    }
}

/// `server`'s connect options if it can be reached and is what `target`
/// asks for (checked on a connection of its own, closed again).
async fn usable(server: &Server, target: SessionTarget) -> Result<Option<AnyConnectOptions>, sqlx::Error> {
    let options: AnyConnectOptions = server.url.parse()?;
    let mut conn: AnyConnection = options.connect().await?;
    let usable = match target.check() {
        None => true,
        Some(check) => sqlx::query_scalar::<_, bool>(check).fetch_one(&mut conn).await?,
    };
    let _ = conn.close().await;
    Ok(usable.then_some(options))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_grow_to_the_cap_and_never_fall_below_half() {
        for round in 0..40 {
            let ceiling = FIRST_WAIT.saturating_mul(2u32.saturating_pow(round)).min(LONGEST_WAIT);
            let wait = wait_before(round);
            assert!(wait <= ceiling && wait >= ceiling / 2, "round {round}: {wait:?} outside {ceiling:?}");
        }
        assert!(wait_before(39) >= LONGEST_WAIT / 2);
    }

    /// A server's error with SQLSTATE `code`, as the driver reports it.
    #[derive(Debug)]
    struct ServerError(&'static str);

    impl std::fmt::Display for ServerError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "SQLSTATE {}", self.0)
        }
    }

    impl std::error::Error for ServerError {}

    impl sqlx::error::DatabaseError for ServerError {
        fn message(&self) -> &str {
            self.0
        }
        fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
            Some(self.0.into())
        }
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    fn server_error(code: &'static str) -> sqlx::Error {
        sqlx::Error::Database(Box::new(ServerError(code)))
    }

    #[test]
    fn a_read_only_or_departing_server_is_lost_a_refused_statement_is_not() {
        // 25006 read-only transaction; 57P01 admin shutdown; 57P03 cannot connect now (a
        // standby being promoted); 08006 connection failure.
        for code in ["25006", "57P01", "57P03", "08006"] {
            assert!(lost_the_server(&server_error(code)), "{code}");
        }
        // 23505 unique violation; 40001 serialization failure; 42P01 undefined table.
        for code in ["23505", "40001", "42P01"] {
            assert!(!lost_the_server(&server_error(code)), "{code}");
        }
    }

    #[test]
    fn a_dead_or_refused_connection_is_a_lost_server_other_errors_are_not() {
        assert!(lost_the_server(&looking_for_the_server()));
        assert!(lost_the_server(&given_up_with_the_server()));
        assert!(lost_the_server(&sqlx::Error::PoolTimedOut));
        assert!(lost_the_server(&sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset))));
        assert!(!lost_the_server(&sqlx::Error::RowNotFound));
        assert!(!lost_the_server(&sqlx::Error::ColumnNotFound("state".into())));
    }
}
