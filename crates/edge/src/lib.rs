//! The edge: what a client may hold of a public listener, HTTP and gRPC
//! alike (docs/design.md#edge, docs/security.md#total-bounds). Each bound is
//! written once here and both listeners use it: [`client_shares`] are each
//! client address's part of a listener (connections, requests or streams,
//! body bytes in flight), [`body_budget`] bounds the request bodies the
//! whole process holds and [`answer_budget`] what its answers hold until
//! they are sent (each a `budget` of one kind), [`send_timeout`] cuts off a
//! connection whose reader stops reading or reads slower than the minimum
//! rate, [`http`] serves a public HTTP listener within its limits and
//! [`grpc`] admits a gRPC server's connections and calls within theirs, each
//! public connection on the clock of `connection_clock` (preface, idle,
//! send, age). Every refusal is counted in [`refusals`], by protocol and
//! reason.

pub mod answer_budget;
pub mod body_budget;
mod budget;
pub mod client_shares;
mod connection_clock;
pub mod grpc;
pub mod http;
pub mod refusals;
mod send_timeout;
