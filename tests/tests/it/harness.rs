//! Tests of the test harness itself: the throwaway (or configured) PostgreSQL server.

use pastebin_tests::postgres::{fresh_database_url, server_url, sqlite_url};
use sqlx::{AnyPool, PgPool, Row};

async fn user_tables(pool: &PgPool) -> Vec<String> {
    sqlx::query("SELECT table_name::text FROM information_schema.tables WHERE table_schema = 'public'")
        .fetch_all(pool)
        .await
        .expect("list tables")
        .into_iter()
        .map(|r| r.get::<String, _>(0))
        .collect()
}

#[tokio::test]
async fn fresh_databases_are_distinct_empty_and_isolated() {
    let a = fresh_database_url().await;
    let b = fresh_database_url().await;
    assert_ne!(a, b, "each call must give a new database");

    let pa = PgPool::connect(&a).await.expect("connect to a");
    let pb = PgPool::connect(&b).await.expect("connect to b");

    let name_a: String = sqlx::query_scalar("SELECT current_database()::text").fetch_one(&pa).await.unwrap();
    let name_b: String = sqlx::query_scalar("SELECT current_database()::text").fetch_one(&pb).await.unwrap();
    assert_ne!(name_a, name_b);
    assert!(name_a.starts_with("t_"), "{name_a}");

    assert!(user_tables(&pa).await.is_empty(), "a is not empty");
    assert!(user_tables(&pb).await.is_empty(), "b is not empty");

    sqlx::query("CREATE TABLE only_in_a (id int PRIMARY KEY)").execute(&pa).await.unwrap();
    sqlx::query("INSERT INTO only_in_a VALUES (1)").execute(&pa).await.unwrap();
    assert_eq!(user_tables(&pa).await, vec!["only_in_a".to_string()]);
    assert!(user_tables(&pb).await.is_empty(), "table leaked into b");
    let err = sqlx::query("SELECT * FROM only_in_a").fetch_all(&pb).await.expect_err("table must not exist in b");
    assert!(err.to_string().contains("only_in_a"), "{err}");

    pa.close().await;
    pb.close().await;
}

#[tokio::test]
async fn any_pool_connects_to_fresh_database() {
    sqlx::any::install_default_drivers();
    let url = fresh_database_url().await;
    let pool = AnyPool::connect(&url).await.expect("AnyPool connect");
    let one: i32 = sqlx::query_scalar("SELECT 1").fetch_one(&pool).await.unwrap();
    assert_eq!(one, 1);
    pool.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_parallel_fresh_databases_all_connect() {
    let tasks: Vec<_> = (0..50)
        .map(|i| {
            tokio::spawn(async move {
                let url = fresh_database_url().await;
                let pool = PgPool::connect(&url).await.expect("connect");
                let table = format!("t{i}");
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE TABLE {table} (x int)")))
                    .execute(&pool)
                    .await
                    .unwrap();
                let tables = user_tables(&pool).await;
                pool.close().await;
                assert_eq!(tables, vec![table]);
                url
            })
        })
        .collect();
    let mut urls = Vec::new();
    for t in tasks {
        urls.push(t.await.expect("task"));
    }
    urls.sort();
    urls.dedup();
    assert_eq!(urls.len(), 50, "URLs must be distinct");
}

#[tokio::test]
async fn server_url_is_stable_and_admin() {
    let a = server_url().await;
    let b = server_url().await;
    assert_eq!(a, b);
    let pool = PgPool::connect(a).await.expect("connect admin");
    let db: String = sqlx::query_scalar("SELECT current_database()::text").fetch_one(&pool).await.unwrap();
    assert_eq!(db, "postgres");
    pool.close().await;
}

#[tokio::test]
async fn sqlite_url_creates_a_file() {
    sqlx::any::install_default_drivers();
    let dir = std::env::temp_dir().join(format!("pastebin-sqlite-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = sqlite_url(&dir, "h.db");
    let pool = AnyPool::connect(&url).await.expect("sqlite connect");
    sqlx::query("CREATE TABLE x (a int)").execute(&pool).await.unwrap();
    pool.close().await;
    assert!(dir.join("h.db").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}
