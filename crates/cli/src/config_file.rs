//! The configuration file: one file every part (and `pastebin ctl`) can share.
//!
//! It is an environment file — `PASTEBIN_NAME=value` lines, `#` comments —
//! named by `PASTEBIN_CONFIG`. Each line sets the variable the matching flag
//! already reads, unless the environment sets it: so the order of precedence
//! is defaults, then the file, then the environment, then flags.

use std::path::Path;

use anyhow::Context;

/// Loads `PASTEBIN_CONFIG`, if set, into the process environment.
/// Must run before any other thread exists (it is called first in `main`).
pub fn load_from_env() -> anyhow::Result<()> {
    match std::env::var_os("PASTEBIN_CONFIG") {
        Some(path) => load(Path::new(&path)),
        None => Ok(()),
    }
}

fn load(path: &Path) -> anyhow::Result<()> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read PASTEBIN_CONFIG {}", path.display()))?;
    for (name, value) in parse(&text).with_context(|| format!("in {}", path.display()))? {
        if std::env::var_os(&name).is_none() {
            // SAFETY: called from `main` before the runtime or any thread starts.
            #[allow(unsafe_code, reason = "set_var is unsafe from edition 2024: see SAFETY")]
            unsafe {
                std::env::set_var(name, value)
            };
        }
    }
    Ok(())
}

/// `NAME=value` pairs; blank lines and `#` comments are skipped. Only
/// `PASTEBIN_*` and `AWS_*` names are accepted, so a typo is an error, not a
/// silently ignored setting.
fn parse(text: &str) -> anyhow::Result<Vec<(String, String)>> {
    let mut pairs = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, value) =
            line.split_once('=').with_context(|| format!("line {}: expected NAME=value", number + 1))?;
        let name = name.trim();
        anyhow::ensure!(
            name.starts_with("PASTEBIN_") || name.starts_with("AWS_"),
            "line {}: {name} is not a PASTEBIN_* or AWS_* setting",
            number + 1
        );
        pairs.push((name.to_owned(), value.trim().trim_matches('"').to_owned()));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_settings_comments_and_quotes() {
        let pairs =
            parse("# shards\nPASTEBIN_KEY_SHARDS = 127.0.0.1:50061,127.0.0.1:50062\n\nPASTEBIN_S3_BUCKET=\"pastes\"\n")
                .unwrap();
        assert_eq!(
            pairs,
            vec![
                ("PASTEBIN_KEY_SHARDS".to_owned(), "127.0.0.1:50061,127.0.0.1:50062".to_owned()),
                ("PASTEBIN_S3_BUCKET".to_owned(), "pastes".to_owned()),
            ]
        );
    }

    #[test]
    fn rejects_lines_that_are_not_settings() {
        assert!(parse("PASTEBIN_HTTP").is_err());
        assert!(parse("HTTP_PORT=1").unwrap_err().to_string().contains("not a PASTEBIN_"));
    }
}
