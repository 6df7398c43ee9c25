//! The configuration file: one file every part (and `pastebin ctl`) can share,
//! named by `PASTEBIN_CONFIG` (docs/deployment.md#settings).
//!
//! Two formats, told apart by the file name:
//! - `*.toml`: the settings of every part at once. Top-level keys apply to
//!   every part; a `[gateway]`, `[key-service]`, `[sweeper]`... section only to
//!   that part and wins over a top-level key; `[aws]` holds the object store's
//!   credentials. Keys are flag names (`s3_bucket` or `s3-bucket`), lists are
//!   arrays. A key no part has, or a section no subcommand has, is an error.
//! - anything else: an environment file of `PASTEBIN_NAME=value` lines and `#`
//!   comments, the format before TOML; it keeps working unchanged.
//!
//! Either way each setting becomes the variable the matching flag already
//! reads, unless the environment sets it, and clap parses it with the flag's
//! own type. So the order of precedence is defaults, then the file, then the
//! environment, then flags.

use std::{collections::BTreeMap, ffi::OsString, path::Path};

use anyhow::Context;

/// Loads `PASTEBIN_CONFIG`, if set, into the process environment, for the
/// part `args` start (a subcommand of `cli`).
/// Must run before any other thread exists (it is called first in `main`).
pub fn load_from_env(cli: &clap::Command, args: &[OsString]) -> anyhow::Result<()> {
    match std::env::var_os("PASTEBIN_CONFIG") {
        Some(path) => load(Path::new(&path), cli, args),
        None => Ok(()),
    }
}

fn load(path: &Path, cli: &clap::Command, args: &[OsString]) -> anyhow::Result<()> {
    if let Some(warning) = exposure_warning(path) {
        // Tracing is not set up yet: the config decides how it is.
        eprintln!("pastebin: warning: {warning}");
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read PASTEBIN_CONFIG {}", path.display()))?;
    let settings = if path.extension().is_some_and(|extension| extension == "toml") {
        parse_toml(&text, cli, running_part(cli, args))
    } else {
        parse(&text)
    };
    for (name, value) in settings.with_context(|| format!("in {}", path.display()))? {
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

/// A warning if users other than the owner may read or write the file: a
/// config can name secrets (S3 credentials), so it belongs at 0600
/// (docs/security.md#private-files).
fn exposure_warning(path: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path).ok()?.permissions().mode() & 0o777;
    (mode & 0o077 != 0).then(|| {
        format!("PASTEBIN_CONFIG {} is mode {mode:o}, open to other users; make it private: chmod 600", path.display())
    })
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

/// The subcommand `args` run (`gateway` in `pastebin gateway --http ...`).
fn running_part<'a>(cli: &'a clap::Command, args: &[OsString]) -> Option<&'a clap::Command> {
    args.iter().skip(1).filter_map(|arg| arg.to_str()).find_map(|arg| cli.find_subcommand(arg))
}

/// The credentials the AWS SDK reads from its standard variables.
const AWS_SETTINGS: &[(&str, &str)] = &[
    ("access_key_id", "AWS_ACCESS_KEY_ID"),
    ("secret_access_key", "AWS_SECRET_ACCESS_KEY"),
    ("session_token", "AWS_SESSION_TOKEN"),
    ("region", "AWS_REGION"),
];

/// Environment variable of each flag of `part` and its nested subcommands, by flag name.
fn flag_variables(part: &clap::Command) -> BTreeMap<String, String> {
    let own = part.get_arguments().filter_map(|arg| {
        let variable = arg.get_env()?.to_str()?;
        Some((arg.get_long()?.to_owned(), variable.to_owned()))
    });
    let nested = part.get_subcommands().flat_map(flag_variables);
    own.chain(nested).collect()
}

/// The variable a TOML key sets, if `variables` has its flag.
fn variable_of<'a>(variables: &'a BTreeMap<String, String>, key: &str) -> Option<&'a String> {
    variables.get(&key.replace('_', "-"))
}

fn scalar(key: &str, value: &toml::Value) -> anyhow::Result<String> {
    Ok(match value {
        toml::Value::String(text) => text.clone(),
        toml::Value::Integer(number) => number.to_string(),
        toml::Value::Float(number) => number.to_string(),
        toml::Value::Boolean(flag) => flag.to_string(),
        // Flags that take lists split on commas.
        toml::Value::Array(items) => {
            items.iter().map(|item| scalar(key, item)).collect::<anyhow::Result<Vec<_>>>()?.join(",")
        }
        toml::Value::Datetime(_) | toml::Value::Table(_) => {
            anyhow::bail!("{key}: expected a string, number, boolean or array")
        }
    })
}

/// The variables a TOML file sets for `running` (every part's keys are
/// checked, whichever part runs).
fn parse_toml(
    text: &str,
    cli: &clap::Command,
    running: Option<&clap::Command>,
) -> anyhow::Result<Vec<(String, String)>> {
    let table: toml::Table = text.parse().context("not valid TOML")?;
    let every_part = flag_variables(cli);
    let mut shared = BTreeMap::new();
    let mut own = BTreeMap::new();
    for (key, value) in &table {
        match value {
            toml::Value::Table(section) if key == "aws" => {
                for (name, value) in section {
                    let (_, variable) =
                        AWS_SETTINGS.iter().find(|(setting, _)| setting == name).with_context(|| {
                            format!("[aws] {name}: not one of access_key_id, secret_access_key, session_token, region")
                        })?;
                    shared.insert(variable.to_string(), scalar(name, value)?);
                }
            }
            toml::Value::Table(section) => {
                let part = cli.find_subcommand(key).with_context(|| format!("[{key}]: no part is called {key}"))?;
                let variables = flag_variables(part);
                for (name, value) in section {
                    let variable = variable_of(&variables, name)
                        .with_context(|| format!("[{key}] {name}: `pastebin {key}` has no such setting"))?;
                    if running.is_some_and(|running| running.get_name() == part.get_name()) {
                        own.insert(variable.clone(), scalar(name, value)?);
                    }
                }
            }
            value => {
                let variable =
                    variable_of(&every_part, key).with_context(|| format!("{key}: no part has this setting"))?;
                shared.insert(variable.clone(), scalar(key, value)?);
            }
        }
    }
    shared.extend(own);
    Ok(shared.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

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
    fn a_config_open_to_other_users_is_warned_about() {
        use std::os::unix::fs::PermissionsExt;
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(exposure_warning(file.path()).unwrap().contains("chmod 600"));
        std::fs::set_permissions(file.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(exposure_warning(file.path()), None);
    }

    #[test]
    fn rejects_lines_that_are_not_settings() {
        assert!(parse("PASTEBIN_HTTP").is_err());
        assert!(parse("HTTP_PORT=1").unwrap_err().to_string().contains("not a PASTEBIN_"));
    }

    const EVERY_PART: &str = r#"
key_shards = ["k0:50061", "k1:50061"]
paste-shards = ["p0:50061"]
s3_bucket = "pastes"
s3_path_style = true

[aws]
access_key_id = "id"
secret_access_key = "secret"

[gateway]
http = "0.0.0.0:8080"
s3_bucket = "gateway-pastes"

[key-service]
listen = "0.0.0.0:50061"
db_connections = 32

[sweeper]
sweep_interval_secs = 2
"#;

    fn settings_of(part: &str) -> BTreeMap<String, String> {
        let cli = crate::Cli::command();
        let running = cli.find_subcommand(part);
        parse_toml(EVERY_PART, &cli, running).unwrap().into_iter().collect()
    }

    #[test]
    fn one_toml_file_holds_every_part_and_a_section_wins_for_its_part() {
        let gateway = settings_of("gateway");
        assert_eq!(gateway["PASTEBIN_KEY_SHARDS"], "k0:50061,k1:50061");
        assert_eq!(gateway["PASTEBIN_PASTE_SHARDS"], "p0:50061");
        assert_eq!(gateway["PASTEBIN_S3_PATH_STYLE"], "true");
        assert_eq!(gateway["PASTEBIN_HTTP"], "0.0.0.0:8080");
        assert_eq!(gateway["PASTEBIN_S3_BUCKET"], "gateway-pastes", "the [gateway] section wins");
        assert_eq!(gateway["AWS_SECRET_ACCESS_KEY"], "secret");
        assert!(!gateway.contains_key("PASTEBIN_LISTEN"), "another part's section does not apply");

        let sweeper = settings_of("sweeper");
        assert_eq!(sweeper["PASTEBIN_S3_BUCKET"], "pastes");
        assert_eq!(sweeper["PASTEBIN_SWEEP_INTERVAL_SECS"], "2");

        let keys = settings_of("key-service");
        assert_eq!(keys["PASTEBIN_DB_CONNECTIONS"], "32");
    }

    #[test]
    fn a_toml_key_or_section_no_part_has_is_an_error() {
        let cli = crate::Cli::command();
        let fails = |text: &str| parse_toml(text, &cli, None).unwrap_err().to_string();
        assert!(fails("s3_buckt = \"x\"").contains("s3_buckt: no part has this setting"));
        assert!(fails("[gatway]\nhttp = \"x\"").contains("no part is called gatway"));
        assert!(fails("[sweeper]\nhttp = \"x\"").contains("`pastebin sweeper` has no such setting"));
        assert!(fails("[aws]\npassword = \"x\"").contains("[aws] password"));
        assert!(fails("s3_bucket = 2026-11-30").contains("expected a string"));
        assert!(fails("not toml").contains("not valid TOML"));
    }
}
