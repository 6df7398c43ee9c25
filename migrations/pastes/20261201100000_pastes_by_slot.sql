-- Rows by their id's slot (the id's first two characters), then id: the
-- per-slot pages of `ctl reconcile` and `ctl repair`
-- (docs/operations.md#finding-and-repairing-lost-pastes). An expression on
-- the prefix, not a range on id, so the pages do not depend on the
-- database's collation. Portable SQL (PostgreSQL and SQLite).
CREATE INDEX pastes_by_slot ON pastes (substr(id, 1, 2), id);
