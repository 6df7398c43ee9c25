-- The shard's marker (docs/design.md#ownership-on-etcd): drawn at random and
-- written here before the topology on etcd records it. A database that
-- holds another marker than etcd's has forgotten commits since (a restore,
-- a new volume, a standby promoted without the last commits); the shard
-- then draws a new one, which voids what a move verified on it.
CREATE TABLE shard_marker (
    singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
    marker TEXT NOT NULL,
    written_at BIGINT NOT NULL
);
