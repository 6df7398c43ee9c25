-- Online resharding (docs/design.md#moving-slots). A shard may own no slot
-- at all (`--slots none`), and every change of its range bumps a generation
-- that callers compare with the one their slot map was built from.
-- Portable SQL (PostgreSQL and SQLite): one column per ALTER.
ALTER TABLE shard_slots ADD COLUMN owns_nothing BIGINT NOT NULL DEFAULT 0;
ALTER TABLE shard_slots ADD COLUMN generation BIGINT NOT NULL DEFAULT 1;

-- The moves this shard took part in, with the step each reached: the
-- handover's progress lives here, not in the `ctl` that drives it, so a
-- rerun after a crash knows where to go on. At most one row is unfinished
-- (step other than 'done' or 'abandoned').
CREATE TABLE slot_moves (
    move_id     TEXT    PRIMARY KEY,
    role        TEXT    NOT NULL CHECK (role IN ('source', 'target')),
    first_slot  BIGINT  NOT NULL CHECK (first_slot BETWEEN 0 AND 255),
    last_slot   BIGINT  NOT NULL CHECK (last_slot BETWEEN first_slot AND 255),
    -- The other shard's address, as the operator gave it.
    peer        TEXT    NOT NULL,
    step        TEXT    NOT NULL CHECK (step IN ('importing', 'frozen', 'released', 'done', 'abandoned')),
    -- Unix milliseconds.
    started_at  BIGINT  NOT NULL,
    updated_at  BIGINT  NOT NULL
);
