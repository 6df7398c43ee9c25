//! Create tokens (docs/security.md#create-tokens): who may create pastes on
//! an instance started with `--require-create-token`.
//!
//! The tokens file holds one `LABEL sha256:HEX` line per token: the SHA-256
//! of each token, never the token itself, so the file (or a leaked copy of
//! it) cannot be used to create. `pastebin ctl tokens` writes it through
//! [`CreateTokenFile`], the gateway reads it through the same type, and
//! re-reads it whenever it changes, so a mounted secret shared by several
//! gateways takes effect without a restart.

use std::{
    fs::{self, File, OpenOptions},
    io::{self, Write},
    os::unix::fs::{MetadataExt, OpenOptionsExt},
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
    time::SystemTime,
};

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// A token's name in the file: what `list` shows and `revoke` takes.
const MAX_LABEL_LEN: usize = 64;

/// One token, by its label and the SHA-256 of the token.
#[derive(Clone, PartialEq, Eq)]
pub struct CreateTokenEntry {
    pub label: String,
    hash: [u8; 32],
}

impl CreateTokenEntry {
    /// The first 8 hex digits of the hash: enough to tell entries apart in a listing.
    pub fn fingerprint(&self) -> String {
        hex::encode(&self.hash[..4])
    }
}

impl std::fmt::Debug for CreateTokenEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CreateTokenEntry({} {})", self.label, self.fingerprint())
    }
}

/// The tokens file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CreateTokenFile {
    entries: Vec<CreateTokenEntry>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

fn valid_label(label: &str) -> bool {
    (1..=MAX_LABEL_LEN).contains(&label.len())
        && label.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

impl CreateTokenFile {
    /// Parses the file's text; blank lines and `#` comments are skipped.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut entries = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let bad = || format!("line {}: expected `LABEL sha256:HEX`", number + 1);
            let (label, hash) = line.split_once(char::is_whitespace).ok_or_else(bad)?;
            let hex_digits = hash.trim().strip_prefix("sha256:").ok_or_else(bad)?;
            let mut hash = [0u8; 32];
            hex::decode_to_slice(hex_digits, &mut hash).map_err(|_| bad())?;
            if !valid_label(label) {
                return Err(bad());
            }
            entries.push(CreateTokenEntry { label: label.to_owned(), hash });
        }
        Ok(Self { entries })
    }

    pub fn render(&self) -> String {
        let mut text = String::from("# pastebin create tokens: LABEL sha256:HEX (managed by `pastebin ctl tokens`)\n");
        for entry in &self.entries {
            text.push_str(&format!("{} sha256:{}\n", entry.label, hex::encode(entry.hash)));
        }
        text
    }

    /// Reads `path`; a file that does not exist yet holds no tokens.
    pub fn load(path: &Path) -> io::Result<Self> {
        match fs::read_to_string(path) {
            Ok(text) => Self::parse(&text).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(e),
        }
    }

    /// Replaces `path` atomically with mode 0600 (temp file, fsync, rename,
    /// fsync the directory): a gateway re-reading it sees the old file or
    /// the new one, never half of it. The temp file is always a new one:
    /// a file or symlink already at its name (a save cut off, or planted)
    /// would keep its own mode and owner, or point the write elsewhere, so
    /// it is refused and left for the operator to look at.
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let temp = dir.join(format!(".create-tokens.{}.tmp", std::process::id()));
        let mut file = match OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temp) {
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                let why =
                    format!("{} is in the way of the new file: check what it is, remove it and retry", temp.display());
                return Err(io::Error::new(io::ErrorKind::AlreadyExists, why));
            }
            opened => opened?,
        };
        let written = (|| {
            file.write_all(self.render().as_bytes())?;
            file.sync_all()?;
            fs::rename(&temp, path)?;
            File::open(dir)?.sync_all()
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temp);
        }
        written
    }

    /// Adds a fresh token under `label` and returns it: the only time the
    /// token exists in clear.
    pub fn add(&mut self, label: &str) -> Result<String, String> {
        if !valid_label(label) {
            return Err(format!("a label is 1 to {MAX_LABEL_LEN} characters of [A-Za-z0-9._-]"));
        }
        if self.entries.iter().any(|e| e.label == label) {
            return Err(format!("a token labelled {label:?} exists already; revoke it first"));
        }
        let token = format!("pbc_{}", pastebin_core::random_secret());
        self.entries.push(CreateTokenEntry { label: label.to_owned(), hash: digest(&token) });
        Ok(token)
    }

    /// Removes the token labelled `label`; false if there was none.
    pub fn revoke(&mut self, label: &str) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.label != label);
        self.entries.len() != before
    }

    pub fn entries(&self) -> &[CreateTokenEntry] {
        &self.entries
    }

    /// Whether `presented` is one of the tokens. Every entry is compared, in
    /// constant time, so the answer's timing says nothing about which.
    pub fn accepts(&self, presented: &str) -> bool {
        let presented = digest(presented);
        self.entries.iter().fold(false, |found, entry| found | bool::from(entry.hash.ct_eq(&presented)))
    }
}

/// What identifies one version of the file on disk.
type Stamp = (Option<SystemTime>, u64, u64);

/// The tokens file as the gateway sees it: re-read when its modification
/// time, size or inode changes (a rename over it, as `save` and Kubernetes
/// secret updates do, changes the inode).
#[derive(Debug)]
pub struct CreateTokens {
    path: PathBuf,
    current: Mutex<(Option<Stamp>, Arc<CreateTokenFile>)>,
}

impl CreateTokens {
    pub fn new(path: PathBuf) -> Self {
        Self { path, current: Mutex::new((None, Arc::new(CreateTokenFile::default()))) }
    }

    /// Whether `presented` is a valid token now. A file that cannot be read
    /// accepts nothing (fail closed) and says so in the log.
    pub fn accepts(&self, presented: &str) -> bool {
        self.file().is_some_and(|file| file.accepts(presented))
    }

    fn file(&self) -> Option<Arc<CreateTokenFile>> {
        let stamp = match fs::metadata(&self.path) {
            Ok(m) => (m.modified().ok(), m.len(), m.ino()),
            Err(error) => {
                tracing::warn!(path = %self.path.display(), %error, "cannot read the create tokens file; refusing creates");
                return None;
            }
        };
        let mut current = self.current.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if current.0 != Some(stamp) {
            match CreateTokenFile::load(&self.path) {
                Ok(file) => {
                    tracing::info!(path = %self.path.display(), tokens = file.entries.len(), "create tokens loaded");
                    *current = (Some(stamp), Arc::new(file));
                }
                Err(error) => {
                    tracing::warn!(path = %self.path.display(), %error, "the create tokens file is unreadable; refusing creates");
                    return None;
                }
            }
        }
        Some(current.1.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_round_trips_through_the_file_and_only_its_hash_is_stored() {
        let mut file = CreateTokenFile::default();
        let token = file.add("ci").unwrap();
        let text = file.render();
        assert!(!text.contains(&token), "the file never holds a token in clear");
        let read = CreateTokenFile::parse(&text).unwrap();
        assert_eq!(read, file);
        assert!(read.accepts(&token));
        assert!(!read.accepts("pbc_guess"));
        assert!(!read.accepts(""));
    }

    #[test]
    fn labels_are_unique_and_revoking_removes_the_token() {
        let mut file = CreateTokenFile::default();
        let token = file.add("alice").unwrap();
        assert!(file.add("alice").is_err());
        assert!(file.add("no spaces").is_err());
        assert!(file.revoke("alice"));
        assert!(!file.revoke("alice"));
        assert!(!file.accepts(&token));
    }

    #[test]
    fn malformed_lines_are_errors_with_their_line_number() {
        let error = CreateTokenFile::parse("# ok\nalice sha256:zz\n").unwrap_err();
        assert!(error.contains("line 2"), "{error}");
        assert!(CreateTokenFile::parse("alice\n").is_err());
    }

    #[test]
    fn the_gateway_view_follows_the_file_and_fails_closed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        let tokens = CreateTokens::new(path.clone());
        assert!(!tokens.accepts("anything"), "no file: nothing is accepted");
        let mut file = CreateTokenFile::default();
        let first = file.add("one").unwrap();
        file.save(&path).unwrap();
        assert!(tokens.accepts(&first));
        let second = file.add("two").unwrap();
        file.revoke("one");
        file.save(&path).unwrap();
        assert!(tokens.accepts(&second));
        assert!(!tokens.accepts(&first), "a revoked token stops working without a restart");
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_file_in_the_way_of_the_temp_file_is_refused_and_left_alone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens");
        let planted = dir.path().join(format!(".create-tokens.{}.tmp", std::process::id()));
        fs::write(&planted, "planted").unwrap();
        fs::set_permissions(&planted, fs::Permissions::from_mode(0o644)).unwrap();
        let mut file = CreateTokenFile::default();
        file.add("ci").unwrap();
        let error = file.save(&path).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        assert!(error.to_string().contains("remove it and retry"), "{error}");
        assert!(!path.exists(), "nothing replaced the tokens file");
        assert_eq!(fs::read_to_string(&planted).unwrap(), "planted", "not ours: left as it was");
    }
}
