-- Shard P: one row per paste id ever used. Portable SQL (PostgreSQL and
-- SQLite). Times are Unix milliseconds.
--
-- A live paste and a tombstone share this table on purpose: the primary key is
-- the single point where "insert the paste" and "make the id dead" serialize,
-- so exactly one of them can win for an id.
CREATE TABLE pastes (
    id                   TEXT    PRIMARY KEY,
    state                TEXT    NOT NULL CHECK (state IN ('live', 'tombstoned')),
    created_at           BIGINT  NOT NULL,
    -- Live rows only (kept on tombstones made from a live row, for audit).
    delete_token_sha256  TEXT,
    expires_at           BIGINT,
    size                 BIGINT,
    content_sha256       TEXT,
    -- Tombstones only: when and why the id died ('aborted', 'deleted', 'expired', 'reaped').
    tombstoned_at        BIGINT,
    tombstone_reason     TEXT
);

CREATE INDEX pastes_live_by_expiry ON pastes (expires_at) WHERE state = 'live';
