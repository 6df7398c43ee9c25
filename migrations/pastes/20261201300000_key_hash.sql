-- Adopting instead of duplicating after a K loss
-- (docs/design.md#adopting-after-a-k-loss): each row made by a create
-- keeps the SHA-256 of that create's idempotency key (the 16 raw bytes)
-- and its request hash, both hex, so a gateway whose K shard may have lost
-- commits can find the paste an erased key made, and tell "the same
-- request" from "the key reused for another". NULL on rows made before
-- this migration and on the fence's tombstones. Portable SQL (PostgreSQL
-- and SQLite): one column per ALTER.
ALTER TABLE pastes ADD COLUMN key_sha256 TEXT;
ALTER TABLE pastes ADD COLUMN request_sha256 TEXT;
CREATE INDEX pastes_by_key ON pastes (key_sha256) WHERE key_sha256 IS NOT NULL;
