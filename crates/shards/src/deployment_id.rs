//! `deployment-id` in a deployment's objects directory
//! (`pastebin-data/objects/deployment-id` for `pastebin up`): a random id
//! made at the first start, which a backup's manifest carries and a
//! restore compares, so that one instance's backup is never restored into
//! another's data (docs/operations.md#backups). It lives beside the objects,
//! not in a database: the one directory every part of a deployment shares,
//! and not lost with the key database a restore replaces.

use std::{
    io::{ErrorKind, Write},
    os::unix::fs::OpenOptionsExt,
    path::{Path, PathBuf},
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentId(String);

#[derive(Debug, thiserror::Error)]
pub enum DeploymentIdError {
    #[error("cannot read {path}: {error}")]
    Read { path: String, error: std::io::Error },
    #[error("cannot write {path}: {error}")]
    Write { path: String, error: std::io::Error },
    #[error("{path} does not hold a deployment id (`{found}`): restore it from a backup's manifest, or remove it")]
    Invalid { path: String, found: String },
}

impl DeploymentId {
    pub const FILE_NAME: &'static str = "deployment-id";

    /// An id as a manifest spells it; `None` unless it is one.
    pub fn parse(text: &str) -> Option<Self> {
        uuid::Uuid::parse_str(text.trim()).ok().map(|id| Self(id.hyphenated().to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    fn path(objects_dir: &Path) -> PathBuf {
        objects_dir.join(Self::FILE_NAME)
    }

    /// The id of the deployment whose objects are in `objects_dir`, if it has one.
    pub fn read(objects_dir: &Path) -> Result<Option<Self>, DeploymentIdError> {
        let path = Self::path(objects_dir);
        match std::fs::read_to_string(&path) {
            Ok(text) => Self::parse(&text)
                .map(Some)
                .ok_or_else(|| DeploymentIdError::Invalid { path: path.display().to_string(), found: text }),
            Err(error) if error.kind() == ErrorKind::NotFound => Ok(None),
            Err(error) => Err(DeploymentIdError::Read { path: path.display().to_string(), error }),
        }
    }

    /// The deployment's id, made now if it has none. Two processes making
    /// it at once agree: the file is created only if absent.
    pub fn read_or_create(objects_dir: &Path) -> Result<Self, DeploymentIdError> {
        if let Some(id) = Self::read(objects_dir)? {
            return Ok(id);
        }
        match Self(uuid::Uuid::new_v4().hyphenated().to_string()).write_new(objects_dir) {
            Err(DeploymentIdError::Write { error, .. }) if error.kind() == ErrorKind::AlreadyExists => {
                Self::read(objects_dir)?.ok_or_else(|| DeploymentIdError::Read {
                    path: Self::path(objects_dir).display().to_string(),
                    error: ErrorKind::NotFound.into(),
                })
            }
            written => written,
        }
    }

    /// Writes this id into `objects_dir`, which must not have one (0600).
    pub fn write_new(self, objects_dir: &Path) -> Result<Self, DeploymentIdError> {
        let path = Self::path(objects_dir);
        let write_error = |error| DeploymentIdError::Write { path: path.display().to_string(), error };
        let mut file =
            std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&path).map_err(write_error)?;
        file.write_all(format!("{}\n", self.0).as_bytes()).and_then(|()| file.sync_all()).map_err(write_error)?;
        Ok(self)
    }
}

impl std::fmt::Display for DeploymentId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn an_id_is_made_once_and_read_back_privately() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(DeploymentId::read(dir.path()).unwrap(), None);
        let made = DeploymentId::read_or_create(dir.path()).unwrap();
        assert_eq!(DeploymentId::read_or_create(dir.path()).unwrap(), made);
        assert_eq!(DeploymentId::read(dir.path()).unwrap(), Some(made.clone()));
        let mode = std::fs::metadata(dir.path().join(DeploymentId::FILE_NAME)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(made.clone().write_new(dir.path()).is_err(), "an id is never replaced");
        std::fs::write(dir.path().join(DeploymentId::FILE_NAME), "not an id").unwrap();
        assert!(matches!(DeploymentId::read(dir.path()), Err(DeploymentIdError::Invalid { .. })));
    }
}
