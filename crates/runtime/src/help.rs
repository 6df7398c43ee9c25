//! The headings `--help` groups flags under, in one place so the flags of
//! every crate use the same few words (docs/configuration.md). A flag
//! struct sets one for all its flags (`#[command(next_help_heading = ...)]`);
//! a single flag sets its own (`#[arg(help_heading = ...)]`). Parts list
//! what they cannot run without first.

/// Where the K and P shards are.
pub const SHARDS: &str = "Shards";
/// Where the objects are: a directory or an S3 bucket.
pub const OBJECT_STORE: &str = "Object store";
/// A shard's own database and slot range.
pub const DATABASE: &str = "Database and slots";
/// Addresses this part listens on, and what it tells clients.
pub const LISTENERS: &str = "Listeners";
/// Timeouts, sizes and caps per listener.
pub const LIMITS: &str = "Limits";
/// Rate limits and create tokens of a public instance.
pub const ABUSE: &str = "Abuse controls";
/// How long pastes may live: the operator's expiry policy.
pub const EXPIRY: &str = "Expiry policy";
/// Highlighting and the read cache.
pub const READING: &str = "Pages and read cache";
/// The sweeper's rounds.
pub const SWEEPER: &str = "Sweeper";
/// Mutual TLS towards K and P, and the public listener's certificate.
pub const TLS: &str = "TLS";
/// Logs, the admin listener (metrics, dashboard) and shutdown.
pub const TELEMETRY: &str = "Telemetry and shutdown";

/// Hides the flags `hidden` picks from `command`'s `--help`; they are still
/// accepted, as every part reads one `PASTEBIN_CONFIG` file and environment.
pub fn hide_flags(command: &mut clap::Command, hidden: impl Fn(&clap::Id) -> bool) {
    *command = std::mem::take(command).mut_args(|arg| if hidden(arg.get_id()) { arg.hide(true) } else { arg });
}
