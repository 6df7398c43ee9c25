//! K's or P's database fails over under load, on real processes
//! (docs/design.md#database-failover): a PostgreSQL primary with a
//! synchronous `pg_basebackup -R` standby, clients creating and retrying,
//! the primary killed with SIGKILL and the standby promoted. Once behind a
//! flipping endpoint (a managed database's endpoint, a Kubernetes service),
//! once with a multi-host URL and nothing in between, once under
//! pg_auto_failover. Every invariant holds: no duplicate, no lost key or
//! paste, every 201 replays byte-identical and reads back, the gateway
//! stays ready. With an asynchronous standby that fell behind, `ctl
//! reconcile` reports exactly what K lost, and K started again with
//! `--may-have-lost-commits-since` makes the retries of the lost keys adopt
//! their pastes instead of minting second ones. And during an outage a
//! shard does not hammer the server.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use pastebin_core::IdempotencyKey;
use pastebin_ctl::Exit;
use pastebin_keys::KeyClient;
use pastebin_shards::channel;
use pastebin_tests::{
    api,
    auto_failover::{self, AutoFailover},
    cluster::{key_table, live_ids, scalar, Cluster, ClusterOptions, Process},
    endpoint::FlippingEndpoint,
    postgres::OwnServer,
    replication::{ReplicatedServer, Replication},
};
use sqlx::{Connection, PgConnection};

use crate::operators::ctl;

/// Clients creating at once: enough that creates are in flight when the primary dies.
const CLIENTS: usize = 6;
/// Creates answered before the primary is killed, and after it is replaced.
const CREATES_BEFORE: usize = 30;
const CREATES_AFTER: usize = 30;
/// Every wait is a bounded loop of this many steps of [`STEP`] (two minutes).
const STEPS: u32 = 2400;
const STEP: Duration = Duration::from_millis(50);

/// A create that got its 201: the key, what was sent, the answer's body, and
/// when the attempt that got it was sent and answered.
struct Created {
    key: String,
    content: String,
    body: String,
    sent_at: Instant,
    answered_at: Instant,
}

/// Clients creating pastes through the gateway until stopped, each
/// retrying its key until it gets a 201, as the API tells clients to.
struct Load {
    stop: Arc<AtomicBool>,
    created: Arc<Mutex<Vec<Created>>>,
    /// Answers other than 201 (503 while K has no primary) and answers that never came.
    failed: Arc<AtomicU64>,
    clients: Vec<tokio::task::JoinHandle<()>>,
}

impl Load {
    fn start(http: &str) -> Load {
        let (stop, created, failed) = (Arc::default(), Arc::default(), Arc::default());
        let clients = (0..CLIENTS)
            .map(|_| {
                tokio::spawn(client(http.to_owned(), Arc::clone(&stop), Arc::clone(&created), Arc::clone(&failed)))
            })
            .collect();
        Load { stop, created, failed, clients }
    }

    fn count(&self) -> usize {
        self.created.lock().unwrap().len()
    }

    /// Waits until `until` holds, at most [`STEPS`] steps; `Err` says what did not happen.
    async fn wait(&self, what: &str, until: impl Fn(&Load) -> bool) -> Result<(), String> {
        for _ in 0..STEPS {
            if until(self) {
                return Ok(());
            }
            tokio::time::sleep(STEP).await;
        }
        let failed = self.failed.load(Ordering::SeqCst);
        Err(format!("gave up waiting for {what}: {} creates, {failed} failed answers", self.count()))
    }

    /// When the first create sent after `after` was answered 201 (one sent
    /// before may have been answered late, from work done before).
    async fn first_create_sent_after(&self, after: Instant) -> Result<Instant, String> {
        self.wait("a create to succeed again", |load| {
            load.created.lock().unwrap().iter().any(|created| created.sent_at > after)
        })
        .await?;
        let created = self.created.lock().unwrap();
        let answered = created.iter().filter(|created| created.sent_at > after).map(|created| created.answered_at);
        Ok(answered.min().expect("waited for one"))
    }

    /// Stops the clients once each has finished its key.
    async fn stop(self) -> Vec<Created> {
        self.stop.store(true, Ordering::SeqCst);
        for client in self.clients {
            client.await.expect("a client does not panic");
        }
        Arc::try_unwrap(self.created).ok().expect("the clients are done").into_inner().unwrap()
    }
}

async fn client(http: String, stop: Arc<AtomicBool>, created: Arc<Mutex<Vec<Created>>>, failed: Arc<AtomicU64>) {
    while !stop.load(Ordering::SeqCst) {
        let key = api::new_key();
        let content = format!("written during a failover, key {key}");
        let (body, sent_at) = create_until_201(&http, &key, &content, &failed).await;
        created.lock().unwrap().push(Created { key, content, body, sent_at, answered_at: Instant::now() });
    }
}

/// Retries one key until it is answered 201: its body, and when the
/// attempt that got it was sent. Only a 503 (or no answer) may come before.
async fn create_until_201(http: &str, key: &str, content: &str, failed: &AtomicU64) -> (String, Instant) {
    for _ in 0..STEPS {
        let sent_at = Instant::now();
        match api::create(http, Some(key), content).await {
            Ok(answer) if answer.status == 201 => return (answer.body, sent_at),
            Ok(answer) if answer.status == 503 => {}
            Ok(answer) => panic!("a create during failover answered {}: {}", answer.status, answer.body),
            Err(_no_answer) => {}
        }
        failed.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(STEP).await;
    }
    panic!("key {key} never got its 201");
}

/// A replicated database for K, and how its primary is replaced.
trait ReplicatedDatabase {
    /// The failed-over part's `--database-url`.
    fn database_url(&self) -> String;
    /// Loses the primary at once (SIGKILL).
    async fn kill_primary(&mut self);
    /// Returns once the standby takes writes: promoted by the test, or by an HA manager.
    async fn standby_takes_over(&self);
    /// The new primary, to read the part's rows from directly.
    fn new_primary_url(&self) -> String;
}

/// How a part reaches a primary and a standby the test promotes itself.
#[derive(Debug, Clone, Copy)]
enum Route {
    /// Through one address that is flipped to the standby on promotion.
    FlippingEndpoint,
    /// A multi-host URL naming both servers, standby first.
    MultiHostUrl,
}

struct PromotedByTheTest {
    server: ReplicatedServer,
    endpoint: FlippingEndpoint,
    route: Route,
    database: String,
}

impl PromotedByTheTest {
    async fn start(route: Route) -> Self {
        let server = ReplicatedServer::start(Replication::Synchronous).await;
        let database = server.fresh_database().await;
        let endpoint = FlippingEndpoint::start(&format!("127.0.0.1:{}", server.primary_port)).await;
        PromotedByTheTest { server, endpoint, route, database }
    }
}

impl ReplicatedDatabase for PromotedByTheTest {
    fn database_url(&self) -> String {
        match self.route {
            Route::FlippingEndpoint => format!("postgres://postgres@{}/{}", self.endpoint.address, self.database),
            Route::MultiHostUrl => self.server.multi_host_url(&self.database),
        }
    }

    async fn kill_primary(&mut self) {
        self.server.kill_primary().await;
    }

    async fn standby_takes_over(&self) {
        self.server.promote_standby().await;
        self.endpoint.flip_to(&format!("127.0.0.1:{}", self.server.standby_port));
    }

    fn new_primary_url(&self) -> String {
        ReplicatedServer::url(self.server.standby_port, &self.database)
    }
}

/// pg_auto_failover's monitor and two nodes; the part has their multi-host URL.
struct PromotedByPgAutoFailover {
    formation: AutoFailover,
    database: String,
    killed: Option<u16>,
}

impl ReplicatedDatabase for PromotedByPgAutoFailover {
    fn database_url(&self) -> String {
        self.formation.multi_host_url(&self.database)
    }

    async fn kill_primary(&mut self) {
        self.killed = Some(self.formation.kill_primary().await);
    }

    async fn standby_takes_over(&self) {
        let killed = self.killed.expect("the primary was killed");
        self.formation.wait_for_promotion(killed).await;
    }

    fn new_primary_url(&self) -> String {
        self.formation.other_node_url(self.killed.expect("the primary was killed"), &self.database)
    }
}

/// What one failover took: from the primary's death, and from the standby's
/// promotion, to the first create sent after it that was answered 201.
struct Figures {
    death_to_first_create: Duration,
    promotion_to_first_create: Duration,
}

impl Figures {
    /// Printed for BENCHMARKS.md (`--nocapture` shows it).
    fn report(&self, how: &str) {
        eprintln!(
            "FAILOVER {how}: the primary's death to the first create {:?}; the standby's promotion to it {:?}",
            self.death_to_first_create, self.promotion_to_first_create
        );
    }
}

/// The part whose database fails over.
#[derive(Debug, Clone, Copy)]
enum Part {
    Keys,
    Pastes,
}

impl Part {
    /// The part's one shard.
    fn shard(self, cluster: &Cluster) -> &Process {
        match self {
            Self::Keys => &cluster.keys[0],
            Self::Pastes => &cluster.pastes[0],
        }
    }
}

/// Panics with what did not happen, and the failed-over part's log to say why.
fn give_up<T>(cluster: &Cluster, part: Part) -> impl Fn(String) -> T + '_ {
    move |what| panic!("{what}\n--- {part:?}'s log ---\n{}", part.shard(cluster).logs())
}

/// The gateway's `/readyz`: its status and body.
async fn readiness(cluster: &Cluster) -> (reqwest::StatusCode, String) {
    let ready = reqwest::get(format!("{}/readyz", cluster.gateway_admin())).await.expect("the gateway answers");
    (ready.status(), ready.text().await.expect("a readiness body"))
}

/// Kills `part`'s synchronous primary under load, lets the standby take
/// over, and checks every invariant once creates work again. The gateway
/// stays ready throughout (docs/deployment.md): reads of other parts work.
async fn fails_over_under_load(part: Part, mut database: impl ReplicatedDatabase) -> Figures {
    let options = match part {
        Part::Keys => ClusterOptions { key_database_urls: vec![database.database_url()], ..Default::default() },
        Part::Pastes => ClusterOptions { paste_database_urls: vec![database.database_url()], ..Default::default() },
    };
    let cluster = Cluster::start(options).await;

    let load = Load::start(&cluster.http);
    load.wait("creates before the failover", |load| load.count() >= CREATES_BEFORE)
        .await
        .unwrap_or_else(give_up(&cluster, part));
    database.kill_primary().await;
    let died = Instant::now();
    let (created_at_death, failed_at_death) = (load.count(), load.failed.load(Ordering::SeqCst));
    // The clients meet the outage before the standby takes over.
    let met = |load: &Load| load.failed.load(Ordering::SeqCst) >= failed_at_death + CLIENTS as u64;
    load.wait("clients to meet the outage", met).await.unwrap_or_else(give_up(&cluster, part));
    let (status, body) = readiness(&cluster).await;
    assert_eq!(status, 200, "the gateway stays ready while {part:?} has no primary: {body}");
    database.standby_takes_over().await;
    let promoted = Instant::now();
    let first = load.first_create_sent_after(died).await.unwrap_or_else(give_up(&cluster, part));
    let after = |load: &Load| load.count() >= created_at_death + CREATES_AFTER;
    load.wait("creates after the failover", after).await.unwrap_or_else(give_up(&cluster, part));
    let created = load.stop().await;

    let (keys, pastes) = match part {
        Part::Keys => (database.new_primary_url(), cluster.paste_database_urls[0].clone()),
        Part::Pastes => (cluster.key_database_urls[0].clone(), database.new_primary_url()),
    };
    invariants_hold(&cluster, &keys, &pastes, &created).await;
    let (status, body) = readiness(&cluster).await;
    assert_eq!(status, 200, "the gateway is ready after the failover: {body}");
    Figures {
        death_to_first_create: first - died,
        promotion_to_first_create: first.saturating_duration_since(promoted),
    }
}

/// No duplicate, no lost key or paste, every 201 replays byte-identical and
/// reads back; `keys` and `pastes` are the databases (the new primary for
/// the part that failed over).
async fn invariants_hold(cluster: &Cluster, keys: &str, pastes: &str, created: &[Created]) {
    let mut changed = Vec::new();
    let mut ids = std::collections::HashSet::new();
    for create in created {
        let replay = api::create(&cluster.http, Some(&create.key), &create.content).await.expect("the gateway answers");
        if replay.status != 201 || replay.body != create.body {
            changed.push((create.key.clone(), replay.status, replay.body));
            continue;
        }
        let id = replay.json()["id"].as_str().expect("a 201 names its paste").to_owned();
        let read = api::get(&cluster.http, &id).await;
        assert_eq!(read.status, 200, "paste {id} of a 201 must read back: {}", read.body);
        assert_eq!(read.json()["content"], create.content.as_str());
        ids.insert(id);
    }
    assert!(changed.is_empty(), "{} of {} keys answered a different replay: {changed:?}", changed.len(), created.len());
    assert_eq!(ids.len(), created.len(), "every key has its own paste");
    let live = scalar(pastes, "SELECT COUNT(*) FROM pastes WHERE state = 'live'").await;
    assert_eq!(live, created.len() as i64, "no paste without a key (no duplicate), none lost");
    let done = scalar(keys, "SELECT COUNT(*) FROM idempotency_keys WHERE state = 'done'").await;
    assert_eq!(done, created.len() as i64, "every 201's key is done");
}

#[tokio::test]
async fn k_fails_over_behind_a_flipping_endpoint_and_loses_nothing() {
    fails_over_under_load(Part::Keys, PromotedByTheTest::start(Route::FlippingEndpoint).await)
        .await
        .report("behind a flipping endpoint");
}

#[tokio::test]
async fn k_fails_over_through_a_multi_host_url_and_loses_nothing() {
    fails_over_under_load(Part::Keys, PromotedByTheTest::start(Route::MultiHostUrl).await)
        .await
        .report("through a multi-host URL");
}

/// P's synchronous primary dies under load: through a multi-host URL, P
/// finds the promoted standby, every paste of a 201 still reads back and no
/// retry stores a second one.
#[tokio::test]
async fn p_fails_over_through_a_multi_host_url_and_loses_nothing() {
    fails_over_under_load(Part::Pastes, PromotedByTheTest::start(Route::MultiHostUrl).await)
        .await
        .report("P through a multi-host URL");
}

/// pg_auto_failover promotes the standby by itself; K follows through the
/// formation's multi-host URL.
#[tokio::test]
async fn k_fails_over_under_pg_auto_failover_and_loses_nothing() {
    if !auto_failover::installed() {
        eprintln!(
            "SKIPPED: pg_autoctl is not installed (apt-get install postgresql-15-auto-failover; scripts/test installs it)"
        );
        return;
    }
    let formation = AutoFailover::start().await;
    let database = formation.fresh_database().await;
    let database = PromotedByPgAutoFailover { formation, database, killed: None };
    fails_over_under_load(Part::Keys, database).await.report("under pg_auto_failover");
}

/// During an outage every call fails at once and one task looks for the
/// server with a growing wait: connection attempts stay a few a second,
/// however many calls arrive. Before, every call opened a connection.
#[tokio::test]
async fn during_an_outage_a_shard_tries_its_server_a_few_times_a_second_not_once_per_call() {
    // Long enough for the search's wait to reach its cap.
    const OUTAGE: Duration = Duration::from_secs(3);
    let postgres = OwnServer::start().await;
    let url = postgres.fresh_database_url().await;
    let endpoint = FlippingEndpoint::start(&postgres.address()).await;
    let url = url.replace(&postgres.address(), &endpoint.address);
    let args = ["key-service", "--database-url", &url, "--listen", "127.0.0.1:0"];
    let shard = Process::start(args.map(str::to_owned).to_vec(), vec![], &["key-service"]).await;
    let keys = KeyClient::new(channel(&format!("http://{}", shard.address("key-service")), None).unwrap());
    keys.get(&IdempotencyKey::new_random()).await.expect("K reads while its database is up");

    postgres.stop().await;
    let (attempts_before, started) = (endpoint.accepted(), Instant::now());
    let clients = (0..CLIENTS).map(|_| {
        let keys = keys.clone();
        tokio::spawn(async move {
            let mut calls = 0u64;
            while started.elapsed() < OUTAGE {
                assert!(keys.get(&IdempotencyKey::new_random()).await.is_err(), "K has no database to read");
                calls += 1;
            }
            calls
        })
    });
    let mut calls = 0;
    for client in clients.collect::<Vec<_>>() {
        calls += client.await.expect("a client does not panic");
    }
    let (attempts, elapsed) = (endpoint.accepted() - attempts_before, started.elapsed());
    // The calls under way when the server went each tried once (at most one
    // per client), then the one search tries at most twice a second once
    // its wait has grown (and five times in its first 0.8 s).
    let allowed = 2 * CLIENTS as u64 + 3 * elapsed.as_secs().saturating_add(1);
    eprintln!("{calls} calls in {elapsed:?} during the outage: {attempts} connection attempts");
    assert!(calls > 10 * attempts, "the outage saw many calls ({calls}) per connection attempt ({attempts})");
    assert!(
        attempts <= allowed,
        "{attempts} connection attempts in {elapsed:?} for {calls} calls: more than {allowed}"
    );

    postgres.restart().await;
    for step in 0..STEPS {
        if keys.get(&IdempotencyKey::new_random()).await.is_ok() {
            return;
        }
        assert!(step + 1 < STEPS, "K never found its database again:\n{}", shard.logs());
        tokio::time::sleep(STEP).await;
    }
}

/// Whether the server at `address` takes writes, for open sessions and new
/// ones alike: a demoted primary, or one an operator made read-only.
async fn take_writes(address: &str, takes: bool) {
    let mut admin =
        PgConnection::connect(&format!("postgres://postgres@{address}/postgres")).await.expect("connect as admin");
    let setting = match takes {
        true => "ALTER SYSTEM SET default_transaction_read_only = off",
        false => "ALTER SYSTEM SET default_transaction_read_only = on",
    };
    sqlx::raw_sql(setting).execute(&mut admin).await.expect("change the setting");
    sqlx::raw_sql("SELECT pg_reload_conf()").execute(&mut admin).await.expect("reload the configuration");
}

/// Two servers in a multi-host URL, the read-only one first: K writes to
/// the other. When that one stops taking writes and the first starts, the
/// write refused as a read-only transaction (it did not run) turns K to the
/// server that takes writes, without a restart; only 503s come in between.
#[tokio::test]
async fn a_write_that_meets_a_read_only_server_finds_the_server_that_takes_writes() {
    let (first, second) = tokio::join!(OwnServer::start(), OwnServer::start());
    let url_on = |server: &OwnServer| format!("postgres://postgres@{}/postgres", server.address());
    // K's schema on both, as a replica would have it.
    for server in [&first, &second] {
        pastebin_runtime::db::connect(&url_on(server), 1, &pastebin_keys::MIGRATIONS).await.expect("migrate");
    }
    take_writes(&first.address(), false).await;
    let url = format!(
        "postgres://postgres@{},{}/postgres?target_session_attrs=read-write",
        first.address(),
        second.address()
    );
    let cluster = Cluster::start(ClusterOptions { key_database_urls: vec![url], ..Default::default() }).await;
    let done = "SELECT COUNT(*) FROM idempotency_keys WHERE state = 'done'";

    let answer = api::create(&cluster.http, Some(&api::new_key()), "before").await.expect("the gateway answers");
    assert_eq!(answer.status, 201, "{}", answer.body);
    assert_eq!((scalar(&url_on(&first), done).await, scalar(&url_on(&second), done).await), (0, 1));

    take_writes(&second.address(), false).await;
    take_writes(&first.address(), true).await;
    let failed = AtomicU64::new(0);
    for _ in 0..STEPS {
        create_until_201(&cluster.http, &api::new_key(), "after", &failed).await;
        if scalar(&url_on(&first), done).await > 0 {
            assert!(
                cluster.keys[0].logs().contains("found a database server to use"),
                "K says it switched:\n{}",
                cluster.keys[0].logs()
            );
            return;
        }
        tokio::time::sleep(STEP).await;
    }
    panic!("K never wrote to the server that takes writes:\n{}", cluster.keys[0].logs());
}

/// Live pastes on P that no key row on K names: what reconcile must call
/// orphans, read from the databases themselves.
async fn orphans_in(keys: &str, pastes: &str) -> usize {
    let named: std::collections::HashSet<String> = key_table(keys).await.into_iter().map(|row| row.2).collect();
    live_ids(pastes).await.into_iter().filter(|id| !named.contains(id)).count()
}

/// K's standby is asynchronous and stops receiving WAL; creates go on, the
/// primary dies and the stale standby is promoted. K has lost the keys of
/// creates it answered 201: `ctl reconcile` reports exactly the pastes no
/// key names (read from the databases), and once those clients send their
/// keys again, each orphan is grouped with the duplicate its retry minted.
#[tokio::test]
async fn an_asynchronous_k_failover_is_reported_by_reconcile_with_exact_counts() {
    let server = ReplicatedServer::start(Replication::Asynchronous).await;
    let database = server.fresh_database().await;
    let key_database_urls = vec![server.multi_host_url(&database)];
    let cluster = Cluster::start(ClusterOptions { key_database_urls, ..Default::default() }).await;
    let load = Load::start(&cluster.http);
    load.wait("creates before the standby falls behind", |load| load.count() >= CREATES_BEFORE)
        .await
        .unwrap_or_else(give_up(&cluster, Part::Keys));
    server.stop_streaming().await;
    let at_cut = load.count();
    load.wait("creates only the primary holds", |load| load.count() >= at_cut + CREATES_AFTER)
        .await
        .unwrap_or_else(give_up(&cluster, Part::Keys));
    server.kill_primary().await;
    server.promote_standby().await;
    let at_promotion = load.count();
    load.wait("creates after the failover", |load| load.count() >= at_promotion + CREATES_AFTER)
        .await
        .unwrap_or_else(give_up(&cluster, Part::Keys));
    let created = load.stop().await;

    let (keys, pastes) = (ReplicatedServer::url(server.standby_port, &database), &cluster.paste_database_urls[0]);
    let known: std::collections::HashSet<String> = key_table(&keys).await.into_iter().map(|row| row.0).collect();
    let forgotten: Vec<&Created> = created.iter().filter(|create| !known.contains(&create.key)).collect();
    // Only a create begun before the cut (at most one per client) has its key on the standby.
    assert!(forgotten.len() + CLIENTS >= CREATES_AFTER, "K lost the keys of the creates answered after the cut");
    let orphans = orphans_in(&keys, pastes).await;
    eprintln!(
        "ASYNCHRONOUS K FAILOVER: {} creates answered 201, K forgot {} of them; {orphans} orphans",
        created.len(),
        forgotten.len()
    );
    assert!(orphans >= forgotten.len(), "each forgotten 201 left its paste without a key");
    let (exit, out, err) = ctl(&cluster, &["reconcile", "--json"]).await;
    assert_eq!(exit, Exit::Orphans, "{err}");
    let report: serde_json::Value = serde_json::from_str(out.trim()).expect("a JSON report");
    assert_eq!(report["orphans"]["count"], orphans as u64, "{report:#}");
    assert_eq!(report["lost_pastes"]["count"], 0, "P lost nothing: {report:#}");

    // The clients of forgotten keys send them again: K mints a second paste each.
    let failed = AtomicU64::new(0);
    for create in &forgotten {
        let (body, _) = create_until_201(&cluster.http, &create.key, &create.content, &failed).await;
        assert_ne!(body, create.body, "a forgotten key cannot replay its 201");
    }
    let orphans_after = orphans_in(&keys, pastes).await;
    let (exit, out, err) = ctl(&cluster, &["reconcile", "--json"]).await;
    assert_eq!(exit, Exit::Orphans, "{err}");
    let report: serde_json::Value = serde_json::from_str(out.trim()).expect("a JSON report");
    assert_eq!(report["orphans"]["count"], orphans_after as u64, "{report:#}");
    assert_eq!(report["likely_duplicates"], orphans_after as u64, "every orphan has its twin now: {report:#}");
}

/// Every paste id on P, live or tombstone.
async fn paste_ids(url: &str) -> std::collections::HashSet<String> {
    let mut conn = PgConnection::connect(url).await.expect("connect to the paste database");
    let ids: Vec<String> = sqlx::query_scalar("SELECT id FROM pastes").fetch_all(&mut conn).await.expect("read ids");
    ids.into_iter().collect()
}

/// The paste id a 201 names.
fn id_of(create: &Created) -> String {
    let body: serde_json::Value = serde_json::from_str(&create.body).expect("a 201 is JSON");
    body["id"].as_str().expect("a 201 names its paste").to_owned()
}

/// P's standby is asynchronous and stops receiving WAL; creates go on, the
/// primary dies and the stale standby is promoted. P has lost the rows of
/// creates answered 201: `ctl reconcile` counts exactly those (read from
/// the databases), the object reaper, however late, deletes none of their
/// objects, and `ctl repair --apply` makes every 201'd paste readable again.
#[tokio::test]
async fn an_asynchronous_p_failover_is_counted_by_reconcile_and_repaired_and_the_reaper_spares_it() {
    let server = ReplicatedServer::start(Replication::Asynchronous).await;
    let database = server.fresh_database().await;
    let paste_database_urls = vec![server.multi_host_url(&database)];
    let cluster = Cluster::start(ClusterOptions { paste_database_urls, ..Default::default() }).await;
    let load = Load::start(&cluster.http);
    load.wait("creates before the standby falls behind", |load| load.count() >= CREATES_BEFORE)
        .await
        .unwrap_or_else(give_up(&cluster, Part::Pastes));
    server.stop_streaming().await;
    let at_cut = load.count();
    load.wait("creates only the primary holds", |load| load.count() >= at_cut + CREATES_AFTER)
        .await
        .unwrap_or_else(give_up(&cluster, Part::Pastes));
    server.kill_primary().await;
    server.promote_standby().await;
    let at_promotion = load.count();
    load.wait("creates after the failover", |load| load.count() >= at_promotion + CREATES_AFTER)
        .await
        .unwrap_or_else(give_up(&cluster, Part::Pastes));
    let created = load.stop().await;

    let on_p = paste_ids(&ReplicatedServer::url(server.standby_port, &database)).await;
    let lost: Vec<&Created> = created.iter().filter(|create| !on_p.contains(&id_of(create))).collect();
    eprintln!("ASYNCHRONOUS P FAILOVER: {} creates answered 201, P lost {} of their rows", created.len(), lost.len());
    // Only a row inserted before the cut (at most one per client) is on the standby.
    assert!(lost.len() + CLIENTS >= CREATES_AFTER, "P lost the rows of the creates answered after the cut");
    let (exit, out, err) = ctl(&cluster, &["reconcile", "--json"]).await;
    assert_eq!(exit, Exit::LostPastes, "{err}");
    let report: serde_json::Value = serde_json::from_str(out.trim()).expect("a JSON report");
    assert_eq!(report["lost_pastes"]["count"], lost.len() as u64, "{report:#}");
    assert_eq!(report["orphans"]["count"], 0, "K lost nothing: {report:#}");

    // The reaper, two hours late, keeps the only copy of every lost paste.
    let clock = pastebin_core::ManualClock::starting_at(chrono::Utc::now());
    clock.advance(Duration::from_secs(2 * 3600));
    cluster.sweeper(clock).await.reap_orphan_objects().await;
    let objects = cluster.object_store().await;
    for create in &lost {
        assert!(objects.get(&id_of(create)).await.unwrap().is_some(), "the object of {} was reaped", id_of(create));
    }

    let (exit, text, err) = ctl(&cluster, &["repair", "--apply"]).await;
    assert_eq!(exit, Exit::Ok, "{text}\n{err}");
    assert!(text.contains(&format!("rebuilt: {}", lost.len())), "{text}");
    for create in &created {
        let read = api::get(&cluster.http, &id_of(create)).await;
        assert_eq!(read.status, 200, "paste {} of a 201 reads again: {}", id_of(create), read.body);
        assert_eq!(read.json()["content"], create.content.as_str());
    }
    let (_, out, _) = ctl(&cluster, &["reconcile", "--json"]).await;
    let report: serde_json::Value = serde_json::from_str(out.trim()).expect("a JSON report");
    assert_eq!(report["lost_pastes"]["count"], 0, "{report:#}");
}

/// The same asynchronous K failover, handled as docs/operations.md says:
/// K is stopped, the stale standby promoted, and K started again with
/// `--may-have-lost-commits-since` (the time the standby stopped receiving
/// WAL). Creates go on; then every client whose 201 K forgot sends its key
/// again: each gets the paste its first 201 named, adopted under a new
/// delete token, and no key has a second paste: reconcile finds no orphan
/// and no duplicate (docs/design.md#adopting-after-a-k-loss).
#[tokio::test]
async fn after_an_asynchronous_k_failover_retries_of_lost_keys_adopt_their_pastes() {
    let server = ReplicatedServer::start(Replication::Asynchronous).await;
    let database = server.fresh_database().await;
    let key_database_urls = vec![server.multi_host_url(&database)];
    let mut cluster = Cluster::start(ClusterOptions { key_database_urls, ..Default::default() }).await;
    let load = Load::start(&cluster.http);
    load.wait("creates before the standby falls behind", |load| load.count() >= CREATES_BEFORE)
        .await
        .unwrap_or_else(give_up(&cluster, Part::Keys));
    // Earlier than the cut is safe: it only widens the window searched.
    let since = (chrono::Utc::now() - chrono::Duration::seconds(1)).to_rfc3339();
    server.stop_streaming().await;
    let at_cut = load.count();
    load.wait("creates only the primary holds", |load| load.count() >= at_cut + CREATES_AFTER)
        .await
        .unwrap_or_else(give_up(&cluster, Part::Keys));
    // K serves nothing between the promotion and its start in the search-first mode.
    cluster.keys[0].kill().await;
    server.kill_primary().await;
    server.promote_standby().await;
    cluster.keys[0].set_flag("--may-have-lost-commits-since", &since);
    cluster.keys[0].restart(&[], &["key-service"]).await;
    let at_restart = load.count();
    load.wait("creates after the failover", |load| load.count() >= at_restart + CREATES_AFTER)
        .await
        .unwrap_or_else(give_up(&cluster, Part::Keys));
    let mut created = load.stop().await;

    let (keys, pastes) =
        (ReplicatedServer::url(server.standby_port, &database), cluster.paste_database_urls[0].clone());
    let known: std::collections::HashSet<String> = key_table(&keys).await.into_iter().map(|row| row.0).collect();
    let forgotten: Vec<usize> = (0..created.len()).filter(|&i| !known.contains(&created[i].key)).collect();
    assert!(forgotten.len() + CLIENTS >= CREATES_AFTER, "K lost the keys of the creates answered after the cut");
    let adopted_in_flight = created.iter().filter(|create| create.body.contains("\"adopted\":true")).count();

    let failed = AtomicU64::new(0);
    for &i in &forgotten {
        let (body, _) = create_until_201(&cluster.http, &created[i].key, &created[i].content, &failed).await;
        let (first, retry): (serde_json::Value, serde_json::Value) =
            (serde_json::from_str(&created[i].body).unwrap(), serde_json::from_str(&body).unwrap());
        assert_eq!(retry["id"], first["id"], "the retry of a lost key names its first paste: {body}");
        assert_eq!(retry["adopted"], true, "and says it adopted it: {body}");
        assert_ne!(retry["delete_token"], first["delete_token"], "under a new delete token");
        created[i].body = body;
    }
    eprintln!(
        "ASYNCHRONOUS K FAILOVER, SEARCH FIRST: {} creates answered 201, K forgot {} of them, each adopted on retry; \
         {adopted_in_flight} more adopted by retries already in flight",
        created.len(),
        forgotten.len()
    );
    invariants_hold(&cluster, &keys, &pastes, &created).await;
    assert_eq!(orphans_in(&keys, &pastes).await, 0, "every paste is named by its key again");
    let (exit, out, err) = ctl(&cluster, &["reconcile", "--json"]).await;
    let report: serde_json::Value = serde_json::from_str(out.trim()).expect("a JSON report");
    assert_eq!(exit, Exit::Ok, "{report:#}\n{err}");
    assert_eq!(report["orphans"]["count"], 0, "{report:#}");
    assert_eq!(report["likely_duplicates"], 0, "{report:#}");
}
