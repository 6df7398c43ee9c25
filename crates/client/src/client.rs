//! The durable-intent create (seed 002) end to end:
//!
//! 1. Take the subject's lock: one run at a time decides whether a subject
//!    needs a create, so two runs can never both mint a key for it.
//! 2. Look in the journal. A pending record for this subject and request is
//!    *adopted* (its key is sent again, and the server replays what the lost
//!    call made); a complete one is the answer (no request at all).
//! 3. Otherwise mint a key and write a pending record, fsynced, before the
//!    first byte goes to the server.
//! 4. Send, retrying with the same key; on a 201 write the answer and mark
//!    the record complete. On anything uncertain the record stays pending.

use std::{
    fmt, io,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use chrono::{DateTime, Utc};
use pastebin_core::{Clock, CreateRequest, CreateToken, Expiry, ExpiryError, IdempotencyKey, LimitError, SystemClock};

use crate::{
    journal::{Answer, Body, Choices, IntentRecord, IntentState, Journal, JournalProblem, LinkKey, Scan, SubjectLock},
    retry::RetryPolicy,
    sealed::Seal,
    server::{CreateCall, CreateFailure, DeleteFailure, Server},
    trust::Trust,
};

/// What a save is *of*: the thing that should have at most one paste per
/// content. Two runs with the same subject and content make one paste.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Subject(String);

impl Subject {
    /// A file, by its canonical absolute path (so `./a` and `/home/u/a` agree).
    pub fn file(path: &Path) -> io::Result<Self> {
        let absolute =
            std::fs::canonicalize(path).map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        Ok(Self(format!("file:{}", absolute.display())))
    }

    /// Standard input: the content alone tells saves apart.
    pub fn stdin() -> Self {
        Self("stdin".into())
    }

    /// A caller-chosen name (`--subject`).
    pub fn named(name: &str) -> Self {
        Self(name.to_owned())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One paste to make.
#[derive(Debug, Clone)]
pub struct Save {
    pub subject: Subject,
    pub content: Body,
    /// What it asks of the paste beside its body (file name, language, burn).
    pub choices: Choices,
    /// `None` is the server's default (30 days).
    pub expires_in_seconds: Option<u64>,
    /// Make another paste even if this subject and content already has one.
    /// A pending save is still adopted first: it may be a paste already.
    pub force_new: bool,
    /// Seal `content` on this machine before it is sent
    /// (docs/api.md#sealed-pastes); `None` sends it as it is.
    pub seal: Option<Seal>,
}

/// How a save got its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// A new key, sent and answered in this run.
    Created,
    /// The key of an earlier, unconfirmed run was sent again and answered;
    /// `replayed` when the server said the paste already existed.
    Adopted { replayed: bool },
    /// The journal already held the answer: nothing was sent.
    AlreadyPasted,
}

#[derive(Debug, Clone)]
pub struct Pasted {
    pub answer: Answer,
    pub key: IdempotencyKey,
    pub subject: String,
    pub how: How,
    /// The journal record holding the answer (mode 0600).
    pub record: PathBuf,
    /// A sealed paste's key, which its link carries after `#`.
    pub link_key: Option<LinkKey>,
}

impl Pasted {
    /// The link to share: for a sealed paste, with its key after `#`.
    pub fn share_url(&self) -> String {
        match &self.link_key {
            Some(key) => format!("{}#{}", self.answer.url, key.expose()),
            None => self.answer.url.clone(),
        }
    }
}

/// Things a caller should show a person, though nothing failed.
#[derive(Debug, Clone)]
pub enum Notice {
    /// A journal file could not be read; it was skipped and left in place.
    Problem(JournalProblem),
    /// Another run holds this subject's lock; this one waits for it.
    Waiting { subject: String, lock: PathBuf },
    /// A send failed in a way that may hide a success; retrying the same key.
    Retrying { key: String, attempt: u32, delay: Duration, reason: String },
    /// An earlier save of this subject with other content is still pending.
    OtherPending { subject: String, key: String, record: PathBuf },
    /// A save resent past the replay window was made afresh: its first
    /// attempt may also have made a paste, which the server no longer names.
    MaybeTwice { key: String, record: PathBuf, created_at: DateTime<Utc> },
}

impl fmt::Display for Notice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Problem(problem) => write!(f, "{problem}"),
            Self::Waiting { subject, lock } => {
                write!(f, "another run is saving {subject}; waiting for its lock ({})", lock.display())
            }
            Self::Retrying { key, attempt, delay, reason } => {
                write!(f, "attempt {attempt} (key {key}) got no answer: {reason}; retrying the same key in {delay:.1?}")
            }
            Self::OtherPending { subject, key, record } => write!(
                f,
                "an earlier save of {subject} with other content is still unconfirmed (key {key}, {}); \
                 `pastebin paste --resume` finishes it",
                record.display()
            ),
            Self::MaybeTwice { key, record, created_at } => write!(
                f,
                "the unconfirmed save from {created_at} (key {key}, {}) was older than the server's 25 h replay \
                 window and the server made the paste afresh: if its first attempt made one too, look for it by \
                 its content; this one is the paste to use",
                record.display()
            ),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum PasteError {
    #[error(transparent)]
    InvalidExpiry(#[from] ExpiryError),
    /// The server's published limits refuse it (the server's own message);
    /// nothing was sent or kept.
    #[error(transparent)]
    OverLimit(#[from] LimitError),
    /// The save may or may not have happened; its record is kept pending.
    #[error(
        "the paste is not confirmed after {attempts} attempt(s): {reason}. The intent is kept in {} \
         (key {key}): run the same paste again or `pastebin paste --resume` to finish it without a second paste",
        record.display()
    )]
    LeftPending { key: String, record: PathBuf, attempts: u32, reason: String },
    #[error("{failure} (record {})", record.display())]
    Refused { key: String, record: PathBuf, failure: CreateFailure },
    /// Refused now, but an earlier attempt under the same key got no answer
    /// and may have created the paste (a proxy's 413 or 403, a lowered size
    /// limit, say nothing about that attempt). The record stays pending.
    #[error(
        "{failure}; but an earlier attempt under key {key} got no answer and may have made the paste, so the \
         intent is kept in {} and stays adoptable: once the server accepts the request again, \
         `pastebin paste --resume` finishes it without a second paste",
        record.display()
    )]
    RefusedAfterUncertain { key: String, record: PathBuf, failure: CreateFailure },
    /// The server cannot be reached as configured (TLS). Nothing was sent by
    /// this attempt; the record is kept as it was.
    #[error("{reason} (record {} kept, key {key})", record.display())]
    Configuration { key: String, record: PathBuf, reason: String },
    /// No connection could be made, by this run or any before it: the
    /// request never left this machine, and its record is gone.
    #[error(
        "{failure} ({server}). Nothing was sent and nothing is kept: is the server running and is --server right? \
         Running the same paste again starts afresh"
    )]
    NotSent { server: String, failure: CreateFailure },
    #[error("the intent journal: {0}")]
    Journal(#[from] io::Error),
    #[error("{0}")]
    Setup(String),
}

impl PasteError {
    /// Whether running again later can still finish this save.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::LeftPending { .. } | Self::RefusedAfterUncertain { .. })
    }

    /// Whether the setup, not the server's answer, stopped the save.
    pub fn is_configuration(&self) -> bool {
        matches!(self, Self::Configuration { .. })
    }
}

/// Which pending saves a resume finishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resuming {
    /// Every pending save, each against the server it was sent to.
    EveryServer,
    /// Only those sent to this client's server (`--resume --server URL`).
    OnlyThisServer,
}

#[derive(Debug, Default)]
pub struct Resumed {
    /// Pending saves of other servers left alone, by server.
    pub other_servers: std::collections::BTreeMap<String, usize>,
    pub finished: Vec<Pasted>,
    pub failed: Vec<PasteError>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    Deleted,
    /// The server had no such paste any more (deleted before, or expired).
    AlreadyGone,
}

#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    #[error("no paste {id} with a known delete token in {}", journal.display())]
    Unknown { id: String, journal: PathBuf },
    #[error("deleting {id}: {failure}")]
    Failed { id: String, failure: DeleteFailure },
    /// No connection could be made, by this run or any before it: the
    /// request never left this machine, and its record is gone.
    #[error(
        "{failure} ({server}). Nothing was sent and nothing is kept: is the server running and is --server right? \
         Running the same paste again starts afresh"
    )]
    NotSent { server: String, failure: CreateFailure },
    #[error("the intent journal: {0}")]
    Journal(#[from] io::Error),
    #[error("{0}")]
    Setup(String),
}

type NoticeSink = Arc<dyn Fn(Notice) + Send + Sync>;

/// A paste client with its journal. Cheap to clone; clones share everything.
#[derive(Clone)]
pub struct Client {
    journal: Journal,
    server: Server,
    /// Sent with creates to `server` only (see [`Client::with_create_token`]).
    create_token: Option<CreateToken>,
    /// Which certificates `server` may present (see [`Client::with_trust`]).
    trust: Trust,
    timeout: Duration,
    retry: RetryPolicy,
    clock: Arc<dyn Clock>,
    notices: NoticeSink,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("server", &self.server.url()).field("journal", &self.journal.root()).finish()
    }
}

impl Client {
    /// A client for `server` (`http://...` or `grpc://...`) journaling under
    /// `state_dir`. Nothing is contacted yet.
    pub fn new(server: &str, state_dir: impl Into<PathBuf>) -> anyhow::Result<Self> {
        let timeout = Duration::from_secs(10);
        Ok(Self {
            journal: Journal::open(state_dir)?,
            server: Server::connect(server, timeout, &Trust::System)?,
            create_token: None,
            trust: Trust::System,
            timeout,
            retry: RetryPolicy::default(),
            clock: Arc::new(SystemClock),
            notices: Arc::new(|notice| tracing::warn!("{notice}")),
        })
    }

    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Bounds each call to the server (a timeout is an uncertain outcome).
    pub fn with_timeout(mut self, timeout: Duration) -> anyhow::Result<Self> {
        self.timeout = timeout;
        self.reconnect()
    }

    /// Which certificates this client's own server may present over HTTPS
    /// (e.g. a `--server-cert` pin). The server of an older record being
    /// resumed is trusted as the system says: a pin names one server.
    pub fn with_trust(mut self, trust: Trust) -> anyhow::Result<Self> {
        self.trust = trust;
        self.reconnect()
    }

    fn reconnect(mut self) -> anyhow::Result<Self> {
        self.server =
            Server::connect(self.server.url(), self.timeout, &self.trust)?.with_create_token(self.create_token.clone());
        Ok(self)
    }

    /// A create token for a server started with `--require-create-token`.
    /// It goes only to this client's own server, never to the server of an
    /// older record being resumed.
    pub fn with_create_token(mut self, token: Option<CreateToken>) -> Self {
        self.server = self.server.with_create_token(token.clone());
        self.create_token = token;
        self
    }

    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Where notices go (default: `tracing` warnings).
    pub fn on_notice(mut self, sink: impl Fn(Notice) + Send + Sync + 'static) -> Self {
        self.notices = Arc::new(sink);
        self
    }

    pub fn journal(&self) -> &Journal {
        &self.journal
    }

    pub fn server_url(&self) -> &str {
        self.server.url()
    }

    fn notice(&self, notice: Notice) {
        (self.notices)(notice)
    }

    /// Reads the journal, reporting what cannot be read.
    pub fn scan(&self) -> io::Result<Scan> {
        let scan = self.journal.scan()?;
        for problem in &scan.problems {
            self.notice(Notice::Problem(problem.clone()));
        }
        Ok(scan)
    }

    /// Saves `save` at most once per subject and content (see the module doc).
    pub async fn paste(&self, save: Save) -> Result<Pasted, PasteError> {
        // The server's limits, when it publishes them: its default lifetime
        // and its refusals, checked here before anything is journaled.
        let limits = self.server.limits().await;
        let expiry = match limits.as_ref().and_then(|limits| limits.expiry.policy()) {
            Some(policy) => policy.admit(save.expires_in_seconds)?,
            None => Expiry::from_seconds(save.expires_in_seconds)?,
        };
        if let Some(limits) = &limits {
            limits.check_create(save.content.bytes().len(), Some(expiry.seconds()))?;
        }
        let request = CreateRequest {
            media_type: save.content.media_type(),
            file_name: save.choices.file_name.as_deref(),
            language: save.choices.language.as_deref(),
            burn_after_reading: save.choices.burn_after_reading,
            ..CreateRequest::text(save.content.bytes(), expiry.seconds())
        };
        // Which save this is: the request itself, or for a sealed save its
        // plaintext and password (each seal's envelope is new).
        let request_hash = match &save.seal {
            Some(seal) => seal.identity(&request),
            None => request.hash().to_hex(),
        };
        let _lock = self.lock(&save.subject).await?;

        // Under the lock, the journal is the truth about this subject.
        let scan = self.scan()?;
        let now = self.clock.now();
        let mut adopt: Option<IntentRecord> = None;
        let mut done: Option<Pasted> = None;
        for (path, record) in scan.records {
            if record.subject != save.subject.as_str() || record.server != self.server.url() {
                continue;
            }
            if record.request_hash != request_hash {
                if record.is_pending() {
                    self.notice(Notice::OtherPending {
                        subject: record.subject.clone(),
                        key: record.key.clone(),
                        record: path,
                    });
                }
                continue;
            }
            match &record.state {
                IntentState::Pending { .. } => {
                    // Oldest first (the scan is sorted): one pending per
                    // subject and request is the norm under the lock. At any
                    // age: the server never retires a pending key, and a
                    // retired one makes the paste afresh, as a new key would.
                    adopt.get_or_insert(record);
                }
                IntentState::Complete { answer, deleted_at: None } if !answer.expired_at(now) => {
                    // The scan only returns records whose key parses.
                    if let Some(key) = record.idempotency_key() {
                        let answer = answer.clone();
                        done = Some(Pasted {
                            answer,
                            key,
                            subject: record.subject,
                            how: How::AlreadyPasted,
                            record: path,
                            link_key: record.link_key,
                        });
                    }
                }
                _ => {}
            }
        }
        if let Some(record) = adopt {
            return self.send_until_answered(&self.server, record).await;
        }
        if let (Some(done), false) = (done, save.force_new) {
            return Ok(done);
        }

        let key = IdempotencyKey::new_random();
        let (body, link_key) = match &save.seal {
            Some(seal) => {
                let (body, link_key) = seal.seal(save.content.bytes()).map_err(|e| PasteError::Setup(e.to_string()))?;
                (body, Some(link_key))
            }
            None => (save.content, None),
        };
        let mut record = IntentRecord::pending(
            key,
            save.subject.as_str(),
            self.server.url(),
            request_hash,
            expiry.seconds(),
            (&body, &save.choices),
            now,
        );
        if let Some(link_key) = link_key {
            record = record.with_link_key(link_key);
        }
        // The intent is durable before anything is sent: from here on, no
        // crash can lose track of this key.
        self.journal.write(&record)?;
        self.send_until_answered(&self.server, record).await
    }

    /// Retries every pending record, at any age (each under its subject's
    /// lock, against the server it was first sent to: a key means nothing to
    /// another server). With [`Resuming::OnlyThisServer`], only the records
    /// of this client's server; the others are counted, not touched.
    pub async fn resume(&self, resuming: Resuming) -> Result<Resumed, PasteError> {
        let scan = self.scan()?;
        let mut resumed = Resumed::default();
        for (_, listed) in scan.records.into_iter().filter(|(_, r)| r.is_pending()) {
            if resuming == Resuming::OnlyThisServer && listed.server != self.server.url() {
                *resumed.other_servers.entry(listed.server).or_default() += 1;
                continue;
            }
            let subject = Subject::named(&listed.subject);
            let _lock = self.lock(&subject).await?;
            // Another run may have finished it while we waited.
            let record = match self.journal.read(&listed.key) {
                Ok(record) if record.is_pending() => record,
                Ok(_) => continue,
                Err(problem) => {
                    self.notice(Notice::Problem(problem));
                    continue;
                }
            };
            let path = self.journal.path_of(&record.key);
            let server = match self.server_for(&record.server) {
                Ok(server) => server,
                Err(e) => {
                    resumed.failed.push(PasteError::Setup(format!("{}: {e}", path.display())));
                    continue;
                }
            };
            match self.send_until_answered(&server, record).await {
                Ok(pasted) => resumed.finished.push(pasted),
                Err(error) => resumed.failed.push(error),
            }
        }
        Ok(resumed)
    }

    /// Deletes paste `id` with the delete token stored when it was created.
    pub async fn delete(&self, id: &str) -> Result<Deleted, DeleteError> {
        let scan = self.scan()?;
        let found = scan.records.into_iter().find(|(_, r)| {
            r.answer().is_some_and(|a| a.id == id && !a.delete_token.is_empty())
                && matches!(r.state, IntentState::Complete { deleted_at: None, .. })
        });
        let Some((_, mut record)) = found else {
            return Err(DeleteError::Unknown { id: id.to_owned(), journal: self.journal.intents_dir() });
        };
        let server = self.server_for(&record.server).map_err(|e| DeleteError::Setup(e.to_string()))?;
        let token = record.answer().map(|a| a.delete_token.clone()).unwrap_or_default();
        let mut attempt = 0;
        let outcome = loop {
            attempt += 1;
            match server.delete(id, &token).await {
                Ok(()) => break Deleted::Deleted,
                Err(DeleteFailure::NotFound) => break Deleted::AlreadyGone,
                // A delete is safe to repeat: a second one is a 404.
                Err(DeleteFailure::Uncertain(reason)) if attempt < self.retry.attempts => {
                    let delay = self.retry.jittered_delay(attempt, None);
                    self.notice(Notice::Retrying { key: record.key.clone(), attempt, delay, reason });
                    tokio::time::sleep(delay).await;
                }
                Err(failure) => return Err(DeleteError::Failed { id: id.to_owned(), failure }),
            }
        };
        if let IntentState::Complete { deleted_at, .. } = &mut record.state {
            *deleted_at = Some(self.clock.now());
        }
        record.updated_at = self.clock.now();
        self.journal.write(&record)?;
        Ok(outcome)
    }

    /// Sends a pending record's request until it is answered, refused, or
    /// this run's attempts are spent; the journal follows every outcome.
    async fn send_until_answered(&self, server: &Server, mut record: IntentRecord) -> Result<Pasted, PasteError> {
        let path = self.journal.path_of(&record.key);
        let key =
            record.idempotency_key().ok_or_else(|| PasteError::Setup(format!("{}: not a UUID key", path.display())))?;
        let Some((body, choices)) = record.state.pending_body() else {
            return Err(PasteError::Setup(format!("{}: not pending, or its content is damaged", path.display())));
        };
        let adopted = record.attempts > 0;
        // A pending record that was sent before got no answer then (an
        // answer would have moved it on): that send may have made the paste.
        let mut maybe_created = adopted;
        let mut attempt = 0;
        loop {
            attempt += 1;
            record.attempts += 1;
            let call =
                CreateCall { key, body: &body, choices: &choices, expires_in_seconds: record.expires_in_seconds };
            tracing::debug!(key_hash = %key.short_hash(), attempt, "sending the create");
            let outcome = server.create(call).await;
            record.updated_at = self.clock.now();
            match outcome {
                Ok(created) => {
                    if adopted && !created.replayed && record.may_be_forgotten(record.updated_at) {
                        let (key, record, created_at) = (record.key.clone(), path.clone(), record.created_at);
                        self.notice(Notice::MaybeTwice { key, record, created_at });
                    }
                    let answer = created.answer;
                    record.state = IntentState::Complete { answer: answer.clone(), deleted_at: None };
                    self.journal.write(&record)?;
                    let how = if adopted { How::Adopted { replayed: created.replayed } } else { How::Created };
                    let link_key = record.link_key;
                    return Ok(Pasted { answer, key, subject: record.subject, how, record: path, link_key });
                }
                Err(failure @ CreateFailure::Refused { .. }) if maybe_created => {
                    if let IntentState::Pending { last_error, .. } = &mut record.state {
                        *last_error = Some(format!("{failure} (after an unanswered attempt; kept adoptable)"));
                    }
                    self.journal.write(&record)?;
                    return Err(PasteError::RefusedAfterUncertain { key: record.key, record: path, failure });
                }
                Err(failure @ CreateFailure::Refused { .. }) => {
                    record.state = IntentState::Rejected { reason: failure.to_string() };
                    self.journal.write(&record)?;
                    return Err(PasteError::Refused { key: record.key, record: path, failure });
                }
                Err(failure @ CreateFailure::NotSent(_)) => {
                    // This attempt sent nothing.
                    record.attempts -= 1;
                    if attempt < self.retry.attempts.max(1) {
                        let delay = self.retry.jittered_delay(attempt, None);
                        let reason = failure.to_string();
                        self.notice(Notice::Retrying { key: record.key.clone(), attempt, delay, reason });
                        tokio::time::sleep(delay).await;
                        continue;
                    }
                    if record.attempts == 0 {
                        // No send of this key ever left: there is nothing to adopt.
                        self.journal.remove(&record.key)?;
                        return Err(PasteError::NotSent { server: server.url().to_owned(), failure });
                    }
                    let reason = failure.to_string();
                    if let IntentState::Pending { last_error, .. } = &mut record.state {
                        *last_error = Some(reason.clone());
                    }
                    self.journal.write(&record)?;
                    return Err(PasteError::LeftPending { key: record.key, record: path, attempts: attempt, reason });
                }
                Err(CreateFailure::Configuration(reason)) => {
                    // This attempt sent nothing; the record keeps what earlier ones left.
                    record.attempts -= 1;
                    self.journal.write(&record)?;
                    return Err(PasteError::Configuration { key: record.key, record: path, reason });
                }
                Err(CreateFailure::Uncertain { reason, retry_after }) => {
                    maybe_created = true;
                    if let IntentState::Pending { last_error, .. } = &mut record.state {
                        *last_error = Some(reason.clone());
                    }
                    self.journal.write(&record)?;
                    if attempt >= self.retry.attempts.max(1) {
                        return Err(PasteError::LeftPending {
                            key: record.key,
                            record: path,
                            attempts: attempt,
                            reason,
                        });
                    }
                    let delay = self.retry.jittered_delay(attempt, retry_after);
                    self.notice(Notice::Retrying { key: record.key.clone(), attempt, delay, reason });
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }

    /// The subject's lock, waiting (off the runtime) if another run holds it.
    async fn lock(&self, subject: &Subject) -> io::Result<SubjectLock> {
        if let Some(lock) = self.journal.try_lock_subject(subject.as_str())? {
            return Ok(lock);
        }
        let lock_path = self.journal.lock_path(subject.as_str());
        self.notice(Notice::Waiting { subject: subject.to_string(), lock: lock_path });
        let journal = self.journal.clone();
        let subject = subject.as_str().to_owned();
        tokio::task::spawn_blocking(move || journal.lock_subject(&subject)).await.map_err(io::Error::other)?
    }

    /// A record's key belongs to the server it was sent to.
    fn server_for(&self, url: &str) -> anyhow::Result<Server> {
        if url == self.server.url() {
            Ok(self.server.clone())
        } else {
            Server::connect(url, self.timeout, &Trust::System)
        }
    }
}

#[cfg(test)]
mod tests {
    use pastebin_core::ManualClock;

    use super::*;

    /// A server address where nothing listens: every send is refused
    /// before anything leaves.
    fn nobody_home() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    }

    /// A server that takes every connection and hangs up without an answer
    /// (after saying it publishes no limits): every send is "no answer".
    async fn silent() -> String {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut request = vec![0u8; 64 * 1024];
                let read = stream.read(&mut request).await.unwrap_or(0);
                no_limits(&mut stream, &String::from_utf8_lossy(&request[..read]).to_lowercase()).await;
            }
        });
        address
    }

    async fn client(state: &Path, clock: &ManualClock) -> Client {
        client_of(&silent().await, state, clock)
    }

    fn client_of(server: &str, state: &Path, clock: &ManualClock) -> Client {
        let once = RetryPolicy { attempts: 1, ..RetryPolicy::default() };
        Client::new(server, state).unwrap().with_clock(Arc::new(clock.clone())).with_retry(once)
    }

    fn save(content: &str, force_new: bool) -> Save {
        Save {
            subject: Subject::named("notes"),
            content: content.into(),
            choices: Choices::default(),
            expires_in_seconds: None,
            force_new,
            seal: None,
        }
    }

    fn left_pending(error: PasteError) -> String {
        match error {
            PasteError::LeftPending { key, .. } => key,
            other => panic!("expected pending, got {other}"),
        }
    }

    #[tokio::test]
    async fn no_answer_keeps_the_key_and_the_next_run_sends_the_same_one() {
        let state = tempfile::tempdir().unwrap();
        let clock = ManualClock::starting_at(Utc::now());
        let client = client(state.path(), &clock).await;
        let first = left_pending(client.paste(save("hello", false)).await.unwrap_err());
        let second = left_pending(client.paste(save("hello", false)).await.unwrap_err());
        assert_eq!(first, second, "a retry reuses the pending key");
        assert_eq!(client.journal().read(&first).unwrap().attempts, 2);
        // Another content is another save, with its own key.
        let other = left_pending(client.paste(save("hello again", false)).await.unwrap_err());
        assert_ne!(other, first);
        assert_eq!(client.scan().unwrap().records.len(), 2);
    }

    /// A server that publishes no limits (an older server): a 404 to
    /// `GET /api/v1/limits`. True when `request` was that and is answered.
    async fn no_limits(stream: &mut tokio::net::TcpStream, request: &str) -> bool {
        use tokio::io::AsyncWriteExt;
        if !request.starts_with("get /api/v1/limits") {
            return false;
        }
        let answer = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
        let _ = stream.write_all(answer.as_bytes()).await;
        true
    }

    /// A server that hangs up on the first request without an answer (an
    /// uncertain send) and answers every later one 201, as a replay of the
    /// key when `replays`. It hands back the `Idempotency-Key` of every request.
    async fn silent_then_created(replays: bool) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let keys = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sent = keys.clone();
        tokio::spawn(async move {
            let mut connection = 0;
            loop {
                let Ok((mut stream, _)) = listener.accept().await else { return };
                let mut request = vec![0u8; 64 * 1024];
                let read = stream.read(&mut request).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&request[..read]).to_lowercase();
                if no_limits(&mut stream, &request).await {
                    continue;
                }
                connection += 1;
                let key = request.lines().find_map(|line| line.strip_prefix("idempotency-key: ")).unwrap_or("");
                sent.lock().unwrap().push(key.trim().to_owned());
                if connection > 1 {
                    let body = r#"{"id":"abcdefghijklmn","url":"u","raw_url":"r","expires_at":"2099-01-01T00:00:00Z","delete_token":"t"}"#;
                    let answer = format!(
                        "HTTP/1.1 201 Created\r\ncontent-type: application/json\r\nidempotent-replayed: {replays}\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                }
            }
        });
        (address, keys)
    }

    /// The server keeps a key 25 h after it *resolved* it and never retires
    /// a pending one, so an old pending save is sent again with its key: the
    /// server replays it, or at worst makes the paste afresh, as a new key would.
    #[tokio::test]
    async fn a_pending_save_past_the_replay_window_is_sent_again_with_its_key() {
        for replays in [true, false] {
            let state = tempfile::tempdir().unwrap();
            let clock = ManualClock::starting_at(Utc::now());
            let (server, sent) = silent_then_created(replays).await;
            let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
            let sink = seen.clone();
            let client = Client::new(&server, state.path())
                .unwrap()
                .with_clock(Arc::new(clock.clone()))
                .with_retry(RetryPolicy { attempts: 1, ..RetryPolicy::default() })
                .on_notice(move |notice| sink.lock().unwrap().push(notice.to_string()));
            let key = left_pending(client.paste(save("hello", false)).await.unwrap_err());

            clock.advance(pastebin_core::KEY_RETENTION + Duration::from_secs(3600));
            let pasted = if replays {
                client.paste(save("hello", false)).await.expect("the old key is sent again and answered")
            } else {
                let resumed = client.resume(Resuming::EveryServer).await.unwrap();
                assert!(resumed.failed.is_empty(), "{:?}", resumed.failed);
                resumed.finished.into_iter().next().expect("resume finished the old save")
            };
            assert_eq!(pasted.key.canonical(), key);
            assert!(matches!(pasted.how, How::Adopted { replayed } if replayed == replays), "{:?}", pasted.how);
            assert_eq!(*sent.lock().unwrap(), [key.clone(), key.clone()], "one key, both sends");
            assert!(matches!(client.journal().read(&key).unwrap().state, IntentState::Complete { .. }));
            let warned = seen.lock().unwrap().iter().any(|notice| notice.contains("made the paste afresh"));
            assert_eq!(warned, !replays, "a fresh answer past the window says a first paste may exist: {seen:?}");
        }
    }

    #[tokio::test]
    async fn a_corrupt_record_does_not_stop_a_save() {
        let state = tempfile::tempdir().unwrap();
        let clock = ManualClock::starting_at(Utc::now());
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let sink = seen.clone();
        let client = client(state.path(), &clock).await.on_notice(move |n| sink.lock().unwrap().push(n.to_string()));
        let corrupt = client.journal().path_of(&IdempotencyKey::new_random().canonical());
        std::fs::write(&corrupt, "{\"version\":").unwrap();
        left_pending(client.paste(save("hello", false)).await.unwrap_err());
        let seen = seen.lock().unwrap();
        assert!(seen.iter().any(|n| n.contains(&corrupt.display().to_string())), "{seen:?}");
        assert!(corrupt.exists());
    }

    /// A refused connection sends nothing: the save is not kept pending,
    /// and the next run starts afresh. A record whose key did leave once
    /// stays pending whatever later attempts meet.
    #[tokio::test]
    async fn a_save_that_never_left_is_not_kept() {
        let state = tempfile::tempdir().unwrap();
        let clock = ManualClock::starting_at(Utc::now());
        let dead = nobody_home();
        let client = client_of(&dead, state.path(), &clock);
        let error = client.paste(save("hello", false)).await.unwrap_err();
        assert!(matches!(error, PasteError::NotSent { .. }), "{error}");
        assert!(!error.is_retryable());
        assert!(error.to_string().contains("Nothing was sent and nothing is kept"), "{error}");
        assert!(client.scan().unwrap().records.is_empty(), "nothing pending");

        let sent_once =
            left_pending(client_of(&silent().await, state.path(), &clock).paste(save("x", false)).await.unwrap_err());
        let mut record = client.journal().read(&sent_once).unwrap();
        record.server = dead.clone();
        client.journal().write(&record).unwrap();
        let resumed = client.resume(Resuming::EveryServer).await.unwrap();
        assert!(matches!(resumed.failed[..], [PasteError::LeftPending { .. }]), "{:?}", resumed.failed);
        assert!(client.journal().read(&sent_once).unwrap().is_pending(), "its first send may have made the paste");
    }

    /// Over gRPC too: a channel that never connected sent nothing.
    #[tokio::test]
    async fn a_grpc_save_that_never_left_is_not_kept() {
        let state = tempfile::tempdir().unwrap();
        let clock = ManualClock::starting_at(Utc::now());
        let dead = nobody_home().replace("http://", "grpc://");
        let client = client_of(&dead, state.path(), &clock);
        let error = client.paste(save("hello", false)).await.unwrap_err();
        assert!(matches!(error, PasteError::NotSent { .. }), "{error}");
        assert!(client.scan().unwrap().records.is_empty(), "nothing pending");
    }

    /// `--resume --server URL` finishes that server's records and counts the others.
    #[tokio::test]
    async fn a_resume_of_this_server_leaves_the_others_alone() {
        let state = tempfile::tempdir().unwrap();
        let clock = ManualClock::starting_at(Utc::now());
        let (one, two) = (silent().await, silent().await);
        left_pending(client_of(&one, state.path(), &clock).paste(save("a", false)).await.unwrap_err());
        let key = left_pending(client_of(&two, state.path(), &clock).paste(save("b", false)).await.unwrap_err());
        let resumed = client_of(&two, state.path(), &clock).resume(Resuming::OnlyThisServer).await.unwrap();
        assert_eq!(resumed.other_servers.into_iter().collect::<Vec<_>>(), [(one, 1)]);
        assert_eq!(resumed.failed.len(), 1, "only the record of {two} was sent again");
        assert_eq!(client_of(&two, state.path(), &clock).journal().read(&key).unwrap().attempts, 2);
        let everything = client_of(&two, state.path(), &clock).resume(Resuming::EveryServer).await.unwrap();
        assert!(everything.other_servers.is_empty());
        assert_eq!(everything.failed.len(), 2);
    }

    #[tokio::test]
    async fn an_invalid_expiry_writes_nothing() {
        let state = tempfile::tempdir().unwrap();
        let clock = ManualClock::starting_at(Utc::now());
        let client = client(state.path(), &clock).await;
        let too_short = Save { expires_in_seconds: Some(1), ..save("hello", false) };
        assert!(matches!(client.paste(too_short).await, Err(PasteError::InvalidExpiry(_))));
        assert!(client.scan().unwrap().records.is_empty());
    }

    /// A server that hangs up on the first request without an answer (an
    /// uncertain send) and answers every later one with a proxy's bare 413.
    async fn silent_then_too_large() -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let mut connection = 0;
            loop {
                let Ok((mut stream, _)) = listener.accept().await else { return };
                let mut request = vec![0u8; 64 * 1024];
                let read = stream.read(&mut request).await.unwrap_or(0);
                if no_limits(&mut stream, &String::from_utf8_lossy(&request[..read]).to_lowercase()).await {
                    continue;
                }
                connection += 1;
                if connection > 1 {
                    let answer = "HTTP/1.1 413 Payload Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n";
                    let _ = stream.write_all(answer.as_bytes()).await;
                }
            }
        });
        address
    }

    #[tokio::test]
    async fn a_refusal_after_an_unanswered_attempt_keeps_the_record_adoptable() {
        let state = tempfile::tempdir().unwrap();
        let clock = ManualClock::starting_at(Utc::now());
        let twice = RetryPolicy { attempts: 2, base_delay: Duration::from_millis(1), ..RetryPolicy::default() };
        let client = Client::new(&silent_then_too_large().await, state.path())
            .unwrap()
            .with_clock(Arc::new(clock.clone()))
            .with_retry(twice);
        let error = client.paste(save("hello", false)).await.unwrap_err();
        let PasteError::RefusedAfterUncertain { key, .. } = &error else {
            panic!("expected kept pending, got {error}")
        };
        assert!(error.is_retryable(), "the save can still be finished later");
        assert!(error.to_string().contains("may have made the paste"), "{error}");
        let record = client.journal().read(key).unwrap();
        assert!(record.is_pending(), "not rejected: the first attempt may have created the paste");
        assert_eq!(record.attempts, 2);
    }

    #[tokio::test]
    async fn a_refusal_on_the_first_attempt_still_rejects() {
        let state = tempfile::tempdir().unwrap();
        let clock = ManualClock::starting_at(Utc::now());
        let server = silent_then_too_large().await;
        // Use up the server's one silent connection first.
        let _ = reqwest::get(&server).await;
        let client = client_of(&server, state.path(), &clock);
        let error = client.paste(save("hello", false)).await.unwrap_err();
        let PasteError::Refused { key, .. } = &error else { panic!("expected a refusal, got {error}") };
        assert!(matches!(client.journal().read(key).unwrap().state, IntentState::Rejected { .. }));
    }

    #[tokio::test]
    async fn the_journal_directories_are_created_private() {
        use std::os::unix::fs::PermissionsExt;
        let state = tempfile::tempdir().unwrap();
        let nested = state.path().join("a/b/pastebin");
        let journal = Journal::open(&nested).unwrap();
        for dir in [state.path().join("a"), state.path().join("a/b"), nested.clone(), journal.intents_dir()] {
            assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700, "{}", dir.display());
        }
    }
}
