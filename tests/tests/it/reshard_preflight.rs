//! What `ctl reshard` refuses before it asks a shard anything
//! (docs/operations.md#moving-slots): a shard the gateways and sweepers do
//! not list, and a name that is not one of their addresses. Each is a usage
//! error (exit 2) that says what was expected, and nothing moves.

use pastebin_core::{OwnedSlots, SlotRange};
use pastebin_tests::{
    cluster::{start_shard, Cluster, ClusterOptions},
    postgres::fresh_database_url,
};

use crate::reshard::{ctl_command, ctl_reshard_command, move_args};

/// `ctl reshard ARGS` with the cluster's lists in its environment (as the
/// gateway's), `extra` variables on top: its exit code and what it printed.
async fn reshard(cluster: &Cluster, args: &[&str], extra: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut command = ctl_reshard_command(cluster, args, "");
    command.envs(extra.iter().copied());
    let output = tokio::time::timeout(std::time::Duration::from_secs(120), command.output())
        .await
        .expect("ctl reshard ends by itself")
        .expect("run ctl reshard");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    (output.status.code(), text)
}

async fn nothing_moved(cluster: &Cluster) {
    let source = cluster.key_client(0).describe().await.unwrap();
    assert_eq!((source.owned, source.frozen), (SlotRange::ALL.into(), None), "the source kept and serves every slot");
    assert_eq!(cluster.key_client(1).describe().await.unwrap().owned, OwnedSlots::Nothing);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_to_a_shard_the_callers_do_not_list_is_refused_and_moves_nothing() {
    let cluster = Cluster::start(ClusterOptions { empty_key_shards: 1, ..Default::default() }).await;
    // Started owning nothing, as a new shard is, but in no caller's list.
    let url = fresh_database_url().await;
    let (_stray, stray) = start_shard("key-service", &url, OwnedSlots::Nothing, None, &[]).await;
    let k = &cluster.key_addresses;
    let (exit, output) = reshard(&cluster, &move_args("key", &k[0], &stray, "0-63"), &[]).await;
    assert_eq!(exit, Some(2), "{output}");
    assert!(output.contains(&format!("--to {stray} is not a listed key shard")), "{output}");
    assert!(output.contains(&format!("{}, {}", k[0], k[1])), "the message names the listed shards: {output}");
    nothing_moved(&cluster).await;
    let stray_owns = pastebin_keys::KeyClient::new(pastebin_shards::channel(&stray, None).unwrap());
    assert_eq!(stray_owns.describe().await.unwrap().owned, OwnedSlots::Nothing);

    // The list is the one the command is given: a list without the source
    // refuses a move between two real shards.
    let (exit, output) =
        reshard(&cluster, &move_args("key", &k[0], &k[1], "0-63"), &[("PASTEBIN_KEY_SHARDS", &k[1])]).await;
    assert_eq!(exit, Some(2), "{output}");
    assert!(output.contains(&format!("--from {} is not a listed key shard", k[0])), "{output}");
    nothing_moved(&cluster).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_name_that_is_no_listed_address_is_a_usage_error_not_an_outage() {
    let cluster = Cluster::start(ClusterOptions { empty_key_shards: 1, ..Default::default() }).await;
    let k = &cluster.key_addresses;
    for (from, to, says) in [
        ("K0", k[1].as_str(), "--from K0 is not a host:port; expected the host:port of one of the key shards"),
        (k[0].as_str(), "no-such-shard.invalid:7161", "--to no-such-shard.invalid:7161 does not resolve"),
    ] {
        let (exit, output) = reshard(&cluster, &move_args("key", from, to, "0-63"), &[]).await;
        assert_eq!(exit, Some(2), "{output}");
        assert!(output.contains(says), "{output}");
        assert!(!output.contains("rerun the same command when the shard answers"), "not an outage: {output}");
    }
    // No list at all: say which one is missing.
    let (exit, output) = reshard(
        &cluster,
        &move_args("key", &k[0], &k[1], "0-63"),
        &[("PASTEBIN_KEY_SHARDS", ""), ("PASTEBIN_PASTE_SHARDS", "")],
    )
    .await;
    assert_eq!(exit, Some(2), "{output}");
    assert!(output.contains("no shard addresses: pass --key-shards and --paste-shards"), "{output}");
    nothing_moved(&cluster).await;
}

/// A move names the topology store that decides it, or says by its own flag
/// that the deployment has none: a bare `ctl reshard` is a usage error that
/// names both ways, and nothing moves. `--status` needs neither.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_move_that_names_no_topology_is_refused_unless_it_says_it_moves_without_one() {
    let cluster = Cluster::start(ClusterOptions { empty_key_shards: 1, ..Default::default() }).await;
    let k = &cluster.key_addresses;
    let bare = |args: Vec<&str>| {
        let mut command = ctl_command(&cluster, "");
        command.arg("reshard").args(args);
        command
    };
    let output = bare(move_args("key", &k[0], &k[1], "128-255")).output().await.expect("run ctl reshard");
    let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert_eq!(output.status.code(), Some(2), "{text}");
    assert!(text.contains("add --topology etcd://") && text.contains("--without-topology"), "{text}");
    nothing_moved(&cluster).await;

    let status = [&["--status"][..], &["--kind", "key", "--from", &k[0], "--to", &k[1]]].concat();
    let output = bare(status).output().await.expect("run ctl reshard --status");
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));

    let (exit, text) = reshard(&cluster, &move_args("key", &k[0], &k[1], "128-255"), &[]).await;
    assert_eq!(exit, Some(0), "with the flag the shards' own records decide: {text}");
    assert_eq!(cluster.key_client(1).describe().await.unwrap().owned, OwnedSlots::Range("128-255".parse().unwrap()));
}
