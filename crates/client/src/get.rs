//! `pastebin get URL`: a paste's content on standard output, from its share
//! link. A sealed paste (docs/api.md#sealed-pastes) is opened here with the
//! key the link carries after `#` (and `--password-file`); the key never
//! goes to the server. Without the key nothing is fetched: a burn paste
//! would burn for nobody.

use std::{io::Write, path::PathBuf, time::Duration};

use anyhow::Context;
use base64::Engine;
use serde::Deserialize;

use crate::{command::read_password, trust::Trust};

/// The header every read of a sealed paste carries (HEAD included).
const PASTE_SEALED: &str = "paste-sealed";

#[derive(Debug, clap::Args)]
pub struct GetArgs {
    /// The paste's share link, e.g. https://paste.example/0A1b2C3d4E5f6G#key
    /// (quote it: the shell may treat '#' and '&' specially).
    pub url: String,
    /// The password of a sealed paste that has one (the file's first line).
    #[arg(long)]
    pub password_file: Option<PathBuf>,
    /// Trust only this certificate (PEM) for an https:// link, instead of any CA.
    #[arg(long, env = "PASTEBIN_SERVER_CERT")]
    pub server_cert: Option<PathBuf>,
    /// Time limit for the request (e.g. 10s).
    #[arg(long, default_value = "30s", value_parser = crate::command::parse_duration)]
    pub timeout: Duration,
}

/// What `GET /api/v1/pastes/{id}` answers, as far as this command reads it.
#[derive(Deserialize)]
struct PasteJson {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    content_base64: Option<String>,
    #[serde(default)]
    sealed: bool,
    #[serde(default)]
    burn_after_reading: bool,
}

/// A share link taken apart: where its paste is read, and its fragment.
#[derive(Debug, PartialEq, Eq)]
struct Link {
    api_url: String,
    id: String,
    fragment: Option<String>,
}

fn parse_link(raw: &str) -> anyhow::Result<Link> {
    let url = reqwest::Url::parse(raw.trim())
        .with_context(|| format!("{raw:?} is not a link: give the whole share link, http(s)://HOST/ID"))?;
    anyhow::ensure!(matches!(url.scheme(), "http" | "https"), "{raw:?} must be an http:// or https:// link");
    let id = url
        .path_segments()
        .and_then(|mut segments| segments.rfind(|segment| !segment.is_empty()))
        .map(str::to_owned)
        .with_context(|| format!("{raw:?} names no paste: the link ends with the paste's id"))?;
    let fragment = url.fragment().filter(|fragment| !fragment.is_empty()).map(str::to_owned);
    let mut api = url.clone();
    api.set_fragment(None);
    api.set_query(None);
    api.set_path(&format!("/api/v1/pastes/{id}"));
    Ok(Link { api_url: api.to_string(), id, fragment })
}

/// Runs `pastebin get`; the exit code (1 when nothing could be printed).
pub(crate) async fn get(args: GetArgs) -> anyhow::Result<i32> {
    match fetch(&args).await {
        Ok(content) => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&content).and_then(|()| stdout.flush()).context("cannot write standard output")?;
            Ok(0)
        }
        Err(error) => {
            eprintln!("pastebin: {error:#}");
            Ok(1)
        }
    }
}

async fn fetch(args: &GetArgs) -> anyhow::Result<Vec<u8>> {
    let link = parse_link(&args.url)?;
    let password = args.password_file.as_deref().map(read_password).transpose()?;
    let trust = args.server_cert.as_deref().map(Trust::pinned).transpose()?.unwrap_or_default();
    let http = reqwest::Client::builder()
        .use_preconfigured_tls(trust.tls_config()?)
        .timeout(args.timeout)
        .connect_timeout(args.timeout)
        .build()?;
    if link.fragment.is_none() {
        // Asked first, never read: reading a sealed burn paste would burn
        // it for a reader who cannot open it.
        let head = http.head(&link.api_url).send().await.context("the server did not answer")?;
        check_status(head.status(), &link.id)?;
        if head.headers().get(PASTE_SEALED).is_some_and(|v| v.as_bytes() == b"true") {
            anyhow::bail!(pastebin_sealed::SealedError::MissingKey);
        }
    }
    let response = http.get(&link.api_url).send().await.context("the server did not answer")?;
    check_status(response.status(), &link.id)?;
    let paste: PasteJson = response.json().await.context("the server's answer is not a paste")?;
    let bytes = match (&paste.content_base64, paste.content) {
        (Some(encoded), _) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .context("the server's answer has damaged base64 content")?,
        (None, Some(text)) => text.into_bytes(),
        (None, None) => anyhow::bail!("the server's answer has no content"),
    };
    if !paste.sealed {
        return Ok(bytes);
    }
    let fragment = link.fragment.as_deref().unwrap_or_default();
    crate::sealed::open(&bytes, fragment, password.as_deref()).map_err(|error| {
        let burned = if paste.burn_after_reading { " (it burned after reading: this was its one read)" } else { "" };
        anyhow::anyhow!("{error}{burned}")
    })
}

fn check_status(status: reqwest::StatusCode, id: &str) -> anyhow::Result<()> {
    match status.as_u16() {
        200..=299 => Ok(()),
        404 => anyhow::bail!("there is no paste {id}: it may have expired, been deleted or burned after reading"),
        code => anyhow::bail!("the server answered {code} for paste {id}; try again later"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_gives_its_api_url_id_and_fragment() {
        let link = parse_link("https://paste.example/0A1b2C3d4E5f6G#abc_-").unwrap();
        assert_eq!(
            link,
            Link {
                api_url: "https://paste.example/api/v1/pastes/0A1b2C3d4E5f6G".into(),
                id: "0A1b2C3d4E5f6G".into(),
                fragment: Some("abc_-".into()),
            }
        );
        assert_eq!(parse_link("http://127.0.0.1:8080/raw/0A1b2C3d4E5f6G#").unwrap().fragment, None);
        assert!(
            parse_link("not a link").is_err() && parse_link("ftp://x/y").is_err() && parse_link("http://x/").is_err()
        );
    }
}
