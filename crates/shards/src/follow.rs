//! Routers follow the topology by a watch (docs/design.md#routers-watch-the-topology):
//! a gateway or sweeper started with `--topology` learns of a move when etcd
//! records it, not when a shard first refuses a call. Each change of a
//! kind's topology makes the map be discovered again, until what the shards
//! answer agrees with what the topology grants them: the shards follow the
//! same watch, so they agree within moments, and a map is never built from
//! a grant a shard has not taken up yet. The shards' own refusals stay the
//! safety net for the moments between.

use std::{sync::Arc, time::Duration};

use futures::StreamExt;
use pastebin_core::{Slot, SLOT_COUNT};
use pastebin_topology::{Authority, Kind, Topology};

use crate::{SlotMap, SlotMapCell};

/// How long the map is asked to agree with one topology before a warning.
const AGREEMENT_PATIENCE: Duration = Duration::from_secs(10);
/// How long a lost watch waits before it watches again.
const WATCH_AGAIN_AFTER: Duration = Duration::from_secs(1);

/// Follows both kinds' topologies into `cell` for as long as the process
/// runs. Until the authority answers, the map is the one the shards
/// described, each from the grant it confirmed; that is said once.
pub fn follow_topology(cell: SlotMapCell, authority: Arc<dyn Authority>) {
    for kind in Kind::ALL {
        tokio::spawn(follow_kind(cell.clone(), authority.clone(), kind));
    }
}

async fn follow_kind(cell: SlotMapCell, authority: Arc<dyn Authority>, kind: Kind) {
    let mut lost_since: Option<tokio::time::Instant> = None;
    loop {
        match authority.watch(kind).await {
            Ok(mut changes) => {
                while let Some(Ok(topology)) = changes.next().await {
                    if lost_since.take().is_some() {
                        tracing::info!(%kind, "the topology store answers again: routing follows it");
                    }
                    agree_with(&cell, kind, &topology).await;
                }
            }
            Err(error) if lost_since.is_none() => tracing::warn!(
                %kind,
                %error,
                "cannot watch the topology: routing by what the shards say they own (each serves only the grant \
                 it confirmed) until it answers"
            ),
            Err(_) => {}
        }
        lost_since.get_or_insert_with(tokio::time::Instant::now);
        tokio::time::sleep(WATCH_AGAIN_AFTER).await;
    }
}

/// Discovers the map again until its `kind` owners are the topology's.
async fn agree_with(cell: &SlotMapCell, kind: Kind, topology: &Topology) {
    if cell.get().is_some_and(|map| agrees(&map, kind, topology)) {
        return;
    }
    let started = tokio::time::Instant::now();
    let mut delay = Duration::from_millis(20);
    loop {
        cell.refresh().await;
        if cell.get().is_some_and(|map| agrees(&map, kind, topology)) {
            tracing::debug!(%kind, version = topology.version, "slot map follows the topology");
            return;
        }
        if started.elapsed() >= AGREEMENT_PATIENCE {
            tracing::warn!(
                %kind,
                version = topology.version,
                "the shards have not taken up the topology's grants within {AGREEMENT_PATIENCE:?}: is every shard \
                 it lists in this process's shard list, with the address it advertises (`pastebin ctl topology \
                 show`)? Routing by what the shards say meanwhile"
            );
            return;
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(500));
    }
}

/// Whether every slot of `kind` routes to the shard the topology grants it to.
fn agrees(map: &SlotMap, kind: Kind, topology: &Topology) -> bool {
    (0..SLOT_COUNT).map(|index| Slot(index as u8)).all(|slot| {
        let (owner, addresses) = match kind {
            Kind::Key => (map.key_owner(slot), map.key_addresses()),
            Kind::Paste => (map.paste_owner(slot), map.paste_addresses()),
        };
        owner.map(|index| addresses[index].as_str()) == topology.owner(slot)
    })
}
