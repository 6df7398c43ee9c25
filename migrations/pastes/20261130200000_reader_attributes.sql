-- What a reader sees besides the bytes (docs/reader-features.md#where-attributes-live).
-- All nullable or defaulted, so rows written before this migration read as
-- plain text pastes that are not burned on reading. Portable SQL: one column
-- per ALTER for SQLite.
ALTER TABLE pastes ADD COLUMN media_type TEXT;
ALTER TABLE pastes ADD COLUMN file_name TEXT;
ALTER TABLE pastes ADD COLUMN language TEXT;
ALTER TABLE pastes ADD COLUMN burn_after_reading BIGINT NOT NULL DEFAULT 0;
