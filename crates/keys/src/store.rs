use std::sync::Arc;

use chrono::{DateTime, Utc};
use pastebin_core::{
    alert, from_millis, to_millis, Clock, IdempotencyKey, KeyState, LostCommits, PasteId, RequestHash, ResponseBody,
    Slot, KEY_RETENTION,
};
use pastebin_runtime::db::{placeholders, Database};
use pastebin_slots::shard_slots::SearchWindows;
use sqlx::{
    any::{AnyArguments, AnyRow},
    query::Query,
    Any, AssertSqlSafe, Row,
};

use crate::{Adopted, Begun, KeyRecord, NewKey, PendingKey, PendingStats, SlotKey};

#[derive(Debug, thiserror::Error)]
pub enum KeyStoreError {
    #[error("key database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A stored row that does not parse: never expected, never papered over.
    #[error("corrupt key record: {0}")]
    Corrupt(String),
    /// The key was deleted by retention between the insert conflict and the
    /// read, repeatedly. Only possible under a pathological clock.
    #[error("the key vanished while it was being begun")]
    Vanished,
}

/// Shard K's storage. The same SQL runs on PostgreSQL and SQLite. Reads go
/// through [`Database::read`]; every write goes through [`Database::execute`], which has
/// committed it (on SQLite, in a group) when it returns.
#[derive(Clone)]
pub struct KeyStore {
    db: Database,
    clock: Arc<dyn Clock>,
    lost_commits: Option<LostCommits>,
    windows: SearchWindows,
}

/// Guarded updates per statement of [`KeyStore::apply_verdicts`]: two
/// parameters each, well inside both backends' parameter limits.
const VERDICTS_PER_STATEMENT: usize = 500;

fn retention() -> chrono::Duration {
    // A constant of 25 h: always representable.
    chrono::Duration::from_std(KEY_RETENTION).unwrap_or(chrono::Duration::MAX)
}

impl KeyStore {
    pub fn new(db: Database, clock: Arc<dyn Clock>) -> Self {
        Self { db, clock, lost_commits: None, windows: SearchWindows::default() }
    }

    /// The same store searching first, too, for the keys of slots inside a
    /// lost-commits window this shard holds ([`SearchWindows`]: its own, or
    /// one that moved here with its slots).
    pub fn with_search_windows(self, windows: SearchWindows) -> Self {
        Self { windows, ..self }
    }

    /// The same store on a database that may have lost commits since
    /// `lost.since` (`--may-have-lost-commits-since`): until
    /// [`LostCommits::search_first_until`], every record it answers that is
    /// not done says `search_first` (docs/design.md#adopting-after-a-k-loss).
    pub fn with_lost_commits(self, lost: Option<LostCommits>) -> Self {
        Self { lost_commits: lost, ..self }
    }

    pub fn lost_commits(&self) -> Option<LostCommits> {
        self.lost_commits
    }

    /// A record as K answers it: a done one names its paste for good; any
    /// other may be a key whose earlier life this database lost.
    fn answered(&self, record: KeyRecord) -> KeyRecord {
        let searching = self.searches_first(record.key.slot());
        KeyRecord { search_first: searching && record.state != KeyState::Done, ..record }
    }

    /// Whether a key of `slot` this shard does not know may be one whose
    /// earlier life it lost, so that a create must search P before minting.
    pub fn searches_first(&self, slot: Slot) -> bool {
        let now = self.clock.now();
        self.lost_commits.is_some_and(|lost| lost.search_first(now))
            || self.windows.searching(slot, pastebin_core::to_millis(now))
    }

    /// The insert of `new` in `state`, made now, which inserts nothing when
    /// the key exists: the statement and the record it writes. The saga's
    /// begin runs it alone (pending); the colocated create runs it (done)
    /// in the same commit as its paste row (docs/design.md#the-colocated-create).
    pub fn insert_key(&self, new: &NewKey, state: KeyState) -> (Query<'static, Any, AnyArguments>, KeyRecord) {
        let now = from_millis(to_millis(self.clock.now()));
        let record = KeyRecord {
            key: new.key,
            request_hash: new.request_hash,
            paste_id: new.paste_id.clone(),
            state,
            response_body: new.response_body.clone(),
            created_at: now,
            retain_until: now + retention(),
            search_first: false,
        };
        let statement = sqlx::query(
            "INSERT INTO idempotency_keys (key, request_hash, paste_id, state, response_body, created_at, retain_until)
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (key) DO NOTHING",
        )
        .bind(record.key.canonical())
        .bind(record.request_hash.to_hex())
        .bind(record.paste_id.to_string())
        .bind(state.as_str())
        .bind(record.response_body.expose().to_owned())
        .bind(to_millis(record.created_at))
        .bind(to_millis(record.retain_until));
        (statement, record)
    }

    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The shard's database, for what moves its rows (docs/design.md#moving-slots).
    pub fn database(&self) -> &Database {
        &self.db
    }

    /// Step 2 of the saga. The primary key decides a race: `ON CONFLICT DO
    /// NOTHING` makes the loser wait for the winner's commit and then insert
    /// nothing, and the loser reads and returns the winner's record.
    pub async fn begin(&self, new: &NewKey) -> Result<Begun, KeyStoreError> {
        for _ in 0..3 {
            let (insert, record) = self.insert_key(new, KeyState::Pending);
            if self.db.execute(insert).await? == 1 {
                return Ok(Begun::Inserted(self.answered(record)));
            }
            // Retention may delete a retired key between the conflict and this
            // read; then the insert is simply tried again.
            if let Some(existing) = self.get(&new.key).await? {
                return Ok(Begun::Existing(existing));
            }
        }
        Err(KeyStoreError::Vanished)
    }

    pub async fn get(&self, key: &IdempotencyKey) -> Result<Option<KeyRecord>, KeyStoreError> {
        let row = self
            .db
            .read(|pool| {
                sqlx::query(
                    "SELECT key, request_hash, paste_id, state, response_body, created_at, retain_until
               FROM idempotency_keys WHERE key = $1",
                )
                .bind(key.canonical())
                .fetch_optional(pool)
            })
            .await?;
        Ok(row.as_ref().map(record_from_row).transpose()?.map(|record| self.answered(record)))
    }

    /// Step 5: pending → done. Guarded by state and paste id so it can only
    /// finish the saga that minted this id, and only once.
    pub async fn mark_done(&self, key: &IdempotencyKey, paste_id: &PasteId) -> Result<bool, KeyStoreError> {
        self.transition(key, paste_id, KeyState::Pending, KeyState::Done).await
    }

    /// pending → aborted. Callers must have tombstoned `paste_id` on shard P
    /// first: the tombstone, not this row, is what stops the paste existing.
    pub async fn abort(&self, key: &IdempotencyKey, paste_id: &PasteId) -> Result<bool, KeyStoreError> {
        self.transition(key, paste_id, KeyState::Pending, KeyState::Aborted).await
    }

    /// A resolved key's 25 h window starts when it is resolved, not when it
    /// was created: a key finished after a long outage must still replay its
    /// 201 to the client retrying it (docs/design.md#retention).
    async fn transition(
        &self,
        key: &IdempotencyKey,
        paste_id: &PasteId,
        from: KeyState,
        to: KeyState,
    ) -> Result<bool, KeyStoreError> {
        debug_assert!(from.can_become(to));
        let retain_until = to_millis(self.clock.now() + retention());
        let changed = self
            .db
            .execute(
                sqlx::query(
                    "UPDATE idempotency_keys SET state = $1, retain_until = $2 WHERE key = $3 AND state = $4 AND paste_id = $5",
                )
                .bind(to.as_str())
                .bind(retain_until)
                .bind(key.canonical())
                .bind(from.as_str())
                .bind(paste_id.to_string()),
            )
            .await?;
        Ok(changed == 1)
    }

    /// Many guarded updates pending → `to` in one write: for every `(key,
    /// paste_id)` the row changes only if it is still pending with that
    /// paste id, exactly as [`Self::mark_done`] or [`Self::abort`] would
    /// decide it alone. Returns the keys that changed. Recovery applies a
    /// page of verdicts this way instead of one commit per key.
    pub async fn apply_verdicts(
        &self,
        to: KeyState,
        keys: &[(IdempotencyKey, PasteId)],
    ) -> Result<Vec<IdempotencyKey>, KeyStoreError> {
        debug_assert!(KeyState::Pending.can_become(to));
        // Retention runs from resolution, as for a single transition.
        let retain_until = to_millis(self.clock.now() + retention());
        let chunks: Vec<Vec<(String, String)>> = keys
            .chunks(VERDICTS_PER_STATEMENT)
            .map(|chunk| chunk.iter().map(|(key, paste_id)| (key.canonical(), paste_id.to_string())).collect())
            .collect();
        let changed: Vec<String> = self
            .db
            .write(move |conn| {
                Box::pin(async move {
                    let mut changed = Vec::new();
                    for chunk in chunks {
                        // A join, not `(key, paste_id) IN (VALUES …)`: with statistics
                        // older than a burst of pendings (the usual state when recovery
                        // starts), PostgreSQL planned the IN as a nested loop over every
                        // pending row for every verdict, 1.7 s per 500 verdicts at
                        // 21,000 pendings; the join is a hash or primary-key lookup
                        // whatever the statistics say (BENCHMARKS.md, figure 6).
                        let sql = format!(
                            "UPDATE idempotency_keys SET state = $1, retain_until = $2
                               FROM (VALUES {}) AS verdict
                              WHERE idempotency_keys.key = verdict.column1 AND idempotency_keys.paste_id = verdict.column2
                                AND idempotency_keys.state = 'pending'
                          RETURNING idempotency_keys.key",
                            placeholders(chunk.len(), |i| format!("(${}, ${})", 2 * i + 3, 2 * i + 4))
                        );
                        let mut update = sqlx::query_scalar(AssertSqlSafe(sql)).bind(to.as_str()).bind(retain_until);
                        for (key, paste_id) in chunk {
                            update = update.bind(key).bind(paste_id);
                        }
                        changed.extend(update.fetch_all(&mut *conn).await?);
                    }
                    Ok(changed)
                })
            })
            .await?;
        changed.iter().map(|key| IdempotencyKey::parse(key).map_err(corrupt)).collect()
    }

    /// Of `paste_ids`, those a done key on this shard names: the product
    /// answered 201 for each, so a P shard with no row for one has lost it,
    /// and fencing it would make the loss permanent
    /// (docs/design.md#never-amplify-a-loss).
    pub async fn named_by_done_keys(&self, paste_ids: &[PasteId]) -> Result<Vec<PasteId>, KeyStoreError> {
        let mut named = Vec::new();
        for chunk in paste_ids.chunks(VERDICTS_PER_STATEMENT) {
            // Prefix and id, so the lookup is the by-slot index whatever the
            // collation (migrations/keys/20261201100000_keys_by_slot.sql).
            let sql = format!(
                "SELECT idempotency_keys.paste_id FROM idempotency_keys
                   JOIN (VALUES {}) AS asked
                     ON substr(idempotency_keys.paste_id, 1, 2) = asked.column1
                    AND idempotency_keys.paste_id = asked.column2
                  WHERE idempotency_keys.state = 'done'",
                placeholders(chunk.len(), |i| format!("(${}, ${})", 2 * i + 1, 2 * i + 2))
            );
            let mut read = sqlx::query_scalar(AssertSqlSafe(sql));
            for id in chunk {
                read = read.bind(id.slot_prefix().to_owned()).bind(id.to_string());
            }
            let found: Vec<String> = self.db.read(|pool| read.fetch_all(pool)).await?;
            for id in found {
                named.push(PasteId::parse(&id).map_err(corrupt)?);
            }
        }
        Ok(named)
    }

    /// Up to `limit` keys whose paste id is in `slot`, ordered by (paste id,
    /// key), after the cursor `after` (the last of the previous page).
    pub async fn list_slot(
        &self,
        slot: Slot,
        after: Option<(&PasteId, &IdempotencyKey)>,
        limit: u32,
    ) -> Result<Vec<SlotKey>, KeyStoreError> {
        let (after_id, after_key) = after.map(|(id, key)| (id.to_string(), key.canonical())).unwrap_or_default();
        let rows = self
            .db
            .read(|pool| {
                sqlx::query(
                    "SELECT key, paste_id, state, created_at FROM idempotency_keys
                      WHERE substr(paste_id, 1, 2) = $1 AND (paste_id > $2 OR (paste_id = $2 AND key > $3))
                      ORDER BY paste_id, key LIMIT $4",
                )
                .bind(PasteId::slot_prefix_of(slot))
                .bind(after_id)
                .bind(after_key)
                .bind(i64::from(limit))
                .fetch_all(pool)
            })
            .await?;
        rows.iter()
            .map(|row| {
                Ok(SlotKey {
                    key: parse_key(row)?,
                    paste_id: parse_paste_id(row)?,
                    state: row.try_get::<String, _>("state")?.parse().map_err(corrupt)?,
                    created_at: from_millis(row.try_get("created_at")?),
                })
            })
            .collect()
    }

    /// pending → done around another paste: the record a K loss erased,
    /// rebuilt (docs/design.md#adopting-after-a-k-loss). Guarded by state and
    /// the pending paste id, so of two attempts racing on the key only the
    /// first adopts, and a record the sweeper aborted meanwhile is left as
    /// it is. One update, so no state between "another paste" and "done"
    /// exists for a crash to leave behind.
    pub async fn adopt(&self, adopted: &Adopted) -> Result<bool, KeyStoreError> {
        let retain_until = to_millis(self.clock.now() + retention());
        let changed = self
            .db
            .execute(
                sqlx::query(
                    "UPDATE idempotency_keys
                        SET state = 'done', paste_id = $1, request_hash = $2, response_body = $3, retain_until = $4
                      WHERE key = $5 AND state = 'pending' AND paste_id = $6",
                )
                .bind(adopted.paste_id.to_string())
                .bind(adopted.request_hash.to_hex())
                .bind(adopted.response_body.expose().to_owned())
                .bind(retain_until)
                .bind(adopted.key.canonical())
                .bind(adopted.pending_paste_id.to_string()),
            )
            .await?;
        Ok(changed == 1)
    }

    /// aborted → pending with a fresh paste id and body. The key's clock
    /// restarts too: the sweeper must see a restarted create as young, not as
    /// a minute-old pending it may abort while the create is in flight.
    pub async fn restart(
        &self,
        key: &IdempotencyKey,
        aborted_paste_id: &PasteId,
        paste_id: &PasteId,
        response_body: &ResponseBody,
    ) -> Result<bool, KeyStoreError> {
        let now = self.clock.now();
        let changed = self
            .db
            .execute(
                sqlx::query(
                    "UPDATE idempotency_keys
                SET state = 'pending', paste_id = $1, response_body = $2, created_at = $3, retain_until = $4
              WHERE key = $5 AND state = 'aborted' AND paste_id = $6",
                )
                .bind(paste_id.to_string())
                .bind(response_body.expose().to_owned())
                .bind(to_millis(now))
                .bind(to_millis(now + retention()))
                .bind(key.canonical())
                .bind(aborted_paste_id.to_string()),
            )
            .await?;
        Ok(changed == 1)
    }

    /// Pending keys created before `created_before`, oldest first, after the
    /// cursor `after` (the last `(created_at, key)` of the previous page).
    pub async fn list_pending(
        &self,
        created_before: DateTime<Utc>,
        after: Option<(DateTime<Utc>, IdempotencyKey)>,
        limit: u32,
    ) -> Result<Vec<PendingKey>, KeyStoreError> {
        let (after_at, after_key) = match after {
            Some((at, key)) => (to_millis(at), key.canonical()),
            None => (i64::MIN, String::new()),
        };
        let rows = self
            .db
            .read(|pool| {
                sqlx::query(
                    "SELECT key, paste_id, created_at FROM idempotency_keys
              WHERE state = 'pending' AND created_at < $1 AND (created_at > $2 OR (created_at = $2 AND key > $3))
              ORDER BY created_at, key LIMIT $4",
                )
                .bind(to_millis(created_before))
                .bind(after_at)
                .bind(after_key)
                .bind(i64::from(limit))
                .fetch_all(pool)
            })
            .await?;
        rows.iter()
            .map(|row| {
                Ok(PendingKey {
                    key: parse_key(row)?,
                    paste_id: parse_paste_id(row)?,
                    created_at: from_millis(row.try_get("created_at")?),
                })
            })
            .collect()
    }

    pub async fn pending_stats(&self) -> Result<PendingStats, KeyStoreError> {
        let now = self.clock.now();
        // Both ages are constants of seconds: always representable.
        let cutoff = |age: std::time::Duration| {
            to_millis(now - chrono::Duration::from_std(age).unwrap_or(chrono::Duration::MAX))
        };
        let row = self
            .db
            .read(|pool| {
                sqlx::query(
                    "SELECT COUNT(*) AS pending, MIN(created_at) AS oldest,
                    COUNT(*) FILTER (WHERE created_at < $1) AS older_2s,
                    COUNT(*) FILTER (WHERE created_at < $2) AS older_60s
               FROM idempotency_keys WHERE state = 'pending'",
                )
                .bind(cutoff(alert::SLOW_AFTER))
                .bind(cutoff(alert::RECOVERY_AFTER))
                .fetch_one(pool)
            })
            .await?;
        let count =
            |name: &str| -> Result<u64, KeyStoreError> { Ok(u64::try_from(row.try_get::<i64, _>(name)?).unwrap_or(0)) };
        Ok(PendingStats {
            pending: count("pending")?,
            oldest_created_at: row.try_get::<Option<i64>, _>("oldest")?.map(from_millis),
            older_than_2s: count("older_2s")?,
            older_than_60s: count("older_60s")?,
            now,
        })
    }

    /// Deletes up to `limit` done or aborted keys whose 25 h window has
    /// passed. Pending keys are never deleted: their saga is not finished.
    /// The outer conditions are repeated so a key restarted while this runs
    /// is re-checked (PostgreSQL re-evaluates them on the new row version).
    pub async fn purge_retired(&self, limit: u32) -> Result<u64, KeyStoreError> {
        let now = to_millis(self.clock.now());
        let deleted = self
            .db
            .execute(
                sqlx::query(
                    "DELETE FROM idempotency_keys
              WHERE state <> 'pending' AND retain_until <= $1 AND key IN (
                    SELECT key FROM idempotency_keys
                     WHERE state <> 'pending' AND retain_until <= $1 LIMIT $2)",
                )
                .bind(now)
                .bind(i64::from(limit)),
            )
            .await?;
        Ok(deleted)
    }
}

fn corrupt(what: impl std::fmt::Display) -> KeyStoreError {
    KeyStoreError::Corrupt(what.to_string())
}

fn parse_key(row: &AnyRow) -> Result<IdempotencyKey, KeyStoreError> {
    IdempotencyKey::parse(&row.try_get::<String, _>("key")?).map_err(corrupt)
}

fn parse_paste_id(row: &AnyRow) -> Result<PasteId, KeyStoreError> {
    PasteId::parse(&row.try_get::<String, _>("paste_id")?).map_err(corrupt)
}

fn record_from_row(row: &AnyRow) -> Result<KeyRecord, KeyStoreError> {
    Ok(KeyRecord {
        key: parse_key(row)?,
        request_hash: RequestHash::from_hex(&row.try_get::<String, _>("request_hash")?)
            .ok_or_else(|| corrupt("request_hash is not 32 hex bytes"))?,
        paste_id: parse_paste_id(row)?,
        state: row.try_get::<String, _>("state")?.parse().map_err(corrupt)?,
        response_body: ResponseBody::new(row.try_get("response_body")?),
        created_at: from_millis(row.try_get("created_at")?),
        retain_until: from_millis(row.try_get("retain_until")?),
        search_first: false,
    })
}
