//! A data directory, a SQLite file and an objects directory belong to one
//! process at a time (docs/operations.md#locks): a second one exits at once,
//! names the first, and touches nothing of it. Real processes.

use std::time::Duration;

use pastebin_tests::cluster::{gateway_args, run_to_exit, Process};

const LIVENESS: Duration = Duration::from_secs(30);

fn up_args(data: &std::path::Path) -> Vec<String> {
    let data = data.to_str().expect("a UTF-8 temp path");
    ["up", "--data-dir", data, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--admin", "127.0.0.1:0"]
        .map(String::from)
        .to_vec()
}

async fn refused(args: &[String]) -> String {
    let output = run_to_exit(&args.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "{args:?} must refuse: {stderr}");
    stderr
}

#[tokio::test]
async fn a_second_process_on_a_running_ups_directory_files_or_objects_exits_naming_the_first() {
    let data = tempfile::tempdir().unwrap();
    let mut first = Process::start(up_args(data.path()), vec![], &["gateway-http", "admin"]).await;
    let lock_file = data.path().join("pastebin.lock");
    let web = format!("http://{}", first.address("gateway-http"));
    // The lock names the addresses once they are bound, just before `up` says it is up.
    let described = async {
        while !std::fs::read_to_string(&lock_file).unwrap_or_default().contains(&web) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(LIVENESS, described).await.expect("up describes itself in its lock file");
    let endpoints = std::fs::read(data.path().join("endpoints.json")).unwrap();
    let holder = format!("pid {} (pastebin up)", first.pid());

    let second_up = refused(&up_args(data.path())).await;
    assert!(
        second_up.contains(&format!("the data directory {} is in use by {holder}", data.path().display())),
        "{second_up}"
    );
    assert!(second_up.contains(&web), "the refusal names the first one's addresses: {second_up}");
    assert!(second_up.contains("pass another --data-dir"), "{second_up}");

    let keys_db = data.path().join("keys.db");
    let url = format!("sqlite://{}", keys_db.display());
    let shard = refused(&["key-service", "--database-url", &url, "--listen", "127.0.0.1:0"].map(String::from)).await;
    assert!(shard.contains(&format!("the SQLite database {} is in use by {holder}", keys_db.display())), "{shard}");

    let objects = data.path().join("objects");
    let nowhere = vec!["127.0.0.1:9".to_owned()];
    let gateway = refused(&gateway_args(&nowhere, &nowhere, &objects)).await;
    assert!(
        gateway.contains(&format!("the objects directory {} is in use by {holder}", objects.display())),
        "{gateway}"
    );

    assert_eq!(std::fs::read(data.path().join("endpoints.json")).unwrap(), endpoints, "endpoints.json untouched");
    let page = reqwest::get(format!("{web}/healthz")).await.unwrap();
    assert!(page.status().is_success(), "the first one still serves: {}", page.status());

    first.signal("INT");
    let stopped = first.wait_exit(LIVENESS).await.expect("up stops on Ctrl-C");
    assert!(stopped.success(), "{stopped}; its log:\n{}", first.logs());
    let mut again = Process::start(up_args(data.path()), vec![], &["gateway-http"]).await;
    again.kill().await;
}
