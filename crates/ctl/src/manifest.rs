//! `manifest.json`, the last file `ctl backup` writes and the first `ctl
//! restore` reads (docs/operations.md#backups): which deployment, which
//! files, when each was taken, at which schema, and their checksums. This
//! one type writes and reads it, and holds the rules a restore checks
//! before it touches anything.

use std::{
    io::Read,
    path::{Path, PathBuf},
};

use chrono::{DateTime, Utc};
use pastebin_shards::DeploymentId;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::CtlError;

/// The version of this format; a restore refuses any other.
const FORMAT: u32 = 1;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    pub format: u32,
    /// The deployment's id (`objects/deployment-id`).
    pub deployment: String,
    /// The `pastebin` version that took it.
    pub made_by: String,
    /// The data directory of the `pastebin up` it is of; none for shards
    /// named one by one (`--key-database`, `--paste-database`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_dir: Option<PathBuf>,
    /// Every K shard's database, taken first.
    pub keys: Vec<DatabaseCopy>,
    /// Every P shard's database, taken after every K.
    pub pastes: Vec<DatabaseCopy>,
    /// The objects, copied after every P.
    pub objects: ObjectsCopy,
}

/// One SQLite database, copied by `VACUUM INTO`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct DatabaseCopy {
    /// Its name in the backup directory.
    pub file: String,
    /// Where it was taken from, and where a restore puts it back.
    pub source: PathBuf,
    /// Taken just before the copy began: the copy holds every commit made
    /// before it (and maybe a few after), so a lost-commits window from
    /// here loses nothing.
    pub snapshot_at: DateTime<Utc>,
    /// The highest migration applied to it.
    pub schema_version: i64,
    pub sha256: String,
    pub bytes: u64,
}

/// The objects directory's paste objects, copied one by one while deletes
/// were paused; their checksums are listed in `listing` (`sha256sum -c`
/// reads it from the backup directory).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ObjectsCopy {
    /// Their directory in the backup (`objects`, holding `pastes/`).
    pub dir: String,
    /// The objects directory they were copied from.
    pub source: PathBuf,
    /// When the listing of the objects began.
    pub snapshot_at: DateTime<Utc>,
    pub count: u64,
    pub bytes: u64,
    pub listing: String,
    pub listing_sha256: String,
}

impl Manifest {
    pub const FILE_NAME: &'static str = "manifest.json";

    pub fn new(
        deployment: &DeploymentId,
        data_dir: Option<PathBuf>,
        keys: Vec<DatabaseCopy>,
        pastes: Vec<DatabaseCopy>,
        objects: ObjectsCopy,
    ) -> Self {
        Self {
            format: FORMAT,
            deployment: deployment.to_string(),
            made_by: format!("pastebin {}", env!("CARGO_PKG_VERSION")),
            data_dir,
            keys,
            pastes,
            objects,
        }
    }

    /// Written aside and renamed: a backup has a manifest only once every
    /// file it names is complete.
    pub fn write(&self, backup: &Path) -> Result<(), CtlError> {
        let mut text = serde_json::to_vec_pretty(self).map_err(|error| CtlError::Failed(error.to_string()))?;
        text.push(b'\n');
        let aside = backup.join(format!("{}.new", Self::FILE_NAME));
        let written = pastebin_runtime::files::write_private(&aside, &text)
            .and_then(|()| std::fs::rename(&aside, backup.join(Self::FILE_NAME)))
            .and_then(|()| std::fs::File::open(backup)?.sync_all());
        written.map_err(|error| {
            CtlError::Failed(format!("cannot write {}/{}: {error}", backup.display(), Self::FILE_NAME))
        })
    }

    pub fn read(backup: &Path) -> Result<Self, CtlError> {
        let path = backup.join(Self::FILE_NAME);
        let text = std::fs::read_to_string(&path).map_err(|error| {
            CtlError::Failed(format!(
                "cannot read {} ({error}): {} is not a backup, or one that did not finish; restore another",
                path.display(),
                backup.display()
            ))
        })?;
        let manifest: Self = serde_json::from_str(&text).map_err(|error| {
            CtlError::Failed(format!("{} is not a backup manifest ({error}); restore another backup", path.display()))
        })?;
        if manifest.format != FORMAT {
            return Err(CtlError::Failed(format!(
                "{} is in format {}, which this pastebin does not know (it reads {FORMAT}): restore it with the \
                 version that took it ({})",
                path.display(),
                manifest.format,
                manifest.made_by
            )));
        }
        Ok(manifest)
    }

    pub fn deployment(&self) -> Result<DeploymentId, CtlError> {
        DeploymentId::parse(&self.deployment).ok_or_else(|| {
            CtlError::Failed(format!(
                "the manifest names no valid deployment (`{}`): restore another backup",
                self.deployment
            ))
        })
    }

    /// K, then P, then the objects (docs/operations.md#backups): a P older
    /// than a K has lost pastes that K's done keys name, and objects older
    /// than P lose the bytes of its live rows.
    pub fn check_order(&self) -> Result<(), CtlError> {
        let broken = |later: &str, later_at: DateTime<Utc>, earlier: &str, earlier_at: DateTime<Utc>, breaks: &str| {
            CtlError::Failed(format!(
                "this backup breaks the order K, then P, then the objects: {later} was taken at {}, before {earlier} \
                 at {}, so {breaks} (docs/operations.md#backups). Take a new backup with `pastebin ctl backup`, \
                 which takes them in order",
                later_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                earlier_at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
            ))
        };
        let paste_before_key = self.keys.iter().find_map(|key| {
            self.pastes.iter().find(|paste| paste.snapshot_at < key.snapshot_at).map(|paste| (key, paste))
        });
        if let Some((key, paste)) = paste_before_key {
            return Err(broken(
                &format!("P's {}", paste.file),
                paste.snapshot_at,
                &format!("K's {}", key.file),
                key.snapshot_at,
                "done keys could name pastes P does not have",
            ));
        }
        let objects = &self.objects;
        if let Some(copy) = self.keys.iter().chain(&self.pastes).find(|copy| objects.snapshot_at < copy.snapshot_at) {
            return Err(broken(
                "the objects' copy",
                objects.snapshot_at,
                &copy.file,
                copy.snapshot_at,
                "live pastes could have lost their bytes",
            ));
        }
        Ok(())
    }

    /// Refuses a backup taken at a schema newer than this binary's: its
    /// migrations are unknown here, and the shard would refuse to start.
    pub fn check_schemas(&self, keys_at: i64, pastes_at: i64) -> Result<(), CtlError> {
        let newer = self
            .keys
            .iter()
            .map(|copy| (copy, keys_at))
            .chain(self.pastes.iter().map(|copy| (copy, pastes_at)))
            .find(|(copy, known)| copy.schema_version > *known);
        match newer {
            Some((copy, known)) => Err(CtlError::Failed(format!(
                "{} is at schema {}, newer than this pastebin knows ({known}): restore it with {} or newer",
                copy.file, copy.schema_version, self.made_by
            ))),
            None => Ok(()),
        }
    }
}

/// The SHA-256 of a file, in hex, and its length.
pub(crate) fn sha256_of(path: &Path) -> std::io::Result<(String, u64)> {
    let mut file = std::fs::File::open(path)?;
    let (mut hasher, mut buffer, mut bytes) = (Sha256::new(), vec![0; 64 * 1024], 0u64);
    loop {
        let read = file.read(&mut buffer)?;
        if read == 0 {
            return Ok((hex::encode(hasher.finalize()), bytes));
        }
        hasher.update(&buffer[..read]);
        bytes += read as u64;
    }
}

/// Refuses a file of the backup whose bytes are not the ones the manifest names.
pub(crate) fn check_sha256(backup: &Path, file: &str, expected: &str) -> Result<(), CtlError> {
    let path = backup.join(file);
    let (found, _) = sha256_of(&path).map_err(|error| {
        CtlError::Failed(format!("cannot read {} ({error}): restore another backup", path.display()))
    })?;
    if found != expected {
        return Err(CtlError::Failed(format!(
            "{} does not match the manifest's checksum (sha256 {expected}, the file's {found}): this backup is \
             damaged; restore another",
            path.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy(file: &str, minute: i64) -> DatabaseCopy {
        DatabaseCopy {
            file: file.into(),
            source: PathBuf::from("/data").join(file),
            snapshot_at: DateTime::from_timestamp(1_900_000_000 + minute * 60, 0).unwrap(),
            schema_version: 20261203000000,
            sha256: String::new(),
            bytes: 0,
        }
    }

    fn manifest(k: i64, p: i64, objects: i64) -> Manifest {
        let objects = ObjectsCopy {
            dir: "objects".into(),
            source: "/data/objects".into(),
            snapshot_at: DateTime::from_timestamp(1_900_000_000 + objects * 60, 0).unwrap(),
            count: 0,
            bytes: 0,
            listing: "objects.sha256".into(),
            listing_sha256: String::new(),
        };
        let id = DeploymentId::parse("5b1f6c1e-3c1a-4d8e-9a55-0f7c1b2a3d4e").unwrap();
        Manifest::new(&id, Some("/data".into()), vec![copy("keys.db", k)], vec![copy("pastes.db", p)], objects)
    }

    #[test]
    fn the_order_is_k_then_p_then_the_objects() {
        manifest(0, 1, 2).check_order().unwrap();
        manifest(0, 0, 0).check_order().unwrap();
        let error = manifest(1, 0, 2).check_order().unwrap_err().to_string();
        assert!(error.contains("P's pastes.db was taken at") && error.contains("before K's keys.db"), "{error}");
        let error = manifest(0, 2, 1).check_order().unwrap_err().to_string();
        assert!(error.contains("the objects' copy was taken at") && error.contains("before pastes.db"), "{error}");
    }

    #[test]
    fn a_manifest_reads_back_as_written_and_newer_schemas_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let written = manifest(0, 1, 2);
        written.write(dir.path()).unwrap();
        assert_eq!(Manifest::read(dir.path()).unwrap(), written);
        written.check_schemas(20261203000000, 20261203000000).unwrap();
        let error = written.check_schemas(20261202000000, 20261203000000).unwrap_err().to_string();
        assert!(error.contains("keys.db is at schema 20261203000000, newer than"), "{error}");
    }
}
