//! Whether the gateway can work (docs/deployment.md#readiness). Two checks:
//!
//! - [`Gateway::check_ready`] (required): it has its slot map and the object
//!   store answers. Without them no call can be served.
//! - [`Gateway::check_shards`] (advisory): every K and P shard serves. One
//!   shard down only leaves its slots unserved (those calls answer 503 +
//!   `Retry-After`); reads of other shards and cached pastes still work, so
//!   the gateway stays ready and names the shard instead. Taking every
//!   gateway out of service for one shard's outage cut off all of them.

use std::{sync::Arc, time::Duration};

use pastebin_shards::SlotMap;

use crate::Gateway;

/// Not a paste id (those are 14 characters), so the object is never there:
/// a GET of it asks the store to answer without touching a paste.
const PROBE_OBJECT: &str = "readyzprobe";
/// Each part gets this long; the slowest one decides how long a check takes.
const PART_TIMEOUT: Duration = Duration::from_secs(1);

impl Gateway {
    /// `Err` says the gateway has no slot map yet
    /// (docs/design.md#shard-identity) or cannot reach the object store.
    pub async fn check_ready(&self) -> Result<(), String> {
        self.slot_map()?;
        within_part(async { self.inner.objects.get(PROBE_OBJECT).await.map(drop).map_err(|_| "fails".to_owned()) })
            .await
            .map_err(|why| format!("object store {why}"))
    }

    /// `Err` names every K and P shard that does not serve right now, by
    /// address and range.
    pub async fn check_shards(&self) -> Result<(), String> {
        let slots = self.slot_map()?;
        // Borrowed by every check below, which names its shard by address
        // and range, never by list position (docs/operations.md#operator-tools).
        let slots = &*slots;
        let keys = slots.key_shards().iter().enumerate().map(|(shard, client)| async move {
            let answer = within_part(client.check_serving()).await;
            answer.map_err(|why| format!("key shard {} {why}", slots.key_shard_name(shard)))
        });
        let pastes = slots.paste_shards().iter().enumerate().map(|(shard, client)| async move {
            let answer = within_part(client.check_serving()).await;
            answer.map_err(|why| format!("paste shard {} {why}", slots.paste_shard_name(shard)))
        });
        let (keys, pastes) = tokio::join!(futures::future::join_all(keys), futures::future::join_all(pastes));
        let failures: Vec<String> = keys.into_iter().chain(pastes).filter_map(Result::err).collect();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        }
    }

    fn slot_map(&self) -> Result<Arc<SlotMap>, String> {
        self.inner.slots.get().ok_or_else(|| "waiting for every shard to say which slots it owns".to_owned())
    }
}

async fn within_part(check: impl std::future::Future<Output = Result<(), String>>) -> Result<(), String> {
    tokio::time::timeout(PART_TIMEOUT, check).await.unwrap_or_else(|_| Err("does not answer".to_owned()))
}
