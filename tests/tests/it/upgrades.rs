//! Upgrades from every earlier schema (docs/testing.md#upgrade-tests): for each
//! migration of shard K and of shard P but the last, a database is migrated
//! only up to it (by sqlx's own migrator, so `_sqlx_migrations` holds what the
//! version that stopped there wrote), filled with every kind of row that schema
//! could hold, then opened as today's shard opens it (today's migrator runs the
//! rest) and every row is checked to serve as it did. On PostgreSQL and SQLite.
//!
//! A fixture is SQL written against the schema of the migration it names
//! (`since`): it is written into every database stopped at that migration or a
//! later one, so each migration added later is covered by the fixtures already
//! here without a line more. A migration that adds a new kind of row adds one
//! fixture (and its check) naming itself.

use std::sync::Arc;

use chrono::DateTime;
use pastebin_core::{
    Clock, DeleteToken, IdempotencyKey, KeyHash, KeyState, ManualClock, OwnedSlots, PasteId, RequestHash, ResponseBody,
    SlotRange,
};
use pastebin_keys::{Begun, KeyStore, NewKey};
use pastebin_pastes::{
    BurnClaim, DeleteOutcome, DismissOutcome, Dismissal, IdFate, InsertOutcome, PasteRead, PasteStore, ReportOrder,
};
use pastebin_proto::shard::v1::ShardKind;
use pastebin_runtime::db::{self, Database};
use pastebin_slots::shard_slots::{Resharding, ShardSlots};
use pastebin_tests::shards::{fresh_url, new_paste, Backend, DEFAULT_POOL_SIZE};
use sqlx::migrate::Migrator;

/// Rows of one kind, as the version that stopped at migration `since` could
/// have written them (only the columns that schema had).
struct Fixture {
    since: i64,
    rows: &'static str,
}

/// Today's clock for every check: after each fixture's `created_at`, before
/// its expiry and its retention.
const NOW_MS: i64 = 1_900_000_000_000;

// ---- Shard K ----

/// A done key (its 201 kept byte for byte), a pending one and an aborted one.
const KEYS: Fixture = Fixture {
    since: 20261129000001,
    rows: r#"INSERT INTO idempotency_keys (key, request_hash, paste_id, state, response_body, created_at, retain_until) VALUES
        ('00000000-0000-4000-8000-00000000d0e1', '1111111111111111111111111111111111111111111111111111111111111111',
         '00UpgradeDone1', 'done', '{"id":"00UpgradeDone1","delete_token":"dt-upgrade-1","url":"https://p.example/00UpgradeDone1"}',
         1899999000000, 1900089000000),
        ('00000000-0000-4000-8000-00000000beef', '2222222222222222222222222222222222222222222222222222222222222222',
         '00UpgradePend1', 'pending', '{"id":"00UpgradePend1","delete_token":"dt-upgrade-2"}',
         1899999000000, 1900089000000),
        ('00000000-0000-4000-8000-00000000ab01', '3333333333333333333333333333333333333333333333333333333333333333',
         '00UpgradeAbrt1', 'aborted', '{"id":"00UpgradeAbrt1","delete_token":"dt-upgrade-3"}',
         1899999000000, 1900089000000);"#,
};

const DONE_KEY: &str = "00000000-0000-4000-8000-00000000d0e1";
const DONE_BODY: &str =
    r#"{"id":"00UpgradeDone1","delete_token":"dt-upgrade-1","url":"https://p.example/00UpgradeDone1"}"#;
const PENDING_KEY: &str = "00000000-0000-4000-8000-00000000beef";
const ABORTED_KEY: &str = "00000000-0000-4000-8000-00000000ab01";

// ---- Both shards (the same tables on K and P) ----

/// The slot range a shard claimed on its first start.
const SLOTS: Fixture = Fixture {
    since: 20261130100000,
    rows: "INSERT INTO shard_slots (singleton, first_slot, last_slot, claimed_at) VALUES (1, 0, 127, 1899999000000);",
};

/// A finished move: this shard handed slots 128-255 to another.
const FINISHED_MOVE: Fixture = Fixture {
    since: 20261201200000,
    rows:
        "INSERT INTO slot_moves (move_id, role, first_slot, last_slot, peer, step, started_at, updated_at)
           VALUES ('upgrade-move-1', 'source', 128, 255, 'http://10.0.0.9:7000', 'done', 1899999000000, 1899999500000);",
};

// ---- Shard P ----

/// Live pastes (one to read, one to delete with its token) and tombstones
/// of the fence and of a delete.
const PASTES: Fixture = Fixture {
    since: 20261129000001,
    rows: "INSERT INTO pastes (id, state, created_at, delete_token_sha256, expires_at, size, content_sha256, tombstoned_at, tombstone_reason) VALUES
        ('00UpgradeLive1', 'live', 1899999000000, '1ba09d5db1e99972aae802057563382d6577f802167f0549f9399c13d7cad9ed',
         2000000000000, 11, '4444444444444444444444444444444444444444444444444444444444444444', NULL, NULL),
        ('00UpgradeLive2', 'live', 1899999000000, '1ba09d5db1e99972aae802057563382d6577f802167f0549f9399c13d7cad9ed',
         2000000000000, 12, '5555555555555555555555555555555555555555555555555555555555555555', NULL, NULL),
        ('00UpgradeAbrt1', 'tombstoned', 1899999000000, NULL, NULL, NULL, NULL, 1899999100000, 'aborted'),
        ('00UpgradeDele1', 'tombstoned', 1899999000000, '1ba09d5db1e99972aae802057563382d6577f802167f0549f9399c13d7cad9ed',
         2000000000000, 13, '6666666666666666666666666666666666666666666666666666666666666666', 1899999200000, 'deleted');",
};

/// The raw token whose SHA-256 the live fixtures keep.
const DELETE_TOKEN: &str = "upgrade-delete-token";

/// A paste with reader attributes, and a burn-after-reading one.
const ATTRIBUTES: Fixture = Fixture {
    since: 20261130200000,
    rows: "INSERT INTO pastes (id, state, created_at, delete_token_sha256, expires_at, size, content_sha256,
                               media_type, file_name, language, burn_after_reading) VALUES
        ('00UpgradeAttr1', 'live', 1899999000000, '1ba09d5db1e99972aae802057563382d6577f802167f0549f9399c13d7cad9ed',
         2000000000000, 20, '7777777777777777777777777777777777777777777777777777777777777777',
         'application/pdf', 'report.pdf', NULL, 0),
        ('00UpgradeBurn1', 'live', 1899999000000, '1ba09d5db1e99972aae802057563382d6577f802167f0549f9399c13d7cad9ed',
         2000000000000, 21, '8888888888888888888888888888888888888888888888888888888888888888',
         NULL, 'notes.rs', 'rust', 1);",
};

/// A paste that keeps the hash of the key that made it (found again after a K loss).
const KEYED: Fixture = Fixture {
    since: 20261201300000,
    rows: "INSERT INTO pastes (id, state, created_at, delete_token_sha256, expires_at, size, content_sha256, key_sha256, request_sha256) VALUES
        ('00UpgradeKeyd1', 'live', 1899999000000, '1ba09d5db1e99972aae802057563382d6577f802167f0549f9399c13d7cad9ed',
         2000000000000, 22, '9999999999999999999999999999999999999999999999999999999999999999',
         'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa',
         'bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb');",
};

const SEALED: Fixture = Fixture {
    since: 20261202100000,
    rows: "INSERT INTO pastes (id, state, created_at, delete_token_sha256, expires_at, size, content_sha256, sealed) VALUES
        ('00UpgradeSeal1', 'live', 1899999000000, '1ba09d5db1e99972aae802057563382d6577f802167f0549f9399c13d7cad9ed',
         2000000000000, 23, 'cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc', 1);",
};

/// A reported paste and a takedown.
const KEEPING: Fixture = Fixture {
    since: 20261202200000,
    rows: r#"INSERT INTO pastes (id, state, created_at, delete_token_sha256, expires_at, size, content_sha256,
                               tombstoned_at, tombstone_reason, removed_because, report_count, last_reported_at, reports) VALUES
        ('00UpgradeRept1', 'live', 1899999000000, '1ba09d5db1e99972aae802057563382d6577f802167f0549f9399c13d7cad9ed',
         2000000000000, 24, 'dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd', NULL, NULL, NULL,
         2, 1899999600000, '[{"reason":"spam","at":1899999500000},{"reason":"other","note":"phishing link","at":1899999600000}]'),
        ('00UpgradeTakn1', 'tombstoned', 1899999000000, '1ba09d5db1e99972aae802057563382d6577f802167f0549f9399c13d7cad9ed',
         2000000000000, 25, 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee', 1899999700000, 'removed',
         'court order 17', 1, 1899999650000, '[{"reason":"illegal","at":1899999650000}]');"#,
};

/// A reported paste with one of its three reports dismissed, its kept reports numbered.
const DISMISSED: Fixture = Fixture {
    since: 20261203300000,
    rows: r#"INSERT INTO pastes (id, state, created_at, delete_token_sha256, expires_at, size, content_sha256,
                               report_count, dismissed_reports, last_reported_at, reports) VALUES
        ('00UpgradeDism1', 'live', 1899999000000, '1ba09d5db1e99972aae802057563382d6577f802167f0549f9399c13d7cad9ed',
         2000000000000, 26, 'ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff', 3, 1, 1899999800000,
         '[{"reason":"malware","at":1899999800000,"number":3},{"reason":"spam","at":1899999700000,"number":1}]');"#,
};

const KEY_FIXTURES: &[Fixture] = &[KEYS, SLOTS, FINISHED_MOVE];
const PASTE_FIXTURES: &[Fixture] = &[PASTES, SLOTS, ATTRIBUTES, FINISHED_MOVE, KEYED, SEALED, KEEPING, DISMISSED];

/// Today's migrations stopped after migration number `applied` (1-based), as
/// the version that shipped them would have run them.
fn stopped_after(migrations: &Migrator, applied: usize) -> Migrator {
    Migrator::with_migrations(migrations.iter().take(applied).cloned().collect())
}

/// A database of `backend` migrated up to `version` only and filled with the
/// fixtures its schema can hold; returns its URL.
async fn database_stopped_at(backend: Backend, migrations: &Migrator, applied: usize, fixtures: &[Fixture]) -> String {
    let url = fresh_url(backend).await;
    let old = stopped_after(migrations, applied);
    let version = old.iter().last().expect("at least one migration").version;
    let db = db::connect(&url, 1, &old).await.unwrap_or_else(|e| panic!("migrating up to {version}: {e:#}"));
    for fixture in fixtures.iter().filter(|fixture| fixture.since <= version) {
        sqlx::raw_sql(fixture.rows)
            .execute(db.pool())
            .await
            .unwrap_or_else(|e| panic!("writing the fixture of {} at {version}: {e}", fixture.since));
    }
    db.pool().close().await;
    url
}

/// Every fixture names a migration of its shard: a typo would silently
/// leave its rows out.
fn assert_fixtures_name_migrations(migrations: &Migrator, fixtures: &[Fixture]) {
    for fixture in fixtures {
        assert!(migrations.version_exists(fixture.since), "fixture since {} names no migration", fixture.since);
    }
}

/// For each migration but the last: the database stopped there, opened by
/// today's code, checked by `check` with the last version the database had.
async fn upgrade_from_each<F, Fut>(backend: Backend, migrations: &Migrator, fixtures: &[Fixture], check: F)
where
    F: Fn(Database, i64) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    assert_fixtures_name_migrations(migrations, fixtures);
    let count = migrations.iter().count();
    for applied in 1..count {
        let version = migrations.iter().nth(applied - 1).expect("a migration").version;
        let url = database_stopped_at(backend, migrations, applied, fixtures).await;
        let db = db::connect(&url, DEFAULT_POOL_SIZE, migrations)
            .await
            .unwrap_or_else(|e| panic!("today's migrator on a database at {version}: {e:#}"));
        check(db, version).await;
    }
}

fn clock() -> Arc<dyn Clock> {
    Arc::new(ManualClock::starting_at(DateTime::from_timestamp_millis(NOW_MS).unwrap()))
}

fn has(version: i64, fixture: &Fixture) -> bool {
    fixture.since <= version
}

fn key(raw: &str) -> IdempotencyKey {
    IdempotencyKey::parse(raw).unwrap()
}

fn id(raw: &str) -> PasteId {
    PasteId::parse(raw).unwrap()
}

/// A retry of a stored key with its own request hash, as the gateway sends it.
async fn retry(store: &KeyStore, raw: &str) -> pastebin_keys::KeyRecord {
    let stored = store.get(&key(raw)).await.unwrap().unwrap_or_else(|| panic!("key {raw} is gone"));
    let again = NewKey {
        key: stored.key,
        request_hash: stored.request_hash,
        paste_id: PasteId::parse("00UpgradeNew01").unwrap(),
        response_body: ResponseBody::new("{\"id\":\"00UpgradeNew01\"}".to_owned()),
    };
    match store.begin(&again).await.unwrap() {
        Begun::Existing(record) => record,
        Begun::Inserted(_) => panic!("a retry of key {raw} made a new key"),
    }
}

async fn check_keys(db: Database, version: i64) {
    let at = format!("upgraded from {version}");
    let store = KeyStore::new(db, clock());
    if has(version, &KEYS) {
        let done = retry(&store, DONE_KEY).await;
        assert_eq!(done.state, KeyState::Done, "{at}");
        assert_eq!(done.response_body.expose(), DONE_BODY, "{at}: the done key replays its 201 byte for byte");
        assert_eq!(done.request_hash, RequestHash::from_hex(&"1".repeat(64)).unwrap(), "{at}");
        assert_eq!(done.paste_id, id("00UpgradeDone1"), "{at}");

        let pending = retry(&store, PENDING_KEY).await;
        assert_eq!(pending.state, KeyState::Pending, "{at}");
        let now = store.clock().now();
        let swept = store.list_pending(now, None, 100).await.unwrap();
        assert_eq!(swept.len(), 1, "{at}: the sweeper sees the one pending key: {swept:?}");
        assert_eq!((swept[0].key, swept[0].paste_id.clone()), (key(PENDING_KEY), id("00UpgradePend1")), "{at}");

        assert_eq!(retry(&store, ABORTED_KEY).await.state, KeyState::Aborted, "{at}: aborted stays aborted");
        assert!(!store.mark_done(&key(ABORTED_KEY), &id("00UpgradeAbrt1")).await.unwrap(), "{at}");
    }
    check_slots(store.database(), ShardKind::Key, version).await;
}

/// The stored range still holds (a restart with it is no resharding) and a
/// finished move is finished, not an active one.
async fn check_slots(db: &Database, kind: ShardKind, version: i64) {
    let at = format!("upgraded from {version}");
    let asked = has(version, &SLOTS).then(|| OwnedSlots::Range(SlotRange::new(0, 127).unwrap()));
    let slots = ShardSlots::claim(db.pool(), kind, asked, Resharding::Refuse, NOW_MS)
        .await
        .unwrap_or_else(|e| panic!("{at}: claiming the stored range: {e}"));
    let ownership = slots.ownership().await;
    assert!(ownership.active.is_none(), "{at}: no move in progress");
    if has(version, &SLOTS) {
        assert_eq!(ownership.owned, OwnedSlots::Range(SlotRange::new(0, 127).unwrap()), "{at}");
        assert_eq!(ownership.generation, 1, "{at}");
    }
    if has(version, &FINISHED_MOVE) {
        let finished = slots.finished_move("upgrade-move-1").await.unwrap();
        let finished = finished.unwrap_or_else(|| panic!("{at}: the finished move is gone"));
        assert_eq!(finished.step.as_str(), "done", "{at}");
        assert_eq!(finished.identity.slots, SlotRange::new(128, 255).unwrap(), "{at}");
    }
}

async fn live(store: &PasteStore, raw: &str, at: &str) -> pastebin_pastes::PasteRow {
    match store.read(&id(raw)).await.unwrap() {
        PasteRead::Live(row) => row,
        other => panic!("{at}: {raw} reads {other:?}"),
    }
}

/// The id is dead for good: it reads as missing (or as the takedown) and an
/// insert of it is refused.
async fn fences(store: &PasteStore, raw: &str, at: &str) {
    let (mut again, _token) = new_paste(store.clock().now(), chrono::Duration::hours(1));
    again.id = id(raw);
    assert_eq!(store.insert(&again).await.unwrap(), InsertOutcome::Tombstoned, "{at}: {raw} still fences");
    assert_eq!(store.tombstone_unless_live(&id(raw)).await.unwrap(), IdFate::Tombstoned, "{at}: {raw}");
}

async fn check_pastes(db: Database, version: i64) {
    let at = &format!("upgraded from {version}");
    check_slots(&db, ShardKind::Paste, version).await;
    let store = PasteStore::new(db, clock());
    let token = DeleteToken::presented(DELETE_TOKEN);
    if has(version, &PASTES) {
        let row = live(&store, "00UpgradeLive1", at).await;
        assert_eq!((row.size, row.content_sha256), (11, [0x44; 32]), "{at}");
        assert_eq!(row.expires_at.timestamp_millis(), 2_000_000_000_000, "{at}");
        assert_eq!(row.attributes, Default::default(), "{at}: a plain text paste, not burned, not sealed");
        assert_eq!(store.delete(&id("00UpgradeLive2"), &token).await.unwrap(), DeleteOutcome::Deleted, "{at}");
        assert_eq!(store.read(&id("00UpgradeLive2")).await.unwrap(), PasteRead::Missing, "{at}");
        for dead in ["00UpgradeAbrt1", "00UpgradeDele1"] {
            assert_eq!(store.read(&id(dead)).await.unwrap(), PasteRead::Missing, "{at}: {dead}");
            fences(&store, dead, at).await;
        }
    }
    if has(version, &ATTRIBUTES) {
        let attributes = live(&store, "00UpgradeAttr1", at).await.attributes;
        assert_eq!(attributes.media_type.map(|t| t.as_str().to_owned()).as_deref(), Some("application/pdf"), "{at}");
        assert_eq!(attributes.file_name.map(|n| n.as_str().to_owned()).as_deref(), Some("report.pdf"), "{at}");
        assert!(!attributes.burn_after_reading, "{at}");
        let burn = live(&store, "00UpgradeBurn1", at).await.attributes;
        assert!(burn.burn_after_reading, "{at}");
        assert_eq!(burn.language.map(|l| l.as_str().to_owned()).as_deref(), Some("rust"), "{at}");
        assert_eq!(store.claim_burn(&id("00UpgradeBurn1")).await.unwrap(), BurnClaim::Claimed, "{at}: burn burns");
        assert_eq!(store.claim_burn(&id("00UpgradeBurn1")).await.unwrap(), BurnClaim::Gone, "{at}: once");
        fences(&store, "00UpgradeBurn1", at).await;
    }
    if has(version, &KEYED) {
        let key_hash = KeyHash([0xaa; 32]);
        let found = store.find_by_key(&key_hash, 10).await.unwrap();
        assert_eq!(found.iter().map(|p| p.id.clone()).collect::<Vec<_>>(), [id("00UpgradeKeyd1")], "{at}");
    }
    if has(version, &SEALED) {
        assert!(live(&store, "00UpgradeSeal1", at).await.attributes.sealed, "{at}: sealed reads as sealed");
        assert!(!live(&store, "00UpgradeLive1", at).await.attributes.sealed, "{at}");
    }
    if has(version, &KEEPING) {
        let reported = store.reported(ReportOrder::Newest, 10, SlotRange::ALL).await.unwrap();
        let reported: Vec<_> = reported.into_iter().filter(|paste| paste.id == id("00UpgradeRept1")).collect();
        assert_eq!(reported.len(), 1, "{at}: {reported:?}");
        assert_eq!((reported[0].report_count, reported[0].open_reports), (2, 2), "{at}");
        let reasons: Vec<_> =
            reported[0].recent.iter().map(|r| (r.number, r.reason.as_str(), r.note.as_deref())).collect();
        assert_eq!(reasons, [(2, "spam", None), (1, "other", Some("phishing link"))], "{at}: numbered by place");
        // Reports kept before numbers existed are dismissed by theirs.
        let dismissed = store.dismiss_report(&id("00UpgradeRept1"), Dismissal::One(1)).await.unwrap();
        assert_eq!(dismissed, DismissOutcome::Dismissed { open_reports: 1 }, "{at}");
        assert_eq!(
            store.read(&id("00UpgradeTakn1")).await.unwrap(),
            PasteRead::RemovedByOperator { reason: "court order 17".into() },
            "{at}: the takedown still shows"
        );
        fences(&store, "00UpgradeTakn1", at).await;
    }
    if has(version, &DISMISSED) {
        let reported = store.reported(ReportOrder::Newest, 10, SlotRange::ALL).await.unwrap();
        let dismissed = reported.iter().find(|paste| paste.id == id("00UpgradeDism1")).expect("still open");
        assert_eq!((dismissed.report_count, dismissed.open_reports), (3, 2), "{at}");
        let numbers: Vec<u64> = dismissed.recent.iter().map(|r| r.number).collect();
        assert_eq!(numbers, [3, 1], "{at}");
    }
}

pastebin_tests::both_backends! {
    async fn key_rows_serve_after_an_upgrade_from_every_earlier_schema(backend: Backend) {
        upgrade_from_each(backend, &pastebin_keys::MIGRATIONS, KEY_FIXTURES, check_keys).await;
    }

    async fn paste_rows_serve_after_an_upgrade_from_every_earlier_schema(backend: Backend) {
        upgrade_from_each(backend, &pastebin_pastes::MIGRATIONS, PASTE_FIXTURES, check_pastes).await;
    }
}
