//! A model of the create protocol, checked exhaustively with `stateright`
//! (docs/model.md).
//!
//! - [`world`]: the state — K, P and the object store per key, clients,
//!   gateways, sweepers and the requests still in the network;
//! - [`servers`]: each call to K, P or the store as one atomic step;
//! - [`protocol`]: the actions — every saga, recovery and reaper step, and
//!   the faults the environment injects;
//! - [`properties`]: what must always (or eventually) hold;
//! - [`flaw`]: broken variants, each of which the checker must catch;
//! - [`check`]: runs a check and reports what it found;
//! - [`handover`]: a model of its own, moving one slot between two shards;
//! - [`ownership`]: a move under the authority, where a shard's database may
//!   forget (roll back to an earlier state of itself).

pub mod check;
mod colocated;
pub mod flaw;
pub mod handover;
pub mod ownership;
pub mod properties;
pub mod protocol;
pub mod servers;
mod symmetry;
pub mod world;

pub use check::{check_exhaustively, find_counterexample, Outcome};
pub use flaw::Flaw;
pub use protocol::{Action, Bounds, Protocol};
