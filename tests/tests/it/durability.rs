//! Each shard knows whether a commit it acknowledged survives the loss of
//! its database server (docs/operations.md#durability-and-failover), and
//! says so in `Describe`, `/readyz`, `ctl stats` and its log; with
//! `--require-synchronous-standby` it refuses to start unless it does.
//! Real PostgreSQL servers: a single one, and a primary with a standby made
//! by `pg_basebackup`, streaming synchronously or not.

use pastebin_ctl::Exit;
use pastebin_runtime::durability::Reported;
use pastebin_tests::{
    cluster::{run_to_exit, Cluster, ClusterOptions, Process},
    postgres::fresh_database_url,
    replication::{ReplicatedServer, Replication},
};
use serde_json::Value;

use crate::operators::ctl;

/// A K shard on `database_url` with its admin listener, started with `extra` flags.
async fn key_shard(database_url: &str, extra: &[&str]) -> Process {
    let args = ["key-service", "--database-url", database_url, "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"];
    let args = args.iter().chain(extra).map(|a| a.to_string()).collect();
    Process::start(args, Vec::new(), &["key-service", "admin"]).await
}

async fn described(shard: &Process) -> Reported {
    let address = format!("http://{}", shard.address("key-service"));
    pastebin_keys::KeyClient::new(pastebin_shards::channel(&address, None).unwrap())
        .durability()
        .await
        .unwrap()
        .expect("the shard read its durability before it listened")
}

async fn readyz(shard: &Process) -> Value {
    let url = format!("http://{}/readyz", shard.address("admin"));
    reqwest::get(url).await.unwrap().json().await.unwrap()
}

#[tokio::test]
async fn a_single_server_is_reported_unsafe_and_the_flag_refuses_to_start() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    for reported in [
        cluster.key_client(0).durability().await.unwrap().expect("K read it"),
        cluster.paste_client(0).durability().await.unwrap().expect("P read it"),
    ] {
        assert_eq!(reported.kind, "single_server", "{reported:?}");
        assert_eq!(reported.commits_survive_server_loss, Some(false));
        assert!(reported.detail.contains("no standby"), "{reported:?}");
    }
    assert!(cluster.keys[0].logs().contains("can be lost on a failover"), "a warning at start-up");
    assert!(cluster.pastes[0].logs().contains("can be lost on a failover"));

    let (exit, out, _) = ctl(&cluster, &["stats", "--json"]).await;
    assert_eq!(exit, Exit::Ok);
    let stats: Value = serde_json::from_str(out.trim()).unwrap();
    let durability = stats["durability"].as_array().expect("durability per shard");
    let shards: Vec<&str> = durability.iter().map(|d| d["shard"].as_str().unwrap()).collect();
    let (k, p) = (cluster.key_addresses[0].as_str(), cluster.paste_addresses[0].as_str());
    assert_eq!(shards, [k, p], "shards are named by address");
    assert!(durability.iter().all(|d| d["kind"] == "single_server" && d["commits_survive_server_loss"] == false));
    let (_, text, _) = ctl(&cluster, &["stats"]).await;
    assert!(text.contains(&format!("durability: {k} single_server, {p} single_server")), "{text}");
    assert!(text.contains(&format!("commits on {k}, {p} can be lost on a failover")), "{text}");

    let database_url = fresh_database_url().await;
    let shard = key_shard(&database_url, &[]).await;
    let ready = readyz(&shard).await;
    assert_eq!(ready["status"], "ready", "an unsafe configuration is reported, not a reason to stop: {ready}");
    assert_eq!(ready["durability"]["kind"], "single_server", "{ready}");
    assert_eq!(ready["durability"]["commits_survive_server_loss"], false);
    let metrics =
        reqwest::get(format!("http://{}/metrics", shard.address("admin"))).await.unwrap().text().await.unwrap();
    assert!(metrics.contains("pastebin_commits_survive_server_loss 0"), "{metrics}");

    let refused = run_to_exit(&[
        "key-service",
        "--database-url",
        &database_url,
        "--listen",
        "127.0.0.1:0",
        "--require-synchronous-standby",
    ])
    .await;
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr).into_owned() + &String::from_utf8_lossy(&refused.stdout);
    assert!(said.contains("--require-synchronous-standby") && said.contains("single server"), "{said}");
    assert!(said.contains("synchronous_standby_names"), "says what to configure: {said}");
}

#[tokio::test]
async fn a_synchronous_standby_is_reported_safe_and_an_asynchronous_one_is_not() {
    let synchronous = ReplicatedServer::start(Replication::Synchronous).await;
    let database = synchronous.fresh_database().await;
    let url = ReplicatedServer::url(synchronous.primary_port, &database);
    let shard = key_shard(&url, &["--require-synchronous-standby"]).await;
    let reported = described(&shard).await;
    assert_eq!(reported.kind, "synchronous_standby", "{reported:?}");
    assert_eq!(reported.commits_survive_server_loss, Some(true));
    assert_eq!(readyz(&shard).await["durability"]["kind"], "synchronous_standby");
    assert!(!shard.logs().contains("can be lost on a failover"), "{}", shard.logs());

    let asynchronous = ReplicatedServer::start(Replication::Asynchronous).await;
    let database = asynchronous.fresh_database().await;
    let url = ReplicatedServer::url(asynchronous.primary_port, &database);
    let shard = key_shard(&url, &[]).await;
    let reported = described(&shard).await;
    assert_eq!(reported.kind, "asynchronous_standbys", "{reported:?}");
    assert_eq!(reported.commits_survive_server_loss, Some(false));
    assert!(shard.logs().contains("can be lost on a failover"));
    let refused = run_to_exit(&[
        "key-service",
        "--database-url",
        &url,
        "--listen",
        "127.0.0.1:0",
        "--require-synchronous-standby",
    ])
    .await;
    assert!(!refused.status.success(), "an asynchronous standby is no synchronous one");
}
