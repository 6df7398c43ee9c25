//! The object store contract, run unchanged against both backends: a local directory and
//! a real S3-compatible server (SeaweedFS). Then the S3-only failure classification: a store
//! nobody answers is Uncertain, a bucket that does not exist is Refused.

use std::sync::Arc;

use bytes::Bytes;
use pastebin_objects::{LocalDirStore, ObjectError, ObjectStore, PutOutcome, S3Settings, S3Store};
use pastebin_tests::s3::{fresh_bucket, set_test_credentials};

/// A store plus whatever must outlive it (the local store's temp dir).
struct Backend {
    store: Arc<dyn ObjectStore>,
    _dir: Option<tempfile::TempDir>,
}

fn local_dir() -> Backend {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = LocalDirStore::open(dir.path()).expect("open local store");
    Backend { store: Arc::new(store), _dir: Some(dir) }
}

async fn seaweedfs() -> Backend {
    let store = S3Store::connect(fresh_bucket().await).await.expect("connect");
    Backend { store: Arc::new(store), _dir: None }
}

/// Runs each contract test once per backend, as `local_dir::NAME` and `seaweedfs::NAME`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod local_dir {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let backend = super::local_dir();
                    super::$name(backend.store.clone()).await;
                }
            )*
        }
        mod seaweedfs {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let backend = super::seaweedfs().await;
                    super::$name(backend.store.clone()).await;
                }
            )*
        }
    };
}

on_both_backends!(
    put_creates_and_get_returns_the_bytes,
    second_put_is_already_exists_and_keeps_the_first_bytes,
    get_absent_is_none,
    delete_then_get_is_none,
    delete_absent_is_ok,
    list_pages_in_id_order_with_time_and_size,
    concurrent_puts_of_one_id_create_exactly_once,
);

const ID: &str = "AB0123456789xy";

async fn put_creates_and_get_returns_the_bytes(store: Arc<dyn ObjectStore>) {
    let outcome = store.put(ID, Bytes::from_static(b"hello, paste")).await.unwrap();
    assert_eq!(outcome, PutOutcome::Created);
    assert_eq!(store.get(ID).await.unwrap(), Some(Bytes::from_static(b"hello, paste")));
}

async fn second_put_is_already_exists_and_keeps_the_first_bytes(store: Arc<dyn ObjectStore>) {
    store.put(ID, Bytes::from_static(b"first")).await.unwrap();
    // The saga's repeat carries the same bytes; the store must not overwrite either way,
    // so different bytes here prove nothing was replaced.
    assert_eq!(store.put(ID, Bytes::from_static(b"first")).await.unwrap(), PutOutcome::AlreadyExists);
    assert_eq!(store.put(ID, Bytes::from_static(b"other")).await.unwrap(), PutOutcome::AlreadyExists);
    assert_eq!(store.get(ID).await.unwrap(), Some(Bytes::from_static(b"first")));
}

async fn get_absent_is_none(store: Arc<dyn ObjectStore>) {
    assert_eq!(store.get(ID).await.unwrap(), None);
}

async fn delete_then_get_is_none(store: Arc<dyn ObjectStore>) {
    store.put(ID, Bytes::from_static(b"short-lived")).await.unwrap();
    store.delete(ID).await.unwrap();
    assert_eq!(store.get(ID).await.unwrap(), None);
    // The id may be written again after a delete (a purge followed by nothing else is the
    // only real case, but the store itself must not remember deleted ids).
    assert_eq!(store.put(ID, Bytes::from_static(b"again")).await.unwrap(), PutOutcome::Created);
}

async fn delete_absent_is_ok(store: Arc<dyn ObjectStore>) {
    store.delete(ID).await.unwrap();
    store.put(ID, Bytes::from_static(b"x")).await.unwrap();
    store.delete(ID).await.unwrap();
    store.delete(ID).await.unwrap();
}

async fn list_pages_in_id_order_with_time_and_size(store: Arc<dyn ObjectStore>) {
    // Bytewise order: digits < uppercase < lowercase, as S3 orders keys.
    let ids = ["b0000000000000", "A0000000000000", "90000000000000", "a0000000000000", "B0000000000000"];
    for (i, id) in ids.iter().enumerate() {
        store.put(id, Bytes::from(vec![b'x'; i + 1])).await.unwrap();
    }
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;

    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = store.list(after.as_deref(), 2).await.unwrap();
        if page.is_empty() {
            break;
        }
        assert!(page.len() <= 2, "page over the limit: {page:?}");
        after = page.last().map(|o| o.paste_id.clone());
        seen.extend(page);
    }

    let listed: Vec<&str> = seen.iter().map(|o| o.paste_id.as_str()).collect();
    assert_eq!(listed, ["90000000000000", "A0000000000000", "B0000000000000", "a0000000000000", "b0000000000000"]);
    for object in &seen {
        let index = ids.iter().position(|id| *id == object.paste_id).unwrap();
        assert_eq!(object.size, index as u64 + 1, "size of {}", object.paste_id);
        // S3's LastModified has whole seconds; allow a little either side.
        let age = now - object.created_at.timestamp();
        assert!((-5..60).contains(&age), "created_at of {} is {age} s ago", object.paste_id);
    }

    // `after` need not be an existing id.
    let page = store.list(Some("A5"), 10).await.unwrap();
    assert_eq!(page.first().map(|o| o.paste_id.as_str()), Some("B0000000000000"));
    assert!(store.list(None, 0).await.unwrap().is_empty());
}

/// SeaweedFS enforces the header under concurrent writers from 4.x on (before 3.97 it
/// ignored it): this runs against the version scripts/test pins, and
/// `seaweedfs_refuses_every_second_writer_round_after_round` repeats it.
async fn concurrent_puts_of_one_id_create_exactly_once(store: Arc<dyn ObjectStore>) {
    race_writers_on(&store, ID).await;
}

/// 16 writers PUT `id` at once with different bytes: exactly one creates, and its bytes stay.
async fn race_writers_on(store: &Arc<dyn ObjectStore>, id: &'static str) {
    let puts: Vec<_> = (0..16)
        .map(|i| {
            let store = Arc::clone(store);
            tokio::spawn(async move { store.put(id, Bytes::from(format!("writer {i}"))).await })
        })
        .collect();
    let mut created = Vec::new();
    for (i, put) in puts.into_iter().enumerate() {
        match put.await.unwrap() {
            Ok(PutOutcome::Created) => created.push(i),
            Ok(PutOutcome::AlreadyExists) => {}
            // S3 may answer a racing conditional PUT with 409 ConditionalRequestConflict,
            // which is Uncertain by contract; it must never be a second Created.
            Err(ObjectError::Uncertain(e)) => eprintln!("writer {i}: uncertain: {e}"),
            Err(e) => panic!("writer {i}: {e}"),
        }
    }
    assert_eq!(created.len(), 1, "{id}: created by writers {created:?}");
    let winner = Bytes::from(format!("writer {}", created[0]));
    assert_eq!(store.get(id).await.unwrap(), Some(winner), "{id}");
}

/// Whether the pinned store enforces create-only under concurrency is a fact about its
/// version, so it is checked on many ids, not one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn seaweedfs_refuses_every_second_writer_round_after_round() {
    const IDS: [&str; 20] = [
        "R0000000000000",
        "R0000000000001",
        "R0000000000002",
        "R0000000000003",
        "R0000000000004",
        "R0000000000005",
        "R0000000000006",
        "R0000000000007",
        "R0000000000008",
        "R0000000000009",
        "R0000000000010",
        "R0000000000011",
        "R0000000000012",
        "R0000000000013",
        "R0000000000014",
        "R0000000000015",
        "R0000000000016",
        "R0000000000017",
        "R0000000000018",
        "R0000000000019",
    ];
    let backend = seaweedfs().await;
    for id in IDS {
        race_writers_on(&backend.store, id).await;
    }
}

/// A port on which nothing listens: bound, then released.
fn dead_endpoint() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

#[tokio::test]
async fn s3_nobody_listening_is_uncertain_not_refused() {
    set_test_credentials();
    let store = S3Store::connect(S3Settings {
        bucket: "any-bucket".into(),
        endpoint: Some(dead_endpoint()),
        region: "us-east-1".into(),
        force_path_style: true,
    })
    .await
    .unwrap();

    let started = std::time::Instant::now();
    let put = store.put(ID, Bytes::from_static(b"x")).await;
    assert!(matches!(put, Err(ObjectError::Uncertain(_))), "put: {put:?}");
    let get = store.get(ID).await;
    assert!(matches!(get, Err(ObjectError::Uncertain(_))), "get: {get:?}");
    let list = store.list(None, 10).await;
    assert!(matches!(list, Err(ObjectError::Uncertain(_))), "list: {list:?}");
    // Retries are off: a refused connection fails at once, not after backoff.
    assert!(started.elapsed() < std::time::Duration::from_secs(2), "took {:?}", started.elapsed());
}

#[tokio::test]
async fn s3_missing_bucket_is_refused() {
    let mut settings = fresh_bucket().await;
    settings.bucket = format!("{}-missing", settings.bucket);
    let store = S3Store::connect(settings).await.unwrap();

    let put = store.put(ID, Bytes::from_static(b"x")).await;
    assert!(matches!(put, Err(ObjectError::Refused(_))), "put: {put:?}");
    // NoSuchBucket is a 404 too, but it must not read as "this paste is absent".
    let get = store.get(ID).await;
    assert!(matches!(get, Err(ObjectError::Refused(_))), "get: {get:?}");
    let list = store.list(None, 10).await;
    assert!(matches!(list, Err(ObjectError::Refused(_))), "list: {list:?}");
}

#[tokio::test]
async fn s3_ensure_bucket_is_idempotent() {
    let settings = fresh_bucket().await;
    let store = S3Store::connect(settings).await.unwrap();
    store.ensure_bucket().await.unwrap();
    assert_eq!(store.put(ID, Bytes::from_static(b"x")).await.unwrap(), PutOutcome::Created);
}
