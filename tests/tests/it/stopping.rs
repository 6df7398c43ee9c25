//! Every serving part stops on SIGTERM or SIGINT within its drain timeout,
//! whatever it is doing (docs/operations.md#stopping): waiting for its shards,
//! holding a call on a database that went silent, in the middle of recovery.
//! Real processes, real signals. The bound each test waits is a liveness
//! bound far above any drain timeout here, never a measure of speed.

use std::time::Duration;

use pastebin_core::SlotRange;
use pastebin_keys::KeyClient;
use pastebin_tests::{
    cluster::{start_shard, Cluster, ClusterOptions, Process},
    postgres::sqlite_url,
    shards::new_key,
};

/// How long a stopping process may take before the test calls it stuck.
const LIVENESS: Duration = Duration::from_secs(30);

/// A `host:port` where nothing listens: a shard that never answers.
async fn nobody() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap().to_string()
}

/// Sends `signal` and returns how the process ended; fails if it is still running.
async fn stop(process: &mut Process, signal: &str) -> std::process::ExitStatus {
    process.signal(signal);
    match process.wait_exit(LIVENESS).await {
        Some(status) => status,
        None => panic!("still running {LIVENESS:?} after SIG{signal}; its log:\n{}", process.logs()),
    }
}

fn args(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|part| part.to_string()).collect()
}

#[tokio::test]
async fn a_gateway_that_listens_while_it_waits_for_its_shards_stops_on_sigterm_and_sigint() {
    let objects = tempfile::tempdir().unwrap();
    let (keys, pastes) = (nobody().await, nobody().await);
    for signal in ["TERM", "INT"] {
        let gateway_args = pastebin_tests::cluster::gateway_args(
            std::slice::from_ref(&keys),
            std::slice::from_ref(&pastes),
            objects.path(),
        );
        // It listens only after its first wait for the shards has run out.
        let mut gateway = Process::start(gateway_args, vec![], &["gateway-http", "gateway-grpc"]).await;
        assert!(gateway.wait_for_log("waiting for the shard", LIVENESS).await, "{}", gateway.logs());
        let status = stop(&mut gateway, signal).await;
        assert!(status.success(), "SIG{signal}: a wait has nothing to drain, so it stops cleanly: {status}");
    }
}

#[tokio::test]
async fn a_sweeper_waiting_for_its_shards_stops_on_sigterm() {
    let objects = tempfile::tempdir().unwrap();
    let (keys, pastes) = (nobody().await, nobody().await);
    let objects = objects.path().to_str().unwrap();
    let sweeper_args = args(&["sweeper", "--key-shards", &keys, "--paste-shards", &pastes, "--objects-dir", objects]);
    let mut sweeper = Process::start(sweeper_args, vec![], &[]).await;
    assert!(sweeper.wait_for_log("waiting for the shard", LIVENESS).await, "{}", sweeper.logs());
    let status = stop(&mut sweeper, "TERM").await;
    assert!(status.success(), "{status}; its log:\n{}", sweeper.logs());
}

#[tokio::test]
async fn a_key_service_holding_a_write_its_database_never_commits_stops_within_its_drain_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(dir.path(), "keys.db");
    // The writer holds its group uncommitted for an hour, and the call has no
    // timeout of its own: only the drain timeout can end the wait.
    let env = [
        ("PASTEBIN_FAILPOINTS", "mid_group_commit=sleep:3600000"),
        ("PASTEBIN_GRPC_CALL_TIMEOUT_SECS", "3600"),
        ("PASTEBIN_DRAIN_TIMEOUT_SECS", "2"),
    ];
    let env: Vec<(String, String)> = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let (mut shard, address) = start_shard("key-service", &url, SlotRange::ALL, None, &env).await;
    let keys = KeyClient::new(pastebin_shards::channel(&address, None).unwrap());
    let held = tokio::spawn(async move { keys.begin(&new_key("held by its database")).await });
    assert!(shard.wait_for_log("failpoint: holding", LIVENESS).await, "{}", shard.logs());

    let status = stop(&mut shard, "TERM").await;
    assert!(!status.success(), "work was cut off, and the exit says so: {status}");
    assert!(shard.logs().contains("the drain outlasted the drain timeout"), "{}", shard.logs());
    assert!(held.await.unwrap().is_err(), "the held call got no answer it could take for a commit");
}

#[tokio::test]
async fn a_sweeper_in_the_middle_of_recovery_stops_within_its_drain_timeout() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    cluster.key_client(0).begin(&new_key("a create that never finished")).await.unwrap();
    let mut sweeper = cluster
        .start_sweeper_with(
            &["--recovery-threshold-secs", "0", "--drain-timeout-secs", "2"],
            &[("PASTEBIN_FAILPOINTS", "mid_recovery=sleep:3600000")],
        )
        .await;
    assert!(sweeper.wait_for_log("failpoint: holding", LIVENESS).await, "{}", sweeper.logs());
    let status = stop(&mut sweeper, "TERM").await;
    assert!(!status.success(), "the round was cut off, and the exit says so: {status}");
    assert!(sweeper.logs().contains("the drain outlasted the drain timeout"), "{}", sweeper.logs());
    let pending = cluster.key_client(0).pending_stats().await.unwrap().pending;
    assert_eq!(pending, 1, "a cut-off round changed nothing: the key waits for the next sweeper");
}
