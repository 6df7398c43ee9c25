//! A shard that vanishes without a reset (docs/design.md#shard-connections):
//! the simulation found that a gateway's connection to such a shard carried
//! every later call into its timeout forever, even once the shard was
//! reachable again. HTTP/2 pings now drop the dead connection, and the next
//! call connects afresh.

use std::time::Duration;

use pastebin_tests::{
    api,
    cluster::{Cluster, ClusterOptions},
    freezer::FreezingProxy,
};

/// Well past the client's ping interval and timeout (10 s + 5 s).
const PATIENCE: Duration = Duration::from_secs(60);

#[tokio::test]
async fn a_gateway_recovers_from_a_key_shard_that_went_silent() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let target = cluster.key_addresses[0].trim_start_matches("http://").to_owned();
    let proxy = FreezingProxy::start(&target).await;
    let gateway = cluster.gateway_with_key_shards(std::slice::from_ref(&proxy.address)).await;
    let http = format!("http://{}", gateway.address("gateway-http"));
    let before = api::create(&http, Some(&api::new_key()), "before the silence").await.unwrap();
    assert_eq!(before.status, 201, "{}", before.body);

    proxy.freeze();
    let during = api::create(&http, Some(&api::new_key()), "during the silence").await.unwrap();
    assert_eq!(during.status, 503, "{}", during.body);
    proxy.thaw();

    // The connection made before the silence never carries a byte again: only
    // a new one can. Each create here has its own key, so none can replay.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let after = api::create(&http, Some(&api::new_key()), "after the silence").await.unwrap();
        if after.status == 201 {
            break;
        }
        assert_eq!(after.status, 503, "{}", after.body);
        assert!(
            tokio::time::Instant::now() < deadline,
            "the gateway kept the dead connection to K for {PATIENCE:?}: {}",
            after.body
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
