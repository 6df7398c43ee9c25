-- Dismissed reports (`pastebin ctl reports --dismiss`,
-- docs/operations.md#reports-and-takedowns): report_count still counts
-- every report made, and a paste's open reports are report_count minus
-- these. A dismissed report leaves the kept list; each kept one carries its
-- number in the JSON (1 for a paste's first report), older ones are
-- numbered by their place when read.
ALTER TABLE pastes ADD COLUMN dismissed_reports BIGINT NOT NULL DEFAULT 0;
