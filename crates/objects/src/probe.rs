//! Proof that an S3 store honours the create-only PUT before a create relies on it
//! (docs/design.md#create-only-put).
//!
//! Many S3-compatible servers accepted `If-None-Match: *` on PutObject for years and
//! ignored it, answering 200 and overwriting. Nothing in a single create tells the two
//! apart, so the store is asked once: a probe object is written twice with the header,
//! and the second write must be refused. [`CheckedS3Store`] holds the verdict and lets no
//! paste be written before it is known.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use tokio::sync::OnceCell;

use crate::{ObjectError, ObjectInfo, ObjectStore, PutOutcome, S3Store};

/// Outside `pastes/`, so the object reaper never lists a probe.
const PROBE_PREFIX: &str = "probes/create-only/";

/// Stores and versions known to refuse a second `If-None-Match: *` PUT
/// (docs/deployment.md#s3-servers says which were tested here).
pub const STORES_KNOWN_TO_HONOUR: &str = "SeaweedFS 3.97 or later (4.x under concurrent \
     writers; 4.48 is tested here), AWS S3 (since August 2024), MinIO (2024 releases on), \
     Ceph RGW, Cloudflare R2";

/// Why a store cannot be used, or why that is not known yet.
#[derive(Debug, thiserror::Error)]
pub enum CreateOnlyError {
    /// The store overwrote an object written with `If-None-Match: *`.
    #[error(
        "the object store (bucket {bucket}) overwrote an object written with `If-None-Match: *`: it does not \
         honour conditional writes, which keep every paste's bytes from being replaced \
         (docs/design.md#create-only-put). Stores known to honour them: {STORES_KNOWN_TO_HONOUR}. \
         Upgrade the store or point --s3-endpoint at one of those."
    )]
    Ignored { bucket: String },
    /// The probe could not finish: the store did not answer, or refused the probe.
    #[error("cannot tell yet whether the object store honours `If-None-Match: *`: {0}")]
    Unknown(#[from] ObjectError),
}

impl S3Store {
    /// Writes a fresh probe object twice with `If-None-Match: *`: the second write must be
    /// refused and the first bytes must remain. Removes the probe afterwards (a leftover
    /// one harms nothing: it is outside `pastes/`).
    pub async fn probe_create_only(&self) -> Result<(), CreateOnlyError> {
        let key = probe_key();
        let first = Bytes::from_static(b"first write");
        self.put_key(&key, first.clone()).await?;
        let second = self.put_key(&key, Bytes::from_static(b"second write")).await?;
        // A store that answers 412 and overwrites all the same is as bad as one that
        // answers 200, so the bytes are read back too.
        let kept = self.get_key(&key).await?;
        if let Err(error) = self.delete_key(&key).await {
            tracing::info!(%error, %key, "could not remove the create-only probe object; it harms nothing");
        }
        match (second, kept) {
            (PutOutcome::AlreadyExists, Some(kept)) if kept == first => Ok(()),
            _ => Err(CreateOnlyError::Ignored { bucket: self.bucket().to_owned() }),
        }
    }
}

/// Unique per process and call: two gateways probing one bucket at once must not
/// see each other's first write as their own.
fn probe_key() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    format!("{PROBE_PREFIX}{}-{nanos}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// An [`S3Store`] that writes no paste before the store has shown it refuses an
/// overwrite. The verdict is asked for once at start ([`CheckedS3Store::check`]); if the
/// store could not answer then, the first PUT asks again, and every PUT waits for it.
#[derive(Debug)]
pub struct CheckedS3Store {
    store: S3Store,
    /// Set only by a definite answer: a store that was unreachable is asked again.
    verdict: OnceCell<Verdict>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Honoured,
    Ignored,
}

impl CheckedS3Store {
    pub fn new(store: S3Store) -> Self {
        Self { store, verdict: OnceCell::new() }
    }

    /// `Ok` once the store has refused an overwrite; [`CreateOnlyError::Ignored`] for good
    /// once it has overwritten; [`CreateOnlyError::Unknown`] while it cannot be asked.
    pub async fn check(&self) -> Result<(), CreateOnlyError> {
        let verdict = self
            .verdict
            .get_or_try_init(|| async {
                match self.store.probe_create_only().await {
                    Ok(()) => Ok(Verdict::Honoured),
                    Err(CreateOnlyError::Ignored { .. }) => Ok(Verdict::Ignored),
                    Err(unknown) => Err(unknown),
                }
            })
            .await?;
        match verdict {
            Verdict::Honoured => Ok(()),
            Verdict::Ignored => Err(CreateOnlyError::Ignored { bucket: self.store.bucket().to_owned() }),
        }
    }
}

#[async_trait::async_trait]
impl ObjectStore for CheckedS3Store {
    async fn put(&self, paste_id: &str, content: Bytes) -> Result<PutOutcome, ObjectError> {
        match self.check().await {
            Ok(()) => self.store.put(paste_id, content).await,
            // The probe's own failure says nothing about this paste's PUT, which was not
            // sent; keeping its kind keeps "store unreachable" uncertain, as it always was.
            Err(CreateOnlyError::Unknown(error)) => Err(error),
            Err(ignored @ CreateOnlyError::Ignored { .. }) => Err(ObjectError::Refused(ignored.to_string())),
        }
    }

    async fn get(&self, paste_id: &str) -> Result<Option<Bytes>, ObjectError> {
        self.store.get(paste_id).await
    }

    async fn delete(&self, paste_id: &str) -> Result<(), ObjectError> {
        self.store.delete(paste_id).await
    }

    async fn list(&self, after: Option<&str>, limit: usize) -> Result<Vec<ObjectInfo>, ObjectError> {
        self.store.list(after, limit).await
    }
}
