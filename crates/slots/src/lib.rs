//! Which slots a shard serves, and its side of moving them
//! (docs/design.md#moving-slots). [`shard_slots`] keeps the shard's range and
//! its record of a move in its database, refuses calls outside the range,
//! and hands out the write permits a freeze waits for; it applies each move
//! call through the pure transitions of pastebin-handover, which the model
//! explores too. [`move_changes`] remembers which rows changed while a copy
//! ran, for the catch-up after the freeze. [`slot_moves`] is the `SlotMoves`
//! gRPC service both K and P serve: export, import, verify, release, take,
//! delete and abandon, each a thin call into [`shard_slots`]. [`granted`]
//! is a shard under a topology: it serves what etcd grants it and follows
//! every change (docs/design.md#ownership-on-etcd); [`failover`] confirms it
//! again whenever its database link comes back.

pub mod failover;
pub mod granted;
pub mod move_changes;
pub mod shard_slots;
pub mod slot_moves;
