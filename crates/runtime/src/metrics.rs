//! Prometheus metrics: every name the services export is declared here, so
//! the alert rules, the dashboard and the code cannot drift apart silently.
//! No label ever carries a key, a paste id or a token.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Creates by outcome: `created`, `replayed`, `adopted`, `conflict`, `unavailable`, `slot_moving`, `shed`, `invalid`,
/// `too_large`, `storage_full`.
pub const CREATES: &str = "pastebin_creates_total";
/// Seconds per saga step: `k_begin`, `put`, `p_insert`, `k_done`, and `create` for the whole.
pub const SAGA_STEP_SECONDS: &str = "pastebin_saga_step_duration_seconds";
/// Pending keys now, per K shard (`address` label: the shard's address as the
/// sweeper lists it), as last seen by the sweeper.
pub const PENDING_KEYS: &str = "pastebin_pending_keys";
/// Age of the oldest pending key, per K shard; 0 when none is pending.
pub const OLDEST_PENDING_AGE_SECONDS: &str = "pastebin_oldest_pending_age_seconds";
/// Pending keys older than 2 s (`older_than="2s"`) and 60 s (`older_than="60s"`), per K shard.
pub const PENDING_KEYS_OLDER_THAN: &str = "pastebin_pending_keys_older_than";
/// Recovery decisions: `done`, `aborted`, `already_resolved`, `skipped_unreachable`,
/// `not_owned` (listed copies of slots another K shard owns, left alone).
pub const SWEEPER_DECISIONS: &str = "pastebin_sweeper_decisions_total";
/// Ids the reaper or recovery left unfenced because a done key names them
/// while their P shard has no row: lost pastes (run `ctl reconcile`).
pub const LOST_PASTES_SPARED: &str = "pastebin_lost_pastes_spared_total";
/// What the sweeper's running cross-check of K, P and the objects found, summed
/// over every slot's latest check, by `kind`: `lost_paste` (done key, no paste
/// row), `missing_object` (done key or live row, no object), `orphan` (live
/// paste, no key). Anything above 0 is a loss: run `ctl reconcile`.
pub const DIVERGENT_IDS: &str = "pastebin_divergent_ids";
/// 1 when a commit this K or P shard acknowledged survives the loss of its
/// database server (a synchronous standby), 0 when it does not (a single
/// server, asynchronous standbys), -1 when the server would not say.
pub const COMMITS_SURVIVE_SERVER_LOSS: &str = "pastebin_commits_survive_server_loss";
/// Unix time of the last sweeper round that reached every shard.
pub const SWEEPER_LAST_SUCCESS: &str = "pastebin_sweeper_last_success_timestamp_seconds";
/// 1 if the sweeper reached this P shard in its last round, else 0 (`address` label).
pub const PASTE_SHARD_REACHABLE: &str = "pastebin_paste_shard_reachable";
/// Done and aborted keys deleted by retention.
pub const RETIRED_KEYS: &str = "pastebin_retired_keys_total";
/// Paste rows purged after expiry.
pub const EXPIRED_PASTES: &str = "pastebin_expired_pastes_total";
/// Orphan objects deleted by the reaper.
pub const REAPED_OBJECTS: &str = "pastebin_reaped_objects_total";
/// Tombstones purged from P after their retention.
pub const PURGED_TOMBSTONES: &str = "pastebin_purged_tombstones_total";
/// Burn-after-reading pastes read (and so deleted) by their one reader.
pub const PASTES_BURNED: &str = "pastebin_pastes_burned_total";

/// Pastes taken down by an operator (`pastebin ctl takedown`), counted by
/// the P shard that tombstoned them.
pub const TAKEDOWNS: &str = "pastebin_takedowns_total";
/// Readers' reports stored, by `reason` (spam, malware, illegal,
/// personal-data, other), counted by the P shard that stored them.
pub const REPORTS: &str = "pastebin_reports_total";

/// Highlighted renders of paste pages, by how they ended: `highlighted`,
/// `out_of_time` (plain text from then on) or `abandoned` (every view waiting
/// for it went away). At most one per paste per gateway, reveals included.
pub const PAGE_RENDERS: &str = "pastebin_page_renders_total";
/// `POST /{id}` reveals (the "show it" button of a paste page).
pub const PAGE_REVEALS: &str = "pastebin_page_reveals_total";

/// Connections, requests and messages the edge turned away, by `protocol`
/// (`http`, `grpc`) and `reason` (docs/security.md#total-bounds); counted
/// through pastebin_edge::refusals.
pub const EDGE_REFUSALS: &str = pastebin_edge::refusals::METRIC;
/// Writes per SQLite group commit (one transaction, one fsync), by
/// `database` (the file name, e.g. `keys.db`): near 1 means no batching.
pub const GROUP_COMMIT_WRITES: &str = "pastebin_group_commit_writes";
/// Seconds a SQLite group's `COMMIT` took (its fsync), by `database`.
pub const SQLITE_COMMIT_SECONDS: &str = "pastebin_sqlite_commit_seconds";
/// Seconds a SQLite WAL checkpoint took, off the commit path, by `database`.
pub const SQLITE_CHECKPOINT_SECONDS: &str = "pastebin_sqlite_checkpoint_seconds";
/// Slots this shard owns but has frozen while they move to another shard
/// (docs/design.md#moving-slots); 0 when no move is copying.
pub const FROZEN_SLOTS: &str = "pastebin_shard_frozen_slots";
/// Rows of a slot move handled by this shard, by `direction`: `exported`
/// and `deleted` on the source, `imported` on the target.
pub const SLOT_MOVE_ROWS: &str = "pastebin_slot_move_rows_total";
/// Seconds since a shard's slot move last changed step, as the sweeper
/// reads the shard (`ctl reshard --status`), by `kind` and the shard's
/// `address`; 0 when it is in no move. A move whose ctl stopped climbs
/// (docs/alerts.md#slot-move-stalled).
pub const SLOT_MOVE_STEP_AGE_SECONDS: &str = "pastebin_slot_move_step_age_seconds";

/// Live paste rows a P shard holds (an expired paste counts until it is
/// purged): counted every minute, and each insert adds one at once.
pub const LIVE_PASTES: &str = "pastebin_live_pastes";
/// The content bytes of those pastes, counted alike.
pub const STORED_BYTES: &str = "pastebin_stored_bytes";
/// HTTP requests of the public listener by `route` (its template, e.g.
/// `/api/v1/pastes/{id}`, or `unmatched`) and `status`, counted as answered.
pub const REQUESTS: &str = "pastebin_requests_total";
/// Free bytes on the fullest filesystem the gateway's free-space watermark
/// watches (`up`'s data directory, a local objects directory).
pub const STORAGE_FREE_BYTES: &str = "pastebin_storage_free_bytes";
/// The watermark itself (`--min-free-bytes`): below it creates are refused with 507.
pub const STORAGE_MIN_FREE_BYTES: &str = "pastebin_storage_min_free_bytes";

/// Every metric name above, for tests that check rules and dashboards.
pub const ALL: &[&str] = &[
    CREATES,
    SAGA_STEP_SECONDS,
    PENDING_KEYS,
    OLDEST_PENDING_AGE_SECONDS,
    PENDING_KEYS_OLDER_THAN,
    SWEEPER_DECISIONS,
    DIVERGENT_IDS,
    COMMITS_SURVIVE_SERVER_LOSS,
    SWEEPER_LAST_SUCCESS,
    PASTE_SHARD_REACHABLE,
    RETIRED_KEYS,
    EXPIRED_PASTES,
    REAPED_OBJECTS,
    PURGED_TOMBSTONES,
    PASTES_BURNED,
    TAKEDOWNS,
    REPORTS,
    PAGE_RENDERS,
    PAGE_REVEALS,
    EDGE_REFUSALS,
    GROUP_COMMIT_WRITES,
    SQLITE_COMMIT_SECONDS,
    SQLITE_CHECKPOINT_SECONDS,
    FROZEN_SLOTS,
    SLOT_MOVE_ROWS,
    SLOT_MOVE_STEP_AGE_SECONDS,
    STORAGE_FREE_BYTES,
    STORAGE_MIN_FREE_BYTES,
    REQUESTS,
    LIVE_PASTES,
    STORED_BYTES,
];

/// Step buckets around the 2 s budget: most steps take milliseconds.
const STEP_BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0];
/// Group sizes up to the writer's largest group (256).
const GROUP_BUCKETS: &[f64] = &[1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 32.0, 64.0, 128.0, 256.0];

/// Installs the process-wide recorder once and returns the handle that
/// renders the text exposition (served on the admin listener's `/metrics`).
pub fn install() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Full(SAGA_STEP_SECONDS.to_owned()), STEP_BUCKETS)
                .expect("the bucket list is not empty")
                .set_buckets_for_metric(Matcher::Full(GROUP_COMMIT_WRITES.to_owned()), GROUP_BUCKETS)
                .expect("the bucket list is not empty")
                .set_buckets_for_metric(Matcher::Full(SQLITE_COMMIT_SECONDS.to_owned()), STEP_BUCKETS)
                .expect("the bucket list is not empty")
                .set_buckets_for_metric(Matcher::Full(SQLITE_CHECKPOINT_SECONDS.to_owned()), STEP_BUCKETS)
                .expect("the bucket list is not empty");
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder was installed first; then ours
            // renders nothing, which the admin tests would show.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}
