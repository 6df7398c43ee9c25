//! The slot handover's state machine (docs/design.md#moving-slots), pure: no
//! I/O, no clock, no randomness, in the manner of etcd's `raft`. A shard
//! keeps one [`Shard`] (what it owns, the move it is in); every move call is
//! a [`Request`] that [`step`] turns into the next `Shard` and the
//! [`Effect`]s the shard must carry out, or a [`Refusal`] that changes
//! nothing. `ctl reshard` asks [`next`] what to do from what both shards
//! recorded. The shards (crates/runtime) persist the records and do the
//! effects; the model (crates/model) explores every interleaving of the
//! same functions, so what it checks is what runs.
//!
//! - [`record`]: the move's identity, its lease and each shard's record;
//! - [`transition`]: [`step`] and every guard;
//! - [`driver`]: [`next`], the step ctl runs from both shards' records;
//! - [`refusal`]: why a call was refused, in the operator's words.

pub mod driver;
pub mod record;
pub mod refusal;
pub mod transition;

pub use driver::{next, Next, View};
pub use record::{Fence, Identity, Lease, Record, Role, Shard, Step};
pub use refusal::Refusal;
pub use transition::{step, step_with, Call, Effect, Guards, Request, Transition};
