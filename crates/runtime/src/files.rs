//! Files that hold secrets (docs/security.md#private-files): the shard
//! databases keep stored 201 bodies with raw delete tokens for 25 h, so
//! every directory a part creates is 0700 and every file 0600, whatever the
//! umask, and an existing one is tightened to that on start.

use std::{
    fs::{self, DirBuilder, OpenOptions},
    io::{self, Write},
    os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
    path::Path,
};

/// Creates `dir` (and missing parents) as 0700, or makes an existing one 0700.
pub fn private_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700))
}

/// Creates `path` empty as 0600 if it is missing, or makes it 0600.
pub fn private_file(path: &Path) -> io::Result<()> {
    OpenOptions::new().create(true).append(true).mode(0o600).open(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))
}

/// Writes `bytes` to `path` as a 0600 file (replacing what was there).
pub fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600))?;
    file.write_all(bytes)?;
    file.sync_all()
}

/// Why a private socket could not be made.
#[derive(Debug, thiserror::Error)]
pub enum SocketError {
    #[error(
        "{path} is {len} bytes long, over the {max}-byte limit of a Unix socket path: choose a shorter --data-dir"
    )]
    PathTooLong { path: String, len: usize, max: usize },
    #[error("{path} answers: another process serves this data directory; stop it or choose another --data-dir")]
    InUse { path: String },
    #[error("cannot listen on {path}: {error} (is the directory writable?)")]
    Bind { path: String, error: io::Error },
}

/// The longest path `sun_path` holds, without its terminating NUL.
const MAX_SOCKET_PATH: usize = 107;

/// Listens on a Unix socket at `path`, 0600 whatever the umask: the
/// socket's mode and the 0700 directory around it are the credential, so
/// only this account can connect (docs/security.md#local-sockets). A
/// socket file left by a process that is gone is replaced; one that still
/// answers is not taken over.
pub fn private_socket(path: &Path) -> Result<tokio::net::UnixListener, SocketError> {
    let shown = path.display().to_string();
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(SocketError::PathTooLong { path: shown, len, max: MAX_SOCKET_PATH });
    }
    if std::os::unix::net::UnixStream::connect(path).is_ok() {
        return Err(SocketError::InUse { path: shown });
    }
    let bind_error = |error| SocketError::Bind { path: shown.clone(), error };
    match fs::remove_file(path) {
        Err(error) if error.kind() != io::ErrorKind::NotFound => return Err(bind_error(error)),
        _ => {}
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(bind_error)?;
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).map_err(bind_error)?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn created_and_existing_paths_end_up_private() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/b");
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);

        let file = dir.join("keys.db");
        fs::write(&file, b"x").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
        private_file(&file).unwrap();
        assert_eq!((mode(&file), fs::read(&file).unwrap()), (0o600, b"x".to_vec()), "kept, tightened");

        let written = dir.join("endpoints.json");
        write_private(&written, b"{}").unwrap();
        assert_eq!(mode(&written), 0o600);
    }

    #[tokio::test]
    async fn a_socket_is_private_replaces_a_stale_one_and_never_a_live_one() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("keys.sock");
        let first = private_socket(&path).unwrap();
        assert_eq!(mode(&path), 0o600);
        assert!(matches!(private_socket(&path), Err(SocketError::InUse { .. })), "a live socket is kept");
        drop(first);
        let _second = private_socket(&path).expect("the file of a closed socket is replaced");
        let long = root.path().join("x".repeat(MAX_SOCKET_PATH));
        let error = private_socket(&long).unwrap_err().to_string();
        assert!(error.contains("choose a shorter --data-dir"), "{error}");
    }
}
