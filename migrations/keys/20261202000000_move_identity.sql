-- One move identity, fenced runs and a two-phase abandon
-- (docs/design.md#moving-slots). Each record names both ends of its move,
-- the epoch and holder of the ctl run that last drove it, whether an
-- abandon has begun, and the token of the source's release (the receipt a
-- target takes with). Portable SQL (PostgreSQL and SQLite): one column per
-- ALTER.
ALTER TABLE slot_moves ADD COLUMN source TEXT NOT NULL DEFAULT '';
ALTER TABLE slot_moves ADD COLUMN target TEXT NOT NULL DEFAULT '';
ALTER TABLE slot_moves ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
ALTER TABLE slot_moves ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE slot_moves ADD COLUMN lease_until BIGINT NOT NULL DEFAULT 0;
ALTER TABLE slot_moves ADD COLUMN abandoning BIGINT NOT NULL DEFAULT 0;
ALTER TABLE slot_moves ADD COLUMN release_token TEXT;
-- A move recorded before this version knew only its peer: that end is
-- filled in; this shard's own address was never recorded, so such a move is
-- finished (or abandoned) by the version that began it.
UPDATE slot_moves SET target = peer WHERE role = 'source';
UPDATE slot_moves SET source = peer WHERE role = 'target';
-- The lost-commits window a released move carries (a K shard's
-- --may-have-lost-commits-since moves with its slots), and the windows this
-- shard holds for slots, its own or taken with them
-- (docs/design.md#adopting-after-a-k-loss). Unix milliseconds.
ALTER TABLE slot_moves ADD COLUMN search_first_since BIGINT;
ALTER TABLE slot_moves ADD COLUMN search_first_until BIGINT;
CREATE TABLE slot_search_windows (
    first_slot  BIGINT  NOT NULL CHECK (first_slot BETWEEN 0 AND 255),
    last_slot   BIGINT  NOT NULL CHECK (last_slot BETWEEN first_slot AND 255),
    since       BIGINT  NOT NULL,
    until       BIGINT  NOT NULL
);
