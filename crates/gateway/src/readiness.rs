//! Whether the gateway can serve every request: each slot's K shard and P
//! shard serve, and the object store answers (docs/deployment.md#readiness).
//! Every slot maps to exactly one shard of each kind, so one shard that
//! cannot work leaves some slots unserved and the gateway not ready.

use std::time::Duration;

use crate::Gateway;

/// Not a paste id (those are 14 characters), so the object is never there:
/// a GET of it asks the store to answer without touching a paste.
const PROBE_OBJECT: &str = "readyzprobe";
/// Each part gets this long; the slowest one decides how long a check takes.
const PART_TIMEOUT: Duration = Duration::from_secs(1);

impl Gateway {
    /// `Err` names every part the gateway cannot work with right now, or
    /// says it has no slot map yet (docs/design.md#shard-identity).
    pub async fn check_ready(&self) -> Result<(), String> {
        let slots =
            self.inner.slots.get().ok_or_else(|| "waiting for every shard to say which slots it owns".to_owned())?;
        let keys = slots.key_shards().iter().enumerate().map(|(shard, client)| async move {
            within_part(client.check_serving()).await.map_err(|why| format!("key shard {shard} {why}"))
        });
        let pastes = slots.paste_shards().iter().enumerate().map(|(shard, client)| async move {
            within_part(client.check_serving()).await.map_err(|why| format!("paste shard {shard} {why}"))
        });
        let objects = async {
            within_part(async { self.inner.objects.get(PROBE_OBJECT).await.map(drop).map_err(|_| "fails".to_owned()) })
                .await
                .map_err(|why| format!("object store {why}"))
        };
        let (keys, pastes, objects) =
            tokio::join!(futures::future::join_all(keys), futures::future::join_all(pastes), objects);
        let failures: Vec<String> =
            keys.into_iter().chain(pastes).chain(std::iter::once(objects)).filter_map(Result::err).collect();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join("; "))
        }
    }
}

async fn within_part(check: impl std::future::Future<Output = Result<(), String>>) -> Result<(), String> {
    tokio::time::timeout(PART_TIMEOUT, check).await.unwrap_or_else(|_| Err("does not answer".to_owned()))
}
