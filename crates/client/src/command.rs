//! `pastebin paste`, `pastebin pastes`, `pastebin delete`: flags, output and
//! exit codes over [`Client`]. The URL (and only the URL) goes to stdout, so
//! `url=$(pastebin paste notes.txt)` works; everything else goes to stderr.
//!
//! Exit codes: 0 done; 1 failed (refused, bad input, journal trouble); 75 (`EX_TEMPFAIL`) not confirmed yet — the intent is kept and
//! running the same command again, or `pastebin paste --resume`, finishes it.

use std::{
    io::Read,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::Context;
use chrono::Utc;
use pastebin_core::{CreateToken, Expiry};

use crate::{
    client::{Client, Deleted, How, PasteError, Resuming, Save, Subject},
    journal::{Body, Choices, IntentState},
    retry::RetryPolicy,
    sealed::Seal,
    server::DEFAULT_SERVER,
    trust::Trust,
};

/// Exit status when a save is left pending for a later run (sysexits.h).
pub const EXIT_TEMPFAIL: i32 = 75;
/// Exit status when the setup is wrong (no TLS connection could be made):
/// nothing was sent, and only a change of setup helps (sysexits.h EX_CONFIG).
pub const EXIT_CONFIG: i32 = 78;

/// The user-facing client commands, to flatten into the `pastebin` binary.
#[derive(Debug, clap::Subcommand)]
pub enum ClientCommand {
    /// Paste FILE (or standard input) and print its share URL. Safe to run
    /// again after any failure or crash: the same subject and content never
    /// makes a second paste.
    Paste(PasteArgs),
    /// List the pastes made from this machine's journal: id, URL, expiry and
    /// whether the delete token is known.
    Pastes(PastesArgs),
    /// Delete one of your pastes with the delete token stored when it was made.
    Delete(DeleteArgs),
    /// Print a paste (by its id or link) to standard output, or to a file with -o;
    /// a sealed paste's link must carry its key (after '#'), which opens it here.
    Get(crate::get::GetArgs),
}

/// Under a heading of their own in `--help`, after what the command itself
/// takes (so each command flattens them last: a heading holds for every
/// flag after it). The words match the serving parts' headings (Shards,
/// TLS, ...), kept in `pastebin-runtime`, which this client does not link.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Server and journal")]
pub struct ClientArgs {
    /// The pastebin: http(s)://HOST:PORT (JSON API; HTTPS trusts the system's CAs,
    /// or the bundle named by SSL_CERT_FILE, and a server certificate that is
    /// itself in it) or grpc://HOST:PORT (gRPC API)
    /// [default: http://127.0.0.1:8080, where `pastebin up` listens].
    #[arg(long, env = "PASTEBIN_SERVER", value_parser = parse_server)]
    pub server: Option<String>,
    /// Trust only this certificate (PEM) for the https:// --server, instead of
    /// any CA: e.g. its self-signed certificate. Its names and validity still count.
    #[arg(long, env = "PASTEBIN_SERVER_CERT")]
    pub server_cert: Option<PathBuf>,
    /// The intent journal's directory [default: $XDG_STATE_HOME/pastebin,
    /// else ~/.local/state/pastebin].
    #[arg(long, env = "PASTEBIN_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Time limit for each request to the server (e.g. 10s); a request that
    /// runs out is "not confirmed", never "not created".
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// A create token, for a server that requires one (`--require-create-token`).
    #[arg(long, env = "PASTEBIN_CREATE_TOKEN", hide_env_values = true)]
    pub create_token: Option<CreateToken>,
}

impl ClientArgs {
    /// The server to talk to: `--server`, else the embedded default's address.
    pub fn server_url(&self) -> &str {
        self.server.as_deref().unwrap_or(DEFAULT_SERVER)
    }
}

/// A `--server` with its scheme: which API to speak is not guessed.
fn parse_server(raw: &str) -> Result<String, String> {
    let schemes = ["http://", "https://", "grpc://"];
    if schemes.iter().any(|scheme| raw.starts_with(scheme)) {
        return Ok(raw.to_owned());
    }
    let address = raw.split_once("://").map_or(raw, |(_, rest)| rest);
    Err(format!(
        "{raw:?} is not a server URL: write http://{address} (the JSON API; https:// behind TLS) or grpc://{address} \
         (the gRPC API)"
    ))
}

#[derive(Debug, clap::Args)]
pub struct PasteArgs {
    /// The file to paste; standard input when absent. UTF-8 text is pasted as
    /// text; anything else as it is, with a media type from its extension
    /// (or --media-type) and its file name.
    pub file: Option<PathBuf>,
    /// Paste the input as binary with this media type (e.g. image/png),
    /// even if it is UTF-8 text.
    #[arg(long)]
    pub media_type: Option<String>,
    /// How long the paste lives: 90s, 10m, 12h, 1d, 1w (60 s to 365 d), or `never` where the
    /// server allows it [default: the server's, 30d unless it says otherwise].
    #[arg(long, value_parser = parse_expiry)]
    pub expires: Option<u64>,
    /// What this paste is of, for "one paste per subject and content"
    /// [default: the file's absolute path, or "stdin"].
    #[arg(long)]
    pub subject: Option<String>,
    /// Make another paste even if this subject and content already has one.
    #[arg(long)]
    pub new: bool,
    /// The language to highlight the page in, as a name or an extension
    /// (`rust`, `py`) [default: the page guesses from FILE's extension, which
    /// is sent as the paste's file name].
    #[arg(long, conflicts_with = "encrypt")]
    pub language: Option<String>,
    /// Delete the paste when it is first read: the link opens once.
    #[arg(long)]
    pub burn_after_reading: bool,
    /// Encrypt on this machine before sending (AES-256-GCM): the server
    /// stores what it cannot read, and the printed link carries the key
    /// after '#'. Anyone with the whole link can read the paste.
    #[arg(long, conflicts_with = "media_type")]
    pub encrypt: bool,
    /// With --encrypt: also require this password (the file's first line)
    /// to read the paste.
    #[arg(long, requires = "encrypt")]
    pub password_file: Option<PathBuf>,
    /// Finish every unconfirmed paste in the journal (reads no input).
    #[arg(long, conflicts_with_all = ["file", "expires", "subject", "new", "media_type", "encrypt", "language", "burn_after_reading"])]
    pub resume: bool,
    /// Sends in this run before leaving the paste pending for a later run.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub attempts: u32,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, clap::Args)]
pub struct PastesArgs {
    /// Also show deleted, refused and abandoned saves.
    #[arg(long)]
    pub all: bool,
    /// Forget the unconfirmed save with this key (shown as `(key KEY)`):
    /// its record is removed from the journal. Its paste may exist on the
    /// server all the same, and the record may be the only copy of its
    /// content: without --yes this only says what would be lost.
    #[arg(long, value_name = "KEY")]
    pub drop: Option<String>,
    /// With --drop: remove the record.
    #[arg(long, requires = "drop")]
    pub yes: bool,
    /// One JSON object per line instead of a table (never the delete token).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub client: ClientArgs,
}

#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    /// The paste's id (as printed by `pastebin pastes`).
    pub id: String,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// Runs one client command; returns the process exit code.
pub async fn run(command: ClientCommand) -> anyhow::Result<i32> {
    match command {
        ClientCommand::Paste(args) => paste(args).await,
        ClientCommand::Pastes(args) => pastes(args),
        ClientCommand::Delete(args) => delete(args).await,
        ClientCommand::Get(args) => crate::get::run(args).await,
    }
}

/// `$XDG_STATE_HOME/pastebin`, else `~/.local/state/pastebin` (relative
/// values are ignored, as the XDG spec asks).
pub fn default_state_dir() -> Option<PathBuf> {
    let absolute = |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute("XDG_STATE_HOME")
        .map(|dir| dir.join("pastebin"))
        .or_else(|| absolute("HOME").map(|home| home.join(".local/state/pastebin")))
}

fn client(args: &ClientArgs, attempts: u32) -> anyhow::Result<Client> {
    let state_dir = match &args.state_dir {
        Some(dir) => dir.clone(),
        None => default_state_dir().context("no state directory: set --state-dir, XDG_STATE_HOME or HOME")?,
    };
    let client = Client::new(args.server_url(), &state_dir)
        .with_context(|| format!("cannot open the journal in {}", state_dir.display()))?
        .with_timeout(args.timeout)?
        .with_trust(args.server_cert.as_deref().map(Trust::pinned).transpose()?.unwrap_or_default())?
        .with_create_token(args.create_token.clone())
        .with_retry(RetryPolicy { attempts, ..RetryPolicy::default() })
        .on_notice(|notice| eprintln!("pastebin: {notice}"));
    Ok(client)
}

async fn paste(args: PasteArgs) -> anyhow::Result<i32> {
    let client = client(&args.client, args.attempts)?;
    if args.resume {
        // An explicit --server narrows the resume to its own records.
        let resuming = if args.client.server.is_some() { Resuming::OnlyThisServer } else { Resuming::EveryServer };
        return resume(&client, resuming).await;
    }
    let (subject, bytes) = match &args.file {
        Some(path) => {
            (Subject::file(path)?, std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?)
        }
        None => (Subject::stdin(), read_stdin().await?),
    };
    let content = body_of(bytes, args.media_type.as_deref(), args.file.as_deref());
    let subject = args.subject.as_deref().map(Subject::named).unwrap_or(subject);
    let choices = Choices {
        // A sealed paste's name would tell the server what it cannot read.
        file_name: if args.encrypt { None } else { file_name_of(args.file.as_deref()) },
        language: args.language.clone(),
        burn_after_reading: args.burn_after_reading,
    };
    let seal = match (args.encrypt, &args.password_file) {
        (false, _) => None,
        (true, None) => Some(Seal::new(None)),
        (true, Some(path)) => Some(Seal::new(Some(read_password(path)?))),
    };
    let save = Save { subject, content, choices, expires_in_seconds: args.expires, force_new: args.new, seal };
    match client.paste(save).await {
        Ok(pasted) => {
            match pasted.how {
                How::Created => {}
                How::Adopted { .. } => eprintln!("pastebin: finished an earlier unconfirmed save (key {})", pasted.key),
                How::AlreadyPasted => {
                    eprintln!(
                        "pastebin: already pasted (unchanged since {}); --new makes another",
                        pasted.record.display()
                    )
                }
            }
            println!("{}", pasted.share_url());
            Ok(0)
        }
        Err(error) => Ok(report(&error)),
    }
}

async fn resume(client: &Client, resuming: Resuming) -> anyhow::Result<i32> {
    let resumed = client.resume(resuming).await?;
    for (server, count) in &resumed.other_servers {
        eprintln!(
            "pastebin: left {count} unconfirmed save(s) of {server} alone: only {}'s are resumed with --server; \
             `pastebin paste --resume --server {server}` finishes them",
            client.server_url()
        );
    }
    if resumed.finished.is_empty() && resumed.failed.is_empty() {
        eprintln!("pastebin: nothing to resume");
    }
    for pasted in &resumed.finished {
        println!("{}\t{}", pasted.share_url(), pasted.subject);
    }
    Ok(resumed.failed.iter().map(report).max().unwrap_or(0))
}

/// Prints an error; returns its exit code (pending beats nothing, failed beats pending).
fn report(error: &PasteError) -> i32 {
    eprintln!("pastebin: {error}");
    if error.is_retryable() {
        EXIT_TEMPFAIL
    } else if error.is_configuration() {
        EXIT_CONFIG
    } else {
        1
    }
}

fn pastes(args: PastesArgs) -> anyhow::Result<i32> {
    let client = client(&args.client, 1)?;
    if let Some(key) = &args.drop {
        return drop_pending(&client, key, args.yes);
    }
    let scan = client.scan()?;
    let now = Utc::now();
    let mut rows = Vec::new();
    for (_, record) in &scan.records {
        let share_url = record.share_url().unwrap_or_default();
        let (id, url, expires_at, token_known, status) = match &record.state {
            IntentState::Complete { answer, deleted_at } => {
                let status = if deleted_at.is_some() {
                    "deleted"
                } else if answer.expired_at(now) {
                    "expired"
                } else {
                    "live"
                };
                (answer.id.as_str(), share_url, answer.expires_at.as_str(), !answer.delete_token.is_empty(), status)
            }
            IntentState::Pending { .. } => ("-", "-".to_owned(), "-", false, "pending"),
            IntentState::Rejected { .. } => ("-", "-".to_owned(), "-", false, "refused"),
            IntentState::Abandoned { .. } => ("-", "-".to_owned(), "-", false, "abandoned"),
        };
        let shown = matches!(status, "live" | "expired" | "pending") || args.all;
        if shown {
            rows.push((id, url, expires_at, token_known, status, record));
        }
    }
    if args.json {
        for (id, url, expires_at, token_known, status, record) in rows {
            let line = serde_json::json!({
                "id": id, "url": url, "expires_at": expires_at, "delete_token_known": token_known,
                "status": status, "subject": record.subject, "key": record.key, "server": record.server,
                "created_at": record.created_at.to_rfc3339(),
            });
            println!("{line}");
        }
    } else {
        println!("{:<14}  {:<9}  {:<24}  {:<5}  {:<40}  SUBJECT", "ID", "STATUS", "EXPIRES", "TOKEN", "URL");
        for (id, url, expires_at, token_known, status, record) in rows {
            let token = if token_known { "yes" } else { "no" };
            let url = if status == "pending" { format!("(key {})", record.key) } else { url };
            println!("{id:<14}  {status:<9}  {expires_at:<24}  {token:<5}  {url:<40}  {}", record.subject);
        }
    }
    Ok(if scan.problems.is_empty() { 0 } else { 1 })
}

/// `pastes --drop KEY`: forgets one unconfirmed save, after saying what
/// that loses; only with `--yes` is the record removed.
fn drop_pending(client: &Client, key: &str, yes: bool) -> anyhow::Result<i32> {
    let record = client.journal().read(key).map_err(|problem| anyhow::anyhow!("{problem}"))?;
    anyhow::ensure!(
        record.is_pending(),
        "the save with key {key} is {}, not unconfirmed: only an unconfirmed save can be dropped",
        record.state.name()
    );
    let path = client.journal().path_of(key);
    eprintln!(
        "pastebin: warning: the save of {} (key {key}, sent {} time(s) to {}) is not confirmed. Its paste may exist \
         on the server all the same, and once the record is gone nothing on this machine can find it or delete it. \
         The record {} may also be the only copy of its content.",
        record.subject,
        record.attempts,
        record.server,
        path.display()
    );
    if !yes {
        eprintln!("pastebin: nothing dropped; add --yes to drop it");
        return Ok(1);
    }
    client.journal().remove(key)?;
    eprintln!("pastebin: dropped {key}");
    Ok(0)
}

async fn delete(args: DeleteArgs) -> anyhow::Result<i32> {
    let client = client(&args.client, 3)?;
    match client.delete(&args.id).await {
        Ok(Deleted::Deleted) => {
            eprintln!("pastebin: deleted {}", args.id);
            Ok(0)
        }
        Ok(Deleted::AlreadyGone) => {
            eprintln!("pastebin: {} was already gone (deleted or expired)", args.id);
            Ok(0)
        }
        Err(error) => {
            eprintln!("pastebin: {error}");
            Ok(1)
        }
    }
}

/// Text if it is UTF-8 and no media type was forced; otherwise the bytes as
/// they are, typed by `--media-type` or the file's extension.
fn body_of(bytes: Vec<u8>, media_type: Option<&str>, path: Option<&Path>) -> Body {
    let bytes = match (media_type, String::from_utf8(bytes)) {
        (None, Ok(text)) => return Body::Text(text),
        (_, Ok(text)) => text.into_bytes(),
        (_, Err(error)) => error.into_bytes(),
    };
    let extension = path.and_then(Path::extension).and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    Body::Binary {
        media_type: media_type.map_or_else(|| media_type_for(extension.as_deref()).to_owned(), str::to_owned),
        bytes,
    }
}

/// The name a paste of FILE carries: what a download is called, and for
/// text the extension the page highlights by, as for a file uploaded in the
/// page (one guess, the server's: docs/reader-features.md).
fn file_name_of(path: Option<&Path>) -> Option<String> {
    path.and_then(Path::file_name).and_then(|n| n.to_str()).map(str::to_owned)
}

/// The media type of common binary files by extension; anything else is
/// `application/octet-stream` (the server serves unknown types as downloads).
fn media_type_for(extension: Option<&str>) -> &'static str {
    match extension.unwrap_or_default() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "avif" => "image/avif",
        "bmp" => "image/bmp",
        "svg" => "image/svg+xml",
        "pdf" => "application/pdf",
        "zip" => "application/zip",
        "gz" | "tgz" => "application/gzip",
        "tar" => "application/x-tar",
        "wasm" => "application/wasm",
        "mp3" => "audio/mpeg",
        "ogg" => "audio/ogg",
        "wav" => "audio/wav",
        "mp4" => "video/mp4",
        "webm" => "video/webm",
        _ => "application/octet-stream",
    }
}

/// A password from its file: the first line, without its line ending (so
/// `echo pw > file` and an editor's file mean the same password).
pub(crate) fn read_password(path: &Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read the password file {}", path.display()))?;
    let password = text.lines().next().unwrap_or_default().to_owned();
    anyhow::ensure!(
        !password.is_empty(),
        "the password file {} is empty: write the password on its first line",
        path.display()
    );
    Ok(password)
}

async fn read_stdin() -> anyhow::Result<Vec<u8>> {
    let bytes = tokio::task::spawn_blocking(|| {
        let mut bytes = Vec::new();
        std::io::stdin().lock().read_to_end(&mut bytes).map(|_| bytes)
    })
    .await?
    .context("cannot read standard input")?;
    Ok(bytes)
}

/// `90`, `90s`, `10m`, `12h`, `1d`.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let digits = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (number, unit) = raw.split_at(digits);
    let bad = || format!("{raw:?} is not a duration like 90s, 10m, 12h or 1d");
    let number: u64 = number.parse().map_err(|_| bad())?;
    let unit_seconds = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    number.checked_mul(unit_seconds).map(Duration::from_secs).ok_or_else(bad)
}

/// A lifetime as `expires_in_seconds`: within 60 s ..= 365 d, which no
/// server's policy widens, or `never` (0) for a server that allows it. The
/// server's own choices are checked against its published limits.
pub fn parse_expiry(raw: &str) -> Result<u64, String> {
    let seconds = pastebin_core::parse_lifetime(raw)?;
    if seconds == Expiry::NEVER_SECONDS {
        return Ok(seconds);
    }
    Expiry::from_seconds(Some(seconds)).map(Expiry::seconds).map_err(|e| format!("{e} (got {seconds})"))
}

#[cfg(test)]
mod tests {
    use clap::{Parser, Subcommand};

    use super::*;

    #[test]
    fn durations_take_s_m_h_d() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("12h"), Ok(Duration::from_secs(43_200)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        for bad in ["", "d", "1w", "1.5h", "-1d", "1 d", "99999999999999999999d"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_expiry("1d"), Ok(86_400));
        assert!(parse_expiry("59s").is_err());
        assert!(parse_expiry("366d").is_err());
    }

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Top,
    }

    /// The way the `pastebin` binary embeds these commands.
    #[derive(Debug, Subcommand)]
    enum Top {
        #[command(flatten)]
        Client(ClientCommand),
    }

    #[test]
    fn the_commands_parse_as_documented() {
        <Cli as clap::CommandFactory>::command().debug_assert();
        let Top::Client(ClientCommand::Paste(paste)) =
            Cli::try_parse_from(["pastebin", "paste", "notes.txt", "--expires", "1d", "--server", "grpc://h:1"])
                .unwrap()
                .command
        else {
            panic!("paste")
        };
        assert_eq!(paste.file.as_deref(), Some(Path::new("notes.txt")));
        assert_eq!(paste.expires, Some(86_400));
        assert_eq!(paste.client.server_url(), "grpc://h:1");
        assert!(Cli::try_parse_from(["pastebin", "paste", "--resume", "x"]).is_err(), "--resume reads no input");
        let Top::Client(ClientCommand::Paste(sealed)) =
            Cli::try_parse_from(["pastebin", "paste", "--encrypt", "--password-file", "pw", "x"]).unwrap().command
        else {
            panic!("paste --encrypt")
        };
        assert!(sealed.encrypt && sealed.password_file.as_deref() == Some(Path::new("pw")));
        assert!(
            Cli::try_parse_from(["pastebin", "paste", "--password-file", "pw", "x"]).is_err(),
            "only with --encrypt"
        );
        assert!(Cli::try_parse_from(["pastebin", "paste", "--encrypt", "--media-type", "a/b", "x"]).is_err());
        assert!(matches!(
            Cli::try_parse_from(["pastebin", "get", "http://h/0A1b2C3d4E5f6G#k"]).unwrap().command,
            Top::Client(ClientCommand::Get(_))
        ));
        let Top::Client(ClientCommand::Delete(delete)) =
            Cli::try_parse_from(["pastebin", "delete", "abc"]).unwrap().command
        else {
            panic!("delete")
        };
        assert_eq!(delete.id, "abc");
        assert!(matches!(
            Cli::try_parse_from(["pastebin", "pastes", "--json"]).unwrap().command,
            Top::Client(ClientCommand::Pastes(_))
        ));
    }
}

#[cfg(test)]
mod body_tests {
    use super::*;

    #[test]
    fn utf8_is_text_and_anything_else_is_binary_typed_by_extension() {
        assert_eq!(body_of(b"hi".to_vec(), None, Some(Path::new("a.png"))), Body::Text("hi".into()));
        let png = body_of(vec![0x89, b'P', 0xff], None, Some(Path::new("/x/Cat.PNG")));
        assert_eq!(png.media_type(), Some("image/png"));
        assert_eq!(file_name_of(Some(Path::new("/x/Cat.PNG"))).as_deref(), Some("Cat.PNG"));
        assert_eq!(png.bytes(), [0x89, b'P', 0xff]);
        let stdin = body_of(vec![0xff], None, None);
        assert_eq!((stdin.media_type(), file_name_of(None)), (Some("application/octet-stream"), None));
        let forced = body_of(b"<svg/>".to_vec(), Some("image/svg+xml"), Some(Path::new("a.svg")));
        assert_eq!((forced.media_type(), forced.bytes()), (Some("image/svg+xml"), &b"<svg/>"[..]));
    }
}
