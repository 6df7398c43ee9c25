-- Tombstones are purged after a retention window (default 7 days) by the
-- sweeper; this index finds the old ones without scanning live rows.
CREATE INDEX pastes_tombstones_by_age ON pastes (tombstoned_at) WHERE state = 'tombstoned';
