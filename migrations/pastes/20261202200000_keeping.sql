-- Keeping a public instance (docs/operations.md#reports-and-takedowns).
-- Reports and takedowns live on the paste's own row, so they shard and
-- move with it: a slot move copies this one table. Portable SQL
-- (PostgreSQL and SQLite): one column per ALTER.
--
-- A takedown is a tombstone with tombstone_reason 'removed' and the
-- operator's reason here; readers are told it (410), not "not found".
ALTER TABLE pastes ADD COLUMN removed_because TEXT;
-- Reports: how many, when the last came, and the last few as a JSON array
-- of {"reason", "note", "at"} (bounded: see the paste store).
ALTER TABLE pastes ADD COLUMN report_count BIGINT NOT NULL DEFAULT 0;
ALTER TABLE pastes ADD COLUMN last_reported_at BIGINT;
ALTER TABLE pastes ADD COLUMN reports TEXT;
-- `ctl reports`: the reported live rows, without a scan of the others.
CREATE INDEX pastes_reported ON pastes (last_reported_at) WHERE report_count > 0;
