//! A delete and an adoption that rotates the same paste's token
//! (docs/design.md#adopting-after-a-k-loss): the delete's tombstone is
//! guarded by the token hash it checked, on a real P process.

use std::time::Duration;

use pastebin_core::{DeleteToken, IdempotencyKey, PasteOrigin, SlotRange};
use pastebin_pastes::{DeleteOutcome, PasteClient};
use pastebin_runtime::failpoints::DELETE_TOKEN_CHECKED;
use pastebin_tests::{
    cluster::start_shard,
    postgres::fresh_database_url,
    shards::{new_paste, random_hash},
};

/// Waits until the failpoint armed as `wait:go` holds its call.
async fn held_at(go: &std::path::Path) {
    let reached = go.with_extension("reached");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while !reached.exists() {
        assert!(tokio::time::Instant::now() < deadline, "the delete reaches its token check");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The token was right when P checked it, and an adoption rotated it
/// before P tombstoned the row: the old token deletes nothing (it is
/// refused as wrong), and the adopted one still deletes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delete_whose_token_was_rotated_after_its_check_deletes_nothing() {
    let held = tempfile::tempdir().unwrap();
    let go = held.path().join("go");
    let failpoints = vec![("PASTEBIN_FAILPOINTS".to_owned(), format!("{DELETE_TOKEN_CHECKED}=wait:{}", go.display()))];
    let url = fresh_database_url().await;
    let (_shard, address) = start_shard("paste-service", &url, SlotRange::ALL, None, &failpoints).await;
    let pastes = PasteClient::new(pastebin_shards::channel(&address, None).unwrap());

    let key = IdempotencyKey::new_random();
    let (mut paste, old_token) = new_paste(chrono::Utc::now(), chrono::Duration::hours(1));
    paste.origin = Some(PasteOrigin { key_hash: key.hash(), request_hash: random_hash() });
    pastes.insert(&paste).await.unwrap();

    let deleting = tokio::spawn({
        let (pastes, id) = (pastes.clone(), paste.id.clone());
        async move { pastes.delete(&id, &old_token).await }
    });
    held_at(&go).await;
    let adopted = DeleteToken::generate();
    assert!(pastes.rotate_delete_token(&paste.id, &key.hash(), &adopted.hash()).await.unwrap(), "rotated");
    std::fs::write(&go, "").unwrap();

    let outcome = tokio::time::timeout(Duration::from_secs(60), deleting).await.expect("the delete ends").unwrap();
    assert_eq!(outcome.unwrap(), DeleteOutcome::WrongToken, "the token rotated away deletes nothing");
    assert!(pastes.get(&paste.id).await.unwrap().is_some(), "the paste is still live");
    assert_eq!(pastes.delete(&paste.id, &adopted).await.unwrap(), DeleteOutcome::Deleted, "the adopted token deletes");
}
