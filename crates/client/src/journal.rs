//! The intent journal: one JSON file per save, under `<state dir>/intents/`.
//!
//! A record is written (and fsynced) *before* the create is sent, so a crash,
//! a timeout or a lost answer always leaves durable evidence that a paste may
//! exist under its idempotency key (seed 002: "record the attempt, not the
//! result"). The record is the key's only home on this machine: as long as it
//! says `pending`, the next run reuses the key and adopts whatever the lost
//! call made.
//!
//! Every write goes to a temporary file in the same directory, is fsynced,
//! renamed over the record, and the directory is fsynced: a reader sees the
//! old record or the new one, never half of each. A record that is torn or
//! corrupt anyway (a disk that lies, a hand edit) is reported with its path
//! and skipped; the journal never deletes a record it cannot read.

use std::{
    fmt,
    fs::{self, File, OpenOptions},
    io::{self, Write},
    os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

use chrono::{DateTime, Utc};
use pastebin_core::IdempotencyKey;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The record format written by this client. A record with a higher version
/// came from a newer client: it is reported and left alone, never rewritten.
pub const RECORD_VERSION: u32 = 1;
/// The format of a sealed save's record (docs/api.md#sealed-pastes): a
/// client from before sealed pastes reports it and leaves it alone, rather
/// than resending its envelope as text.
pub const SEALED_RECORD_VERSION: u32 = 2;
/// The format of a save that asks the page for something (a language,
/// burn after reading, a text's file name): a client from before these
/// reports it and leaves it alone, rather than resending it without them
/// (another request under the same key, which the server refuses).
pub const CHOICES_RECORD_VERSION: u32 = 3;

const INTENTS: &str = "intents";
const LOCKS: &str = "locks";
const RECORD_SUFFIX: &str = ".json";

/// One save: what was asked, under which key, and how far it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentRecord {
    pub version: u32,
    /// The idempotency key, canonical. Also the record's file name.
    pub key: String,
    /// What this save is of: `file:<absolute path>`, `stdin`, or `--subject`.
    pub subject: String,
    /// The server the key was sent to: a key means nothing to another server.
    pub server: String,
    /// Hex SHA-256 of the request, as the server computes it
    /// ([`pastebin_core::CreateRequest::hash`]): content plus expiry.
    pub request_hash: String,
    pub expires_in_seconds: u64,
    /// When the intent was recorded, before the first send. The server keeps
    /// a key 25 h after it resolved it, which is later than this, never earlier.
    #[serde(with = "rfc3339")]
    pub created_at: DateTime<Utc>,
    #[serde(with = "rfc3339")]
    pub updated_at: DateTime<Utc>,
    /// Sends made under this key so far, across all runs.
    #[serde(default)]
    pub attempts: u32,
    /// A sealed save's key, the share link's fragment: kept for as long as
    /// the record, so `pastebin pastes` can show the whole link again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_key: Option<LinkKey>,
    #[serde(flatten)]
    pub state: IntentState,
}

/// The key of a sealed paste as its link's fragment carries it. It opens
/// the paste: `Debug` never prints it, and only the 0600 record holds it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LinkKey(String);

impl LinkKey {
    pub fn new(fragment: String) -> Self {
        Self(fragment)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LinkKey(<redacted>)")
    }
}

/// How far a save got. Stored as `"state": "..."` beside the other fields.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum IntentState {
    /// Sent (or about to be) with no answer yet: a paste may exist. The exact
    /// content is kept so `--resume` can repeat the very same request.
    Pending {
        /// The text, or for a binary save its bytes in base64 (see [`Body`]).
        content: String,
        /// Set for a binary save only; records written before binary saves
        /// existed have neither, and are text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        media_type: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file_name: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        language: Option<String>,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        burn_after_reading: bool,
        /// Set for a sealed save: `content` is its envelope in base64, the
        /// exact bytes every resend repeats.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        sealed: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last_error: Option<String>,
    },
    /// The server answered 201: the answer, with its delete token.
    Complete {
        answer: Answer,
        #[serde(default, skip_serializing_if = "Option::is_none", with = "rfc3339::option")]
        deleted_at: Option<DateTime<Utc>>,
    },
    /// The server refused the request (400, 409, 413): nothing was created.
    Rejected { reason: String },
    /// A pending record that an earlier client gave up on (`--new` past the
    /// replay window); read so that its journal stays readable, never written
    /// now that a pending key is always sent again. Kept, not
    /// deleted: the paste may exist.
    Abandoned { reason: String },
}

/// What a save sends: UTF-8 text, a file's bytes as they are with their
/// media type, or a sealed envelope. The journal stores binary bodies and
/// envelopes in base64.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Text(String),
    Binary {
        media_type: String,
        bytes: Vec<u8>,
    },
    /// An envelope sealed on this machine (docs/api.md#sealed-pastes).
    Sealed {
        envelope: Vec<u8>,
    },
}

impl Body {
    pub fn bytes(&self) -> &[u8] {
        match self {
            Self::Text(text) => text.as_bytes(),
            Self::Binary { bytes, .. } => bytes,
            Self::Sealed { envelope } => envelope,
        }
    }

    pub fn media_type(&self) -> Option<&str> {
        match self {
            Self::Text(_) | Self::Sealed { .. } => None,
            Self::Binary { media_type, .. } => Some(media_type),
        }
    }

    /// The pending state that keeps this body and its choices for a later `--resume`.
    fn pending(&self, choices: &Choices) -> IntentState {
        use base64::Engine;
        let content = match self {
            Self::Text(text) => text.clone(),
            Self::Binary { bytes, .. } | Self::Sealed { envelope: bytes } => {
                base64::engine::general_purpose::STANDARD.encode(bytes)
            }
        };
        IntentState::Pending {
            content,
            media_type: self.media_type().map(str::to_owned),
            file_name: choices.file_name.clone(),
            language: choices.language.clone(),
            burn_after_reading: choices.burn_after_reading,
            sealed: matches!(self, Self::Sealed { .. }),
            last_error: None,
        }
    }
}

/// What a save asks of the paste beside its body (docs/api.md#create-a-paste):
/// the name a download gets (its extension hints the page's language), the
/// language to highlight it in, whether its first read deletes it. Part of
/// the request, so a resend repeats them exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Choices {
    pub file_name: Option<String>,
    pub language: Option<String>,
    pub burn_after_reading: bool,
}

impl From<&str> for Body {
    fn from(text: &str) -> Self {
        Self::Text(text.to_owned())
    }
}

impl From<String> for Body {
    fn from(text: String) -> Self {
        Self::Text(text)
    }
}

impl IntentState {
    /// The body a pending record sends, with its choices; `None` if it is
    /// not pending or its stored base64 is damaged.
    pub fn pending_body(&self) -> Option<(Body, Choices)> {
        use base64::Engine;
        let Self::Pending { content, media_type, file_name, language, burn_after_reading, sealed, .. } = self else {
            return None;
        };
        let decoded = || base64::engine::general_purpose::STANDARD.decode(content).ok();
        let body = match media_type {
            None if *sealed => Body::Sealed { envelope: decoded()? },
            None => Body::Text(content.clone()),
            Some(media_type) => Body::Binary { media_type: media_type.clone(), bytes: decoded()? },
        };
        let choices = Choices {
            file_name: file_name.clone(),
            language: language.clone(),
            burn_after_reading: *burn_after_reading,
        };
        Some((body, choices))
    }

    pub fn name(&self) -> &'static str {
        match self {
            Self::Pending { .. } => "pending",
            Self::Complete { .. } => "complete",
            Self::Rejected { .. } => "rejected",
            Self::Abandoned { .. } => "abandoned",
        }
    }
}

/// The 201 body the server returned, as stored. The delete token is the
/// paste's only credential: `Debug` never prints it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Answer {
    pub id: String,
    pub url: String,
    pub raw_url: String,
    /// RFC 3339, UTC, as the server wrote it.
    pub expires_at: String,
    pub delete_token: String,
}

impl Answer {
    /// Whether the paste is past its expiry at `now` (an unparsable expiry
    /// counts as live: the server decides).
    pub fn expired_at(&self, now: DateTime<Utc>) -> bool {
        DateTime::parse_from_rfc3339(&self.expires_at).is_ok_and(|at| at.with_timezone(&Utc) <= now)
    }
}

impl fmt::Debug for Answer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Answer")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("raw_url", &self.raw_url)
            .field("expires_at", &self.expires_at)
            .field("delete_token", &"<redacted>")
            .finish()
    }
}

impl IntentRecord {
    /// A fresh pending record for a save that has not been sent yet.
    pub fn pending(
        key: IdempotencyKey,
        subject: &str,
        server: &str,
        request_hash: String,
        expires_in_seconds: u64,
        (body, choices): (&Body, &Choices),
        now: DateTime<Utc>,
    ) -> Self {
        // Binary saves had file names before version 3: only what an older
        // client would drop when resending needs the newer format.
        let asks_more = choices.language.is_some()
            || choices.burn_after_reading
            || (matches!(body, Body::Text(_)) && choices.file_name.is_some());
        Self {
            version: if asks_more {
                CHOICES_RECORD_VERSION
            } else if matches!(body, Body::Sealed { .. }) {
                SEALED_RECORD_VERSION
            } else {
                RECORD_VERSION
            },
            key: key.canonical(),
            subject: subject.to_owned(),
            server: server.to_owned(),
            request_hash,
            expires_in_seconds,
            created_at: now,
            updated_at: now,
            attempts: 0,
            link_key: None,
            state: body.pending(choices),
        }
    }

    /// The same record, keeping a sealed save's key for its link.
    pub fn with_link_key(mut self, key: LinkKey) -> Self {
        self.link_key = Some(key);
        self
    }

    /// The link to share: the server's URL, and for a sealed paste its key
    /// after `#` (which no browser sends to the server).
    pub fn share_url(&self) -> Option<String> {
        let answer = self.answer()?;
        Some(match &self.link_key {
            Some(key) => format!("{}#{}", answer.url, key.expose()),
            None => answer.url.clone(),
        })
    }

    pub fn idempotency_key(&self) -> Option<IdempotencyKey> {
        IdempotencyKey::parse(&self.key).ok()
    }

    pub fn answer(&self) -> Option<&Answer> {
        match &self.state {
            IntentState::Complete { answer, .. } => Some(answer),
            _ => None,
        }
    }

    pub fn is_pending(&self) -> bool {
        matches!(self.state, IntentState::Pending { .. })
    }

    /// Whether the server may have forgotten this record's key. It keeps a
    /// key 25 h after the key was *resolved* (never earlier than its first
    /// send, which follows `created_at`) and never retires a pending one, so
    /// before this age a re-send is always answered under the same key.
    /// Past it, a re-send is still never worse than a new key: at worst the
    /// server makes the paste afresh. A margin covers clock skew between
    /// this machine and the server, erring towards "may have".
    pub fn may_be_forgotten(&self, now: DateTime<Utc>) -> bool {
        const SKEW_MARGIN: chrono::Duration = chrono::Duration::minutes(10);
        // KEY_RETENTION is 25 h: far inside chrono's range.
        let retention = chrono::Duration::from_std(pastebin_core::KEY_RETENTION).unwrap_or(chrono::Duration::MAX);
        now - self.created_at > retention - SKEW_MARGIN
    }
}

/// A record file that could not be used, and why. Reported, never deleted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("journal record {}: {reason}; skipped (left in place)", path.display())]
pub struct JournalProblem {
    pub path: PathBuf,
    pub reason: String,
}

/// Everything readable in the journal, plus what was not.
#[derive(Debug, Default)]
pub struct Scan {
    pub records: Vec<(PathBuf, IntentRecord)>,
    pub problems: Vec<JournalProblem>,
}

/// The state directory: `intents/` (records) and `locks/` (per-subject locks).
#[derive(Debug, Clone)]
pub struct Journal {
    root: PathBuf,
}

impl Journal {
    /// Opens the journal under `state_dir`, creating what is missing with
    /// mode 0700. The two directories the journal owns are made 0700 even if
    /// they already existed (records hold delete tokens); a `state_dir` the
    /// user made is left as they made it.
    pub fn open(state_dir: impl Into<PathBuf>) -> io::Result<Self> {
        let root = state_dir.into();
        create_dir_durably(&root).map_err(|e| with_path(e, &root))?;
        for dir in [root.join(INTENTS), root.join(LOCKS)] {
            create_dir_durably(&dir).map_err(|e| with_path(e, &dir))?;
            fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).map_err(|e| with_path(e, &dir))?;
        }
        Ok(Self { root })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn intents_dir(&self) -> PathBuf {
        self.root.join(INTENTS)
    }

    pub fn path_of(&self, key: &str) -> PathBuf {
        self.intents_dir().join(format!("{key}{RECORD_SUFFIX}"))
    }

    /// Durably removes a record: only for a save that never left this
    /// machine, or one its owner chose to forget (`pastebin pastes --drop`).
    pub fn remove(&self, key: &str) -> io::Result<()> {
        let path = self.path_of(key);
        fs::remove_file(&path).map_err(|e| with_path(e, &path))?;
        File::open(self.intents_dir())?.sync_all()
    }

    /// Durably replaces (or creates) the record's file; returns its path.
    pub fn write(&self, record: &IntentRecord) -> io::Result<PathBuf> {
        let path = self.path_of(&record.key);
        // Serializing plain strings and numbers cannot fail.
        let mut bytes = serde_json::to_vec_pretty(record).expect("a record serializes");
        bytes.push(b'\n');
        write_durably(&path, &bytes).map_err(|e| with_path(e, &path))?;
        Ok(path)
    }

    /// Reads one record by key.
    pub fn read(&self, key: &str) -> Result<IntentRecord, JournalProblem> {
        read_record(&self.path_of(key))
    }

    /// Reads every record. Temporary files of interrupted writes are not
    /// records and are ignored; anything else unreadable is a problem.
    pub fn scan(&self) -> io::Result<Scan> {
        let dir = self.intents_dir();
        let mut scan = Scan::default();
        let mut paths: Vec<PathBuf> = Vec::new();
        for entry in fs::read_dir(&dir).map_err(|e| with_path(e, &dir))? {
            let entry = entry.map_err(|e| with_path(e, &dir))?;
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || !name.ends_with(RECORD_SUFFIX) {
                continue;
            }
            paths.push(entry.path());
        }
        paths.sort();
        for path in paths {
            match read_record(&path) {
                Ok(record) => scan.records.push((path, record)),
                Err(problem) => scan.problems.push(problem),
            }
        }
        scan.records.sort_by_key(|(_, r)| r.created_at);
        Ok(scan)
    }

    /// The lock file guarding one subject: whoever holds it is the only run
    /// deciding whether this subject needs a create.
    pub fn lock_path(&self, subject: &str) -> PathBuf {
        let digest = Sha256::digest(subject.as_bytes());
        self.root.join(LOCKS).join(format!("{}.lock", hex::encode(&digest[..16])))
    }

    /// Takes the subject's lock if nobody holds it.
    pub fn try_lock_subject(&self, subject: &str) -> io::Result<Option<SubjectLock>> {
        let (file, path) = self.open_lock(subject)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(SubjectLock { _file: file, path })),
            Err(fs::TryLockError::WouldBlock) => Ok(None),
            Err(fs::TryLockError::Error(e)) => Err(with_path(e, &path)),
        }
    }

    /// Waits for the subject's lock (blocking: call off the async runtime).
    pub fn lock_subject(&self, subject: &str) -> io::Result<SubjectLock> {
        let (file, path) = self.open_lock(subject)?;
        file.lock().map_err(|e| with_path(e, &path))?;
        Ok(SubjectLock { _file: file, path })
    }

    fn open_lock(&self, subject: &str) -> io::Result<(File, PathBuf)> {
        let path = self.lock_path(subject);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| with_path(e, &path))?;
        Ok((file, path))
    }
}

/// An exclusive lock on one subject (an OS file lock: released when this is
/// dropped or the process dies, so a crashed run never wedges the subject).
#[derive(Debug)]
pub struct SubjectLock {
    _file: File,
    pub path: PathBuf,
}

fn read_record(path: &Path) -> Result<IntentRecord, JournalProblem> {
    let problem = |reason: String| JournalProblem { path: path.to_owned(), reason };
    let bytes = fs::read(path).map_err(|e| problem(format!("cannot read: {e}")))?;
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(problem("empty (a torn write?)".into()));
    }
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| problem(format!("not valid JSON (torn or corrupt): {e}")))?;
    let version = value.get("version").and_then(serde_json::Value::as_u64);
    match version {
        Some(v) if (u64::from(RECORD_VERSION)..=u64::from(CHOICES_RECORD_VERSION)).contains(&v) => {}
        Some(v) => {
            return Err(problem(format!(
            "record version {v} is not supported by this client (knows {RECORD_VERSION} to {CHOICES_RECORD_VERSION})"
        )))
        }
        None => return Err(problem("no record version".into())),
    }
    let record: IntentRecord =
        serde_json::from_value(value).map_err(|e| problem(format!("not an intent record: {e}")))?;
    let expected = format!("{}{RECORD_SUFFIX}", record.key);
    if path.file_name().is_some_and(|name| name != expected.as_str()) || record.idempotency_key().is_none() {
        return Err(problem(format!("names key {:?}, which does not match its file name", record.key)));
    }
    Ok(record)
}

/// Temp file in the same directory, fsync, rename over `path`, fsync the
/// directory: after this returns the new contents survive a power cut, and
/// at no moment does `path` hold a partial record. Mode 0600: a complete
/// record holds a delete token.
fn write_durably(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = path.parent().ok_or_else(|| io::Error::other("a record path has a directory"))?;
    let name = path.file_name().ok_or_else(|| io::Error::other("a record path has a file name"))?.to_string_lossy();
    let temp = dir.join(format!(".{name}.{}.{:016x}.tmp", std::process::id(), rand::random::<u64>()));
    let result = (|| {
        let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        fs::rename(&temp, path)?;
        File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result
}

/// Creates `dir` and any missing parents as 0700, fsyncing the parent of
/// each directory it creates: a record fsynced into a directory whose own
/// entry was never made durable can vanish with it in a power cut.
fn create_dir_durably(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let parent = dir.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    create_dir_durably(parent)?;
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => File::open(parent)?.sync_all(),
        // Made by a concurrent run in between: it fsyncs its own parent.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

fn with_path(error: io::Error, path: &Path) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

/// `DateTime<Utc>` as RFC 3339 text, without turning on chrono's serde
/// feature for the whole workspace.
mod rfc3339 {
    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&at.to_rfc3339_opts(SecondsFormat::Millis, true))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<DateTime<Utc>, D::Error> {
        let raw = String::deserialize(d)?;
        DateTime::parse_from_rfc3339(&raw).map(|at| at.with_timezone(&Utc)).map_err(serde::de::Error::custom)
    }

    pub mod option {
        use super::*;

        pub fn serialize<S: Serializer>(at: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
            match at {
                Some(at) => super::serialize(at, s),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
            let raw = Option::<String>::deserialize(d)?;
            raw.map(|raw| {
                DateTime::parse_from_rfc3339(&raw).map(|at| at.with_timezone(&Utc)).map_err(serde::de::Error::custom)
            })
            .transpose()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> DateTime<Utc> {
        DateTime::parse_from_rfc3339("2030-01-02T03:04:05Z").unwrap().with_timezone(&Utc)
    }

    fn record(subject: &str, at: DateTime<Utc>) -> IntentRecord {
        IntentRecord::pending(
            IdempotencyKey::new_random(),
            subject,
            "http://s",
            "ab".repeat(32),
            86_400,
            (&Body::Text("hi".into()), &Choices::default()),
            at,
        )
    }

    fn complete(mut record: IntentRecord) -> IntentRecord {
        record.state = IntentState::Complete {
            answer: Answer {
                id: "00abcdefghijkl".into(),
                url: "http://s/00abcdefghijkl".into(),
                raw_url: "http://s/raw/00abcdefghijkl".into(),
                expires_at: "2030-01-03T03:04:05Z".into(),
                delete_token: "secret-token".into(),
            },
            deleted_at: None,
        };
        record
    }

    #[test]
    fn records_round_trip_with_a_version_and_mode_0600() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path().join("state")).unwrap();
        let pending = record("file:/a", now());
        let path = journal.write(&pending).unwrap();
        assert_eq!(journal.read(&pending.key).unwrap(), pending);
        let done = complete(pending.clone());
        journal.write(&done).unwrap();
        assert_eq!(journal.read(&done.key).unwrap(), done);
        let raw: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        assert_eq!(raw["version"], 1);
        assert_eq!(raw["state"], "complete");
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(fs::metadata(journal.root()).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(fs::metadata(journal.intents_dir()).unwrap().permissions().mode() & 0o777, 0o700);
        assert!(!format!("{done:?}").contains("secret-token"), "Debug never shows the delete token");
        // No temporary files are left behind by a successful write.
        let leftovers: Vec<_> = fs::read_dir(journal.intents_dir())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with('.'))
            .collect();
        assert!(leftovers.is_empty());
    }

    #[test]
    fn a_torn_record_is_reported_with_its_path_and_the_others_survive() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let good = complete(record("file:/good", now()));
        journal.write(&good).unwrap();
        let torn = record("file:/torn", now());
        let full = serde_json::to_string(&torn).unwrap();
        let torn_path = journal.path_of(&torn.key);
        fs::write(&torn_path, &full[..full.len() / 2]).unwrap();
        let empty_path = journal.path_of(&IdempotencyKey::new_random().canonical());
        fs::write(&empty_path, "").unwrap();
        // An interrupted write's temp file is not a record at all.
        fs::write(journal.intents_dir().join(".x.json.1.00.tmp"), "{").unwrap();

        let scan = journal.scan().unwrap();
        assert_eq!(scan.records.len(), 1);
        assert_eq!(scan.records[0].1, good);
        let mut reported: Vec<_> = scan.problems.iter().map(|p| p.path.clone()).collect();
        reported.sort();
        let mut expected = vec![torn_path.clone(), empty_path.clone()];
        expected.sort();
        assert_eq!(reported, expected);
        let message = scan.problems.iter().find(|p| p.path == torn_path).unwrap().to_string();
        assert!(message.contains(&torn_path.display().to_string()), "{message}");
        assert!(message.contains("torn or corrupt"), "{message}");
        assert!(torn_path.exists() && empty_path.exists(), "unreadable records are never deleted");
    }

    #[test]
    fn corrupt_json_wrong_version_and_mismatched_names_are_problems() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let garbage = journal.path_of("11111111-1111-4111-8111-111111111111");
        fs::write(&garbage, b"\x00\xffnot json").unwrap();
        let mut future = record("file:/f", now());
        future.version = 99;
        fs::write(journal.path_of(&future.key), serde_json::to_vec(&future).unwrap()).unwrap();
        let moved = record("file:/m", now());
        let wrong_name = journal.path_of("22222222-2222-4222-8222-222222222222");
        fs::write(&wrong_name, serde_json::to_vec(&moved).unwrap()).unwrap();
        let not_a_record = journal.path_of("33333333-3333-4333-8333-333333333333");
        fs::write(&not_a_record, br#"{"version": 1, "hello": "world"}"#).unwrap();

        let scan = journal.scan().unwrap();
        assert!(scan.records.is_empty());
        assert_eq!(scan.problems.len(), 4, "{:?}", scan.problems);
        let reason = |path: &Path| scan.problems.iter().find(|p| p.path == path).unwrap().reason.clone();
        assert!(reason(&garbage).contains("not valid JSON"));
        assert!(reason(&journal.path_of(&future.key)).contains("version 99"));
        assert!(reason(&wrong_name).contains("does not match"));
        assert!(reason(&not_a_record).contains("not an intent record"));
    }

    #[test]
    fn a_key_may_be_forgotten_only_once_the_replay_window_since_its_creation_is_over() {
        let fresh = record("file:/a", now());
        assert!(!fresh.may_be_forgotten(now()));
        assert!(!fresh.may_be_forgotten(now() + chrono::Duration::hours(24)));
        assert!(fresh.may_be_forgotten(now() + chrono::Duration::hours(25)));
    }

    #[test]
    fn subject_locks_are_exclusive_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::open(dir.path()).unwrap();
        let held = journal.try_lock_subject("file:/a").unwrap().expect("free at first");
        assert!(journal.try_lock_subject("file:/a").unwrap().is_none(), "a second holder is refused");
        assert!(journal.try_lock_subject("file:/b").unwrap().is_some(), "other subjects are independent");
        drop(held);
        assert!(journal.try_lock_subject("file:/a").unwrap().is_some());
    }

    #[test]
    fn expiry_is_read_from_the_answer() {
        let done = complete(record("file:/a", now()));
        let answer = done.answer().unwrap();
        assert!(!answer.expired_at(now()));
        assert!(answer.expired_at(now() + chrono::Duration::days(2)));
    }
}
