//! The authority in one process: a linearizable register per kind, for
//! unit tests and the deterministic simulation, behind the same
//! [`Authority`] the shards use.

use std::{collections::HashMap, sync::Mutex};

use futures::{stream::BoxStream, StreamExt};
use tokio::sync::watch;

use crate::{
    authority::{Authority, AuthorityError, Read, Revision, Swap},
    grants::{Kind, Topology},
};

#[derive(Default)]
pub struct MemoryAuthority {
    kinds: Mutex<HashMap<Kind, Stored>>,
    revision: Mutex<i64>,
}

struct Stored {
    revision: i64,
    changes: watch::Sender<Option<Topology>>,
}

impl MemoryAuthority {
    fn with_kind<T>(&self, kind: Kind, f: impl FnOnce(&mut Stored) -> T) -> T {
        // A panic while holding it cannot leave a half-written topology: each change is one assignment.
        let mut kinds = self.kinds.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let stored = kinds.entry(kind).or_insert_with(|| Stored { revision: 0, changes: watch::Sender::new(None) });
        f(stored)
    }

    fn next_revision(&self) -> i64 {
        let mut revision = self.revision.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *revision += 1;
        *revision
    }

    fn read_now(stored: &Stored) -> Read {
        let topology = stored.changes.borrow().clone();
        let revision = topology.is_some().then_some(stored.revision);
        Read { topology, revision }
    }
}

#[async_trait::async_trait]
impl Authority for MemoryAuthority {
    async fn read(&self, kind: Kind) -> Result<Read, AuthorityError> {
        Ok(self.with_kind(kind, |stored| Self::read_now(stored)))
    }

    async fn swap(&self, kind: Kind, expected: Revision, next: &Topology) -> Result<Swap, AuthorityError> {
        let revision = self.next_revision();
        Ok(self.with_kind(kind, |stored| {
            let now = Self::read_now(stored);
            if now.revision != expected {
                return Swap::Changed(Box::new(now));
            }
            stored.revision = revision;
            stored.changes.send_replace(Some(next.clone()));
            Swap::Written(revision)
        }))
    }

    async fn watch(&self, kind: Kind) -> Result<BoxStream<'static, Result<Topology, AuthorityError>>, AuthorityError> {
        let changes = self.with_kind(kind, |stored| stored.changes.subscribe());
        let stream =
            tokio_stream::wrappers::WatchStream::new(changes).filter_map(|topology| async { topology.map(Ok) });
        Ok(stream.boxed())
    }

    fn describe(&self) -> String {
        "the in-process topology".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use pastebin_core::{OwnedSlots, SlotRange};

    use super::*;
    use crate::authority::change;

    #[tokio::test]
    async fn a_swap_from_a_stale_read_is_refused_and_change_decides_again() {
        let authority = MemoryAuthority::default();
        let first = Topology::initial([("a".to_owned(), OwnedSlots::Range(SlotRange::ALL))]).unwrap();
        assert_eq!(authority.swap(Kind::Key, None, &first).await.unwrap(), Swap::Written(1));
        let stale = authority.swap(Kind::Key, None, &first).await.unwrap();
        assert!(matches!(stale, Swap::Changed(read) if read.revision == Some(1)));
        let mut watch = authority.watch(Kind::Key).await.unwrap();
        assert_eq!(watch.next().await.unwrap().unwrap().version, 1);
        let changed =
            change(&authority, Kind::Key, |now| Ok(Some(Topology { version: now.version + 1, ..now.clone() })))
                .await
                .unwrap();
        assert_eq!(changed.version, 2);
        assert_eq!(watch.next().await.unwrap().unwrap().version, 2);
        assert!(authority.read(Kind::Paste).await.unwrap().topology.is_none());
    }
}
