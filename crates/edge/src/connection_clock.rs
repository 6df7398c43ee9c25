//! The clock of one public gRPC connection (docs/security.md#total-bounds):
//! what it may hold open, and for how long, whatever its client does.
//!
//! - a new connection opens its first call within the preface timeout of
//!   its accept (a silent socket, a TLS handshake or HTTP/2 preface that
//!   never ends, a connection that only answers pings);
//! - a connection with no call open gets another within the idle timeout;
//! - an answer that handed hyper something (its headers, a message) has it
//!   taken by the client within the send timeout: hyper asks the answer for
//!   more only once the client's HTTP/2 window has room again, so the time
//!   between the two is the time the client owes. An answer waiting for its
//!   own next message (a health watch) owes nothing and is off the clock;
//! - a connection is closed a call timeout after its maximum age (tonic
//!   sends the GOAWAY at the age), whatever is still open on it.
//!
//! The connection keeps the clock, not its calls: a client that grants no
//! window is never sent a byte, so hyper never polls the answer and no timer
//! inside it could fire, while the connection is polled whenever it reads.

use std::{
    collections::BTreeSet,
    future::Future,
    sync::{Arc, Mutex, PoisonError},
    task::{Context, Poll, Waker},
    time::Duration,
};

use tokio::time::Instant;

use crate::refusals::{refused, Protocol};

/// The rules of one listener's connections; a `None` is no such rule.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ConnectionRules {
    pub preface_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub send_timeout: Option<Duration>,
    /// From the accept to the hard close: the maximum age and a call
    /// timeout of grace, for the calls the GOAWAY let finish.
    pub closed_at: Option<Duration>,
}

impl ConnectionRules {
    fn any(&self) -> bool {
        self.preface_timeout.is_some()
            || self.idle_timeout.is_some()
            || self.send_timeout.is_some()
            || self.closed_at.is_some()
    }
}

/// Why a connection's clock ran out: the refusal's reason and what the log says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Overdue {
    Preface,
    Idle,
    Send,
    Age,
}

impl Overdue {
    fn reason(self) -> &'static str {
        match self {
            Self::Preface => "preface_timeout",
            Self::Idle => "idle_timeout",
            Self::Send => "send_timeout",
            Self::Age => "max_connection_age",
        }
    }

    fn what(self) -> &'static str {
        match self {
            Self::Preface => "the connection opened no call within --grpc-preface-timeout-secs",
            Self::Idle => "the connection had no call open for --grpc-idle-timeout-secs",
            Self::Send => "an answer was not taken by the client within --grpc-send-timeout-secs",
            Self::Age => "the connection outlived --grpc-max-connection-age-secs and its grace",
        }
    }
}

/// One connection's clock, shared by the connection and its calls.
#[derive(Debug)]
pub(crate) struct ConnectionClock {
    rules: ConnectionRules,
    accepted: Instant,
    state: Mutex<ClockState>,
}

#[derive(Debug, Default)]
struct ClockState {
    calls_open: usize,
    /// When the last call ended; `None` until one has.
    idle_since: Option<Instant>,
    /// Answers the client owes a read, by since when (and their id).
    owed: BTreeSet<(Instant, u64)>,
    next_call: u64,
    /// The connection's task, and the moment its timer is set for.
    waker: Option<Waker>,
    timer_at: Option<Instant>,
}

impl ClockState {
    /// A new moment something is due: the connection's task is woken when
    /// its timer is set for later (or not at all), so it sets it again.
    fn due_by(&self, at: Instant) {
        if self.timer_at.is_none_or(|timer| at < timer) {
            if let Some(waker) = &self.waker {
                waker.wake_by_ref();
            }
        }
    }
}

impl ConnectionClock {
    /// The clock of a connection accepted now, if `rules` set any.
    pub(crate) fn start(rules: ConnectionRules) -> Option<Arc<Self>> {
        rules.any().then(|| Arc::new(Self { rules, accepted: Instant::now(), state: Mutex::default() }))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A call opens on this connection; it is open until the guard drops.
    pub(crate) fn call_opened(self: &Arc<Self>) -> CallOnClock {
        let mut state = self.state();
        state.calls_open += 1;
        let id = state.next_call;
        state.next_call += 1;
        CallOnClock { clock: self.clone(), id, owed_since: None }
    }

    /// What is due first, and when; remembers `waker` to wake when
    /// something earlier comes due.
    fn due(&self, waker: &Waker) -> Option<(Instant, Overdue)> {
        let mut state = self.state();
        if !state.waker.as_ref().is_some_and(|known| known.will_wake(waker)) {
            state.waker = Some(waker.clone());
        }
        let rules = &self.rules;
        let quiet = match state.idle_since {
            _ if state.calls_open > 0 => None,
            None => rules.preface_timeout.map(|timeout| (self.accepted + timeout, Overdue::Preface)),
            Some(since) => rules.idle_timeout.map(|timeout| (since + timeout, Overdue::Idle)),
        };
        let owed = match (state.owed.first(), rules.send_timeout) {
            (Some((since, _)), Some(timeout)) => Some((*since + timeout, Overdue::Send)),
            _ => None,
        };
        let aged = rules.closed_at.map(|age| (self.accepted + age, Overdue::Age));
        let due = [quiet, owed, aged].into_iter().flatten().min_by_key(|(at, _)| *at);
        state.timer_at = due.map(|(at, _)| at);
        due
    }
}

/// One call's place on its connection's clock: open until dropped, and
/// owing the client's read while what its answer handed over waits.
#[derive(Debug)]
pub(crate) struct CallOnClock {
    clock: Arc<ConnectionClock>,
    id: u64,
    owed_since: Option<Instant>,
}

impl CallOnClock {
    /// The answer handed hyper something to send (its headers, a message):
    /// the client owes a read until hyper asks the answer for more.
    pub(crate) fn handed_over(&mut self) {
        if self.owed_since.is_some() {
            return;
        }
        let now = Instant::now();
        self.owed_since = Some(now);
        let mut state = self.clock.state();
        state.owed.insert((now, self.id));
        if let Some(timeout) = self.clock.rules.send_timeout {
            state.due_by(now + timeout);
        }
    }

    /// Hyper asks the answer for more: what it handed over was taken.
    pub(crate) fn taken(&mut self) {
        if let Some(since) = self.owed_since.take() {
            self.clock.state().owed.remove(&(since, self.id));
        }
    }
}

impl Drop for CallOnClock {
    fn drop(&mut self) {
        let mut state = self.clock.state();
        if let Some(since) = self.owed_since {
            state.owed.remove(&(since, self.id));
        }
        state.calls_open -= 1;
        if state.calls_open == 0 {
            let now = Instant::now();
            state.idle_since = Some(now);
            if let Some(timeout) = self.clock.rules.idle_timeout {
                state.due_by(now + timeout);
            }
        }
    }
}

/// The connection's side of its clock: the timer for what is due first.
#[derive(Debug)]
pub(crate) struct ClockWatch {
    clock: Arc<ConnectionClock>,
    timer: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    /// Once overdue the connection only fails (and is counted once).
    cut: Option<Overdue>,
}

impl ClockWatch {
    pub(crate) fn new(clock: Arc<ConnectionClock>) -> Self {
        Self { clock, timer: None, cut: None }
    }

    pub(crate) fn clock(&self) -> &Arc<ConnectionClock> {
        &self.clock
    }

    /// An error once something is overdue. Polled on every read and write:
    /// hyper reads a connection for as long as it serves it, so the timer
    /// wakes the connection's task even when no byte moves.
    pub(crate) fn overdue(&mut self, cx: &mut Context<'_>) -> std::io::Result<()> {
        if self.cut.is_none() {
            let Some((due, why)) = self.clock.due(cx.waker()) else {
                self.timer = None;
                return Ok(());
            };
            let timer = self.timer.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(due)));
            if timer.deadline() != due {
                timer.as_mut().reset(due);
            }
            if timer.as_mut().poll(cx) == Poll::Pending {
                return Ok(());
            }
            self.cut = Some(why);
            refused(Protocol::Grpc, why.reason());
            tracing::debug!("{}; closing it", why.what());
        }
        let why = self.cut.unwrap_or(Overdue::Send);
        Err(std::io::Error::new(std::io::ErrorKind::TimedOut, why.what()))
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use super::*;

    fn rules(preface: u64, idle: u64, send: u64) -> ConnectionRules {
        let secs = |s| (s > 0).then(|| Duration::from_secs(s));
        ConnectionRules {
            preface_timeout: secs(preface),
            idle_timeout: secs(idle),
            send_timeout: secs(send),
            closed_at: None,
        }
    }

    /// How long until `watch` fails, or `None` if it is still fine after `bound`.
    async fn fails_after(watch: &mut ClockWatch, bound: Duration) -> Option<Duration> {
        let started = Instant::now();
        let failed = tokio::time::timeout(
            bound,
            poll_fn(|cx| match watch.overdue(cx) {
                Ok(()) => Poll::Pending,
                Err(error) => Poll::Ready(error),
            }),
        );
        failed.await.ok().map(|_| started.elapsed())
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_opens_no_call_is_cut_at_the_preface_timeout() {
        let mut watch = ClockWatch::new(ConnectionClock::start(rules(2, 60, 0)).unwrap());
        let took = fails_after(&mut watch, Duration::from_secs(100)).await.expect("cut off");
        assert_eq!(took, Duration::from_secs(2));
        assert_eq!(watch.cut, Some(Overdue::Preface));
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_call_keeps_the_connection_and_its_end_starts_the_idle_timeout() {
        let clock = ConnectionClock::start(rules(2, 5, 0)).unwrap();
        let mut watch = ClockWatch::new(clock.clone());
        let call = clock.call_opened();
        assert!(fails_after(&mut watch, Duration::from_secs(30)).await.is_none(), "a call is open");
        drop(call);
        let took = fails_after(&mut watch, Duration::from_secs(100)).await.expect("idle, then cut off");
        assert_eq!(took, Duration::from_secs(5));
        assert_eq!(watch.cut, Some(Overdue::Idle));
    }

    #[tokio::test(start_paused = true)]
    async fn what_an_answer_handed_over_must_be_taken_within_the_send_timeout() {
        let clock = ConnectionClock::start(rules(0, 0, 3)).unwrap();
        let mut watch = ClockWatch::new(clock.clone());
        let mut call = clock.call_opened();
        // A watch between two changes: nothing owed, however long.
        assert!(fails_after(&mut watch, Duration::from_secs(30)).await.is_none());
        // Handed over, and taken within the timeout, again and again.
        for _ in 0..10 {
            call.handed_over();
            assert!(fails_after(&mut watch, Duration::from_secs(2)).await.is_none());
            call.taken();
        }
        // Handed over and never taken: cut off.
        call.handed_over();
        let took = fails_after(&mut watch, Duration::from_secs(100)).await.expect("cut off");
        assert_eq!(took, Duration::from_secs(3));
        assert_eq!(watch.cut, Some(Overdue::Send));
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_is_closed_at_its_age_whatever_it_has_open() {
        let rules = ConnectionRules { closed_at: Some(Duration::from_secs(7)), ..rules(0, 0, 0) };
        let clock = ConnectionClock::start(rules).unwrap();
        let mut watch = ClockWatch::new(clock.clone());
        let _call = clock.call_opened();
        let took = fails_after(&mut watch, Duration::from_secs(100)).await.expect("closed");
        assert_eq!(took, Duration::from_secs(7));
    }

    #[test]
    fn no_rule_no_clock() {
        assert!(ConnectionClock::start(ConnectionRules::default()).is_none());
    }
}
