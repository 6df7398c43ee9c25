//! Readiness against real outages (docs/deployment.md#readiness): a shard
//! whose PostgreSQL is stopped, a gateway whose object store is gone, a
//! sweeper whose round cannot reach K. Each reports not ready on `/readyz`
//! and in gRPC health while `/healthz` stays 200, and is ready again once the
//! outage ends. A gateway one of whose shard processes is killed stays ready
//! (degraded) and names the shard.

use std::time::Duration;

use pastebin_runtime::grpc::check_serving;
use pastebin_shards::channel;
use pastebin_tests::{
    api::{create, new_key},
    cluster::{Cluster, ClusterOptions, Process},
    postgres::OwnServer,
};

/// Generous: a check runs every second, but the machine may be busy.
const PATIENCE: Duration = Duration::from_secs(60);

async fn get(url: &str) -> (u16, String) {
    match reqwest::get(url).await {
        Ok(answer) => (answer.status().as_u16(), answer.text().await.unwrap_or_default()),
        Err(error) => panic!("{url} does not answer: {error}"),
    }
}

/// Polls `admin`'s `/readyz` until it answers `want`; returns that body.
async fn readyz_becomes(admin: &str, want: u16) -> String {
    readyz_says(admin, want, "").await
}

/// Polls `admin`'s `/readyz` until it answers `want` with a body naming
/// `reason`; returns that body.
async fn readyz_says(admin: &str, want: u16, reason: &str) -> String {
    let url = format!("http://{admin}/readyz");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (status, body) = get(&url).await;
        if status == want && body.contains(reason) {
            return body;
        }
        assert!(tokio::time::Instant::now() < deadline, "{url} stayed {status}, never {want} for {reason:?}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn alive(admin: &str) {
    assert_eq!(get(&format!("http://{admin}/healthz")).await.0, 200, "liveness must not follow readiness");
}

async fn grpc_health(address: &str) -> Result<(), String> {
    check_serving(channel(&format!("http://{address}"), None).unwrap().into()).await
}

async fn shard_follows_its_database(kind: &str) {
    let postgres = OwnServer::start().await;
    let url = postgres.fresh_database_url().await;
    let args = [kind, "--database-url", &url, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"];
    let shard = Process::start(args.map(str::to_owned).to_vec(), vec![], &[kind, "admin"]).await;
    let (admin, grpc) = (shard.address("admin").to_owned(), shard.address(kind).to_owned());

    let body = readyz_becomes(&admin, 200).await;
    assert!(body.contains(r#""database":"ok""#), "{body}");
    assert_eq!(grpc_health(&grpc).await, Ok(()));

    postgres.stop().await;
    let body = readyz_becomes(&admin, 503).await;
    assert!(body.contains("the database does not answer"), "{body}");
    assert!(!body.contains(&url), "the database URL must not be shown: {body}");
    assert_eq!(grpc_health(&grpc).await, Err("reports NotServing".to_owned()));
    alive(&admin).await;

    postgres.restart().await;
    readyz_becomes(&admin, 200).await;
    assert_eq!(grpc_health(&grpc).await, Ok(()));
}

#[tokio::test]
async fn key_service_is_not_ready_while_its_database_is_down() {
    shard_follows_its_database("key-service").await;
}

#[tokio::test]
async fn paste_service_is_not_ready_while_its_database_is_down() {
    shard_follows_its_database("paste-service").await;
}

/// A key whose slot the shard `index` of `count` owns (an even split).
fn key_for_shard(index: usize, count: usize) -> String {
    let slots = pastebin_tests::shards::even_split(index, count);
    loop {
        let key = new_key();
        if slots.contains(pastebin_core::IdempotencyKey::parse(&key).unwrap().slot()) {
            return key;
        }
    }
}

/// Round 3 reverses round 2's rule (docs/deployment.md#readiness): a gateway
/// stays ready while a K or P shard is down, and `/readyz` names the shard;
/// only the creates that need it answer 503 + `Retry-After`, and the other
/// shards' creates and reads go on.
#[tokio::test]
async fn gateway_stays_ready_while_a_shard_is_down_and_names_it() {
    let options = ClusterOptions { key_shards: 2, paste_shards: 2, ..ClusterOptions::default() };
    let mut cluster = Cluster::start(options).await;
    let admin = cluster.gateway.address("admin").to_owned();
    let grpc = cluster.gateway.address("gateway-grpc").to_owned();
    let body = readyz_becomes(&admin, 200).await;
    assert!(body.contains(r#""status":"ready""#) && body.contains(r#""shards":"ok""#), "{body}");
    let before = create(&cluster.http, Some(&key_for_shard(0, 2)), "written before").await.unwrap();
    assert_eq!(before.status, 201, "{}", before.body);
    let before_id = before.json()["id"].as_str().unwrap().to_owned();

    // Shards are named by address and range (docs/operations.md#operator-tools).
    cluster.pastes[1].kill().await;
    let dead = format!("paste shard {} (slots 128-255)", cluster.paste_addresses[1]);
    let body = readyz_says(&admin, 200, &dead).await;
    assert!(body.contains(r#""status":"degraded""#), "{body}");
    assert!(!body.contains(&cluster.paste_addresses[0]), "only the dead shard is named: {body}");
    assert_eq!(grpc_health(&grpc).await, Ok(()), "gRPC health follows readiness: still serving");
    alive(&admin).await;
    let unserved = create(&cluster.http, Some(&key_for_shard(1, 2)), "needs the dead shard").await.unwrap();
    assert_eq!(unserved.status, 503, "{}", unserved.body);
    assert!(unserved.headers.contains_key("retry-after"), "{:?}", unserved.headers);
    let served = create(&cluster.http, Some(&key_for_shard(0, 2)), "other slots go on").await.unwrap();
    assert_eq!(served.status, 201, "{}", served.body);
    assert_eq!(get(&format!("{}/raw/{before_id}", cluster.http)).await.0, 200);

    cluster.pastes[1].restart(&[], &["paste-service"]).await;
    readyz_says(&admin, 200, r#""status":"ready""#).await;

    cluster.keys[0].kill().await;
    let body = readyz_says(&admin, 200, &format!("key shard {} (slots 0-127)", cluster.key_addresses[0])).await;
    assert!(body.contains(r#""status":"degraded""#), "{body}");
    cluster.keys[0].restart(&[], &["key-service"]).await;
    readyz_says(&admin, 200, r#""status":"ready""#).await;
}

#[tokio::test]
async fn gateway_is_not_ready_without_its_object_store() {
    // Port 9 (discard) on loopback: nothing listens.
    let options = ClusterOptions { s3_endpoint: Some("http://127.0.0.1:9".into()), ..ClusterOptions::default() };
    let cluster = Cluster::start(options).await;
    let admin = cluster.gateway.address("admin").to_owned();
    let body = readyz_becomes(&admin, 503).await;
    assert!(body.contains("object store"), "{body}");
    assert!(!body.contains("key shard") && !body.contains("paste shard"), "the shards are fine: {body}");
    alive(&admin).await;
}

#[tokio::test]
async fn sweeper_is_not_ready_after_a_round_that_could_not_reach_k() {
    let mut cluster = Cluster::start(ClusterOptions::default()).await;
    let sweeper = cluster.start_sweeper(&["--sweep-interval-secs", "1"]).await;
    let admin = sweeper.address("admin").to_owned();
    readyz_becomes(&admin, 200).await;

    cluster.keys[0].kill().await;
    let body = readyz_becomes(&admin, 503).await;
    assert!(body.contains("sweeper rounds"), "{body}");
    // The round under way at the kill may have listed K before it died and
    // failed only a later call (key retention); the next whole round lists K
    // and says so.
    readyz_says(&admin, 503, "key shards unreachable").await;
    alive(&admin).await;

    cluster.keys[0].restart(&[], &["key-service"]).await;
    readyz_becomes(&admin, 200).await;
}
