//! `pastebin get ID|URL`: a paste's content to standard output (or a file),
//! byte for byte, over the JSON API with the same TLS trust as `paste`.
//! `pastebin get -` and `--link-file FILE` read the link instead from
//! standard input or a file: a sealed paste's link carries its key after
//! `#`, and a command line is visible to every local user (`/proc/PID/cmdline`,
//! `ps`) and kept in shell history.
//!
//! A burn-after-reading paste is deleted by its one read, so it is never
//! read by accident: the share link (`GET /{id}`) answers a burn paste with
//! a refusal instead of its content, and only then, after the person says
//! yes (or `--yes`), does the explicit read (`GET /api/v1/pastes/{id}`)
//! fetch it. [`reveal`] turns the fetched bytes into what is written: the
//! one place where a sealed paste's envelope (docs/api.md#sealed-pastes) is
//! opened, with the key the link carries after `#` (and `--password-file`);
//! the key never goes to the server. Without the key a sealed paste is
//! never read: a burn paste would burn for nobody.

use std::{
    io::{IsTerminal, Write},
    path::PathBuf,
};

use anyhow::{bail, Context};
use base64::Engine;
use reqwest::{header, StatusCode};
use serde::Deserialize;

use crate::{
    command::{read_password, ClientArgs, EXIT_CONFIG},
    server::{http_client, tls_failure},
    trust::Trust,
};

/// The header every read of a sealed paste carries (`HEAD` included).
const PASTE_SEALED: &str = "paste-sealed";

#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// The paste: its link (https://host/ID, …/raw/ID), or its id on --server;
    /// `-` reads it from standard input's first line. Give a sealed paste's
    /// link (its key after `#`) with `-` or --link-file: a command line is
    /// visible to other local users and kept in shell history.
    #[arg(required_unless_present = "link_file", conflicts_with = "link_file")]
    pub paste: Option<String>,
    /// Read the paste's link (or id) from FILE's first line instead of the command line.
    #[arg(long, value_name = "FILE")]
    pub link_file: Option<PathBuf>,
    /// Write the content to FILE (created or replaced) instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Also print when the paste expires and its language (type, file name) on standard error.
    #[arg(long)]
    pub info: bool,
    /// Read a burn-after-reading paste without asking first (reading it deletes it).
    #[arg(short, long)]
    pub yes: bool,
    /// The password of a sealed paste that has one (the file's first line).
    #[arg(long)]
    pub password_file: Option<PathBuf>,
    #[command(flatten)]
    pub client: ClientArgs,
}

/// Where a paste is: the server's base URL, its id, and the link's fragment.
#[derive(Debug, PartialEq, Eq)]
struct Target {
    base: String,
    id: String,
    /// What follows `#` in the link (a sealed paste's key), if anything.
    fragment: Option<String>,
}

impl Target {
    /// A link names its own server; a bare id is on `server`.
    fn parse(raw: &str, server: &str) -> anyhow::Result<Self> {
        let raw = raw.trim();
        let (link, fragment) = match raw.split_once('#') {
            Some((link, fragment)) => (link, Some(fragment.to_owned()).filter(|f| !f.is_empty())),
            None => (raw, None),
        };
        let link = link.split('?').next().unwrap_or_default().trim_end_matches('/');
        if !link.contains("://") {
            return Ok(Self { base: crate::server::normalize_url(server), id: link.to_owned(), fragment });
        }
        let (before, id) = link.rsplit_once('/').context("a paste link ends in its id")?;
        let base = before.trim_end_matches("/raw").trim_end_matches("/api/v1/pastes");
        if id.is_empty() || base.ends_with(':') || base.ends_with('/') {
            bail!("{raw} is not a paste's link: expected https://HOST/ID");
        }
        Ok(Self { base: base.to_owned(), id: id.to_owned(), fragment })
    }
}

/// A paste as the JSON API answers it.
#[derive(Debug, Deserialize)]
struct PasteJson {
    expires_at: String,
    size: u64,
    media_type: Option<String>,
    file_name: Option<String>,
    language: Option<String>,
    burn_after_reading: bool,
    content: Option<String>,
    content_base64: Option<String>,
    /// Present (and true) only on a sealed paste: `content_base64` is its envelope.
    #[serde(default)]
    sealed: bool,
}

#[derive(Deserialize)]
struct ErrorJson {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    code: String,
    message: String,
}

/// What was fetched: the stored bytes, and the metadata when it was asked for
/// (or came with them).
struct Fetched {
    content: Vec<u8>,
    sealed: bool,
    /// Whether this read burned the paste (its one read).
    burned: bool,
    about: Option<PasteJson>,
}

/// The link as given: on the command line, on standard input's first line
/// (`-`), or on --link-file's first line.
async fn link(args: &GetArgs) -> anyhow::Result<String> {
    let (text, from) = match (&args.paste, &args.link_file) {
        (_, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the link file {}", path.display()))?;
            (text, format!("the link file {}", path.display()))
        }
        (Some(raw), None) if raw == "-" => {
            let line = tokio::task::spawn_blocking(|| {
                let mut line = String::new();
                std::io::stdin().read_line(&mut line).map(|_| line)
            })
            .await?
            .context("cannot read the link from standard input")?;
            (line, "standard input".to_owned())
        }
        (Some(raw), None) => return Ok(raw.clone()),
        (None, None) => bail!("give the paste's link or id, `-` to read it from standard input, or --link-file FILE"),
    };
    let link = text.lines().next().unwrap_or_default().trim().to_owned();
    anyhow::ensure!(!link.is_empty(), "{from} holds no link: write the paste's link on its first line");
    Ok(link)
}

pub async fn run(args: GetArgs) -> anyhow::Result<i32> {
    let link = link(&args).await?;
    if link.starts_with("grpc://") || (!link.contains("://") && args.client.server_url().starts_with("grpc://")) {
        bail!("`pastebin get` reads over HTTP(S): give the paste's https:// link, or an http(s):// --server");
    }
    let target = Target::parse(&link, args.client.server_url())?;
    let password = args.password_file.as_deref().map(read_password).transpose()?;
    let trust = args.client.server_cert.as_deref().map(Trust::pinned).transpose()?.unwrap_or_default();
    let http = http_client(args.client.timeout, &trust)?;
    let fetched = match fetch(&http, &target, &args).await {
        Ok(fetched) => fetched,
        // A setup problem, as `paste` reports it (docs/security.md#what-an-operator-must-put-in-front).
        Err(error) => match error.downcast::<TlsFailure>() {
            Ok(TlsFailure(explained)) => {
                eprintln!("pastebin: {explained}");
                return Ok(EXIT_CONFIG);
            }
            Err(error) => return Err(error),
        },
    };
    let content = reveal(&fetched, target.fragment.as_deref(), password.as_deref())?;
    match &args.output {
        Some(path) => std::fs::write(path, &content).with_context(|| format!("cannot write {}", path.display()))?,
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(&content).and_then(|()| out.flush()).context("cannot write to standard output")?;
        }
    }
    if let Some(about) = fetched.about.filter(|_| args.info) {
        eprintln!("{}", describe(&about));
    }
    Ok(0)
}

/// The bytes to write, from the bytes fetched. Stored bytes are written as
/// they are; a sealed paste's envelope is opened with the key of the link's
/// fragment.
fn reveal(fetched: &Fetched, fragment: Option<&str>, password: Option<&str>) -> anyhow::Result<Vec<u8>> {
    if !fetched.sealed {
        return Ok(fetched.content.clone());
    }
    crate::sealed::open(&fetched.content, fragment.unwrap_or_default(), password).map_err(|error| {
        let burned = if fetched.burned { " (it burned after reading: this was its one read)" } else { "" };
        anyhow::anyhow!("{error}{burned}")
    })
}

/// Whether `response` is a sealed paste's.
fn is_sealed(response: &reqwest::Response) -> bool {
    response.headers().get(PASTE_SEALED).is_some_and(|value| value.as_bytes() == b"true")
}

/// Refuses, before the read that would burn it, a sealed paste whose link
/// has no key: asked with `HEAD`, which never burns.
async fn refuse_keyless_sealed(http: &reqwest::Client, target: &Target) -> anyhow::Result<()> {
    if target.fragment.is_some() {
        return Ok(());
    }
    let url = format!("{}/api/v1/pastes/{}", target.base, target.id);
    let head = http.head(&url).send().await.map_err(|error| unreachable(target, error))?;
    if is_sealed(&head) {
        bail!(pastebin_sealed::SealedError::MissingKey);
    }
    Ok(())
}

/// The share link first, which never burns: a burn paste answers it with a
/// refusal, and is read only when the person agrees.
async fn fetch(http: &reqwest::Client, target: &Target, args: &GetArgs) -> anyhow::Result<Fetched> {
    if !args.yes {
        let shared = http.get(format!("{}/{}", target.base, target.id)).header(header::ACCEPT, "*/*").send().await;
        let shared = shared.map_err(|error| unreachable(target, error))?;
        match shared.status() {
            StatusCode::OK => {
                let sealed = is_sealed(&shared);
                if sealed && target.fragment.is_none() {
                    bail!(pastebin_sealed::SealedError::MissingKey);
                }
                let content = shared.bytes().await.context("the answer was cut off")?.to_vec();
                // Metadata only when asked for: it costs a second read (never a burn).
                let about = if args.info { Some(read_json(http, target).await?) } else { None };
                return Ok(Fetched { content, sealed, burned: false, about });
            }
            // A burn paste: asked below, once a sealed one without its key is refused.
            StatusCode::CONFLICT => {}
            _ => return Err(refusal(shared).await),
        }
    }
    refuse_keyless_sealed(http, target).await?;
    if !args.yes {
        confirm_burn(&target.id)?;
    }
    let paste = read_json(http, target).await?;
    let content = match (&paste.content, &paste.content_base64) {
        (_, Some(encoded)) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .context("the server's content_base64 is not base64")?,
        (Some(text), None) => text.clone().into_bytes(),
        (None, None) => bail!("the server's answer has no content"),
    };
    Ok(Fetched { content, sealed: paste.sealed, burned: paste.burn_after_reading, about: Some(paste) })
}

/// `GET /api/v1/pastes/{id}`: the explicit read (it burns a burn paste).
async fn read_json(http: &reqwest::Client, target: &Target) -> anyhow::Result<PasteJson> {
    let url = format!("{}/api/v1/pastes/{}", target.base, target.id);
    let answer = http.get(&url).header(header::ACCEPT, "application/json").send().await;
    let answer = answer.map_err(|error| unreachable(target, error))?;
    if answer.status() != StatusCode::OK {
        return Err(refusal(answer).await);
    }
    answer.json().await.context("the server's answer is not a paste")
}

/// The server could not be asked: a TLS handshake that failed is the
/// setup problem [`TlsFailure`] explains; anything else says what failed.
fn unreachable(target: &Target, error: reqwest::Error) -> anyhow::Error {
    match tls_failure(&error) {
        Some(explained) => TlsFailure(explained).into(),
        None => anyhow::Error::new(error).context(format!("cannot reach {}", target.base)),
    }
}

/// A TLS handshake failure, explained: `get` exits with [`EXIT_CONFIG`] for
/// it, as `paste` does.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct TlsFailure(String);

/// A refusal in the server's words (410 names the operator's reason).
async fn refusal(answer: reqwest::Response) -> anyhow::Error {
    let status = answer.status();
    let text = answer.text().await.unwrap_or_default();
    match serde_json::from_str::<ErrorJson>(&text) {
        Ok(body) if body.error.code == "not_found" => {
            anyhow::anyhow!("no such paste (it may have expired or been deleted)")
        }
        Ok(body) => anyhow::anyhow!("{}", body.error.message),
        Err(_) => anyhow::anyhow!("the server answered HTTP {}", status.as_u16()),
    }
}

/// Asks on the terminal before the read that deletes a burn paste; without
/// a terminal to ask on, only `--yes` reads it.
fn confirm_burn(id: &str) -> anyhow::Result<()> {
    let warning = format!("paste {id} is deleted when it is read: nobody can read it again");
    if !std::io::stdin().is_terminal() {
        bail!("{warning}; pass --yes to read it");
    }
    eprint!("{warning}. Read it now? [y/N] ");
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer).context("cannot read the answer")?;
    if !matches!(answer.trim(), "y" | "Y" | "yes") {
        bail!("not read: paste {id} is still there");
    }
    Ok(())
}

/// The `--info` lines: expiry, language, type and name, size.
fn describe(paste: &PasteJson) -> String {
    let never = paste.expires_at.starts_with("9999-");
    let mut lines = vec![if never { "expires: never".to_owned() } else { format!("expires: {}", paste.expires_at) }];
    lines.push(format!("language: {}", paste.language.as_deref().unwrap_or("none")));
    if let Some(media_type) = &paste.media_type {
        lines.push(format!("type: {media_type}"));
    }
    if let Some(name) = &paste.file_name {
        lines.push(format!("file name: {name}"));
    }
    lines.push(format!("size: {} bytes", paste.size));
    if paste.burn_after_reading {
        lines.push("burned: this was its only read".into());
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_names_its_server_and_an_id_uses_the_given_one() {
        let at = |raw: &str| Target::parse(raw, "http://127.0.0.1:8080/").unwrap();
        let id = "4Zk3bY0c9QpLmN";
        assert_eq!(at(id), Target { base: "http://127.0.0.1:8080".into(), id: id.into(), fragment: None });
        for link in [
            format!("https://paste.example/{id}"),
            format!("https://paste.example/raw/{id}?download"),
            format!("https://paste.example/api/v1/pastes/{id}/"),
        ] {
            assert_eq!(at(&link), Target { base: "https://paste.example".into(), id: id.into(), fragment: None });
        }
        let sealed = at(&format!("https://paste.example/{id}#key"));
        assert_eq!(sealed.fragment.as_deref(), Some("key"));
        assert!(Target::parse("https://paste.example/", "x").is_err());
    }
}
