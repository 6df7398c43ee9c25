//! `pastebin ctl` never guesses (docs/alerts.md#pastebin-ctl): a shard
//! named in a row is one that said it owns the slot; an owner that cannot be
//! known is called unknown; a summary over shards that did not answer is
//! `unknown`, never `healthy`; a TLS mismatch is named with the flags to add.
//! Against real shard processes, through ctl's library entry point (the
//! exact text an operator reads) or the real binary where the working
//! directory matters.

use std::time::Duration;

use pastebin_core::{IdempotencyKey, PasteId, RequestHash, ResponseBody};
use pastebin_ctl::{execute, parse_from, Exit};
use pastebin_keys::NewKey;
use pastebin_tests::{
    cluster::{execute as sql, gateway_args, run_to_exit, testbed_binary, Cluster, ClusterOptions, Process},
    tls::ctl_certs,
};
use serde_json::Value;

/// Runs `pastebin ctl ARGS`; returns the exit, stdout and stderr.
async fn ctl(args: &[String]) -> (Exit, String, String) {
    let argv = std::iter::once("pastebin ctl".to_owned()).chain(args.iter().cloned());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let exit = execute(parse_from(argv).expect("valid ctl arguments"), &mut out, &mut err).await;
    let (out, err) = (String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap());
    assert!(!err.contains("panicked"), "{err}");
    (exit, out, err)
}

fn shard_flags(cluster: &Cluster) -> Vec<String> {
    vec![
        "--key-shards".into(),
        cluster.key_addresses.join(","),
        "--paste-shards".into(),
        cluster.paste_addresses.join(","),
        "--timeout-secs".into(),
        "2".into(),
    ]
}

fn with(command: &[&str], flags: &[String]) -> Vec<String> {
    command.iter().map(|part| part.to_string()).chain(flags.iter().cloned()).collect()
}

/// Begins a pending key on K whose slot is at least `min_slot`, `age` seconds old.
async fn pending_key(cluster: &Cluster, min_slot: u8, age: i64) -> IdempotencyKey {
    let key = std::iter::repeat_with(IdempotencyKey::new_random).find(|key| key.slot().0 >= min_slot).unwrap();
    let new = NewKey {
        key,
        request_hash: RequestHash([7; 32]),
        paste_id: PasteId::mint(key.slot()),
        response_body: ResponseBody::new("{}".to_owned()),
    };
    cluster.key_client(0).begin(&new).await.unwrap();
    let statement = format!("UPDATE idempotency_keys SET created_at = created_at - {} WHERE key = $1", age * 1000);
    sql(&cluster.key_database_urls[0], &statement, &key.canonical()).await;
    key
}

#[tokio::test]
async fn with_every_paste_shard_down_ctl_calls_the_owner_unknown_and_the_level_unknown() {
    let mut cluster = Cluster::start(ClusterOptions { paste_shards: 2, ..Default::default() }).await;
    let flags = shard_flags(&cluster);
    // A young key, forced in a dry run: no advice to pass --force.
    let young = pending_key(&cluster, 0, 0).await;
    let (_, out, _) = ctl(&with(&["recover", &young.canonical(), "--dry-run", "--force"], &flags)).await;
    assert!(out.contains("would abort"), "{out}");
    assert!(!out.contains("without --force"), "--force was given: {out}");

    // Slots 128-255 belong to the second paste shard.
    let stuck = pending_key(&cluster, 128, 70).await;
    let slot = stuck.slot();
    for shard in &mut cluster.pastes {
        shard.kill().await;
    }
    let unknown = format!("P shard for slot {slot}: unknown — no paste shard that answered owns it");

    let (exit, out, err) = ctl(&with(&["pending"], &flags)).await;
    assert_eq!(exit, Exit::Ok, "K answered: {err}");
    let row = out.lines().find(|line| line.contains(&stuck.canonical())).unwrap_or_else(|| panic!("{out}"));
    assert!(row.contains("unknown") && !row.contains("P0") && !row.contains("P1"), "{row}");
    assert!(out.contains(&unknown), "{out}");
    let (_, json, _) = ctl(&with(&["pending", "--json"], &flags)).await;
    let rows: Vec<Value> = json.lines().map(|line| serde_json::from_str(line).unwrap()).collect();
    let row = rows.iter().find(|row| row["key"] == stuck.canonical()).unwrap();
    assert_eq!((row["paste_shard"].clone(), row["slot"].clone()), (Value::Null, Value::from(slot.0)), "{row}");

    let (exit, out, _) = ctl(&with(&["recover", &stuck.canonical(), "--dry-run"], &flags)).await;
    assert_eq!(exit, Exit::Unreachable, "{out}");
    assert!(out.contains(&unknown) && out.contains("left pending"), "{out}");
    assert!(!out.contains("on P0") && !out.contains("on P1"), "no guessed shard: {out}");

    let (exit, out, _) = ctl(&with(&["stats"], &flags)).await;
    assert_eq!(exit, Exit::Unreachable, "{out}");
    assert!(out.contains("level: unknown (2 shard(s) did not answer"), "{out}");
    assert!(!out.contains("healthy"), "nothing unreachable is called healthy: {out}");
    let (_, json, _) = ctl(&with(&["stats", "--json"], &flags)).await;
    let report: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(report["total"]["level"], "unknown", "{report}");
}

#[tokio::test]
async fn ctl_without_flags_finds_pastebin_data_in_the_working_directory() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("pastebin-data");
    let data = data.to_str().unwrap();
    let up = ["up", "--data-dir", data, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--admin", "127.0.0.1:0"];
    let mut up = Process::start(up.map(String::from).to_vec(), vec![], &["gateway-http"]).await;
    let endpoints = std::path::Path::new(data).join("endpoints.json");
    let written = async {
        while !endpoints.exists() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), written).await.expect("up writes endpoints.json");
    let stats = tokio::process::Command::new(testbed_binary())
        .args(["ctl", "stats"])
        .current_dir(dir.path())
        .env_remove("PASTEBIN_DATA_DIR")
        .output();
    let stats = tokio::time::timeout(Duration::from_secs(60), stats).await.unwrap().unwrap();
    let out = String::from_utf8_lossy(&stats.stdout);
    assert!(stats.status.success(), "{out}\n{}", String::from_utf8_lossy(&stats.stderr));
    assert!(out.contains("level: healthy"), "{out}");
    up.kill().await;
}

/// Runs the testbed to its exit; it must fail, and its stderr is returned.
async fn refused(args: &[String]) -> String {
    let output = run_to_exit(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{args:?} must refuse: {log}");
    log
}

#[tokio::test]
async fn a_tls_mismatch_is_named_with_the_flags_to_add_by_every_client_of_k_and_p() {
    let certs = tempfile::tempdir().unwrap();
    let tls = ctl_certs(&certs.path().join("certs"));
    let options = ClusterOptions { tls: Some(tls.clone()), empty_key_shards: 1, ..Default::default() };
    let cluster = Cluster::start(options).await;
    // host:port without TLS files means plaintext: to a TLS shard.
    let plain: Vec<String> = shard_flags(&cluster).iter().map(|flag| flag.replace("https://", "")).collect();
    // Every ctl command that calls a shard names the flags to add, exit 2;
    // `reshard` calls the two shards of the move itself: the same sentence.
    let (from, to) =
        (cluster.key_addresses[0].replace("https://", ""), cluster.key_addresses[1].replace("https://", ""));
    let (key, id) = (IdempotencyKey::new_random().canonical(), PasteId::mint(pastebin_core::Slot(7)).to_string());
    let reshard = ["reshard", "--without-topology", "--kind", "key", "--from", &from, "--to", &to];
    let commands = [
        vec!["stats"],
        vec!["pending"],
        vec!["recover", &key],
        vec!["reconcile"],
        vec!["repair"],
        vec!["reports"],
        vec!["takedown", &id, "--reason", "spam"],
        [&reshard[..], &["--slots", "128-255"]].concat(),
        [&reshard[..], &["--status"]].concat(),
    ];
    let no_tls_files =
        "serves TLS, but this part has no TLS files: add --tls-ca CA.pem --tls-cert CERT.pem --tls-key KEY.pem";
    for command in commands {
        let (exit, out, err) = ctl(&with(&command, &plain)).await;
        assert_eq!(exit, Exit::Usage, "ctl {command:?}: {out}{err}");
        let named =
            if command[0] == "reshard" { format!("key shard {from} {no_tls_files}") } else { no_tls_files.into() };
        assert!(err.contains(&named), "ctl {command:?}: {err}");
    }
    assert_eq!(
        cluster.key_client(1).describe().await.unwrap().owned,
        pastebin_core::OwnedSlots::Nothing,
        "nothing moved"
    );

    let objects = tempfile::tempdir().unwrap();
    let (keys, pastes) = (&plain[1..2], &plain[3..4]);
    let gateway = refused(&gateway_args(keys, pastes, objects.path())).await;
    assert!(gateway.contains(no_tls_files), "the gateway: {gateway}");
    let objects_dir = objects.path().to_str().unwrap().to_owned();
    let sweeper = with(&["sweeper", "--objects-dir", &objects_dir], &plain[..4]);
    let sweeper = refused(&sweeper).await;
    assert!(sweeper.contains(no_tls_files), "the sweeper: {sweeper}");
    let (key, paste) =
        (cluster.key_addresses[0].replace("https://", ""), cluster.paste_addresses[0].replace("https://", ""));
    let bench = ["bench", "steps", "--key-service", &key, "--paste-service", &paste, "--objects-dir", &objects_dir];
    let bench = refused(&bench.map(String::from)).await;
    assert!(bench.contains(&format!("key shard {key} {no_tls_files}")), "bench steps: {bench}");

    let plaintext = Cluster::start(ClusterOptions::default()).await;
    let bare: Vec<String> = shard_flags(&plaintext).iter().map(|flag| flag.replace("http://", "")).collect();
    let (exit, _, err) = ctl(&[with(&["stats"], &bare), tls.client.flags()].concat()).await;
    assert_eq!(exit, Exit::Usage, "{err}");
    assert!(err.contains("serves plaintext, but this part uses TLS"), "{err}");
}
