//! What an unsafe failover leaves behind, found and repaired
//! (docs/operations.md#finding-and-repairing-lost-pastes): real K and P
//! shards on PostgreSQL, a real gateway and SeaweedFS; the losses are made
//! directly in the shards' databases and the bucket, as a standby that
//! missed the last commits would make them.

use std::collections::BTreeSet;

use chrono::Utc;
use pastebin_core::{IdempotencyKey, PasteId, Slot};
use pastebin_ctl::Exit;
use pastebin_tests::{
    api::{create, new_key},
    cluster::{execute as sql, scalar, Cluster, ClusterOptions},
};
use serde_json::Value;

use crate::operators::ctl;

/// A paste created through the gateway: its key, id and bytes.
struct Created {
    key: IdempotencyKey,
    id: PasteId,
    content: String,
    delete_token: String,
}

async fn create_pastes(cluster: &Cluster, n: usize) -> Vec<Created> {
    let mut created = Vec::new();
    for i in 0..n {
        let (key, content) = (new_key(), format!("paste number {i}"));
        let answer = create(&cluster.http, Some(&key), &content).await.unwrap();
        assert_eq!(answer.status, 201, "{}", answer.body);
        let id = PasteId::parse(answer.json()["id"].as_str().unwrap()).unwrap();
        let delete_token = answer.json()["delete_token"].as_str().unwrap().to_owned();
        created.push(Created { key: IdempotencyKey::parse(&key).unwrap(), id, content, delete_token });
    }
    created
}

fn paste_database<'a>(cluster: &'a Cluster, id: &PasteId) -> &'a str {
    &cluster.paste_database_urls[cluster.slot_map().paste_shard_index(id.slot())]
}

fn key_database<'a>(cluster: &'a Cluster, key: &IdempotencyKey) -> &'a str {
    &cluster.key_database_urls[cluster.slot_map().key_shard_index(key.slot())]
}

/// P loses a paste row (its last commit never reached the promoted standby).
async fn lose_row(cluster: &Cluster, id: &PasteId) {
    assert_eq!(sql(paste_database(cluster, id), "DELETE FROM pastes WHERE id = $1", id.as_str()).await, 1);
}

/// K loses a key: the client's retry then mints a second paste.
async fn lose_key_and_retry(cluster: &Cluster, paste: &Created) -> PasteId {
    let statement = "DELETE FROM idempotency_keys WHERE key = $1";
    assert_eq!(sql(key_database(cluster, &paste.key), statement, &paste.key.canonical()).await, 1);
    let answer = create(&cluster.http, Some(&paste.key.canonical()), &paste.content).await.unwrap();
    assert_eq!(answer.status, 201, "{}", answer.body);
    let second = PasteId::parse(answer.json()["id"].as_str().unwrap()).unwrap();
    assert_ne!(second, paste.id, "the retry minted a second paste");
    second
}

async fn tombstones(cluster: &Cluster) -> i64 {
    let mut total = 0;
    for url in &cluster.paste_database_urls {
        total += scalar(url, "SELECT COUNT(*) FROM pastes WHERE state = 'tombstoned'").await;
    }
    total
}

fn json(out: &str) -> Value {
    serde_json::from_str(out.trim()).unwrap_or_else(|_| panic!("not JSON: {out}"))
}

fn ids(samples: &Value) -> BTreeSet<String> {
    samples.as_array().unwrap().iter().map(|s| s["paste_id"].as_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn reconcile_counts_lost_pastes_orphans_and_missing_objects_exactly() {
    let cluster = Cluster::start(ClusterOptions { key_shards: 2, paste_shards: 2, ..Default::default() }).await;
    let created = create_pastes(&cluster, 12).await;
    let objects = cluster.object_store().await;

    let (exit, out, err) = ctl(&cluster, &["reconcile", "--json"]).await;
    assert_eq!(exit, Exit::Ok, "{err}");
    let clean = json(&out);
    for kind in ["lost_pastes", "missing_objects", "orphans", "pending_with_paste", "orphan_objects"] {
        assert_eq!(clean[kind]["count"], 0, "{kind}: {clean:#}");
    }
    // Every slot is read once, on the shards that own it: nothing counted twice.
    assert_eq!((clean["slots_read"].as_u64(), clean["complete"].as_bool()), (Some(256), Some(true)));
    assert_eq!((clean["keys_read"].as_u64(), clean["rows_read"].as_u64()), (Some(12), Some(12)), "{clean:#}");
    assert_eq!(clean["objects_read"], 12);
    assert!(err.contains("reconcile: 256/256 slots, 36 rows read"), "plain progress lines: {err}");

    // K loses two keys and their clients retry: two duplicates. And one
    // live paste no key ever named.
    let mut duplicate_of = std::collections::BTreeMap::new();
    for paste in &created[..2] {
        duplicate_of.insert(paste.id.to_string(), lose_key_and_retry(&cluster, paste).await.to_string());
    }
    let (mut stray, _token) = pastebin_tests::shards::new_paste(Utc::now(), chrono::Duration::days(1));
    stray.id = PasteId::mint(Slot(7));
    cluster.slot_map().paste_shard(Slot(7)).insert(&stray).await.unwrap();
    objects.put(stray.id.as_str(), bytes::Bytes::from_static(b"no key")).await.unwrap();

    let (exit, out, err) = ctl(&cluster, &["reconcile", "--json"]).await;
    assert_eq!(exit, Exit::Orphans, "{err}");
    let report = json(&out);
    assert_eq!(report["orphans"]["count"], 3, "{report:#}");
    assert_eq!(report["likely_duplicates"], 2, "{report:#}");
    let expected: BTreeSet<String> =
        created[..2].iter().map(|p| p.id.to_string()).chain([stray.id.to_string()]).collect();
    assert_eq!(ids(&report["orphans"]["samples"]), expected);
    for orphan in report["orphans"]["samples"].as_array().unwrap() {
        let id = orphan["paste_id"].as_str().unwrap();
        let same: Vec<&str> = orphan["same_content"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
        match duplicate_of.get(id) {
            Some(second) => assert_eq!(same, [second.as_str()], "grouped with its duplicate: {orphan}"),
            None => assert!(same.is_empty(), "{orphan}"),
        }
    }
    assert_eq!(report["lost_pastes"]["count"], 0);
    assert_eq!(report["missing_objects"]["count"], 0);

    // An object is lost from the bucket.
    objects.delete(created[5].id.as_str()).await.unwrap();
    let (exit, out, _) = ctl(&cluster, &["reconcile", "--json"]).await;
    assert_eq!(exit, Exit::MissingObjects);
    let report = json(&out);
    assert_eq!(report["missing_objects"]["count"], 1);
    assert_eq!(report["missing_objects"]["samples"][0]["paste_id"], created[5].id.to_string());
    assert_eq!(report["missing_objects"]["samples"][0]["key_done"], true);

    // P loses three rows; the object of one of them is gone too.
    for paste in &created[6..9] {
        lose_row(&cluster, &paste.id).await;
    }
    objects.delete(created[8].id.as_str()).await.unwrap();
    let (exit, out, err) = ctl(&cluster, &["reconcile", "--json"]).await;
    assert_eq!(exit, Exit::LostPastes, "{err}");
    let report = json(&out);
    assert_eq!(report["lost_pastes"]["count"], 3, "{report:#}");
    assert_eq!(ids(&report["lost_pastes"]["samples"]), created[6..9].iter().map(|p| p.id.to_string()).collect());
    for lost in report["lost_pastes"]["samples"].as_array().unwrap() {
        let paste = created.iter().find(|p| p.id.as_str() == lost["paste_id"]).unwrap();
        assert_eq!(lost["key"], paste.key.canonical());
        assert_eq!(lost["object_present"], paste.id != created[8].id, "{lost}");
    }
    assert_eq!(report["missing_objects"]["count"], 2, "{report:#}");
    assert_eq!(
        ids(&report["missing_objects"]["samples"]),
        BTreeSet::from([created[5].id.to_string(), created[8].id.to_string()])
    );
    assert_eq!(report["orphans"]["count"], 3);
    // Objects of lost pastes are no live row's, and a done key names them.
    let orphan_objects = report["orphan_objects"]["samples"].as_array().unwrap();
    assert_eq!(report["orphan_objects"]["count"], 2, "{report:#}");
    assert!(orphan_objects.iter().all(|o| o["key_done"] == true), "{report:#}");

    let (exit, text, _) = ctl(&cluster, &["reconcile"]).await;
    assert_eq!(exit, Exit::LostPastes);
    assert!(text.contains("lost pastes (done key, no paste row): 3"), "{text}");
    assert!(text.contains("`pastebin ctl repair`"), "says what to do next: {text}");
    assert!(text.contains("missing objects (done key or live row, no object): 2"), "{text}");
    assert!(text.contains("orphans (live paste, no key): 3 (2 likely duplicate(s)"), "{text}");
    assert!(text.contains(created[6].id.as_str()), "{text}");

    // The sweeper's running cross-check (the dashboard's gauges) finds the
    // same, one slot per round.
    let sweeper = cluster.sweeper(pastebin_core::ManualClock::starting_at(Utc::now())).await;
    let mut totals = pastebin_sweeper::Divergence::default();
    for _ in 0..256 {
        totals = sweeper.audit_next_slot().await;
    }
    assert_eq!(totals, pastebin_sweeper::Divergence { lost_pastes: 3, missing_objects: 2, orphans: 3 });

    // Read-only throughout: no tombstone, no key changed.
    assert_eq!(tombstones(&cluster).await, 0);
    assert_eq!(cluster.key_rows().await, 12);

    // A P shard down: its slots are not checked, and the report says so.
    let mut cluster = cluster;
    cluster.pastes[1].kill().await;
    let (exit, out, err) = ctl(&cluster, &["reconcile", "--json"]).await;
    let report = json(&out);
    assert_eq!(report["complete"], false);
    assert_eq!(report["slots_read"], 128);
    let shard = format!("P shard {} unreachable", cluster.paste_addresses[1]);
    assert!(err.contains(&shard) && err.contains("were not checked"), "{err}");
    assert_eq!(err.matches("warning:").count(), 1, "one warning per part: {err}");
    assert_ne!(exit, Exit::Ok, "nothing unread is called healthy");
}

async fn raw(cluster: &Cluster, id: &PasteId) -> (reqwest::StatusCode, String) {
    let response = reqwest::get(format!("{}/raw/{id}", cluster.http)).await.expect("GET reaches the gateway");
    (response.status(), response.text().await.unwrap())
}

#[tokio::test]
async fn repair_rebuilds_lost_rows_from_the_stored_201_and_the_object_and_the_reaper_spares_them() {
    let cluster = Cluster::start(ClusterOptions { paste_shards: 2, ..Default::default() }).await;
    let created = create_pastes(&cluster, 8).await;
    let objects = cluster.object_store().await;
    // P loses five rows. One of them lost its object too; another id was
    // tombstoned since (a delete or an abort that reached P): both are beyond repair.
    for paste in &created[..5] {
        lose_row(&cluster, &paste.id).await;
    }
    objects.delete(created[3].id.as_str()).await.unwrap();
    let fenced = &created[4].id;
    let p = cluster.slot_map().paste_shard(fenced.slot()).clone();
    assert_eq!(p.tombstone_unless_live(fenced).await.unwrap(), pastebin_pastes::IdFate::Tombstoned);
    let rows_before = cluster.live_pastes().await;
    assert_eq!(rows_before, 3);

    // A dry run says what it would do and changes nothing.
    let (exit, out, err) = ctl(&cluster, &["repair", "--json"]).await;
    assert_eq!(exit, Exit::Failed, "one lost paste cannot be rebuilt: {err}");
    let dry = json(&out);
    assert_eq!(dry["apply"], false);
    assert_eq!(dry["lost_pastes"], 4, "the tombstoned id is not lost: {dry:#}");
    assert_eq!(dry["outcomes"]["would_rebuild"], 3, "{dry:#}");
    assert_eq!(dry["outcomes"]["cannot_rebuild"], 1, "{dry:#}");
    let cannot = dry["samples"].as_array().unwrap().iter().find(|s| s["outcome"] == "cannot_rebuild").unwrap();
    assert_eq!(cannot["paste_id"], created[3].id.to_string());
    assert!(cannot["reason"].as_str().unwrap().contains("object is missing"), "{cannot}");
    assert_eq!(cluster.live_pastes().await, rows_before, "a dry run inserts nothing");
    assert_eq!(raw(&cluster, &created[0].id).await.0, 404);
    assert!(err.contains("repair (dry run): 256/256 slots"), "progress lines: {err}");

    let (exit, text, _) = ctl(&cluster, &["repair", "--apply"]).await;
    assert_eq!(exit, Exit::Failed, "{text}");
    assert!(text.contains("rebuilt: 3"), "{text}");
    assert!(text.contains("cannot rebuild: 1"), "{text}");
    assert!(text.contains("not rebuilt (on neither K nor the object): media_type"), "says what is lost: {text}");
    for paste in &created[..3] {
        assert_eq!(raw(&cluster, &paste.id).await, (reqwest::StatusCode::OK, paste.content.clone()), "{}", paste.id);
    }
    assert_eq!(raw(&cluster, fenced).await.0, 404, "a tombstone is never re-created");
    assert_eq!(p.peek_fate(fenced).await.unwrap(), Some(pastebin_pastes::IdFate::Tombstoned));

    // Again: nothing left to do but the one that cannot be rebuilt.
    let (exit, out, _) = ctl(&cluster, &["repair", "--apply", "--json"]).await;
    assert_eq!(exit, Exit::Failed);
    let again = json(&out);
    assert_eq!((again["lost_pastes"].as_u64(), again["outcomes"]["cannot_rebuild"].as_u64()), (Some(1), Some(1)));
    let (exit, out, _) = ctl(&cluster, &["reconcile", "--json"]).await;
    assert_eq!(exit, Exit::LostPastes);
    assert_eq!(json(&out)["lost_pastes"]["count"], 1);

    // The reaper, however late, leaves every rebuilt paste's object alone.
    let clock = pastebin_core::ManualClock::starting_at(Utc::now());
    clock.advance(std::time::Duration::from_secs(2 * 3600));
    let reap = cluster.sweeper(clock).await.reap_orphan_objects().await;
    assert_eq!(reap.reaped_objects, 1, "only the tombstoned id's object goes: {reap:?}");
    for paste in &created[..3] {
        assert!(objects.get(paste.id.as_str()).await.unwrap().is_some(), "{} was reaped", paste.id);
        assert_eq!(raw(&cluster, &paste.id).await.0, 200);
    }

    // The rebuilt row holds the hash of the token the client was given.
    let client = reqwest::Client::new();
    let delete = client
        .delete(format!("{}/api/v1/pastes/{}", cluster.http, created[0].id))
        .bearer_auth(&created[0].delete_token)
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), reqwest::StatusCode::NO_CONTENT);
}

/// Two pastes in one slot, created through the gateway with keys of that slot.
async fn create_in_one_slot(cluster: &Cluster) -> Vec<Created> {
    let slot = IdempotencyKey::new_random().slot();
    let mut created = Vec::new();
    while created.len() < 2 {
        let key = IdempotencyKey::new_random();
        if key.slot() != slot {
            continue;
        }
        let content = format!("paste in slot {slot}, number {}", created.len());
        let answer = create(&cluster.http, Some(&key.canonical()), &content).await.unwrap();
        assert_eq!(answer.status, 201, "{}", answer.body);
        let id = PasteId::parse(answer.json()["id"].as_str().unwrap()).unwrap();
        let delete_token = answer.json()["delete_token"].as_str().unwrap().to_owned();
        created.push(Created { key, id, content, delete_token });
    }
    created
}

/// `repair` reads each lost paste's key again just before it rebuilds the
/// row: a key that was read done and naming the lost id, and since then
/// aborted or made to name another paste, has its row rebuilt from a stale
/// reading, so it is not rebuilt (a real ctl process, held between the
/// two readings).
#[tokio::test]
async fn repair_does_not_rebuild_a_paste_whose_key_changed_after_it_was_found() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let created = create_in_one_slot(&cluster).await;
    for paste in &created {
        lose_row(&cluster, &paste.id).await;
    }
    let held = tempfile::tempdir().unwrap();
    let go = held.path().join("go");
    let mut command = tokio::process::Command::new(pastebin_tests::cluster::testbed_binary());
    command
        .args(["ctl", "repair", "--apply", "--json", "--key-shards", &cluster.key_addresses.join(",")])
        .args(["--paste-shards", &cluster.paste_addresses.join(","), "--s3-bucket", &cluster.s3.bucket])
        .args(["--s3-endpoint", cluster.s3.endpoint.as_deref().unwrap_or_default(), "--s3-path-style"])
        .envs([("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test"), ("AWS_REGION", "us-east-1")])
        .env("PASTEBIN_FAILPOINTS", format!("{}=wait:{}", pastebin_ctl::repair::LOST_PASTE_FOUND, go.display()))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let repair = command.spawn().unwrap();
    let reached = go.with_extension("reached");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(120);
    while !reached.exists() {
        assert!(tokio::time::Instant::now() < deadline, "repair finds the lost pastes");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Both were found (one slot, one reading). Now one key is aborted and
    // the other names another paste; K's stored 201 still names the lost ids.
    let (aborted, renamed) = (&created[0], &created[1]);
    let abort = "UPDATE idempotency_keys SET state = 'aborted' WHERE key = $1";
    assert_eq!(sql(key_database(&cluster, &aborted.key), abort, &aborted.key.canonical()).await, 1);
    let other = PasteId::mint(renamed.key.slot());
    let rename = format!("UPDATE idempotency_keys SET paste_id = '{other}' WHERE key = $1");
    assert_eq!(sql(key_database(&cluster, &renamed.key), &rename, &renamed.key.canonical()).await, 1);
    std::fs::write(&go, "").unwrap();

    let output = tokio::time::timeout(std::time::Duration::from_secs(120), repair.wait_with_output())
        .await
        .expect("repair ends by itself")
        .unwrap();
    let (out, err) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(Exit::Failed.code()), "{out}{err}");
    let report = json(&out);
    assert_eq!(report["outcomes"]["cannot_rebuild"], 2, "{report:#}");
    for sample in report["samples"].as_array().unwrap() {
        assert!(sample["reason"].as_str().unwrap().contains("its key changed since it was read"), "{sample}");
    }
    for paste in &created {
        assert_eq!(raw(&cluster, &paste.id).await.0, 404, "{} was not rebuilt", paste.id);
    }
    // Nothing rebuilt: no note about what a rebuilt row lacks.
    let (_, text, _) = ctl(&cluster, &["repair", "--apply"]).await;
    assert!(text.contains("cannot rebuild: 1") && !text.contains("not rebuilt (on neither"), "{text}");
}
