//! The object store: the bytes of a paste, one object per paste id, at `pastes/<id>`.
//!
//! The create saga (docs/design.md#saga, step 3) writes an object with a create-only [`ObjectStore::put`]
//! before the paste row exists, so an object can outlive an aborted create; the sweeper's
//! object reaper (docs/design.md#object-reaper) pages through [`ObjectStore::list`] and deletes the orphans.
//!
//! - [`LocalDirStore`] (`local`): a directory, for the embedded single-machine default.
//! - [`S3Store`] (`s3`): any S3-compatible service, through aws-sdk-s3.
//! - [`DeletePause`] (`delete_pause`): a backup's pause of a directory's deletes.
//! - [`CheckedS3Store`] (`probe`): an [`S3Store`] that writes no paste before the store
//!   has refused an overwrite of a probe object (docs/design.md#create-only-put).
//!
//! Both backends answer every failure as [`ObjectError::Refused`] (it did not happen; a
//! full local disk is [`ObjectError::StorageFull`], which did not happen either) or
//! [`ObjectError::Uncertain`] (it may have happened): the saga aborts on the first and
//! leaves the key pending on the second, so the two must never be confused.

mod delete_pause;
mod local;
mod probe;
mod s3;

pub use delete_pause::DeletePause;
pub use local::LocalDirStore;
pub use probe::{CheckedS3Store, CreateOnlyError, STORES_KNOWN_TO_HONOUR};
pub use s3::{S3Settings, S3Store};

/// The common prefix of every paste object; the reaper lists under it.
const PREFIX: &str = "pastes/";

/// Object key of a paste: `pastes/<id>`. Ids are opaque strings here (14 base62 chars in practice).
pub fn object_key(paste_id: &str) -> String {
    format!("{PREFIX}{paste_id}")
}

/// What a create-only PUT found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// This call created the object.
    Created,
    /// An object with this id was already there. For the saga this is success: an id is
    /// only ever written with the bytes of the one request hash that minted it.
    AlreadyExists,
}

/// One object as the reaper and reconcile see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectInfo {
    pub paste_id: String,
    /// When the object was written; the reaper's age floor is measured from here.
    pub created_at: chrono::DateTime<chrono::Utc>,
    pub size: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// The store answered and the operation did not happen (4xx other than the create-only conflict, bucket missing, permission...).
    #[error("object store refused: {0}")]
    Refused(String),
    /// We do not know whether it happened: timeout, connection reset, 5xx. The saga must treat this as "maybe".
    #[error("object store unreachable or uncertain: {0}")]
    Uncertain(String),
    /// The store had no room for the object (a local directory's disk is
    /// full): like [`Self::Refused`], it did not happen; apart so the client
    /// hears that the storage is full (docs/operations.md#a-full-disk).
    #[error("object store full: {0}")]
    StorageFull(String),
}

/// One object per paste id. No method retries on its own and none has its own deadline
/// beyond a short connect timeout: the caller wraps each call in its budget and the saga
/// owns the retry policy.
#[async_trait::async_trait]
pub trait ObjectStore: Send + Sync + 'static {
    /// Create-only PUT of `pastes/<id>`. An existing object is never overwritten.
    async fn put(&self, paste_id: &str, content: bytes::Bytes) -> Result<PutOutcome, ObjectError>;
    /// `None` when absent.
    async fn get(&self, paste_id: &str) -> Result<Option<bytes::Bytes>, ObjectError>;
    /// Idempotent: deleting an absent object is `Ok`.
    async fn delete(&self, paste_id: &str) -> Result<(), ObjectError>;
    /// One page of objects under `pastes/`, ordered by paste id (bytewise), starting strictly
    /// after `after`; at most `limit`. Page on with the last id returned; an empty page is
    /// the end (a short page is not: S3 may return fewer than asked).
    async fn list(&self, after: Option<&str>, limit: usize) -> Result<Vec<ObjectInfo>, ObjectError>;
}
