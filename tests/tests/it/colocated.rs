//! The colocated create on real processes (docs/design.md#the-colocated-create):
//! one shard serving K and P on one database, each create one commit. Every
//! test runs twice, on the embedded default (`pastebin up --colocated`: one
//! SQLite file, objects in a directory) and on a deployment
//! (`colocated-shard` on PostgreSQL, a gateway process on SeaweedFS's S3).
//! Crashes are real: a failpoint aborts the process that creates.

use std::{sync::Arc, time::Duration};

use pastebin_core::IdempotencyKey;
use pastebin_objects::{LocalDirStore, ObjectStore};
use pastebin_tests::{
    api::{contention_env, create, create_within, get, new_key},
    cluster::{scalar, Cluster, ClusterOptions, Process},
    shards::Backend,
};
use reqwest::StatusCode;

/// A colocated deployment under test: where it answers, its one database,
/// its objects, its shard as the test calls it, and the process that
/// creates (`up` itself, or the gateway).
struct Colocated {
    http: String,
    database_url: String,
    objects: Arc<dyn ObjectStore>,
    keys: pastebin_keys::KeyClient,
    deployment: Deployment,
}

enum Deployment {
    Up { up: Box<Process>, _data: tempfile::TempDir },
    Cluster(Box<Cluster>),
}

const UP_PARTS: &[&str] = &["colocated-shard", "gateway-http", "gateway-grpc", "admin"];
const GATEWAY_PARTS: &[&str] = &["gateway-http", "gateway-grpc", "admin"];

impl Colocated {
    async fn start(backend: Backend, failpoints: &str, env: Vec<(String, String)>) -> Self {
        match backend {
            Backend::Sqlite => Self::up(failpoints, env).await,
            Backend::Postgres => Self::deployment(failpoints, env).await,
        }
    }

    async fn up(failpoints: &str, mut env: Vec<(String, String)>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let data = dir.path().to_str().expect("UTF-8 temp dir").to_owned();
        let mut args: Vec<String> = ["up", "--colocated", "--data-dir", &data].map(String::from).to_vec();
        for flag in ["--http", "--grpc", "--admin"] {
            args.extend([flag.to_owned(), "127.0.0.1:0".to_owned()]);
        }
        env.push(("PASTEBIN_FAILPOINTS".to_owned(), failpoints.to_owned()));
        let up = Process::start(args, env, UP_PARTS).await;
        let channel = pastebin_shards::channel(&format!("unix:{data}/colocated.sock"), None).expect("the socket");
        Colocated {
            http: format!("http://{}", up.address("gateway-http")),
            database_url: format!("sqlite://{data}/colocated.db"),
            objects: Arc::new(LocalDirStore::open(dir.path().join("objects")).expect("the objects directory")),
            keys: pastebin_keys::KeyClient::new(channel),
            deployment: Deployment::Up { up: Box::new(up), _data: dir },
        }
    }

    async fn deployment(failpoints: &str, env: Vec<(String, String)>) -> Self {
        let failpoints = Some(failpoints.to_owned()).filter(|f| !f.is_empty());
        let cluster = Cluster::start(ClusterOptions { colocated: true, failpoints, env, ..Default::default() }).await;
        Colocated {
            http: cluster.http.clone(),
            database_url: cluster.key_database_urls[0].clone(),
            objects: cluster.object_store().await,
            keys: cluster.key_client(0),
            deployment: Deployment::Cluster(Box::new(cluster)),
        }
    }

    /// The process that creates, and the parts it announces when it starts.
    fn creator(&mut self) -> (&mut Process, &'static [&'static str]) {
        match &mut self.deployment {
            Deployment::Up { up, .. } => (up, UP_PARTS),
            Deployment::Cluster(cluster) => (&mut cluster.gateway, GATEWAY_PARTS),
        }
    }

    /// Waits for the creating process to die at its failpoint.
    async fn crashed(&mut self) {
        let status = self.creator().0.wait_exit(Duration::from_secs(30)).await;
        assert!(status.is_some_and(|s| !s.success()), "the process died at its failpoint");
    }

    /// Starts the creating process again with `env` changed.
    async fn restart(&mut self, env: &[(&str, &str)]) {
        let (creator, parts) = self.creator();
        creator.restart(env, parts).await;
        self.http = format!("http://{}", creator.address("gateway-http"));
    }

    /// Waits for the crash, then starts the process again with no failpoint.
    async fn crashed_then_restarted(&mut self) {
        self.crashed().await;
        self.restart(&[("PASTEBIN_FAILPOINTS", "")]).await;
    }

    /// How many times the creating process timed step `step` (its
    /// `pastebin_saga_step_duration_seconds` count).
    async fn steps_timed(&mut self, step: &str) -> u64 {
        let admin = self.creator().0.address("admin").to_owned();
        let metrics = reqwest::get(format!("http://{admin}/metrics")).await.unwrap().text().await.unwrap();
        let line = format!("pastebin_saga_step_duration_seconds_count{{step=\"{step}\"}}");
        let count = metrics.lines().find_map(|l| l.strip_prefix(&line)).map(|n| n.trim().parse::<f64>().unwrap());
        count.unwrap_or(0.0) as u64
    }

    async fn count(&self, sql: &'static str) -> i64 {
        scalar(&self.database_url, sql).await
    }

    async fn objects(&self) -> usize {
        self.objects.list(None, 10_000).await.expect("the objects list").len()
    }
}

pastebin_tests::both_backends! {
    async fn creates_replays_and_conflicts_in_one_commit(backend: Backend) {
        let mut colocated = Colocated::start(backend, "", vec![]).await;
        let key = new_key();
        let first = create(&colocated.http, Some(&key), "one commit").await.unwrap();
        assert_eq!(first.status, StatusCode::CREATED, "{backend:?}: {}", first.body);
        let id = first.json()["id"].as_str().unwrap().to_owned();
        assert_eq!(get(&colocated.http, &id).await.json()["content"], "one commit");
        // The key was never pending: it is done, with the 201 the client got, byte for byte.
        let stored = colocated.keys.get(&IdempotencyKey::parse(&key).unwrap()).await.unwrap().unwrap();
        assert_eq!(stored.state, pastebin_core::KeyState::Done, "{backend:?}");
        assert_eq!(stored.response_body.expose(), first.body, "{backend:?}");

        let replay = create(&colocated.http, Some(&key), "one commit").await.unwrap();
        assert_eq!((replay.status, &replay.body), (StatusCode::CREATED, &first.body), "{backend:?}");
        assert_eq!(replay.headers["idempotent-replayed"], "true");
        let other = create(&colocated.http, Some(&key), "another body").await.unwrap();
        assert_eq!(other.status, StatusCode::CONFLICT, "{backend:?}: {}", other.body);
        assert_eq!(other.json()["error"]["code"], "idempotency_key_conflict");

        assert_eq!(colocated.count("SELECT COUNT(*) FROM pastes").await, 1, "{backend:?}");
        assert_eq!(colocated.count("SELECT COUNT(*) FROM idempotency_keys").await, 1, "{backend:?}");
        assert_eq!(colocated.objects().await, 1, "{backend:?}");
        // One commit, and none of the saga's: no K begin, no P insert, no K done.
        assert_eq!(colocated.steps_timed("commit").await, 1, "{backend:?}");
        for step in ["k_begin", "p_insert", "k_done"] {
            assert_eq!(colocated.steps_timed(step).await, 0, "{backend:?}: {step}");
        }
    }

    /// A crash between the PUT and the commit leaves an object no row names (the
    /// reaper's) and nothing else: the retry creates, once.
    async fn a_crash_after_the_put_leaves_an_orphan_object_and_the_retry_creates_once(backend: Backend) {
        let mut colocated = Colocated::start(backend, "after_put", vec![]).await;
        let key = new_key();
        assert!(create(&colocated.http, Some(&key), "put, then crash").await.is_err(), "{backend:?}: died");
        colocated.crashed_then_restarted().await;
        assert_eq!(colocated.count("SELECT COUNT(*) FROM idempotency_keys").await, 0, "{backend:?}: nothing committed");
        assert_eq!(colocated.objects().await, 1, "{backend:?}: the PUT happened");

        let retry = create(&colocated.http, Some(&key), "put, then crash").await.unwrap();
        assert_eq!(retry.status, StatusCode::CREATED, "{backend:?}: {}", retry.body);
        assert!(retry.headers.get("idempotent-replayed").is_none(), "{backend:?}: a first answer");
        let again = create(&colocated.http, Some(&key), "put, then crash").await.unwrap();
        assert_eq!(again.body, retry.body, "{backend:?}");
        assert_eq!(colocated.count("SELECT COUNT(*) FROM pastes").await, 1, "{backend:?}");
        assert_eq!(colocated.objects().await, 2, "{backend:?}: the paste's and the orphan");
    }

    /// A crash after the commit, before the answer: the retry replays the 201
    /// the client never saw, and no second paste is made.
    async fn a_crash_after_the_commit_is_replayed_by_the_retry(backend: Backend) {
        let mut colocated = Colocated::start(backend, "after_commit", vec![]).await;
        let key = new_key();
        assert!(create(&colocated.http, Some(&key), "commit, then crash").await.is_err(), "{backend:?}: died");
        colocated.crashed_then_restarted().await;
        let stored = colocated.keys.get(&IdempotencyKey::parse(&key).unwrap()).await.unwrap().expect("committed");
        assert_eq!(stored.state, pastebin_core::KeyState::Done, "{backend:?}");

        let retry = create(&colocated.http, Some(&key), "commit, then crash").await.unwrap();
        assert_eq!(retry.status, StatusCode::CREATED, "{backend:?}: {}", retry.body);
        assert_eq!(retry.body, stored.response_body.expose(), "{backend:?}: the committed 201, byte for byte");
        assert_eq!(retry.headers["idempotent-replayed"], "true");
        assert_eq!(get(&colocated.http, stored.paste_id.as_str()).await.json()["content"], "commit, then crash");
        assert_eq!(colocated.count("SELECT COUNT(*) FROM pastes").await, 1, "{backend:?}");
        assert_eq!(colocated.objects().await, 1, "{backend:?}");
    }

    /// Racers on one key: the key's primary key lets one commit; every other
    /// answers the winner's 201, and the losers' objects are deleted at once.
    async fn racers_on_one_key_make_one_paste(backend: Backend) {
        // Every attempt is admitted and may take as long as a saturated machine
        // needs: contention on one key, not load shedding (see saga.rs).
        let budget = Duration::from_secs(120);
        let colocated = Colocated::start(backend, "", contention_env(budget)).await;
        let key = new_key();
        let attempts = (0..32).map(|_| create_within(&colocated.http, Some(&key), "contended", budget));
        let answers = futures::future::join_all(attempts).await;
        let mut bodies = Vec::new();
        for answer in answers {
            let answer = answer.unwrap();
            assert_eq!(answer.status, StatusCode::CREATED, "{backend:?}: {}", answer.body);
            bodies.push(answer.body);
        }
        assert!(bodies.iter().all(|body| body == &bodies[0]), "{backend:?}: one paste answered to all");
        assert_eq!(colocated.count("SELECT COUNT(*) FROM pastes").await, 1, "{backend:?}");
        assert_eq!(colocated.objects().await, 1, "{backend:?}: the losers' objects are gone");
    }

    /// A key the saga left pending on a colocated shard (a gateway that runs
    /// the saga died after K's begin) is finished by the one-commit gateway with
    /// the saga's own rules: the stored id and 201, one paste.
    async fn a_key_the_saga_left_pending_is_finished_under_its_stored_id(backend: Backend) {
        let saga_only = vec![("PASTEBIN_SAGA_ONLY".to_owned(), "true".to_owned())];
        let mut colocated = Colocated::start(backend, "after_k_begin", saga_only).await;
        let key = new_key();
        assert!(create(&colocated.http, Some(&key), "left pending").await.is_err(), "{backend:?}: died");
        colocated.crashed().await;
        colocated.restart(&[("PASTEBIN_FAILPOINTS", ""), ("PASTEBIN_SAGA_ONLY", "false")]).await;
        let pending = colocated.keys.get(&IdempotencyKey::parse(&key).unwrap()).await.unwrap().expect("begun");
        assert_eq!(pending.state, pastebin_core::KeyState::Pending, "{backend:?}");
        let retry = create(&colocated.http, Some(&key), "left pending").await.unwrap();
        assert_eq!(retry.status, StatusCode::CREATED, "{backend:?}: {}", retry.body);
        assert_eq!(retry.body, pending.response_body.expose(), "{backend:?}: the stored 201");
        assert_eq!(colocated.count("SELECT COUNT(*) FROM pastes").await, 1, "{backend:?}");
        assert_eq!(colocated.count("SELECT COUNT(*) FROM idempotency_keys WHERE state = 'done'").await, 1);
    }
}

#[tokio::test]
async fn a_data_directory_keeps_the_layout_it_was_made_with() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data = dir.path().to_str().unwrap();
    let up_in = |data: &str, colocated: bool| {
        let mut args = vec!["up".to_owned(), "--data-dir".to_owned(), data.to_owned()];
        args.extend(colocated.then(|| "--colocated".to_owned()));
        args.extend(["--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--admin", "127.0.0.1:0"].map(String::from));
        args
    };
    let args = |colocated: bool| up_in(data, colocated);
    let mut up = Process::start(args(false), vec![], GATEWAY_PARTS).await;
    up.signal("TERM");
    assert!(up.wait_exit(Duration::from_secs(30)).await.is_some());
    let refused =
        pastebin_tests::cluster::run_to_exit(&args(true).iter().map(String::as_str).collect::<Vec<_>>()).await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("was made without --colocated") && stderr.contains("new --data-dir"), "{stderr}");
    assert!(!dir.path().join("colocated.db").exists(), "the refused start wrote nothing");

    // A colocated directory stays colocated when started without the flag.
    let other = tempfile::tempdir().expect("temp dir");
    let other_data = other.path().to_str().unwrap();
    let start = |colocated: bool| up_in(other_data, colocated);
    let mut first = Process::start(start(true), vec![], UP_PARTS).await;
    first.signal("TERM");
    assert!(first.wait_exit(Duration::from_secs(30)).await.is_some());
    let again = Process::start(start(false), vec![], UP_PARTS).await;
    let http = format!("http://{}", again.address("gateway-http"));
    assert_eq!(create(&http, Some(&new_key()), "still one commit").await.unwrap().status, StatusCode::CREATED);
    assert!(!other.path().join("keys.db").exists(), "no saga files appeared");
}

/// What a colocated data directory cannot do yet is refused, saying so and
/// what to do instead: a move of its slots, and `ctl backup`.
#[tokio::test]
async fn a_move_or_a_backup_of_a_colocated_up_is_refused_saying_why() {
    let colocated = Colocated::start(Backend::Sqlite, "", vec![]).await;
    let Deployment::Up { _data: dir, .. } = &colocated.deployment else { unreachable!("an up") };
    let data = dir.path().to_str().unwrap();
    let socket = format!("unix:{data}/colocated.sock");
    let elsewhere = format!("unix:{data}/nothing.sock");
    let moving =
        ["ctl", "reshard", "--data-dir", data, "--status", "--kind", "key", "--from", &socket, "--to", &elsewhere];
    let refused = pastebin_tests::cluster::run_to_exit(&moving).await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_ne!(refused.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("A colocated shard's slots do not move yet"), "{stderr}");

    let backups = tempfile::tempdir().unwrap();
    let backup = ["ctl", "backup", backups.path().to_str().unwrap(), "--data-dir", data];
    let refused = pastebin_tests::cluster::run_to_exit(&backup).await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_ne!(refused.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("is a colocated data directory") && stderr.contains("copy the directory"), "{stderr}");
}
