//! The colocated shard's one commit: the paste row and its key, done with
//! the 201 body, in one transaction on the database that holds both
//! (docs/design.md#the-colocated-create).

use pastebin_core::KeyState;
use pastebin_keys::{KeyRecord, KeyStore, KeyStoreError, NewKey};
use pastebin_pastes::{NewPaste, PasteStore};
use pastebin_runtime::grpc::StoreFailure;

/// What a commit found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Commit {
    /// Both rows are committed.
    Committed,
    /// The key was there (a racer's, or one the saga left); nothing was written.
    Existing(KeyRecord),
    /// The shard may have lost commits for the key's slot: a key it does
    /// not know may have had an earlier life, so the create searches the
    /// paste rows first, which the saga does. Nothing was written.
    SearchFirst,
}

#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error(transparent)]
    Keys(#[from] KeyStoreError),
    #[error("colocated commit: {0}")]
    Database(#[from] sqlx::Error),
    /// The minted id has a row already: a tombstone (the fence) or a
    /// collision. Nothing was written; a retry mints another id.
    #[error("the paste id minted for this create is taken; nothing was written, retry the create")]
    IdTaken,
}

impl StoreFailure for CommitError {
    fn database(&self) -> Option<&sqlx::Error> {
        match self {
            Self::Keys(KeyStoreError::Database(error)) | Self::Database(error) => Some(error),
            _ => None,
        }
    }
}

/// What one commit's statements left.
enum Wrote {
    Both,
    KeyExists,
    IdTaken,
}

/// K's and P's stores on the one database of a colocated shard.
#[derive(Clone)]
pub struct ColocatedStore {
    keys: KeyStore,
    pastes: PasteStore,
}

impl ColocatedStore {
    /// `keys` and `pastes` must be stores of the same database.
    pub fn new(keys: KeyStore, pastes: PasteStore) -> Self {
        Self { keys, pastes }
    }

    /// The key done and its paste live, in one commit, or neither. The
    /// key's primary key decides a race: the loser's insert waits for the
    /// winner's commit, inserts nothing, and the loser answers the winner's
    /// record. An id with a row already, live or a tombstone, is never
    /// written over: the commit takes its key back out in the same
    /// transaction, so no create lands behind the fence.
    pub async fn commit(&self, new: &NewKey, paste: &NewPaste) -> Result<Commit, CommitError> {
        if self.keys.searches_first(new.key.slot()) {
            return Ok(Commit::SearchFirst);
        }
        // Retention may delete a retired key between a conflict and the
        // read; then the commit is simply tried again.
        for _ in 0..3 {
            let (insert_key, _) = self.keys.insert_key(new, KeyState::Done);
            let insert_paste = pastebin_pastes::insert_paste(paste);
            let key = new.key.canonical();
            let wrote = self
                .keys
                .database()
                .write(move |conn| {
                    Box::pin(async move {
                        if insert_key.execute(&mut *conn).await?.rows_affected() == 0 {
                            return Ok(Wrote::KeyExists);
                        }
                        if insert_paste.execute(&mut *conn).await?.rows_affected() == 1 {
                            return Ok(Wrote::Both);
                        }
                        sqlx::query("DELETE FROM idempotency_keys WHERE key = $1")
                            .bind(key)
                            .execute(&mut *conn)
                            .await?;
                        Ok(Wrote::IdTaken)
                    })
                })
                .await?;
            match wrote {
                Wrote::Both => {
                    self.pastes.counted(paste);
                    return Ok(Commit::Committed);
                }
                Wrote::IdTaken => return Err(CommitError::IdTaken),
                Wrote::KeyExists => {
                    if let Some(record) = self.keys.get(&new.key).await? {
                        return Ok(Commit::Existing(record));
                    }
                }
            }
        }
        Err(KeyStoreError::Vanished.into())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use chrono::Duration;
    use pastebin_core::{
        Clock, DeleteToken, IdempotencyKey, LostCommits, PasteAttributes, PasteId, RequestHash, ResponseBody,
        SystemClock,
    };
    use pastebin_pastes::IdFate;
    use pastebin_runtime::db;

    use super::*;

    struct Shard {
        store: ColocatedStore,
        keys: KeyStore,
        pastes: PasteStore,
        _dir: tempfile::TempDir,
    }

    async fn shard() -> Shard {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("colocated.db").display());
        let database = db::connect(&url, 4, &crate::MIGRATIONS).await.unwrap();
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let keys = KeyStore::new(database.clone(), clock.clone());
        let pastes = PasteStore::new(database, clock);
        Shard { store: ColocatedStore::new(keys.clone(), pastes.clone()), keys, pastes, _dir: dir }
    }

    fn create(key: IdempotencyKey) -> (NewKey, NewPaste) {
        let id = PasteId::mint(key.slot());
        let now = SystemClock.now();
        let new = NewKey {
            key,
            request_hash: RequestHash([7; 32]),
            paste_id: id.clone(),
            response_body: ResponseBody::new(format!("{{\"id\":\"{id}\"}}")),
        };
        let paste = NewPaste {
            id,
            delete_token_hash: DeleteToken::generate().hash(),
            created_at: now,
            expires_at: now + Duration::hours(1),
            size: 5,
            content_sha256: [1; 32],
            attributes: PasteAttributes::default(),
            origin: None,
        };
        (new, paste)
    }

    #[tokio::test]
    async fn one_commit_makes_the_key_done_and_the_paste_live_together() {
        let shard = shard().await;
        let (new, paste) = create(IdempotencyKey::new_random());
        assert_eq!(shard.store.commit(&new, &paste).await.unwrap(), Commit::Committed);
        let record = shard.keys.get(&new.key).await.unwrap().unwrap();
        assert_eq!((record.state, &record.paste_id), (KeyState::Done, &paste.id));
        assert_eq!(shard.pastes.peek_fate(&paste.id).await.unwrap(), Some(IdFate::Live));
    }

    #[tokio::test]
    async fn a_second_commit_of_a_key_answers_the_first_and_writes_nothing() {
        let shard = shard().await;
        let key = IdempotencyKey::new_random();
        let (first, first_paste) = create(key);
        let (second, second_paste) = create(key);
        shard.store.commit(&first, &first_paste).await.unwrap();
        let Commit::Existing(record) = shard.store.commit(&second, &second_paste).await.unwrap() else {
            panic!("the second commit must find the first's key")
        };
        assert_eq!(record.paste_id, first_paste.id);
        assert_eq!(shard.pastes.peek_fate(&second_paste.id).await.unwrap(), None, "no second paste row");
    }

    #[tokio::test]
    async fn a_commit_never_lands_behind_the_fence() {
        let shard = shard().await;
        let (new, paste) = create(IdempotencyKey::new_random());
        assert_eq!(shard.pastes.tombstone_unless_live(&paste.id).await.unwrap(), IdFate::Tombstoned);
        assert!(matches!(shard.store.commit(&new, &paste).await, Err(CommitError::IdTaken)));
        assert_eq!(shard.keys.get(&new.key).await.unwrap(), None, "the key was taken back out");
        assert_eq!(shard.pastes.peek_fate(&paste.id).await.unwrap(), Some(IdFate::Tombstoned));
    }

    #[tokio::test]
    async fn a_shard_that_may_have_lost_commits_sends_a_new_key_to_the_saga() {
        let shard = shard().await;
        let since = SystemClock.now() - Duration::minutes(5);
        let keys = shard.keys.clone().with_lost_commits(Some(LostCommits::new(since, SystemClock.now())));
        let store = ColocatedStore::new(keys, shard.pastes.clone());
        let (new, paste) = create(IdempotencyKey::new_random());
        assert_eq!(store.commit(&new, &paste).await.unwrap(), Commit::SearchFirst);
        assert_eq!(shard.keys.get(&new.key).await.unwrap(), None);
    }
}
