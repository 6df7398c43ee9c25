//! The object store, in process: a map with the real store's contract
//! (create-only PUT, list in id order) and its failures (refusals,
//! timeouts, writes whose answer is lost). Every call takes simulated time.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use bytes::Bytes;
use chrono::{DateTime, Utc};
use pastebin_core::Clock;
use pastebin_objects::{ObjectError, ObjectInfo, ObjectStore, PutOutcome};
use rand::{rngs::StdRng, Rng, SeedableRng};

use crate::clock::HostClock;

struct Stored {
    content: Bytes,
    created_at: DateTime<Utc>,
}

#[derive(Default)]
struct Bucket {
    objects: BTreeMap<String, Stored>,
    /// Every id whose object was ever deleted, for the history checker.
    deleted: Vec<String>,
    /// While set, every call fails as uncertain, some after doing their work.
    outage: bool,
}

/// The shared in-process object store. Clones share the bucket.
#[derive(Clone)]
pub struct SimObjects {
    bucket: Arc<Mutex<Bucket>>,
    faults: Arc<Mutex<StdRng>>,
    clock: HostClock,
}

/// The chance that one call fails while the store is up.
const FAULT_RATE: f64 = 0.03;

impl SimObjects {
    pub fn new(seed: u64, clock: HostClock) -> Self {
        Self { bucket: Arc::default(), faults: Arc::new(Mutex::new(StdRng::seed_from_u64(seed))), clock }
    }

    fn bucket(&self) -> MutexGuard<'_, Bucket> {
        self.bucket.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn set_outage(&self, outage: bool) {
        self.bucket().outage = outage;
    }

    pub fn content(&self, paste_id: &str) -> Option<Bytes> {
        self.bucket().objects.get(paste_id).map(|stored| stored.content.clone())
    }

    pub fn deleted(&self) -> Vec<String> {
        self.bucket().deleted.clone()
    }

    /// How one call goes: its latency, and whether it fails before or
    /// after its effect.
    fn draw(&self) -> (Duration, Fault) {
        let mut rng = self.faults.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let latency = Duration::from_millis(rng.random_range(1..30));
        let roll: f64 = rng.random();
        let fault = if self.bucket().outage {
            if roll < 0.5 {
                Fault::UncertainBefore
            } else {
                Fault::UncertainAfter
            }
        } else if roll < FAULT_RATE / 3.0 {
            Fault::Refused
        } else if roll < FAULT_RATE * 2.0 / 3.0 {
            Fault::UncertainBefore
        } else if roll < FAULT_RATE {
            Fault::UncertainAfter
        } else {
            Fault::None
        };
        (latency, fault)
    }

    /// Runs `effect` as the store would: after a latency, unless the call
    /// fails first; an uncertain failure may come after the effect.
    async fn call<T>(&self, effect: impl FnOnce(&mut Bucket) -> T) -> Result<T, ObjectError> {
        let (latency, fault) = self.draw();
        tokio::time::sleep(latency).await;
        match fault {
            Fault::Refused => Err(ObjectError::Refused("simulated refusal".into())),
            Fault::UncertainBefore => Err(ObjectError::Uncertain("simulated timeout".into())),
            Fault::UncertainAfter => {
                effect(&mut self.bucket());
                Err(ObjectError::Uncertain("simulated lost answer".into()))
            }
            Fault::None => Ok(effect(&mut self.bucket())),
        }
    }
}

enum Fault {
    None,
    Refused,
    UncertainBefore,
    UncertainAfter,
}

#[async_trait::async_trait]
impl ObjectStore for SimObjects {
    async fn put(&self, paste_id: &str, content: Bytes) -> Result<PutOutcome, ObjectError> {
        self.call(|bucket| {
            if bucket.objects.contains_key(paste_id) {
                PutOutcome::AlreadyExists
            } else {
                bucket.objects.insert(paste_id.to_owned(), Stored { content, created_at: self.clock.now() });
                PutOutcome::Created
            }
        })
        .await
    }

    async fn get(&self, paste_id: &str) -> Result<Option<Bytes>, ObjectError> {
        self.call(|bucket| bucket.objects.get(paste_id).map(|stored| stored.content.clone())).await
    }

    async fn delete(&self, paste_id: &str) -> Result<(), ObjectError> {
        self.call(|bucket| {
            if bucket.objects.remove(paste_id).is_some() {
                bucket.deleted.push(paste_id.to_owned());
            }
        })
        .await
    }

    async fn list(&self, after: Option<&str>, limit: usize) -> Result<Vec<ObjectInfo>, ObjectError> {
        let after = after.map(str::to_owned);
        self.call(|bucket| {
            let start = match &after {
                Some(after) => std::ops::Bound::Excluded(after.clone()),
                None => std::ops::Bound::Unbounded,
            };
            bucket
                .objects
                .range((start, std::ops::Bound::Unbounded))
                .take(limit)
                .map(|(id, stored)| ObjectInfo {
                    paste_id: id.clone(),
                    created_at: stored.created_at,
                    size: stored.content.len() as u64,
                })
                .collect()
        })
        .await
    }
}
