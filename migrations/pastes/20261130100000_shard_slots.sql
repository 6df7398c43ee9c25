-- The slot range this shard owns (`--slots FIRST-LAST`), written on first
-- start and checked on every later one: a shard restarted with another
-- range refuses to start unless told it is a deliberate resharding step.
-- Portable SQL (PostgreSQL and SQLite). One row at most.
CREATE TABLE shard_slots (
    singleton   BIGINT  PRIMARY KEY CHECK (singleton = 1),
    first_slot  BIGINT  NOT NULL CHECK (first_slot BETWEEN 0 AND 255),
    last_slot   BIGINT  NOT NULL CHECK (last_slot BETWEEN first_slot AND 255),
    -- Unix milliseconds of the start that wrote this range.
    claimed_at  BIGINT  NOT NULL
);
