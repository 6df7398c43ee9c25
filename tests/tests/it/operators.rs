//! What the people on call use (docs/design.md#operators, docs/alerts.md), against real
//! processes: `pastebin ctl` (through its library entry point, with the
//! exact output an operator would read), the admin listener's `/metrics`
//! and dashboard (the dashboard in a real headless Chromium), and the
//! Prometheus rules and Grafana dashboard (every metric they use exists).

use std::{collections::BTreeSet, path::PathBuf, process::Command, time::Duration};

use chrono::Utc;
use pastebin_core::{IdempotencyKey, KeyState, ManualClock, PasteId, RequestHash, ResponseBody};
use pastebin_ctl::{execute, parse_from, Exit};
use pastebin_keys::NewKey;
use pastebin_tests::{
    api::{create, new_key},
    cluster::{execute as sql, Cluster, ClusterOptions},
};
use serde_json::Value;

/// Stands in for a delete token inside a stored 201 body: it must never be printed.
const SECRET: &str = "dt_NEVER_PRINT_THIS_TOKEN_0123456789abcdefghij";

/// Runs `pastebin ctl ARGS` against the cluster; returns the exit, stdout, stderr.
pub(crate) async fn ctl(cluster: &Cluster, args: &[&str]) -> (Exit, String, String) {
    let mut argv = vec!["pastebin ctl".to_owned()];
    argv.extend(args.iter().map(|a| a.to_string()));
    argv.extend([
        "--key-shards".into(),
        cluster.key_addresses.join(","),
        "--paste-shards".into(),
        cluster.paste_addresses.join(","),
        "--s3-bucket".into(),
        cluster.s3.bucket.clone(),
        "--s3-endpoint".into(),
        cluster.s3.endpoint.clone().unwrap_or_default(),
        "--s3-path-style".into(),
    ]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let exit = execute(parse_from(&argv).expect("valid ctl arguments"), &mut out, &mut err).await;
    let (out, err) = (String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap());
    assert!(!out.contains(SECRET) && !err.contains(SECRET), "a delete token was printed:\n{out}\n{err}");
    assert!(!err.contains("panicked") && !err.contains("stack backtrace"), "{err}");
    (exit, out, err)
}

fn key_shard_of(cluster: &Cluster, key: &IdempotencyKey) -> usize {
    cluster.slot_map().key_shard_index(key.slot())
}

/// Begins a pending key directly on its K shard (as if its gateway died
/// after step 2), with a stored body holding [`SECRET`]; with `paste`, the
/// paste row is inserted on P too (as if it died before step 5).
async fn seed(cluster: &Cluster, paste: bool) -> (IdempotencyKey, PasteId) {
    let key = IdempotencyKey::new_random();
    let paste_id = PasteId::mint(key.slot());
    let body = format!(r#"{{"id":"{paste_id}","delete_token":"{SECRET}"}}"#);
    let new = NewKey {
        key,
        request_hash: RequestHash([9; 32]),
        paste_id: paste_id.clone(),
        response_body: ResponseBody::new(body),
    };
    cluster.slot_map().key_shard(key.slot()).begin(&new).await.unwrap();
    if paste {
        // A day-long paste row under the key's paste id.
        let (mut row, _token) = pastebin_tests::shards::new_paste(Utc::now(), chrono::Duration::days(1));
        row.id = paste_id.clone();
        cluster.slot_map().paste_shard(paste_id.slot()).insert(&row).await.unwrap();
    }
    (key, paste_id)
}

/// Moves a key's creation `seconds` into the past, on its shard's database.
async fn age_key(cluster: &Cluster, key: &IdempotencyKey, seconds: i64) {
    let url = &cluster.key_database_urls[key_shard_of(cluster, key)];
    let statement = format!("UPDATE idempotency_keys SET created_at = created_at - {} WHERE key = $1", seconds * 1000);
    assert_eq!(sql(url, &statement, &key.canonical()).await, 1);
}

async fn tombstones(cluster: &Cluster) -> i64 {
    pastebin_tests::cluster::scalar(
        &cluster.paste_database_urls[0],
        "SELECT COUNT(*) FROM pastes WHERE state = 'tombstoned'",
    )
    .await
}

async fn state_of(cluster: &Cluster, key: &IdempotencyKey) -> KeyState {
    cluster.slot_map().key_shard(key.slot()).get(key).await.unwrap().unwrap().state
}

/// Crashes a create at `failpoint` and restarts the gateway clean; returns the key.
async fn crash_create(cluster: &mut Cluster, failpoint: &str, content: &str) -> IdempotencyKey {
    cluster.restart_gateway(failpoint).await;
    let key = new_key();
    assert!(create(&cluster.http, Some(&key), content).await.is_err(), "the gateway died at {failpoint}");
    cluster.restart_gateway("").await;
    IdempotencyKey::parse(&key).unwrap()
}

#[tokio::test]
async fn pending_lists_stale_keys_of_every_shard_oldest_first_with_their_paste_shard() {
    let cluster = Cluster::start(ClusterOptions { key_shards: 2, paste_shards: 2, ..Default::default() }).await;
    let mut stale = Vec::new();
    for i in 0..6 {
        let (key, paste_id) = seed(&cluster, i % 2 == 0).await;
        age_key(&cluster, &key, 70 + 30 * i).await;
        stale.push((key, paste_id, 70 + 30 * i));
    }
    let (young, _) = seed(&cluster, false).await;
    let slots = cluster.slot_map();

    let (exit, out, err) = ctl(&cluster, &["pending", "--json"]).await;
    assert_eq!(exit, Exit::Ok, "{err}");
    let rows: Vec<Value> =
        out.lines().map(|line| serde_json::from_str(line).expect("one JSON object per line")).collect();
    let mut expected = stale.clone();
    expected.sort_by_key(|(_, _, age)| -age);
    assert_eq!(rows.len(), expected.len(), "{out}");
    for (row, (key, paste_id, age)) in rows.iter().zip(&expected) {
        assert_eq!(row["key"], key.canonical(), "oldest first:\n{out}");
        assert_eq!(row["paste_id"], paste_id.to_string());
        assert_eq!(row["paste_shard"], slots.paste_shard_index(paste_id.slot()));
        assert_eq!(row["key_shard"], key_shard_of(&cluster, key));
        assert_eq!(row["state"], "pending");
        let shown = row["age_seconds"].as_f64().unwrap();
        assert!((shown - *age as f64).abs() < 30.0, "age {shown} for a key {age}s old");
        assert!(row["created_at"].as_str().unwrap().ends_with('Z'));
    }
    assert!(!out.contains(&young.canonical()), "a key younger than 60s is not stale");

    let (exit, table, _) = ctl(&cluster, &["pending"]).await;
    assert_eq!(exit, Exit::Ok);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("AGE") && lines[0].contains("PASTE ID") && lines[0].contains("P SHARD"), "{table}");
    assert!(lines[1].contains(&expected[0].0.canonical()), "the oldest key is on the first row:\n{table}");
    // Columns are aligned: every key starts at the same column.
    let column = lines[1].find(&expected[0].0.canonical()).unwrap();
    assert_eq!(lines[2].find(&expected[1].0.canonical()), Some(column), "{table}");

    let (_, limited, note) = ctl(&cluster, &["pending", "--json", "--limit", "2", "--older-than", "0s"]).await;
    assert_eq!(limited.lines().count(), 2);
    assert!(limited.lines().next().unwrap().contains(&expected[0].0.canonical()));
    assert!(note.contains("raise --limit"), "{note}");
    let (_, all, _) = ctl(&cluster, &["pending", "--json", "--older-than", "0s"]).await;
    assert!(all.contains(&young.canonical()), "--older-than 0s lists every pending key");
}

#[tokio::test]
async fn recover_reads_p_first_dry_run_changes_nothing_and_blind_means_pending() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let committed = crash_create(&mut cluster, "before_done", "committed, never marked").await;
    let orphaned = crash_create(&mut cluster, "after_put", "never inserted").await;
    for key in [&committed, &orphaned] {
        assert_eq!(state_of(&cluster, key).await, KeyState::Pending);
    }

    // Too young: the create might still be in flight.
    let (exit, out, _) = ctl(&cluster, &["recover", &committed.canonical()]).await;
    assert_eq!(exit, Exit::Failed, "{out}");
    assert!(out.contains("may still be in flight"), "{out}");
    assert_eq!(state_of(&cluster, &committed).await, KeyState::Pending);
    age_key(&cluster, &committed, 120).await;
    age_key(&cluster, &orphaned, 120).await;

    let (exit, out, _) = ctl(&cluster, &["recover", &committed.canonical(), "--dry-run"]).await;
    assert_eq!(exit, Exit::Ok);
    assert!(out.contains("would mark done"), "{out}");
    // The paste shard by address and range, never a list position (docs/operations.md#operator-tools).
    let on = format!(" on {} (slots 0-255)", cluster.paste_addresses[0]);
    assert!(out.contains(&on) && !out.contains("on P0"), "{out}");
    let (exit, out, _) = ctl(&cluster, &["recover", &orphaned.canonical(), "--dry-run", "--json"]).await;
    assert_eq!(exit, Exit::Ok);
    let dry: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((dry["decision"].as_str(), dry["dry_run"].as_bool()), (Some("aborted"), Some(true)), "{out}");
    for key in [&committed, &orphaned] {
        assert_eq!(state_of(&cluster, key).await, KeyState::Pending, "a dry run changes nothing");
    }
    // Not even a tombstone: a dry run only reads P.
    let orphan_id = PasteId::parse(dry["paste_id"].as_str().unwrap()).unwrap();
    assert_eq!(tombstones(&cluster).await, 0);
    let p = cluster.paste_client(0);

    let (exit, out, _) = ctl(&cluster, &["recover", &committed.canonical()]).await;
    assert_eq!(exit, Exit::Ok, "{out}");
    assert!(out.contains("marked done"), "{out}");
    assert_eq!(state_of(&cluster, &committed).await, KeyState::Done);
    let (exit, out, _) = ctl(&cluster, &["recover", &orphaned.canonical()]).await;
    assert_eq!(exit, Exit::Ok, "{out}");
    assert!(out.contains("aborted"), "{out}");
    assert_eq!(state_of(&cluster, &orphaned).await, KeyState::Aborted);
    assert_eq!(tombstones(&cluster).await, 1, "the abort went through the fence");
    assert_eq!(p.tombstone_unless_live(&orphan_id).await.unwrap(), pastebin_pastes::IdFate::Tombstoned);
    let (exit, out, _) = ctl(&cluster, &["recover", &committed.canonical()]).await;
    assert_eq!(exit, Exit::Ok);
    assert!(out.contains("already done"), "{out}");

    // P down: the key stays pending, and the exit code says why.
    let (blind, _) = seed(&cluster, false).await;
    age_key(&cluster, &blind, 120).await;
    cluster.pastes[0].kill().await;
    let (exit, out, _) = ctl(&cluster, &["recover", &blind.canonical()]).await;
    assert_eq!(exit, Exit::Unreachable, "{out}");
    assert!(out.contains("left pending"), "{out}");
    assert_eq!(state_of(&cluster, &blind).await, KeyState::Pending, "never abort what cannot be seen");

    let (exit, _, err) = ctl(&cluster, &["recover", &IdempotencyKey::new_random().canonical()]).await;
    assert_eq!(exit, Exit::Failed, "{err}");
}

#[tokio::test]
async fn reconcile_finds_orphan_objects_pending_keys_with_pastes_and_missing_objects() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let (exit, out, err) = ctl(&cluster, &["reconcile", "--json"]).await;
    assert_eq!(exit, Exit::Ok, "{err}");
    let clean: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(clean["pending_with_paste"]["count"], 0);
    assert_eq!(clean["orphan_objects"]["count"], 0);

    let committed = crash_create(&mut cluster, "before_done", "committed, never marked").await;
    let orphaned = crash_create(&mut cluster, "after_put", "never inserted").await;
    let keys = cluster.key_client(0);
    let committed_id = keys.get(&committed).await.unwrap().unwrap().paste_id;
    let orphan_id = keys.get(&orphaned).await.unwrap().unwrap().paste_id;
    // And a live paste whose object was lost (seeded rows have none).
    let (lost, lost_id) = seed(&cluster, true).await;

    let (exit, out, err) = ctl(&cluster, &["reconcile", "--json", "--older-than", "0s"]).await;
    assert_eq!(exit, Exit::MissingObjects, "a live row without its object: {err}");
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["read_only"], true);
    assert_eq!(report["pending_with_paste"]["count"], 2, "{report:#}");
    let with_paste: BTreeSet<String> = report["pending_with_paste"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["key"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(with_paste, BTreeSet::from([committed.canonical(), lost.canonical()]));
    assert_eq!(report["orphan_objects"]["count"], 1, "{report:#}");
    let orphan = &report["orphan_objects"]["samples"][0];
    assert_eq!(orphan["paste_id"], orphan_id.to_string());
    assert_eq!(orphan["key_pending"], true);
    assert_eq!(orphan["past_age_floor"], false);
    assert_eq!(orphan["key_done"], false);
    assert_eq!(report["missing_objects"]["count"], 1, "{report:#}");
    assert_eq!(report["missing_objects"]["samples"][0]["paste_id"], lost_id.to_string());
    assert_eq!(report["missing_objects"]["samples"][0]["key_done"], false);
    assert_eq!(report["objects_read"], 2);

    // Read-only: nothing changed, and the orphan's id was not fenced.
    for key in [&committed, &orphaned, &lost] {
        assert_eq!(state_of(&cluster, key).await, KeyState::Pending);
    }
    assert!(cluster.object_store().await.get(orphan_id.as_str()).await.unwrap().is_some());
    assert_eq!(tombstones(&cluster).await, 0, "reconcile fences nothing");
    assert!(report["pending_with_paste"]["samples"].to_string().contains(committed_id.as_str()));

    let (exit, text, _) = ctl(&cluster, &["reconcile", "--older-than", "0s"]).await;
    assert_eq!(exit, Exit::MissingObjects);
    assert!(text.contains("pending keys whose paste exists: 2"), "{text}");
    assert!(text.contains("objects without a live paste row: 1"), "{text}");
    assert!(text.contains("never delete them by hand"), "{text}");

    cluster.pastes[0].kill().await;
    let (exit, _, err) = ctl(&cluster, &["reconcile", "--older-than", "0s"]).await;
    assert_eq!(exit, Exit::Unreachable, "{err}");
    let shard = format!("P shard {} unreachable", cluster.paste_addresses[0]);
    assert!(err.contains(&shard), "shards are named by address: {err}");
}

#[tokio::test]
async fn stats_level_follows_the_oldest_pending_age() {
    let mut cluster = Cluster::start(ClusterOptions { key_shards: 2, ..Default::default() }).await;
    let level = |out: &str| -> (String, u64) {
        let report: Value = serde_json::from_str(out.trim()).unwrap();
        (report["total"]["level"].as_str().unwrap().to_owned(), report["total"]["pending"].as_u64().unwrap())
    };
    let (exit, out, _) = ctl(&cluster, &["stats", "--json"]).await;
    assert_eq!(exit, Exit::Ok);
    assert_eq!(level(&out), ("healthy".into(), 0));

    let (slow, _) = seed(&cluster, false).await;
    age_key(&cluster, &slow, 10).await;
    let (_, out, _) = ctl(&cluster, &["stats", "--json"]).await;
    assert_eq!(level(&out), ("slow".into(), 1));
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    let shard = key_shard_of(&cluster, &slow);
    assert_eq!(report["key_shards"][shard]["level"], "slow");
    assert_eq!(report["key_shards"][1 - shard]["level"], "healthy");

    age_key(&cluster, &slow, 60).await;
    let (_, text, _) = ctl(&cluster, &["stats"]).await;
    assert!(text.contains("level: recovery"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("total") && l.contains("recovery")), "{text}");

    cluster.keys[1 - shard].kill().await;
    let (exit, out, err) = ctl(&cluster, &["stats", "--json"]).await;
    assert_eq!(exit, Exit::Unreachable, "{err}");
    // A shard that did not answer may hold an older pending: the level is unknown.
    assert_eq!(level(&out), ("unknown".into(), 1));
    let report: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(report["total"]["answered_level"], "recovery", "what could be read is still reported");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// Every metric the sweeper and the admin listener's process own is on
/// `/metrics` after one sweeper round.
#[tokio::test]
async fn metrics_endpoint_exposes_the_sweeper_metrics_after_a_round() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let sweeper = cluster.sweeper(ManualClock::starting_at(Utc::now())).await;
    let state = pastebin_admin::AdminState::new(sweeper.clone());
    sweeper.round(true).await;
    let admin = serve_admin(state).await;
    let body = reqwest::get(format!("{admin}/metrics")).await.unwrap().text().await.unwrap();
    use pastebin_runtime::metrics as m;
    // The create counters, step histogram and burn counter are recorded by the gateway
    // process; they show on its admin listener, not this one. Edge refusals
    // appear once something is refused (tests/tests/it/edge.rs checks them).
    // Group sizes, commit and checkpoint times are recorded by SQLite shards' writers only
    // (group_commit::sqlite_group_sizes_are_on_the_admin_listener checks them),
    // a slot move's gauges by the shards in it (reshard.rs checks them), and
    // durability by each K and P shard (durability.rs checks it), takedowns
    // and reports by the P shard that stored them (keeping.rs checks them), the free
    // space by a gateway that watches its storage (full_disk.rs checks it), requests
    // by the gateway that answered them, stored pastes by each P shard (telemetry.rs
    // checks them).
    let elsewhere = [
        m::TAKEDOWNS,
        m::REPORTS,
        m::CREATES,
        m::SAGA_STEP_SECONDS,
        m::PASTES_BURNED,
        m::PAGE_RENDERS,
        m::PAGE_REVEALS,
        m::EDGE_REFUSALS,
        m::GROUP_COMMIT_WRITES,
        m::SQLITE_COMMIT_SECONDS,
        m::SQLITE_CHECKPOINT_SECONDS,
        m::FROZEN_SLOTS,
        m::SLOT_MOVE_ROWS,
        m::COMMITS_SURVIVE_SERVER_LOSS,
        m::STORAGE_FREE_BYTES,
        m::STORAGE_MIN_FREE_BYTES,
        m::REQUESTS,
        m::LIVE_PASTES,
        m::STORED_BYTES,
    ];
    for name in m::ALL.iter().filter(|n| !elsewhere.contains(n)) {
        assert!(body.lines().any(|l| l.starts_with(name)), "{name} missing from /metrics:\n{body}");
    }
    // A shard is labelled by its address, never its position in a list
    // (docs/alerts.md#paste-shard-unreachable).
    let reachable = format!(r#"pastebin_paste_shard_reachable{{address="{}"}} 1"#, cluster.paste_addresses[0]);
    assert!(body.contains(&reachable), "{body}");
    let pending = format!(r#"pastebin_pending_keys{{address="{}"}} 0"#, cluster.key_addresses[0]);
    assert!(body.contains(&pending), "{body}");
    assert!(!body.contains("shard=\""), "no shard is named by its position in a list:\n{body}");
    assert!(!body.contains("key=") && !body.contains("paste_id="), "no per-key labels");
}

async fn serve_admin(state: pastebin_admin::AdminState) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(pastebin_admin::serve(listener, state, Default::default(), std::future::pending()));
    format!("http://{address}")
}

fn workspace() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ is inside the workspace").to_owned()
}

/// `pastebin_*` names in a PromQL expression, with histogram suffixes folded.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("pastebin_") {
        let tail = &rest[at..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        let name = &tail[..end];
        let base = ["_bucket", "_sum", "_count"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
        names.push(if pastebin_runtime::metrics::ALL.contains(&base) { base.to_owned() } else { name.to_owned() });
        rest = &tail[end..];
    }
    names
}

/// Whether an alert or a legend names a shard as `P0`/`K1` (a position in a
/// list, which differs between processes) instead of its address
/// (docs/alerts.md#paste-shard-unreachable).
fn names_a_shard_by_position(text: &str) -> bool {
    ["P{{", "K{{", "$labels.shard", "{{shard}}", "by (shard)"].iter().any(|by_position| text.contains(by_position))
}

#[test]
fn alert_rules_and_grafana_use_only_exported_metrics_and_say_never_mass_abort() {
    let rules: serde_yaml::Value =
        serde_yaml::from_str(&std::fs::read_to_string(workspace().join("deploy/prometheus/alerts.yml")).unwrap())
            .unwrap();
    let mut used = BTreeSet::new();
    let mut alerts = BTreeSet::new();
    for group in rules["groups"].as_sequence().expect("groups") {
        for rule in group["rules"].as_sequence().expect("rules") {
            let name = rule["alert"].as_str().expect("every rule is an alert");
            alerts.insert(name.to_owned());
            let expr = rule["expr"].as_str().expect("expr");
            let names = metric_names(expr);
            assert!(!names.is_empty(), "{name} uses no pastebin metric");
            used.extend(names);
            assert!(rule["for"].as_str().is_some(), "{name} has a for: duration");
            assert!(["warning", "page"].contains(&rule["labels"]["severity"].as_str().unwrap()), "{name} severity");
            let runbook = rule["annotations"]["runbook"].as_str().expect("runbook");
            assert!(runbook.contains("docs/alerts.md#"), "{name} links the runbook");
            assert!(runbook.to_lowercase().contains("mass-abort"), "{name}'s runbook says do not mass-abort");
        }
    }
    for expected in [
        "PastebinSlowCreates",
        "PastebinRecoveryTerritory",
        "PastebinPendingCountClimbing",
        "PastebinSweeperStalled",
        "PastebinPasteShardUnreachable",
    ] {
        assert!(alerts.contains(expected), "missing alert {expected}");
    }
    let climbing = pastebin_core::alert::CLIMBING_PER_MINUTE;
    let text = std::fs::read_to_string(workspace().join("deploy/prometheus/alerts.yml")).unwrap();
    assert!(text.contains(&format!("> {climbing}")), "the rule and the dashboard climb at the same rate");
    for file in
        ["deploy/prometheus/alerts.yml", "deploy/kubernetes/base/prometheus-rule.yaml", "deploy/grafana/pastebin.json"]
    {
        let text = std::fs::read_to_string(workspace().join(file)).unwrap();
        assert!(!names_a_shard_by_position(&text), "{file} names a shard by its position in a list");
        assert!(text.contains("address"), "{file} names shards by address");
    }
    assert!(names_a_shard_by_position(r#"summary: "Paste shard P{{ $labels.shard }} unreachable""#));

    let grafana: Value =
        serde_json::from_str(&std::fs::read_to_string(workspace().join("deploy/grafana/pastebin.json")).unwrap())
            .unwrap();
    let mut panels = 0;
    let mut exprs = Vec::new();
    for panel in grafana["panels"].as_array().expect("panels") {
        panels += 1;
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            used.extend(metric_names(expr));
            exprs.push(expr);
        }
    }
    assert!(panels >= 6);
    // Every gateway's refusals, summed: each /dashboard lists only its own process's.
    let refusals = "sum by (protocol, reason) (rate(pastebin_edge_refusals_total[5m]))";
    assert!(exprs.contains(&refusals), "no panel shows the edge's refusals by protocol and reason");
    let known: BTreeSet<String> = pastebin_runtime::metrics::ALL.iter().map(|s| s.to_string()).collect();
    let unknown: Vec<_> = used.difference(&known).collect();
    assert!(unknown.is_empty(), "rules or panels use metrics nobody exports: {unknown:?}");
    assert!(used.len() >= 8, "{used:?}");
    // The check above can fail: a made-up name is caught.
    assert_eq!(metric_names("rate(pastebin_made_up_total[1m])"), ["pastebin_made_up_total"]);
}

/// Runs tests/dashboard/check.mjs against `url`; panics with its output unless it passed.
fn check_in_chromium(url: &str, level: &str) -> PathBuf {
    check_in_chromium_with(url, level, &[])
}

/// [`check_in_chromium`], and one line of "Slot moves in progress" holds
/// every text of `moving`.
fn check_in_chromium_with(url: &str, level: &str, moving: &[&str]) -> PathBuf {
    // A refusal of this process's edge, for the dashboard's refusals table
    // (check.mjs wants one row). Recorded here, by every check: the counter is
    // the test process's, and a check must not pass only after another one ran.
    pastebin_edge::refusals::refused(pastebin_edge::refusals::Protocol::Grpc, "client_streams");
    let dir = workspace().join("tests/dashboard");
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.is_ok_and(|o| o.status.success()),
        "node is missing: the dashboard test needs Node.js (Debian: apt-get install -y nodejs npm)"
    );
    assert!(
        std::path::Path::new("/usr/bin/chromium").exists() || std::env::var_os("CHROMIUM").is_some(),
        "chromium is missing: the dashboard test needs it (Debian: apt-get install -y chromium)"
    );
    assert!(
        dir.join("node_modules/playwright-core").is_dir(),
        "playwright-core is missing: run `npm ci --prefix tests/dashboard`"
    );
    let name = if moving.is_empty() { level.to_owned() } else { format!("{level}-moving") };
    let screenshot = workspace().join(format!("target/test-artifacts/dashboard-{name}.png"));
    let _ = std::fs::remove_file(&screenshot);
    // Ends what node started (Chromium) when this check ends, pass or fail.
    let browser = pastebin_tests::process_tag::ProcessTag::new();
    let output = Command::new("node")
        .arg(dir.join("check.mjs"))
        .args([url, level, screenshot.to_str().unwrap()])
        .args(moving)
        .env(browser.env().0, browser.env().1)
        .current_dir(&dir)
        .output()
        .expect("node runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the dashboard check failed ({}):\n{stdout}\n{stderr}", output.status);
    assert!(screenshot.is_file(), "no screenshot at {}", screenshot.display());
    screenshot
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_shows_the_level_of_seeded_pendings_in_a_real_browser() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let mut seeded = Vec::new();
    for _ in 0..3 {
        let (key, _) = seed(&cluster, false).await;
        age_key(&cluster, &key, 20).await;
        seeded.push(key);
    }
    let sweeper = cluster.sweeper(ManualClock::starting_at(Utc::now())).await;
    let state = pastebin_admin::AdminState::new(sweeper).with_sample_interval(Duration::from_millis(500));
    let mut round = pastebin_sweeper::RoundReport::default();
    round.recovery.examined = 2;
    round.recovery.marked_done = 1;
    round.recovery.aborted = 1;
    // check.mjs finds it under "Cleanup errors", its row marked.
    round.reap.errors = 1;
    state.record_round(round);
    let admin = serve_admin(state).await;
    let dashboard = format!("{admin}/dashboard");

    let screenshot = tokio::task::spawn_blocking({
        let dashboard = dashboard.clone();
        move || check_in_chromium(&dashboard, "slow")
    })
    .await
    .unwrap();
    eprintln!("screenshot: {}", screenshot.display());
    if std::env::var_os("PASTEBIN_UPDATE_SCREENSHOTS").is_some() {
        let dark = screenshot.with_file_name("dashboard-slow-dark.png");
        std::fs::copy(dark, workspace().join("docs/screenshots/dashboard-dark.png")).unwrap();
    }

    for key in &seeded {
        age_key(&cluster, key, 100).await;
    }
    tokio::task::spawn_blocking(move || check_in_chromium(&dashboard, "recovery")).await.unwrap();

    // Keys are never on the dashboard, in the page or its data.
    let status = reqwest::get(format!("{admin}/dashboard/status.json")).await.unwrap().text().await.unwrap();
    let page = reqwest::get(format!("{admin}/dashboard")).await.unwrap().text().await.unwrap();
    for key in &seeded {
        assert!(!status.contains(&key.canonical()) && !page.contains(&key.canonical()));
    }
    assert!(!status.contains(SECRET));
    let status: Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["level"], "recovery");
    assert_eq!(status["pending"], 3);
}

/// `status.json` once `ready` holds for it (the sampler runs every 500 ms).
pub(crate) async fn status_when(admin: &str, what: &str, ready: impl Fn(&Value) -> bool) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let status: Value = reqwest::get(format!("{admin}/dashboard/status.json")).await.unwrap().json().await.unwrap();
        if ready(&status) {
            return status;
        }
        assert!(tokio::time::Instant::now() < deadline, "{what}: {status:#}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `pastebin_slot_move_step_age_seconds` of K shard `address` on the admin
/// listener's `/metrics`, once `ready` holds for it (the sampler sets it
/// every 500 ms; a sample taken while a shard restarts sets 0).
async fn step_age_gauge_when(admin: &str, address: &str, ready: impl Fn(f64) -> bool) {
    let labels = [format!(r#"address="{address}""#), r#"kind="key""#.to_owned()];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let body = reqwest::get(format!("{admin}/metrics")).await.unwrap().text().await.unwrap();
        let line = body.lines().find(|line| {
            line.starts_with(pastebin_runtime::metrics::SLOT_MOVE_STEP_AGE_SECONDS)
                && labels.iter().all(|label| line.contains(label.as_str()))
        });
        let age = line.and_then(|line| line.rsplit(' ').next()?.parse::<f64>().ok());
        if age.is_some_and(&ready) {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{address}'s move step age on /metrics: {line:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A `ctl reshard` killed mid-copy leaves its move in the copy step on both
/// shards: the dashboard shows it, in status.json and in Chromium, with
/// both shards by address, their steps and its age; once it has made no
/// step for longer than the threshold, as stalled, with the command that
/// finishes it. (Before, only frozen slots were listed: "none".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dashboard_shows_a_move_killed_mid_copy_and_alerts_once_it_stalls() {
    let mut cluster = Cluster::start(ClusterOptions { empty_key_shards: 1, ..Default::default() }).await;
    let mut created = 0;
    while created < 3 {
        let key = IdempotencyKey::new_random();
        if key.slot().0 < 128 {
            continue;
        }
        let answer = create(&cluster.http, Some(&key.canonical()), "moving").await.unwrap();
        assert_eq!(answer.status, 201, "{}", answer.body);
        created += 1;
    }
    let k = cluster.key_addresses.clone();
    let mut args = crate::reshard::move_args("key", &k[0], &k[1], "128-255");
    args.extend(["--batch", "1"]);
    let failpoint = pastebin_ctl::reshard::failpoint::MID_COPY;
    let (ok, output) = crate::reshard::ctl_reshard(&cluster, &args, failpoint).await;
    assert!(!ok && output.contains(&format!("failpoint {failpoint}")), "{output}");

    let sweeper = cluster.sweeper(ManualClock::starting_at(Utc::now())).await;
    let state = pastebin_admin::AdminState::new(sweeper).with_sample_interval(Duration::from_millis(500));
    let admin = serve_admin(state).await;
    let status = status_when(&admin, "the move shows", |s| s["moving"].as_array().is_some_and(|m| !m.is_empty())).await;
    let moving = &status["moving"][0];
    assert_eq!(moving["steps"], serde_json::json!(["source exporting", "target importing"]), "{status:#}");
    assert_eq!((moving["source"].as_str(), moving["target"].as_str()), (Some(k[0].as_str()), Some(k[1].as_str())));
    assert_eq!((moving["slots"].as_str(), moving["stalled"].as_bool()), (Some("128-255"), Some(false)));
    assert!(moving["age_seconds"].as_f64().is_some_and(|age| age >= 0.0), "{moving}");
    assert_eq!(status["key_shards"][0]["address"], k[0].as_str(), "shards are named by address");
    assert_eq!(status["key_shards"][0]["slots"], "0-255");
    step_age_gauge_when(&admin, &k[0], |age| (0.0..900.0).contains(&age)).await;
    let dashboard = format!("{admin}/dashboard");
    tokio::task::spawn_blocking({
        let (dashboard, source) = (dashboard.clone(), k[0].clone());
        move || check_in_chromium_with(&dashboard, "healthy", &["source exporting", "target importing", &source])
    })
    .await
    .unwrap();

    // Twenty minutes without a step: the shards' records aged in their
    // databases, read back when they restart.
    let twenty_minutes = "UPDATE slot_moves SET started_at = started_at - 1200000, updated_at = updated_at - 1200000 \
                          WHERE step <> $1";
    for shard in 0..2 {
        assert_eq!(sql(&cluster.key_database_urls[shard], twenty_minutes, "done").await, 1);
        cluster.keys[shard].forget_flag("--slots");
        cluster.keys[shard].restart(&[], &["key-service"]).await;
    }
    let status = status_when(&admin, "the move stalls", |s| s["moves_stalled"] == true).await;
    assert!(status["moving"][0]["step_age_seconds"].as_f64().is_some_and(|age| age >= 1200.0), "{status:#}");
    // What PastebinSlotMoveStalled reads (> 900 s), per shard by address (docs/alerts.md#slot-move-stalled).
    for address in &k {
        step_age_gauge_when(&admin, address, |age| age >= 1200.0).await;
    }
    let rerun = format!("rerun `pastebin ctl reshard --kind key --from {} --to {}`", k[0], k[1]);
    tokio::task::spawn_blocking(move || check_in_chromium_with(&dashboard, "healthy", &["STALLED", &rerun]))
        .await
        .unwrap();
}
