//! Mutual TLS between the parts, on real processes (docs/operations.md,
//! "Certificates"): K and P refuse a plaintext client, a TLS client without
//! a certificate and one whose certificate another CA signed, and serve a
//! properly signed one; a whole create → GET → sweeper recovery runs over
//! mutual TLS between separate gateway, K, P and sweeper processes, with
//! certificates from `pastebin ctl certs` and from the `openssl` CLI.

use std::{path::Path, time::Duration};

use pastebin_core::{IdempotencyKey, KeyState};
use pastebin_ctl::Exit;
use pastebin_keys::KeyClient;
use pastebin_pastes::PasteClient;
use pastebin_proto::api::v1::{paste_api_client::PasteApiClient, GetPasteRequest};
use pastebin_runtime::tls::MutualTls;
use pastebin_shards::channel;
use pastebin_tests::{
    api::{create, get, new_key},
    cluster::{execute as sql, Cluster, ClusterOptions, Process},
    shards::{new_key as new_record, new_paste},
    tls::{ctl_certs, openssl_certs, ClusterTls, TlsFiles},
};
use reqwest::StatusCode;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint};

/// How a part is given its TLS files.
#[derive(Clone, Copy)]
pub(crate) enum Given {
    Flags,
    /// `PASTEBIN_TLS_*` lines in a `PASTEBIN_CONFIG` file, as an operator would deploy them.
    ConfigFile,
}

/// A K or P process on a SQLite file in `dir`, serving mutual TLS with `tls`.
pub(crate) async fn shard(kind: &str, dir: &Path, tls: &TlsFiles, given: Given) -> (Process, String) {
    shard_on(kind, "127.0.0.1:0", dir, tls, given).await
}

async fn shard_on(kind: &str, listen: &str, dir: &Path, tls: &TlsFiles, given: Given) -> (Process, String) {
    let database = format!("sqlite://{}", dir.join(format!("{kind}.db")).display());
    let mut args: Vec<String> = [kind, "--database-url", &database, "--listen", listen].map(String::from).to_vec();
    // What an operator's log shows by default, refused handshakes included.
    let mut env = vec![("RUST_LOG".to_owned(), pastebin_runtime::telemetry::DEFAULT_FILTER.to_owned())];
    match given {
        Given::Flags => args.extend(tls.flags()),
        Given::ConfigFile => {
            let config = dir.join(format!("{kind}.env"));
            let lines =
                [("PASTEBIN_TLS_CERT", &tls.cert), ("PASTEBIN_TLS_KEY", &tls.key), ("PASTEBIN_TLS_CA", &tls.ca)]
                    .map(|(name, path)| format!("{name}={}\n", path.display()));
            std::fs::write(&config, lines.concat()).unwrap();
            env.push(("PASTEBIN_CONFIG".to_owned(), config.to_str().unwrap().to_owned()));
        }
    }
    let process = Process::start(args, env, &[kind]).await;
    let address = process.address(kind).to_owned();
    (process, address)
}

/// A TLS client that trusts the CA but has no certificate of its own.
fn without_certificate(address: &str, ca: &Path) -> Channel {
    let ca = Certificate::from_pem(std::fs::read(ca).unwrap());
    Endpoint::from_shared(format!("https://{address}"))
        .unwrap()
        .tls_config(ClientTlsConfig::new().ca_certificate(ca))
        .unwrap()
        .connect_lazy()
}

/// The three kinds of client K and P must refuse, each with a name for messages.
fn intruders(address: &str, ca: &Path, foreign: &MutualTls) -> Vec<(&'static str, Channel)> {
    vec![
        ("plaintext", channel(&format!("http://{address}"), None).unwrap()),
        ("TLS without a certificate", without_certificate(address, ca)),
        ("certificate from another CA", channel(address, Some(foreign)).unwrap()),
    ]
}

#[tokio::test]
async fn shards_refuse_plaintext_certificateless_and_foreign_clients_and_serve_signed_ones() {
    let temp = tempfile::tempdir().unwrap();
    let certs = ctl_certs(&temp.path().join("certs"));
    // Trusts the servers' CA, but its own certificate was signed by another.
    let other_ca = ctl_certs(&temp.path().join("other-ca"));
    let foreign = TlsFiles { ca: certs.client.ca.clone(), ..other_ca.client }.load();
    let (keys_process, keys) = shard("key-service", temp.path(), &certs.key_service, Given::Flags).await;
    let (pastes_process, pastes) = shard("paste-service", temp.path(), &certs.paste_service, Given::ConfigFile).await;
    let signed = certs.client.load();

    let record = new_record("{}");
    for (who, intruder) in intruders(&keys, &certs.client.ca, &foreign) {
        let refused = KeyClient::new(intruder).begin(&record).await;
        assert!(refused.is_err(), "K served a {who} client: {refused:?}");
    }
    let (paste, _token) = new_paste(chrono::Utc::now(), chrono::Duration::hours(1));
    for (who, intruder) in intruders(&pastes, &certs.client.ca, &foreign) {
        let refused = PasteClient::new(intruder).insert(&paste).await;
        assert!(refused.is_err(), "P served a {who} client: {refused:?}");
    }

    // A client with a certificate the CA signed is served, and sees that
    // none of the refused calls wrote anything.
    let keys = KeyClient::new(channel(&keys, Some(&signed)).unwrap());
    let pastes = PasteClient::new(channel(&pastes, Some(&signed)).unwrap());
    assert!(keys.get(&record.key).await.unwrap().is_none(), "a refused begin stored nothing");
    assert!(pastes.get(&paste.id).await.unwrap().is_none(), "a refused insert stored nothing");
    keys.begin(&record).await.expect("a signed client is served by K");
    pastes.insert(&paste).await.expect("a signed client is served by P");
    assert!(pastes.get(&paste.id).await.unwrap().is_some());
    // The operator sees each refusal, with rustls's reason (docs/operations.md, "Certificates").
    for process in [&keys_process, &pastes_process] {
        let logs = process.logs();
        assert!(logs.contains("serving mutual TLS only"), "{logs}");
        for reason in ["InvalidContentType", "peer sent no certificates", "UnknownIssuer"] {
            assert!(logs.contains("tls accept error error=") && logs.contains(reason), "{reason}:\n{logs}");
        }
    }
}

#[tokio::test]
async fn the_name_checked_is_the_host_of_the_address() {
    let temp = tempfile::tempdir().unwrap();
    let certs = ctl_certs(&temp.path().join("certs"));
    // Reachable at 127.0.0.2, but its certificate names only localhost and 127.0.0.1.
    let (_keys, address) = shard_on("key-service", "127.0.0.2:0", temp.path(), &certs.key_service, Given::Flags).await;
    let keys = KeyClient::new(channel(&address, Some(&certs.client.load())).unwrap());
    let refused = keys.pending_stats().await.expect_err("a certificate for other names is refused");
    assert!(refused.to_string().contains("not valid for name"), "{refused}");
}

/// Polls K (as the test's own signed client) until `key` is no longer pending.
async fn wait_until_resolved(keys: &KeyClient, key: &IdempotencyKey, sweeper: &Process) -> KeyState {
    for _ in 0..300 {
        let state = keys.get(key).await.expect("K answers a signed client").expect("the key exists").state;
        if state != KeyState::Pending {
            return state;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the sweeper never resolved the key; its log:\n{}", sweeper.logs());
}

/// Create → GET → a create crashed before K's done → the sweeper process
/// resolves it → the retry replays the original 201, every hop over mTLS.
async fn whole_saga_and_recovery_over_mutual_tls(tls: ClusterTls) {
    let public_scheme = if tls.public.is_some() { "https://" } else { "http://" };
    let mut cluster = Cluster::start(ClusterOptions { tls: Some(tls), ..Default::default() }).await;
    assert!(cluster.key_addresses[0].starts_with("https://") && cluster.grpc.starts_with(public_scheme));

    let created = create(&cluster.http, Some(&new_key()), "over mutual TLS").await.unwrap();
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let id = created.json()["id"].as_str().unwrap().to_owned();
    let read = get(&cluster.http, &id).await;
    assert_eq!((read.status, read.json()["content"].as_str()), (StatusCode::OK, Some("over mutual TLS")));

    cluster.restart_gateway("before_done").await;
    let key = new_key();
    assert!(create(&cluster.http, Some(&key), "recovered over mTLS").await.is_err(), "the gateway died");
    cluster.restart_gateway("").await;
    let key = IdempotencyKey::parse(&key).unwrap();
    let keys = cluster.key_client(0);
    let stored = keys.get(&key).await.unwrap().unwrap();
    assert_eq!(stored.state, KeyState::Pending);
    let aged = "UPDATE idempotency_keys SET created_at = created_at - 120000 WHERE key = $1";
    assert_eq!(sql(&cluster.key_database_urls[0], aged, &key.canonical()).await, 1);

    let sweeper = cluster.start_sweeper(&["--sweep-interval-secs", "1"]).await;
    assert_eq!(wait_until_resolved(&keys, &key, &sweeper).await, KeyState::Done, "its paste exists on P");
    let retry = create(&cluster.http, Some(&key.canonical()), "recovered over mTLS").await.unwrap();
    assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.body);
    assert_eq!(retry.body, stored.response_body.expose(), "the original 201, same id and delete token");
    let recovered_id = retry.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(get(&cluster.http, &recovered_id).await.status, StatusCode::OK);

    // The operator's ctl reaches the shards with its own certificate, and only with it.
    let client = cluster.tls.as_ref().unwrap().client.clone();
    assert_eq!(ctl_stats(&cluster, Some(&client)).await, Exit::Ok);
    // Without it, ctl sees a TLS shard and refuses with the flags to add.
    assert_eq!(ctl_stats(&cluster, None).await, Exit::Usage);
}

/// `pastebin ctl stats` against the cluster's shards, written as bare `host:port`.
async fn ctl_stats(cluster: &Cluster, tls: Option<&TlsFiles>) -> Exit {
    let bare = |addresses: &[String]| addresses.iter().map(|a| a.replace("https://", "")).collect::<Vec<_>>().join(",");
    let mut argv = vec!["pastebin ctl".to_owned(), "stats".into()];
    argv.extend([
        "--key-shards".into(),
        bare(&cluster.key_addresses),
        "--paste-shards".into(),
        bare(&cluster.paste_addresses),
    ]);
    argv.extend(tls.map(TlsFiles::flags).unwrap_or_default());
    let (mut out, mut err) = (Vec::new(), Vec::new());
    pastebin_ctl::execute(pastebin_ctl::parse_from(&argv).unwrap(), &mut out, &mut err).await
}

#[tokio::test]
async fn create_get_and_sweeper_recovery_run_over_mutual_tls_with_ctl_certs() {
    let temp = tempfile::tempdir().unwrap();
    whole_saga_and_recovery_over_mutual_tls(ctl_certs(&temp.path().join("certs"))).await;
}

#[tokio::test]
async fn create_get_and_sweeper_recovery_run_over_mutual_tls_with_openssl_certs() {
    let temp = tempfile::tempdir().unwrap();
    whole_saga_and_recovery_over_mutual_tls(openssl_certs(temp.path())).await;
}

async fn public_get(channel: Channel, id: &str) -> Result<String, tonic::Status> {
    let reply = PasteApiClient::new(channel).get_paste(GetPasteRequest { id: id.to_owned() }).await?;
    Ok(reply.into_inner().content)
}

#[tokio::test]
async fn the_public_grpc_listener_serves_tls_and_asks_for_certificates_only_when_told() {
    let temp = tempfile::tempdir().unwrap();
    let tls = ctl_certs(&temp.path().join("certs"));
    let mut cluster = Cluster::start(ClusterOptions { tls: Some(tls.clone()), ..Default::default() }).await;
    let created = create(&cluster.http, Some(&new_key()), "public over TLS").await.unwrap();
    let id = created.json()["id"].as_str().unwrap().to_owned();
    let address = cluster.grpc.trim_start_matches("https://").to_owned();
    let public_ca = tls.public.as_ref().expect("ctl certs makes the public listener's certificate").ca.clone();
    let signed = TlsFiles { ca: public_ca.clone(), ..tls.client.clone() }.load();

    // Default --tls-client-auth none: any TLS client that trusts the public CA, no plaintext.
    let anonymous = public_get(without_certificate(&address, &public_ca), &id).await;
    assert_eq!(anonymous.unwrap(), "public over TLS");
    let plaintext = public_get(channel(&format!("http://{address}"), None).unwrap(), &id).await;
    assert!(plaintext.is_err(), "the public listener served plaintext");
    // It serves its own certificate, not the gateway's: a client trusting only the internal CA refuses it.
    let internal_only = public_get(without_certificate(&address, &tls.client.ca), &id).await;
    assert!(internal_only.is_err(), "the public listener served a certificate of the internal CA");

    cluster.gateway.restart(&[("PASTEBIN_TLS_CLIENT_AUTH", "required")], &["gateway-grpc"]).await;
    let anonymous = public_get(without_certificate(&address, &public_ca), &id).await;
    assert!(anonymous.is_err(), "required client auth served a client without a certificate");
    assert_eq!(public_get(channel(&address, Some(&signed)).unwrap(), &id).await.unwrap(), "public over TLS");
}

#[tokio::test]
async fn a_tls_handshake_that_never_finishes_on_the_public_listener_is_dropped_at_its_timeout() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let temp = tempfile::tempdir().unwrap();
    let tls = ctl_certs(&temp.path().join("certs"));
    // 1 s here; 10 s unless set (docs/security.md#total-bounds).
    let env = vec![("PASTEBIN_TLS_HANDSHAKE_TIMEOUT_SECS".to_owned(), "1".to_owned())];
    let cluster = Cluster::start(ClusterOptions { tls: Some(tls), env, ..Default::default() }).await;
    let address = cluster.grpc.trim_start_matches("https://").to_owned();
    // A client that connects, sends the first bytes of a ClientHello record and stalls.
    let mut stalled = tokio::net::TcpStream::connect(&address).await.unwrap();
    stalled.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
    let started = tokio::time::Instant::now();
    let mut received = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(60), stalled.read_to_end(&mut received)).await;
    assert!(closed.is_ok(), "the server never dropped the stalled handshake");
    // Closed well before the default 10 s: the flag is what bounded it.
    assert!(started.elapsed() < Duration::from_secs(9), "dropped after {:?}", started.elapsed());
}

/// A key stolen from a client part (the internet-facing gateway above all)
/// cannot pose as K: a shard serving the gateway's certificate, or its
/// public listener's, is refused by a client of K, and a shard's own
/// certificate is refused from a client. Made by `ctl certs` and by openssl.
#[tokio::test]
async fn no_certificate_but_a_shards_own_is_accepted_as_a_shard() {
    let temp = tempfile::tempdir().unwrap();
    let ctl = ctl_certs(&temp.path().join("certs"));
    let openssl_dir = temp.path().join("openssl");
    std::fs::create_dir(&openssl_dir).unwrap();
    let openssl = openssl_certs(&openssl_dir);
    let public = ctl.public.clone().expect("ctl certs makes the public listener's certificate");
    let impostors = [
        ("ctl certs: the gateway's", &ctl, TlsFiles { ca: ctl.key_service.ca.clone(), ..ctl.gateway.clone() }),
        ("ctl certs: the public listener's", &ctl, TlsFiles { ca: ctl.key_service.ca.clone(), ..public }),
        ("openssl: the gateway's", &openssl, openssl.gateway.clone()),
    ];
    for (which, certs, impostor) in impostors {
        let dir = tempfile::tempdir_in(temp.path()).unwrap();
        let (_keys, address) = shard("key-service", dir.path(), &impostor, Given::Flags).await;
        let keys = KeyClient::new(channel(&address, Some(&certs.client.load())).unwrap());
        let answer = keys.pending_stats().await;
        assert!(answer.is_err(), "a key service serving {which} certificate was trusted: {answer:?}");
    }
    for certs in [&ctl, &openssl] {
        let dir = tempfile::tempdir_in(temp.path()).unwrap();
        let (_keys, address) = shard("key-service", dir.path(), &certs.key_service, Given::Flags).await;
        let genuine = KeyClient::new(channel(&address, Some(&certs.client.load())).unwrap());
        assert!(genuine.pending_stats().await.is_ok(), "the shard's own certificate is trusted");
        let posing_as_client = KeyClient::new(channel(&address, Some(&certs.paste_service.load())).unwrap());
        assert!(posing_as_client.pending_stats().await.is_err(), "a shard's certificate called K as a client");
    }
}

#[tokio::test]
async fn a_ca_bundle_lets_old_and_new_certificates_meet_during_a_ca_roll() {
    let temp = tempfile::tempdir().unwrap();
    let (old, new) = (ctl_certs(&temp.path().join("old")), ctl_certs(&temp.path().join("new")));
    // Roll step 1: every part trusts both CAs; K still presents its old certificate.
    let bundle = temp.path().join("bundle.pem");
    let pems = [&old.client.ca, &new.client.ca].map(|ca| std::fs::read_to_string(ca).unwrap());
    std::fs::write(&bundle, pems.concat()).unwrap();
    let trusting_both = |files: &TlsFiles| TlsFiles { ca: bundle.clone(), ..files.clone() };
    let (_keys, address) = shard("key-service", temp.path(), &trusting_both(&old.key_service), Given::Flags).await;

    // Step 2 has begun for some clients: old and new certificates are both served.
    for (which, client) in [("old", &old.client), ("new", &new.client)] {
        let keys = KeyClient::new(channel(&address, Some(&trusting_both(client).load())).unwrap());
        let stats = keys.pending_stats().await;
        assert!(stats.is_ok(), "a client with the {which} certificate was refused: {stats:?}");
    }
    // A client that already dropped the old CA cannot verify K's old certificate:
    // why the bundle must reach every part before any leaf changes.
    let too_early = KeyClient::new(channel(&address, Some(&new.client.load())).unwrap());
    assert!(too_early.pending_stats().await.is_err());
}
