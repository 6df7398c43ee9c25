//! The etcd of the test harness (`tests/src/etcd.rs`) does what the topology's tests
//! rely on: three members that replicate, writes that fail without a quorum and work
//! again once it is back, a member that restarts on its own data, client mutual TLS, and
//! no member left running after the cluster is dropped. Driven with `etcdctl`.

use std::process::Output;

use pastebin_tests::etcd::{Etcd, EtcdTls};
use pastebin_tests::tls::{ctl_certs, etcd_member};

fn said(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// `etcdctl put KEY VALUE` through `endpoints`; `Err` with what etcdctl said.
async fn put(etcd: &Etcd, endpoints: &str, key: &str, value: &str) -> Result<(), String> {
    let output = etcd.etcdctl_on(endpoints, &["put", key, value]).await;
    if output.status.success() {
        Ok(())
    } else {
        Err(said(&output))
    }
}

/// The value of `key` read through `endpoint` alone, linearizably (the member asks the
/// leader how far to catch up before it answers).
async fn get(etcd: &Etcd, endpoint: &str, key: &str) -> String {
    let output = etcd.etcdctl_on(endpoint, &["get", "--print-value-only", key]).await;
    assert!(output.status.success(), "get {key} through {endpoint}: {}\n{}", said(&output), etcd.logs());
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[tokio::test]
async fn three_members_replicate_refuse_writes_without_a_quorum_and_take_them_once_it_is_back() {
    let mut etcd = Etcd::three().await;
    let endpoints = etcd.endpoints();
    assert_eq!(endpoints.len(), 3);
    assert_eq!(etcd.topology_url(), format!("etcd://{}", endpoints.join(",")));

    put(&etcd, &endpoints[0], "slots/key", "before").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        get(&etcd, &endpoints[2], "slots/key").await,
        "before",
        "written through one member, read through another"
    );

    let killed = etcd.lose_quorum();
    assert_eq!(killed.len(), 2, "two of three killed");
    let survivor = (0..3).find(|m| !killed.contains(m)).expect("one member still runs");
    // Failed, not refused: had the survivor been the leader, it may hold the write in its
    // log and commit it once the quorum is back. Which is why it writes another key.
    let uncertain = put(&etcd, &endpoints[survivor], "slots/other", "without quorum").await;
    assert!(uncertain.is_err(), "a write with one member of three running must not succeed");
    let read = etcd.etcdctl_on(&endpoints[survivor], &["get", "slots/key"]).await;
    assert!(!read.status.success(), "a linearizable read needs the quorum too: {}", said(&read));

    etcd.restore_quorum().await;
    assert_eq!(get(&etcd, &endpoints[killed[0]], "slots/key").await, "before", "a killed member kept its data");
    put(&etcd, &endpoints[killed[0]], "slots/other", "after").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(get(&etcd, &endpoints[survivor], "slots/other").await, "after");
}

#[tokio::test]
async fn a_member_killed_or_stopped_restarts_on_its_own_data_and_catches_up() {
    let mut etcd = Etcd::three().await;
    let endpoints = etcd.endpoints();
    put(&etcd, &endpoints.join(","), "moves/one", "recorded").await.unwrap_or_else(|e| panic!("{e}"));

    etcd.kill(2);
    assert!(etcd.has_quorum());
    // With a quorum a write succeeds, though maybe only after the survivors elected a new
    // leader (the killed member may have led): a busy machine can take longer than one try.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(120);
    while let Err(error) = put(&etcd, &endpoints[..2].join(","), "moves/one", "taken").await {
        assert!(tokio::time::Instant::now() < deadline, "two of three members take a write: {error}");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    // A fresh data directory could not rejoin (its cluster was bootstrapped without it):
    // the member comes back only on its own data.
    etcd.restart(2).await;
    assert_eq!(get(&etcd, &endpoints[2], "moves/one").await, "taken", "it caught up with the write it missed");

    etcd.stop(0);
    put(&etcd, &endpoints[1..].join(","), "moves/one", "done").await.unwrap_or_else(|e| panic!("{e}"));
    etcd.restart(0).await;
    assert_eq!(get(&etcd, &endpoints[0], "moves/one").await, "done");
}

#[tokio::test]
async fn over_mutual_tls_a_member_answers_only_clients_with_a_client_certificate_of_its_ca() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path().join("certs");
    let certs = ctl_certs(&dir);
    let tls = EtcdTls { member: etcd_member(&dir), client: certs.client.clone() };
    let etcd = Etcd::start(1, Some(tls)).await;
    let endpoint = etcd.endpoints().remove(0);

    put(&etcd, &endpoint, "topology/epoch", "1").await.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(get(&etcd, &endpoint, "topology/epoch").await, "1", "ctl's certificate is a client of etcd");

    let anonymous = etcd.etcdctl_as(None, &endpoint, &["get", "topology/epoch"]).await;
    assert!(!anonymous.status.success(), "a client without a certificate is refused: {}", said(&anonymous));
    // etcd checks a client certificate's extended key usage: a shard's certificate as
    // `ctl certs` makes it today (serverAuth only) cannot call etcd.
    let shard = etcd.etcdctl_as(Some(&certs.key_service), &endpoint, &["get", "topology/epoch"]).await;
    assert!(!shard.status.success(), "a serverAuth-only certificate is refused as a client: {}", said(&shard));
    let log = std::fs::read_to_string(etcd.dir().join("member0.log")).unwrap();
    assert!(log.contains("incompatible key usage"), "etcd says why it refused it:\n{log}");
}

#[tokio::test]
async fn dropping_the_cluster_ends_every_member_and_removes_its_data() {
    let etcd = Etcd::three().await;
    let pids = etcd.pids();
    assert_eq!(pids.len(), 3);
    let dir = etcd.dir().to_owned();
    drop(etcd);
    for pid in pids {
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists(), "etcd pid {pid} outlived its cluster");
    }
    assert!(!dir.exists(), "{} is left behind", dir.display());
}
