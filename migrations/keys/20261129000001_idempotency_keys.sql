-- Shard K: one row per idempotency key. Portable SQL: the same file runs on
-- PostgreSQL (production) and SQLite (the embedded default). Times are Unix
-- milliseconds.
CREATE TABLE idempotency_keys (
    -- Canonical UUID text (lowercase, hyphenated). The unique key is what
    -- serializes two creates racing on one key.
    key            TEXT    PRIMARY KEY,
    request_hash   TEXT    NOT NULL,
    paste_id       TEXT    NOT NULL,
    state          TEXT    NOT NULL CHECK (state IN ('pending', 'done', 'aborted')),
    -- The 201 body. Holds the delete token: never logged, never listed.
    response_body  TEXT    NOT NULL,
    created_at     BIGINT  NOT NULL,
    retain_until   BIGINT  NOT NULL
);

-- The sweeper's and the operators' question: pending keys, oldest first.
CREATE INDEX idempotency_keys_pending_by_age
    ON idempotency_keys (created_at, key) WHERE state = 'pending';

-- Retention: done and aborted keys past their window. Pending keys are never in it.
CREATE INDEX idempotency_keys_retired_by_deadline
    ON idempotency_keys (retain_until) WHERE state <> 'pending';
