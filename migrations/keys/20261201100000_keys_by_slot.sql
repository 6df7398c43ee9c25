-- Keys by their paste id's slot (the id's first two characters), then id.
-- Two questions use it: "does a done key name this paste id?" (asked before
-- the reaper or recovery may tombstone an id that P has no row for:
-- docs/design.md#never-amplify-a-loss) and `ctl reconcile`'s per-slot pages.
-- An expression on the prefix, not a range on paste_id, so the pages do not
-- depend on the database's collation. Portable SQL (PostgreSQL and SQLite).
CREATE INDEX idempotency_keys_by_slot ON idempotency_keys (substr(paste_id, 1, 2), paste_id);
