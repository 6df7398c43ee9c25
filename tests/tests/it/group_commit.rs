//! Group commit on SQLite shards: many writes share one transaction and one
//! fsync, yet each keeps the guarantees of a statement run alone. A crash
//! in the middle of a group (statements run, COMMIT not yet) loses the whole
//! group and no request of it was answered; a failed write rolls back only
//! itself.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use pastebin_runtime::db;
use pastebin_tests::{
    api::{create, get, new_key, Answer},
    cluster::Process,
    shards::fresh_url,
};
use reqwest::StatusCode;
use sqlx::Row;

/// A create as a client sent it: key, content, and its answer if one came.
type Sent = (String, String, Option<Answer>);

const WORKERS: usize = 16;
const CREATES_PER_WORKER: usize = 40;

fn up_args(dir: &std::path::Path) -> Vec<String> {
    let dir = dir.to_str().expect("the temp dir is UTF-8").to_owned();
    ["up", "--data-dir", &dir, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--admin", "127.0.0.1:0"]
        .map(str::to_owned)
        .to_vec()
}

/// 16 clients create until `pastebin up` dies on the 60th group (each
/// create is three grouped writes: K begin, P insert, K done). Every 201
/// answered before the crash is there after the restart, and replays; every
/// request without a 201 finishes on its retry.
#[tokio::test]
async fn a_crash_in_the_middle_of_a_group_commit_never_loses_an_answered_create() {
    let dir = tempfile::tempdir().expect("temp dir");
    let failpoint = vec![("PASTEBIN_FAILPOINTS".to_owned(), "mid_group_commit=after:60".to_owned())];
    let mut up = Process::start(up_args(dir.path()), failpoint, &["gateway-http"]).await;
    let http = format!("http://{}", up.address("gateway-http"));

    let answers: Arc<Mutex<Vec<Sent>>> = Arc::default();
    let workers = (0..WORKERS).map(|worker| {
        let (http, answers) = (http.clone(), answers.clone());
        tokio::spawn(async move {
            for i in 0..CREATES_PER_WORKER {
                let (key, content) = (new_key(), format!("paste {worker}-{i}"));
                let answer = create(&http, Some(&key), &content).await.ok();
                let gone = answer.is_none();
                answers.lock().unwrap().push((key, content, answer));
                if gone {
                    return;
                }
            }
        })
    });
    futures::future::join_all(workers).await;
    assert!(up.wait_exit(Duration::from_secs(10)).await.is_some(), "the failpoint crashed the process");

    up.restart(&[("PASTEBIN_FAILPOINTS", "")], &["gateway-http"]).await;
    let http = format!("http://{}", up.address("gateway-http"));
    let answers = std::mem::take(&mut *answers.lock().unwrap());
    let answered: Vec<_> = answers
        .iter()
        .filter_map(|(key, content, answer)| {
            answer.as_ref().filter(|a| a.status == StatusCode::CREATED).map(|a| (key, content, a))
        })
        .collect();
    let unanswered: Vec<_> =
        answers.iter().filter(|(_, _, answer)| answer.is_none()).map(|(key, content, _)| (key, content)).collect();
    assert!(answered.len() >= 5, "some creates finished before the crash: {}", answered.len());
    assert!(!unanswered.is_empty(), "the crash cut requests short");

    for (key, content, first) in answered {
        let id = first.json()["id"].as_str().expect("a 201 names its id").to_owned();
        let read = get(&http, &id).await;
        assert_eq!(read.status, StatusCode::OK, "answered 201 for {id}, gone after the crash");
        assert_eq!(read.json()["content"].as_str(), Some(content.as_str()));
        let replay = create(&http, Some(key), content).await.expect("the gateway answers");
        assert_eq!(replay.status, StatusCode::CREATED);
        assert_eq!(replay.body, first.body, "the replay is the stored 201, not a new paste");
        assert_eq!(replay.headers["idempotent-replayed"], "true");
    }
    for (key, content) in unanswered {
        let retry = create(&http, Some(key), content).await.expect("the gateway answers");
        assert_eq!(retry.status, StatusCode::CREATED, "{}", retry.body);
        let id = retry.json()["id"].as_str().expect("a 201 names its id").to_owned();
        assert_eq!(get(&http, &id).await.status, StatusCode::OK);
    }
}

/// `pastebin up`'s admin listener shows how many writes each SQLite COMMIT
/// took, per database: every create is three writes (two on K, one on P).
#[tokio::test]
async fn sqlite_group_sizes_are_on_the_admin_listener() {
    let dir = tempfile::tempdir().expect("temp dir");
    let up = Process::start(up_args(dir.path()), Vec::new(), &["gateway-http", "admin"]).await;
    let http = format!("http://{}", up.address("gateway-http"));
    for i in 0..5 {
        let answer = create(&http, Some(&new_key()), &format!("paste {i}")).await.expect("the gateway answers");
        assert_eq!(answer.status, StatusCode::CREATED, "{}", answer.body);
    }
    let metrics = reqwest::get(format!("http://{}/metrics", up.address("admin"))).await.unwrap().text().await.unwrap();
    for (database, at_least) in [("keys.db", 10.0), ("pastes.db", 5.0)] {
        let sum = format!("pastebin_group_commit_writes_sum{{database=\"{database}\"}} ");
        let line = metrics.lines().find(|l| l.starts_with(&sum)).unwrap_or_else(|| panic!("no {sum}in:\n{metrics}"));
        let writes: f64 = line[sum.len()..].parse().expect("a number");
        assert!(writes >= at_least, "{database}: {writes} writes grouped, want at least {at_least}");
    }
    // Each COMMIT is timed; the checkpoints, off the commit path, are timed by
    // their own task, which runs within 250 ms of a commit (the test's own
    // patience, not the machine's speed, bounds the wait).
    let timed = |metrics: &str, name: &str| {
        let count = format!("{name}_count{{database=\"keys.db\"}} ");
        metrics.lines().any(|l| l.strip_prefix(&count).is_some_and(|n| n.parse::<f64>().is_ok_and(|n| n >= 1.0)))
    };
    assert!(timed(&metrics, pastebin_runtime::metrics::SQLITE_COMMIT_SECONDS), "commits timed:\n{metrics}");
    let patience = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let metrics =
            reqwest::get(format!("http://{}/metrics", up.address("admin"))).await.unwrap().text().await.unwrap();
        if timed(&metrics, pastebin_runtime::metrics::SQLITE_CHECKPOINT_SECONDS) {
            break;
        }
        assert!(tokio::time::Instant::now() < patience, "no checkpoint timed:\n{metrics}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

pastebin_tests::both_backends! {
    /// Writes submitted together land in the same groups; a write whose
    /// second statement fails leaves no trace of its first, fails alone, and
    /// every other write commits.
    async fn a_failed_write_rolls_back_only_itself(backend: Backend) {
        let database = db::connect(&fresh_url(backend).await, 5, &pastebin_keys::MIGRATIONS).await.expect("database");
        let writes = (0..64).map(|i| {
            let database = database.clone();
            async move {
                database
                    .write(move |conn| {
                        Box::pin(async move {
                            insert_key(&format!("key-{i}")).execute(&mut *conn).await?;
                            if i % 4 == 0 {
                                // The same key again: a unique violation.
                                insert_key(&format!("key-{i}")).execute(&mut *conn).await?;
                            }
                            Ok(i)
                        })
                    })
                    .await
            }
        });
        let outcomes = futures::future::join_all(writes).await;
        for (i, outcome) in outcomes.iter().enumerate() {
            assert_eq!(outcome.is_err(), i % 4 == 0, "write {i}: {outcome:?}");
        }
        let rows = sqlx::query("SELECT key FROM idempotency_keys").fetch_all(database.pool()).await.expect("read");
        let mut keys: Vec<String> = rows.iter().map(|row| row.get::<String, _>("key")).collect();
        keys.sort();
        let mut expected: Vec<String> = (0..64).filter(|i| i % 4 != 0).map(|i| format!("key-{i}")).collect();
        expected.sort();
        assert_eq!(keys, expected);
    }

    /// Single-statement writes run without a savepoint: one that breaks a
    /// constraint fails alone, the writes grouped with it commit.
    async fn a_single_statement_breaking_a_constraint_fails_alone(backend: Backend) {
        let database = db::connect(&fresh_url(backend).await, 5, &pastebin_keys::MIGRATIONS).await.expect("database");
        database.execute(insert_key("taken")).await.expect("the first insert of a key");
        let writes = (0..64).map(|i| {
            let database = database.clone();
            async move { database.execute(insert_key(&if i % 4 == 0 { "taken".to_owned() } else { format!("key-{i}") })).await }
        });
        let outcomes = futures::future::join_all(writes).await;
        for (i, outcome) in outcomes.iter().enumerate() {
            match outcome {
                Ok(rows) => assert!(i % 4 != 0 && *rows == 1, "write {i}: {outcome:?}"),
                Err(sqlx::Error::Database(error)) => {
                    assert!(i % 4 == 0 && error.kind() == sqlx::error::ErrorKind::UniqueViolation, "write {i}: {error}")
                }
                Err(error) => panic!("write {i}: {error}"),
            }
        }
        let mut expected: Vec<String> = (0..64).filter(|i| i % 4 != 0).map(|i| format!("key-{i}")).collect();
        expected.push("taken".to_owned());
        expected.sort();
        assert_eq!(stored_keys(&database).await, expected);
    }

    /// A single statement failing other than on a constraint (here: a table
    /// that does not exist) may end its group on SQLite. Whatever was grouped
    /// with it, every caller's answer is true: an Ok write is stored, a
    /// failed one is not.
    async fn every_answer_is_true_when_a_single_statement_fails_its_group(backend: Backend) {
        let database = db::connect(&fresh_url(backend).await, 5, &pastebin_keys::MIGRATIONS).await.expect("database");
        let writes = (0..64).map(|i| {
            let database = database.clone();
            async move {
                let statement = if i == 20 {
                    sqlx::query("INSERT INTO no_such_table (key) VALUES ($1)").bind("never")
                } else {
                    insert_key(&format!("key-{i}"))
                };
                (i, database.execute(statement).await)
            }
        });
        let outcomes = futures::future::join_all(writes).await;
        assert!(outcomes[20].1.is_err(), "the statement on a missing table fails");
        let mut answered_ok: Vec<String> =
            outcomes.iter().filter(|(_, outcome)| outcome.is_ok()).map(|(i, _)| format!("key-{i}")).collect();
        answered_ok.sort();
        assert_eq!(stored_keys(&database).await, answered_ok);
        database.execute(insert_key("after")).await.expect("the writer goes on after a failed group");
    }
}

/// A plain insert of a pending key row (no ON CONFLICT: a repeated key is a unique violation).
fn insert_key(key: &str) -> sqlx::query::Query<'static, sqlx::Any, sqlx::any::AnyArguments> {
    sqlx::query(
        "INSERT INTO idempotency_keys (key, request_hash, paste_id, state, response_body, created_at, retain_until)
         VALUES ($1, 'h', 'p', 'pending', 'b', 0, 0)",
    )
    .bind(key.to_owned())
}

async fn stored_keys(database: &db::Database) -> Vec<String> {
    let rows = sqlx::query("SELECT key FROM idempotency_keys").fetch_all(database.pool()).await.expect("read");
    let mut keys: Vec<String> = rows.iter().map(|row| row.get::<String, _>("key")).collect();
    keys.sort();
    keys
}
