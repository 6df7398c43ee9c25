-- A move's source records it before it freezes anything: step 'exporting'
-- (docs/design.md#moving-slots), while the bulk of the rows is copied and
-- the slots are still served. The step's CHECK gains it; a CHECK cannot be
-- altered in SQLite, so the table is rebuilt. Portable SQL (PostgreSQL and
-- SQLite).
CREATE TABLE slot_moves_next (
    move_id     TEXT    PRIMARY KEY,
    role        TEXT    NOT NULL CHECK (role IN ('source', 'target')),
    first_slot  BIGINT  NOT NULL CHECK (first_slot BETWEEN 0 AND 255),
    last_slot   BIGINT  NOT NULL CHECK (last_slot BETWEEN first_slot AND 255),
    peer        TEXT    NOT NULL,
    step        TEXT    NOT NULL CHECK (step IN ('importing', 'exporting', 'frozen', 'released', 'done', 'abandoned')),
    started_at  BIGINT  NOT NULL,
    updated_at  BIGINT  NOT NULL
);
INSERT INTO slot_moves_next (move_id, role, first_slot, last_slot, peer, step, started_at, updated_at)
    SELECT move_id, role, first_slot, last_slot, peer, step, started_at, updated_at FROM slot_moves;
DROP TABLE slot_moves;
ALTER TABLE slot_moves_next RENAME TO slot_moves;
