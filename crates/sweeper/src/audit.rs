//! The sweeper's running cross-check of K, P and the objects: one slot per
//! round with `ctl reconcile`'s rules (`pastebin_shards::reconcile`), so a
//! full pass takes 256 rounds (about 21 minutes at the default 5 s) and each
//! round reads a 256th of the data. The counts of every slot's latest check
//! are summed into the divergence gauges the dashboard and the alerts use
//! (docs/operations.md#finding-and-repairing-lost-pastes). Read-only; kept in
//! memory only, since it is recomputed by the next pass.

use std::sync::Mutex;

use pastebin_core::Slot;
use pastebin_runtime::metrics as names;
use pastebin_shards::reconcile::{reconcile_slot, SlotReport};

use crate::Sweeper;

/// Lost pastes, missing objects and orphans: in one slot, or summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Divergence {
    pub lost_pastes: u64,
    pub missing_objects: u64,
    pub orphans: u64,
}

impl Divergence {
    fn of(report: &SlotReport) -> Self {
        Self {
            lost_pastes: report.lost.len() as u64,
            missing_objects: report.missing_objects.len() as u64,
            orphans: report.orphans.len() as u64,
        }
    }
}

/// Which slot is next, and what each slot's latest check found.
pub(crate) struct Audit {
    next: u8,
    found: [Divergence; 256],
}

impl Default for Audit {
    fn default() -> Self {
        Self { next: 0, found: [Divergence::default(); 256] }
    }
}

impl Audit {
    fn totals(&self) -> Divergence {
        self.found.iter().fold(Divergence::default(), |sum, slot| Divergence {
            lost_pastes: sum.lost_pastes + slot.lost_pastes,
            missing_objects: sum.missing_objects + slot.missing_objects,
            orphans: sum.orphans + slot.orphans,
        })
    }
}

impl Sweeper {
    /// Cross-checks the next slot and sets the gauges to the sums over every
    /// slot's latest check. A slot that cannot be read keeps its previous
    /// counts (a partial read would call a healthy paste lost).
    pub async fn audit_next_slot(&self) -> Divergence {
        let slot = {
            let mut audit = lock(&self.audit);
            let slot = audit.next;
            audit.next = audit.next.wrapping_add(1);
            Slot(slot)
        };
        let now = self.clock.now();
        let found =
            reconcile_slot(&self.slot_map(), self.objects.as_ref(), slot, now, self.settings.call_timeout).await;
        let totals = {
            let mut audit = lock(&self.audit);
            match found {
                Ok(report) => audit.found[usize::from(slot.0)] = Divergence::of(&report),
                Err(error) => tracing::warn!(%error, slot = slot.0, "cannot cross-check a slot; next pass"),
            }
            audit.totals()
        };
        for (kind, count) in
            [("lost_paste", totals.lost_pastes), ("missing_object", totals.missing_objects), ("orphan", totals.orphans)]
        {
            metrics::gauge!(names::DIVERGENT_IDS, "kind" => kind).set(count as f64);
        }
        totals
    }
}

/// The audit holds plain counts: a panic elsewhere cannot leave them torn.
fn lock(audit: &Mutex<Audit>) -> std::sync::MutexGuard<'_, Audit> {
    audit.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
