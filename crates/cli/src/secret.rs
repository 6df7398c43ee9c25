//! A setting that must never be printed: a database URL carries its password.
//! `Debug` (and so `?settings` in a log line or a panic) shows only that a
//! value is there; the code that needs it calls [`Secret::expose`].

use std::{convert::Infallible, fmt, str::FromStr};

#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl FromStr for Secret {
    type Err = Infallible;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Ok(Self(value.to_owned()))
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(hidden)")
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use crate::{Cli, Command};

    #[test]
    fn a_database_url_never_prints() {
        let cli = Cli::parse_from(["pastebin", "key-service", "--database-url", "postgres://k:hunter2@db/keys_0"]);
        let Command::KeyService(args) = &cli.command else { panic!("parsed as {cli:?}") };
        let args = &args.shard;
        assert_eq!(args.database_url.expose(), "postgres://k:hunter2@db/keys_0");
        let printed = format!("{cli:?}");
        assert!(!printed.contains("hunter2") && printed.contains("Secret(hidden)"), "{printed}");
    }
}
