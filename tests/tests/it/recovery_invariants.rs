//! The sweeper's promises under load: the seed's one-minute outage and a
//! randomized run of crashes, outages and retries, both checked by one
//! invariant checker over the real shards.

use std::{collections::HashMap, time::Duration};

use chrono::Utc;
use pastebin_core::ManualClock;
use pastebin_tests::{
    api::{create, get, new_key},
    cluster::{key_table, live_ids, Cluster, ClusterOptions},
};
use reqwest::StatusCode;

fn a_minute_later() -> ManualClock {
    let clock = ManualClock::starting_at(Utc::now());
    clock.advance(Duration::from_secs(61));
    clock
}

/// Retries `key` like a client would (same key, same body) until a 201.
async fn retry_until_created(http: &str, key: &str, content: &str) -> String {
    for _ in 0..20 {
        if let Ok(answer) = create(http, Some(key), content).await {
            if answer.status == StatusCode::CREATED {
                return answer.body;
            }
            assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{}", answer.body);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("key {key} never got its 201");
}

/// What must hold once the dust settles:
/// - every key has exactly one live paste, and it is the id its 201s named;
/// - every 201 ever returned for a key is byte-identical and readable;
/// - no done key lacks a live paste; no pending key is left;
/// - there are no live pastes that no key names (no duplicates).
async fn check_invariants(
    cluster: &Cluster,
    answers: &HashMap<String, Vec<String>>,
    contents: &HashMap<String, String>,
) {
    let mut keys = Vec::new();
    for url in &cluster.key_database_urls {
        keys.extend(key_table(url).await);
    }
    let mut live = std::collections::HashSet::new();
    for url in &cluster.paste_database_urls {
        live.extend(live_ids(url).await);
    }
    assert_eq!(keys.len(), contents.len(), "one key row per key");
    for (key, state, paste_id, _) in &keys {
        assert_eq!(state, "done", "key {key} is {state}: nothing may be left pending or aborted after retries");
        assert!(live.contains(paste_id), "done key {key} names {paste_id}, which is not a live paste");
        let bodies = &answers[key];
        assert!(!bodies.is_empty());
        assert!(bodies.iter().all(|b| b == &bodies[0]), "key {key} got different 201s");
        let named: serde_json::Value = serde_json::from_str(&bodies[0]).unwrap();
        assert_eq!(named["id"], paste_id.as_str(), "the 201 names the key's paste");
        let read = get(&cluster.http, paste_id).await;
        assert_eq!(read.status, StatusCode::OK);
        assert_eq!(read.json()["content"], contents[key].as_str());
    }
    assert_eq!(live.len(), keys.len(), "no duplicate pastes: exactly one live paste per key");
}

#[tokio::test]
async fn the_one_minute_outage_recovers_without_duplicates_or_losses() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let mut contents = HashMap::new();
    let mut answers: HashMap<String, Vec<String>> = HashMap::new();
    // Some creates succeed before the outage.
    for i in 0..10 {
        let key = new_key();
        let content = format!("before the outage #{i}");
        answers.entry(key.clone()).or_default().push(retry_until_created(&cluster.http, &key, &content).await);
        contents.insert(key, content);
    }

    // P goes down; creates keep arriving and are left pending (503).
    cluster.pastes[0].kill().await;
    let mut stuck = Vec::new();
    for i in 0..60 {
        let key = new_key();
        let content = format!("during the outage #{i}");
        let answer = create(&cluster.http, Some(&key), &content).await.unwrap();
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        stuck.push(key.clone());
        contents.insert(key, content);
    }
    // A minute passes; the sweeper cannot see P, so it aborts nothing.
    cluster.age_pending_keys(Duration::from_secs(61)).await;
    let sweeper = cluster.sweeper(a_minute_later()).await;
    let blind = sweeper.recover_stale().await;
    assert_eq!((blind.aborted, blind.marked_done, blind.skipped_unreachable), (0, 0, 60), "{blind:?}");

    // P comes back; one sweep resolves every stale pending.
    cluster.pastes[0].restart(&[], &["paste-service"]).await;
    let back = sweeper.recover_stale().await;
    assert_eq!(back.aborted + back.marked_done, 60, "{back:?}");
    let stats = cluster.key_client(0).pending_stats().await.unwrap();
    assert_eq!(stats.pending, 0, "no pending older than threshold + one sweep");

    // Every client retries; each gets one answer, consistently.
    for key in &stuck {
        let body = retry_until_created(&cluster.http, key, &contents[key]).await;
        let again = retry_until_created(&cluster.http, key, &contents[key]).await;
        assert_eq!(body, again);
        answers.entry(key.clone()).or_default().extend([body, again]);
    }
    check_invariants(&cluster, &answers, &contents).await;
}

/// A tiny deterministic generator, so a failing run replays from its seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[tokio::test]
async fn randomized_crashes_outages_and_retries_keep_every_invariant() {
    let seed = std::env::var("PASTEBIN_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| Utc::now().timestamp_nanos_opt().unwrap_or(1) as u64 | 1);
    println!("randomized run seed: {seed} (replay with PASTEBIN_TEST_SEED={seed})");
    let mut rng = Rng(seed);
    // Random gateway crashes at every step boundary; the process is restarted when it dies.
    let crashes = "after_k_begin=chance:0.04,after_put=chance:0.04,after_p_insert=chance:0.04,before_done=chance:0.02,after_done=chance:0.04";
    let mut cluster = Cluster::start(ClusterOptions { failpoints: Some(crashes.into()), ..Default::default() }).await;
    // An over-eager sweeper (no recovery threshold at all: every pending key
    // is stale to it) races the live creates the whole time: only the fence
    // keeps it from doing harm.
    let eager = pastebin_sweeper::SweeperSettings { recovery_threshold: Duration::ZERO, ..Default::default() };
    let sweeper = cluster.sweeper_with(a_minute_later(), eager).await;

    let keys: Vec<(String, String)> =
        (0..120).map(|i| (new_key(), format!("randomized paste #{i} seed {seed}"))).collect();
    let mut answers: HashMap<String, Vec<String>> = HashMap::new();
    let mut paste_service_down = false;
    let (mut crashes_seen, mut outages) = (0, 0);
    for step in 0..400 {
        let (key, content) = &keys[rng.below(keys.len() as u64) as usize];
        match create(&cluster.http, Some(key), content).await {
            Ok(answer) if answer.status == StatusCode::CREATED => {
                answers.entry(key.clone()).or_default().push(answer.body)
            }
            Ok(answer) => assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "step {step}: {}", answer.body),
            // The gateway died at a failpoint: bring it back with the same failpoints.
            Err(_) => {
                crashes_seen += 1;
                cluster.restart_gateway(crashes).await;
            }
        }
        match rng.below(40) {
            0 if !paste_service_down => {
                cluster.pastes[0].kill().await;
                paste_service_down = true;
                outages += 1;
            }
            1 | 2 if paste_service_down => {
                cluster.pastes[0].restart(&[], &["paste-service"]).await;
                paste_service_down = false;
            }
            3..=5 => {
                sweeper.recover_stale().await;
            }
            _ => {}
        }
    }

    println!("{crashes_seen} gateway crashes, {outages} paste-service outages");
    assert!(crashes_seen > 0, "the run crashed nothing: it proves nothing");

    // The outage ends, the gateway runs clean, the sweeper sweeps, clients retry.
    if paste_service_down {
        cluster.pastes[0].restart(&[], &["paste-service"]).await;
    }
    cluster.restart_gateway("").await;
    sweeper.recover_stale().await;
    let contents: HashMap<String, String> = keys.iter().cloned().collect();
    for (key, content) in &keys {
        let body = retry_until_created(&cluster.http, key, content).await;
        answers.entry(key.clone()).or_default().push(body);
    }
    check_invariants(&cluster, &answers, &contents).await;
}
