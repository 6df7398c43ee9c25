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
}
