//! The paste client that never double-creates: the client half of the
//! durable-intent pattern (seed 002), for people (`pastebin paste`,
//! `pastebin pastes`, `pastebin delete`) and for Rust programs ([`Client`]).
//!
//! Data flows: [`Client::paste`] takes the subject's lock, consults the
//! [`journal`] (adopting a pending save, or returning a complete one), writes
//! a pending [`IntentRecord`] *before* sending, then sends through a
//! [`Server`] (HTTP or gRPC) with the [`RetryPolicy`], always under the same
//! idempotency key, and writes the answer back into the record. A crash at
//! any point leaves a record that the next run — or `--resume` — finishes by
//! sending the same key again; the server replays what the lost call made.
//!
//! The [`command`] module is the CLI over that: clap arguments, output and
//! exit codes; `get` reads a paste back (opening a [`sealed`] one with its
//! link's key).

mod client;
pub mod command;
mod get;
pub mod journal;
mod retry;
pub mod sealed;
mod server;
mod trust;

pub use client::{Client, DeleteError, Deleted, How, Notice, PasteError, Pasted, Resumed, Resuming, Save, Subject};
pub use command::{run, ClientArgs, ClientCommand, DeleteArgs, PasteArgs, PastesArgs, EXIT_CONFIG, EXIT_TEMPFAIL};
pub use get::GetArgs;
pub use journal::{Answer, Body, Choices, IntentRecord, IntentState, Journal, JournalProblem, LinkKey};
pub use retry::RetryPolicy;
pub use sealed::Seal;
pub use server::{CreateFailure, DeleteFailure, Server, DEFAULT_SERVER};
pub use trust::Trust;
