//! Where K, P and the object store disagree about ids, one slot at a time
//! (docs/operations.md#finding-and-repairing-lost-pastes). Each slot is read
//! on the K shard and the P shard that own it, and under the slot's prefix
//! in the object store, in pages: a deployment of millions of rows is read
//! 256 bounded pieces at a time. Read-only.
//!
//! What counts, exactly:
//! - **lost paste**: a done key whose paste id has no row on P (live or
//!   tombstone). The product answered 201 for it; P lost the row. (A
//!   tombstone outlives the key that minted its id, so a done key always
//!   finds at least a tombstone unless the row was lost.)
//! - **orphan**: a live paste that no key names although it was created less
//!   than [`ORPHAN_WINDOW`] ago. A key is kept at least 25 h after it was
//!   resolved, which is after its paste was inserted, so a younger paste
//!   without a key means K lost the key; an older one may simply have
//!   outlived its retired key and is not counted. Orphans are grouped with
//!   the other live pastes of the slot that have the same content hash:
//!   likely duplicates minted by a retry after the loss.
//! - **missing object**: an id that a done key names or a live row holds,
//!   not tombstoned, whose object is not in the store (a tombstone's object
//!   is gone on purpose). A lost paste whose object is missing cannot be
//!   repaired.
//! - **pending key whose paste exists**: the sweeper marks it done.
//! - **orphan object**: an object no live row holds; the reaper deletes it
//!   behind a tombstone once it is past the age floor (unless a done key
//!   names its id: then it is a lost paste's only copy).
//!
//! Order of the reads: K, then P, then the objects, then again whatever a
//! finding depends on. A key done when K was read had its row and its
//! object written before, so "lost" is never a create in flight. An orphan
//! candidate (P read after K) is checked against a second read of K, so a
//! create that began after the first read is not one. Missing and orphan
//! objects are checked against a second read of P, so a paste deleted or
//! inserted while the objects were listed is not one.

use std::{
    collections::{HashMap, HashSet},
    time::Duration,
};

use chrono::{DateTime, Utc};
use pastebin_core::{IdempotencyKey, KeyState, PasteId, Slot, KEY_RETENTION};
use pastebin_keys::SlotKey;
use pastebin_objects::{ObjectError, ObjectInfo, ObjectStore};
use pastebin_pastes::{IdFate, SlotRow};
use pastebin_runtime::grpc::CallError;

use crate::SlotMap;

/// Rows per page on K, on P and in the object store.
pub const PAGE: u32 = 1000;
/// A live paste younger than this must have its key on K: the 25 h key
/// retention less a margin for the clocks of K, P and the reader.
pub const ORPHAN_WINDOW: Duration = Duration::from_secs(KEY_RETENTION.as_secs() - 10 * 60);

/// A done key whose paste row P does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostPaste {
    pub paste_id: PasteId,
    pub key: IdempotencyKey,
    /// False when the object is missing too: nothing is left to rebuild from.
    pub object_present: bool,
}

/// A live paste no key names, and the live pastes of its slot with the same content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    pub paste_id: PasteId,
    pub content_sha256: [u8; 32],
    pub created_at: DateTime<Utc>,
    /// Other live pastes of the slot with the same content hash.
    pub same_content: Vec<PasteId>,
}

/// An id whose object should be in the store and is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingObject {
    pub paste_id: PasteId,
    /// A done key names it (else only a live row holds it).
    pub key_done: bool,
}

/// An object no live row holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrphanObject {
    pub object: ObjectInfo,
    /// A pending key names its id: the sweeper resolves the key first.
    pub key_pending: bool,
    /// A done key names its id: the only copy of a lost paste, never to reap.
    pub key_done: bool,
}

/// What one slot's cross-check found, and how much it read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlotReport {
    pub lost: Vec<LostPaste>,
    pub orphans: Vec<Orphan>,
    pub missing_objects: Vec<MissingObject>,
    /// Pending keys whose paste row is live, any age (the caller judges the age).
    pub pending_with_paste: Vec<SlotKey>,
    pub orphan_objects: Vec<OrphanObject>,
    pub keys_read: u64,
    pub rows_read: u64,
    pub objects_read: u64,
}

/// Which part could not be read; the slot's report is then not made at all
/// (a partial one would call a healthy paste lost).
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("K shard {1} unreachable: {2}")]
    KeyShard(usize, String, CallError),
    #[error("P shard {1} unreachable: {2}")]
    PasteShard(usize, String, CallError),
    #[error("object store: {0}")]
    Objects(ObjectError),
}

/// Cross-checks `slot`; every call carries `call_timeout`.
pub async fn reconcile_slot(
    slots: &SlotMap,
    objects: &dyn ObjectStore,
    slot: Slot,
    now: DateTime<Utc>,
    call_timeout: Duration,
) -> Result<SlotReport, ReconcileError> {
    let keys = read_keys(slots, slot, call_timeout).await?;
    let rows = read_rows(slots, slot, call_timeout).await?;
    let stored = read_objects(objects, slot, call_timeout).await?;
    let mut report = SlotReport {
        keys_read: keys.len() as u64,
        rows_read: rows.len() as u64,
        objects_read: stored.len() as u64,
        ..SlotReport::default()
    };
    let stored_ids: HashSet<&str> = stored.iter().map(|object| object.paste_id.as_str()).collect();
    let fate_of: HashMap<&PasteId, IdFate> = rows.iter().map(|row| (&row.id, row.fate)).collect();
    for key in &keys {
        let fate = fate_of.get(&key.paste_id).copied();
        match (key.state, fate) {
            (KeyState::Done, None) => report.lost.push(LostPaste {
                paste_id: key.paste_id.clone(),
                key: key.key,
                object_present: stored_ids.contains(key.paste_id.as_str()),
            }),
            (KeyState::Pending, Some(IdFate::Live)) => report.pending_with_paste.push(key.clone()),
            _ => {}
        }
    }
    report.orphans = orphans(slots, slot, &keys, &rows, now, call_timeout).await?;

    // Ids whose object should be there, and objects no live row holds.
    let done: HashSet<&PasteId> = keys.iter().filter(|k| k.state == KeyState::Done).map(|k| &k.paste_id).collect();
    let missing: Vec<&PasteId> = done
        .iter()
        .copied()
        .filter(|id| fate_of.get(id) != Some(&IdFate::Tombstoned))
        .chain(rows.iter().filter(|row| row.fate == IdFate::Live && !done.contains(&row.id)).map(|row| &row.id))
        .filter(|id| !stored_ids.contains(id.as_str()))
        .collect();
    let unheld: Vec<&ObjectInfo> = stored.iter().filter(|object| !live_holds(&fate_of, &object.paste_id)).collect();
    if missing.is_empty() && unheld.is_empty() {
        return Ok(report);
    }
    let reread = read_rows(slots, slot, call_timeout).await?;
    let fate_now: HashMap<&PasteId, IdFate> = reread.iter().map(|row| (&row.id, row.fate)).collect();
    report.missing_objects = missing
        .into_iter()
        .filter(|id| fate_now.get(id) != Some(&IdFate::Tombstoned))
        .filter(|id| done.contains(id) || fate_now.get(id) == Some(&IdFate::Live))
        .map(|id| MissingObject { paste_id: id.clone(), key_done: done.contains(id) })
        .collect();
    let state_of: HashMap<&str, KeyState> = keys.iter().map(|k| (k.paste_id.as_str(), k.state)).collect();
    report.orphan_objects = unheld
        .into_iter()
        .filter(|object| !live_holds(&fate_now, &object.paste_id))
        .map(|object| OrphanObject {
            object: object.clone(),
            key_pending: state_of.get(object.paste_id.as_str()) == Some(&KeyState::Pending),
            key_done: state_of.get(object.paste_id.as_str()) == Some(&KeyState::Done),
        })
        .collect();
    Ok(report)
}

fn live_holds(fate_of: &HashMap<&PasteId, IdFate>, object_id: &str) -> bool {
    PasteId::parse(object_id).is_ok_and(|id| fate_of.get(&id) == Some(&IdFate::Live))
}

/// Live pastes of the slot that no key names, confirmed by a second read of K.
async fn orphans(
    slots: &SlotMap,
    slot: Slot,
    keys: &[SlotKey],
    rows: &[SlotRow],
    now: DateTime<Utc>,
    call_timeout: Duration,
) -> Result<Vec<Orphan>, ReconcileError> {
    let named: HashSet<&PasteId> = keys.iter().map(|key| &key.paste_id).collect();
    let young = |row: &&SlotRow| now.signed_duration_since(row.created_at).to_std().unwrap_or_default() < ORPHAN_WINDOW;
    let candidates: Vec<&SlotRow> =
        rows.iter().filter(|row| row.fate == IdFate::Live && !named.contains(&row.id)).filter(young).collect();
    if candidates.is_empty() {
        return Ok(Vec::new());
    }
    let reread = read_keys(slots, slot, call_timeout).await?;
    let named: HashSet<&PasteId> = reread.iter().map(|key| &key.paste_id).collect();
    let mut by_content: HashMap<[u8; 32], Vec<&PasteId>> = HashMap::new();
    for row in rows.iter().filter(|row| row.fate == IdFate::Live) {
        if let Some(hash) = row.content_sha256 {
            by_content.entry(hash).or_default().push(&row.id);
        }
    }
    Ok(candidates
        .into_iter()
        .filter(|row| !named.contains(&row.id))
        .map(|row| {
            let content_sha256 = row.content_sha256.unwrap_or_default();
            let same_content = by_content
                .get(&content_sha256)
                .into_iter()
                .flatten()
                .filter(|id| ***id != row.id)
                .map(|id| (*id).clone())
                .collect();
            Orphan { paste_id: row.id.clone(), content_sha256, created_at: row.created_at, same_content }
        })
        .collect())
}

async fn read_keys(slots: &SlotMap, slot: Slot, call_timeout: Duration) -> Result<Vec<SlotKey>, ReconcileError> {
    let shard = slots.key_shard_index(slot);
    let failed = |error| ReconcileError::KeyShard(shard, slots.key_addresses()[shard].clone(), error);
    let mut keys: Vec<SlotKey> = Vec::new();
    loop {
        let client = slots.key_shards()[shard].with_deadline(tokio::time::Instant::now() + call_timeout);
        let page = client.list_slot(slot, keys.last(), PAGE).await.map_err(failed)?;
        let full = page.len() == PAGE as usize;
        keys.extend(page);
        if !full {
            return Ok(keys);
        }
    }
}

async fn read_rows(slots: &SlotMap, slot: Slot, call_timeout: Duration) -> Result<Vec<SlotRow>, ReconcileError> {
    let shard = slots.paste_shard_index(slot);
    let failed = |error| ReconcileError::PasteShard(shard, slots.paste_addresses()[shard].clone(), error);
    let mut rows: Vec<SlotRow> = Vec::new();
    loop {
        let client = slots.paste_shards()[shard].with_deadline(tokio::time::Instant::now() + call_timeout);
        let page = client.list_slot(slot, rows.last().map(|row| &row.id), PAGE).await.map_err(failed)?;
        let full = page.len() == PAGE as usize;
        rows.extend(page);
        if !full {
            return Ok(rows);
        }
    }
}

/// The objects under the slot's prefix. The store lists bytewise and the
/// slot prefixes sort bytewise, so they are one contiguous run starting
/// after the bare prefix. A short page is not the end (S3 may return fewer
/// than asked): the run ends at an empty page or past the prefix.
async fn read_objects(
    objects: &dyn ObjectStore,
    slot: Slot,
    call_timeout: Duration,
) -> Result<Vec<ObjectInfo>, ReconcileError> {
    let prefix = PasteId::slot_prefix_of(slot);
    let mut found = Vec::new();
    let mut after = prefix.clone();
    loop {
        let page = tokio::time::timeout(call_timeout, objects.list(Some(&after), PAGE as usize))
            .await
            .unwrap_or_else(|_| Err(ObjectError::Uncertain("object store listing timed out".into())))
            .map_err(ReconcileError::Objects)?;
        let Some(last) = page.last() else { return Ok(found) };
        let passed_the_slot = !last.paste_id.starts_with(&prefix);
        after = last.paste_id.clone();
        found.extend(page.into_iter().filter(|object| object.paste_id.starts_with(&prefix)));
        if passed_the_slot {
            return Ok(found);
        }
    }
}
