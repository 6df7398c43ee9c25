-- Sealed pastes (docs/api.md#sealed-pastes): the stored object is an
-- envelope the client encrypted with a key the server never sees. 1 on
-- such a paste; rows written before this migration read as not sealed.
-- Portable SQL (PostgreSQL and SQLite).
ALTER TABLE pastes ADD COLUMN sealed BIGINT NOT NULL DEFAULT 0;
