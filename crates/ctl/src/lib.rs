//! `pastebin ctl`: what the people on call run (docs/design.md#operators).
//!
//! - `pending`: stale pending keys across every K shard, oldest first;
//! - `recover KEY`: resolve one key now with the sweeper's rules (reads P first);
//! - `reconcile`: a read-only, slot-by-slot report of what K, P and the
//!   object store disagree on (lost pastes, missing objects, orphans);
//! - `repair [--apply]`: rebuilds the paste rows P lost from K's stored 201
//!   and the object (a dry run unless `--apply`);
//! - `stats`: pending counts, oldest age and the alert-card level per shard;
//! - `certs`: a development CA and a certificate for each part (mutual TLS).
//! - `tokens`: the create tokens file of `--require-create-token`;
//! - `reshard`: move a slot range from one K or P shard to another, online,
//!   between shards the callers' lists name (`move_preflight` checks that first).
//! - `reports`: what readers reported, newest or most reported first;
//! - `takedown ID --reason TEXT`: remove a paste without its token (readers get 410).
//! - `backup DIR`, `restore DIR`: a `pastebin up` (or SQLite shards) copied
//!   online in the order K, P, objects, and put back with K's lost-commits
//!   window (`manifest` is the backup's format and the rules a restore checks).
//!
//! [`Deployment`] finds the shards (flags, `PASTEBIN_*` variables, or the
//! `endpoints.json` of a `pastebin up` data directory, `./pastebin-data` by
//! default). Every command writes to the writers it is given, so tests read
//! exactly what an operator sees. A row names a shard only when that shard
//! said it owns the slot; otherwise it says `unknown`, never a guess.
//! Exit codes: 0 ok, 1 refused or failed, 2 usage (including a TLS
//! mismatch, named with the flags to add), 3 a shard or the object store
//! could not be reached (what could be read is still printed; `stats` then
//! reports the level `unknown`); `reconcile` found lost pastes 4, missing
//! objects 5, orphans 6 (the worst one found wins); `backup` of PostgreSQL
//! shards or an S3 store 7 (nothing copied: it printed the order and the
//! commands of their own tools).
//! No command ever prints a delete token or a stored response body: K's
//! listing carries neither, and the one record read in full (`recover`) is
//! shown field by field, without its body.

mod backup;
mod certs;
mod deployment;
mod format;
mod keeping;
mod manifest;
mod move_authority;
mod move_preflight;
mod pending;
mod progress;
mod reconcile;
mod recover;
pub mod repair;
pub mod reshard;
mod restore;
mod stats;
mod tokens;
mod topology;

use std::io::Write;

use clap::{Parser, Subcommand};

pub use deployment::{Deployment, EndpointArgs};
pub use format::parse_duration;
pub use progress::ProgressTo;

/// `pastebin ctl [shard options] COMMAND`.
#[derive(Debug, Clone, clap::Args)]
pub struct CtlArgs {
    #[command(flatten)]
    pub endpoints: EndpointArgs,
    #[command(subcommand)]
    pub command: CtlCommand,
}

#[derive(Debug, Clone, Subcommand)]
pub enum CtlCommand {
    /// List stale pending keys across all K shards, oldest first.
    Pending(pending::PendingArgs),
    /// Resolve one pending key now, with the sweeper's rules: read P, then
    /// mark done (paste exists) or fence and abort (no paste); leave it
    /// pending if P cannot be read.
    Recover(recover::RecoverArgs),
    /// Read-only cross-check of K, P and the objects, slot by slot: lost
    /// pastes (done key, no row), missing objects, orphans (live paste, no
    /// key) grouped by content, pending keys whose paste exists, objects
    /// without a live row. Exit 4, 5 or 6 when it finds the first three.
    Reconcile(reconcile::ReconcileArgs),
    /// Rebuild the paste rows P lost (done key, no row) from K's stored 201
    /// and the object. A dry run that only reads unless --apply; never
    /// re-creates an id a tombstone holds.
    Repair(repair::RepairArgs),
    /// Pending count, oldest pending age and alert level, per K shard and in total.
    Stats(stats::StatsArgs),
    /// Create tokens for `--require-create-token`: add (prints the token once), list, revoke.
    Tokens(tokens::TokensArgs),
    /// Move a slot range from one K (or P) shard to another while gateways
    /// and sweepers keep running; rerun it to finish a move that stopped.
    /// --from and --to are HOST:PORT entries of --key-shards or --paste-shards
    /// (the lists the callers are given).
    #[command(after_help = reshard::MISTAKES)]
    Reshard(reshard::ReshardArgs),
    /// Live pastes readers reported, newest (or most reported) first, with
    /// each one's age, size and latest reports, and the open count.
    Reports(keeping::ReportsArgs),
    /// Remove a paste without its delete token: readers get 410 with --reason,
    /// its object is deleted, a replay of its create's key still answers 201.
    Takedown(keeping::TakedownArgs),
    /// Make a development CA and a certificate and key for each part
    /// (key-service, paste-service, gateway, sweeper, ctl), and print the flags to use.
    Certs(certs::CertsArgs),
    /// Which shard owns which slots, on etcd (--topology): `init` writes the
    /// ranges the shards hold today, once; `show` prints what etcd holds.
    Topology(topology::TopologyArgs),
    /// Back up a `pastebin up` data directory (or SQLite shards) while it
    /// serves: every K, then every P, then the objects, with a manifest.
    /// For PostgreSQL or S3 it prints the tools' commands instead (exit 7).
    Backup(backup::BackupArgs),
    /// Put a backup back, `pastebin up` stopped: checks it, then restores K
    /// (alone with --only key) so that for 26 h a retry of a key it does
    /// not know adopts its paste instead of making a second one.
    Restore(restore::RestoreArgs),
}

/// The commands that read the object store; the others hide its flags from
/// their `--help`, since the flags do nothing for them.
const READS_OBJECTS: [&str; 4] = ["reconcile", "repair", "takedown", "backup"];

/// Hides the object-store flags from the help of every command of a built
/// `ctl` command line (one whose global flags reached its commands) that
/// does not read the object store. They are still accepted, as every
/// command shares one `PASTEBIN_CONFIG` file and environment.
pub fn hide_idle_flags(ctl: &mut clap::Command) {
    let objects = <pastebin_shards::ObjectStoreArgs as clap::Args>::augment_args(clap::Command::new("objects"));
    let ids: Vec<clap::Id> = objects.get_arguments().map(|arg| arg.get_id().clone()).collect();
    for command in ctl.get_subcommands_mut().filter(|command| !READS_OBJECTS.contains(&command.get_name())) {
        pastebin_runtime::help::hide_flags(command, |flag| ids.contains(flag));
    }
}

/// How a command ended, as the process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Ok = 0,
    /// The command was understood but refused or failed (no such key, a key too young to recover).
    Failed = 1,
    /// Bad arguments or configuration.
    Usage = 2,
    /// A shard or the object store could not be reached; partial output was
    /// printed, and `stats` says level `unknown`.
    Unreachable = 3,
    /// `reconcile`: done keys whose paste row is gone (run `ctl repair`).
    LostPastes = 4,
    /// `reconcile`: ids the product answered for whose bytes are gone.
    MissingObjects = 5,
    /// `reconcile`: live pastes no key names (K lost keys; likely duplicates).
    Orphans = 6,
    /// `backup`: PostgreSQL shards or an S3 store, which their own tools
    /// back up; nothing was copied, the order and their commands were printed.
    OtherTools = 7,
}

impl Exit {
    pub fn code(self) -> i32 {
        self as i32
    }
}

/// An error that ends a command: one line for the operator, and its exit code.
#[derive(Debug, thiserror::Error)]
pub enum CtlError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Unreachable(String),
    #[error("{0}")]
    Failed(String),
}

impl CtlError {
    fn exit(&self) -> Exit {
        match self {
            CtlError::Usage(_) => Exit::Usage,
            CtlError::Unreachable(_) => Exit::Unreachable,
            CtlError::Failed(_) => Exit::Failed,
        }
    }
}

impl From<std::io::Error> for CtlError {
    fn from(error: std::io::Error) -> Self {
        CtlError::Failed(format!("cannot write the output: {error}"))
    }
}

/// Runs a command with the process's stdout and stderr; returns the exit code.
/// Errors are printed as one line on stderr, never as a backtrace.
/// Long commands draw a progress bar when stderr is a terminal.
pub async fn run(args: CtlArgs) -> anyhow::Result<i32> {
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    let progress = if std::io::IsTerminal::is_terminal(&err) { ProgressTo::Terminal } else { ProgressTo::Lines };
    Ok(execute_with(args, progress, &mut out, &mut err).await.code())
}

/// Runs a command, writing its report to `out` and warnings, progress lines
/// and errors to `err`.
pub async fn execute(args: CtlArgs, out: &mut (dyn Write + Send), err: &mut (dyn Write + Send)) -> Exit {
    execute_with(args, ProgressTo::Lines, out, err).await
}

/// [`execute`], with progress drawn where `progress` says.
pub async fn execute_with(
    args: CtlArgs,
    progress: ProgressTo,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Exit {
    let result = async {
        // Resolved only by the commands that talk to shards: `certs` comes
        // before there is anything to reach, and tokens live in a file of their own.
        let deployment = || Deployment::resolve(&args.endpoints);
        match &args.command {
            CtlCommand::Pending(command) => pending::run(&deployment().await?, command, out, err).await,
            CtlCommand::Recover(command) => recover::run(&deployment().await?, command, out, err).await,
            CtlCommand::Reconcile(command) => reconcile::run(&deployment().await?, command, progress, out, err).await,
            CtlCommand::Repair(command) => repair::run(&deployment().await?, command, progress, out, err).await,
            CtlCommand::Stats(command) => stats::run(&deployment().await?, command, out, err).await,
            CtlCommand::Reshard(command) => reshard::run(command, &args.endpoints, progress, out, err).await,
            CtlCommand::Reports(command) => keeping::reports(&deployment().await?, command, out, err).await,
            CtlCommand::Takedown(command) => keeping::takedown(&deployment().await?, command, out, err).await,
            CtlCommand::Certs(command) => certs::run(command, out),
            CtlCommand::Tokens(command) => tokens::run(command, out),
            CtlCommand::Topology(command) => topology::run(command, &args.endpoints, out, err).await,
            CtlCommand::Backup(command) => backup::run(command, &args.endpoints, progress, out, err).await,
            CtlCommand::Restore(command) => restore::run(command, &args.endpoints, out, err).await,
        }
    }
    .await;
    let exit = match result {
        Ok(exit) => exit,
        Err(error) => {
            let _ = writeln!(err, "error: {error}");
            error.exit()
        }
    };
    let _ = out.flush();
    exit
}

/// The ctl command line on its own, as `pastebin ctl` parses it; for tests
/// and for embedding.
#[derive(Debug, Parser)]
#[command(name = "pastebin ctl")]
struct CtlCli {
    #[command(flatten)]
    args: CtlArgs,
}

/// Parses `pastebin ctl` arguments (the first item is the program name).
pub fn parse_from<I, T>(args: I) -> Result<CtlArgs, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    CtlCli::try_parse_from(args).map(|cli| cli.args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_options_may_follow_the_subcommand() {
        let args =
            parse_from(["pastebin ctl", "pending", "--data-dir", "/tmp/x", "--older-than", "2m", "--json"]).unwrap();
        assert_eq!(args.endpoints.data_dir.as_deref(), Some(std::path::Path::new("/tmp/x")));
        let CtlCommand::Pending(pending) = args.command else { panic!("parsed as {:?}", args.command) };
        assert_eq!((pending.older_than.as_secs(), pending.json, pending.limit), (120, true, 100));
    }

    #[test]
    fn bad_arguments_are_usage_errors() {
        for bad in [
            vec!["pastebin ctl", "pending", "--older-than", "soon"],
            vec!["pastebin ctl", "pending", "--limit", "0"],
            vec!["pastebin ctl", "recover"],
            vec!["pastebin ctl", "explode"],
        ] {
            let error = parse_from(&bad).unwrap_err();
            assert_eq!(error.exit_code(), 2, "{bad:?}");
        }
    }

    /// Runs `pastebin ctl ARGS` in this process: (exit, stdout, stderr).
    pub(crate) async fn run_args(args: &[&str]) -> (Exit, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let exit = execute(parse_from(args).unwrap(), &mut out, &mut err).await;
        (exit, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
    }

    #[tokio::test]
    async fn no_shards_configured_is_one_line_and_exit_2() {
        let (exit, out, err) = run_args(&["pastebin ctl", "stats", "--data-dir", "/nonexistent/pastebin"]).await;
        assert_eq!(exit, Exit::Usage);
        assert!(out.is_empty());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("error: cannot read /nonexistent/pastebin/endpoints.json"), "{err}");
    }

    #[tokio::test]
    async fn unreachable_shards_exit_3_with_what_could_be_printed() {
        let nowhere = ["--key-shards", "127.0.0.1:9", "--paste-shards", "127.0.0.1:9"];
        let (exit, out, err) = run_args(&[&["pastebin ctl", "stats"][..], &nowhere].concat()).await;
        assert_eq!(exit, Exit::Unreachable);
        assert!(out.contains("127.0.0.1:9") && out.contains("unknown") && out.contains("NO"), "{out}");
        assert!(out.contains("level: unknown (2 shard(s) did not answer; no key shard answered)"), "{out}");
        assert!(!out.contains("healthy"), "nothing unreachable is called healthy: {out}");
        assert!(err.contains("K shard 127.0.0.1:9 (slots unknown) unreachable"), "{err}");
        assert!(!err.contains("panicked") && !err.contains("backtrace"));

        let (exit, _, err) = run_args(&[&["pastebin ctl", "pending"][..], &nowhere].concat()).await;
        assert_eq!(exit, Exit::Unreachable, "{err}");

        let recover = ["pastebin ctl", "recover", "5b1f6c1e-3c1a-4d8e-9a55-0f7c1b2a3d4e"];
        let (exit, _, err) = run_args(&[&recover[..], &nowhere].concat()).await;
        assert_eq!(exit, Exit::Unreachable, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }

    #[tokio::test]
    async fn a_refusal_names_exactly_the_list_that_is_missing() {
        let (exit, _, err) = run_args(&["pastebin ctl", "stats", "--key-shards", "127.0.0.1:9"]).await;
        assert_eq!(exit, Exit::Usage);
        assert!(err.starts_with("error: --paste-shards is missing (the key shards are given)"), "{err}");
        let (_, _, err) = run_args(&["pastebin ctl", "pending", "--paste-shards", "127.0.0.1:9"]).await;
        assert!(err.starts_with("error: --key-shards is missing (the paste shards are given)"), "{err}");
    }

    #[tokio::test]
    async fn a_malformed_key_is_a_usage_error() {
        let args =
            ["pastebin ctl", "recover", "not-a-uuid", "--key-shards", "127.0.0.1:9", "--paste-shards", "127.0.0.1:9"];
        let (exit, _, err) = run_args(&args).await;
        assert_eq!(exit, Exit::Usage);
        assert!(err.contains("is not an idempotency key"), "{err}");
    }
}
