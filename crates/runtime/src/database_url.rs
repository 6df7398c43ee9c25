//! libpq's multi-host database URLs, which sqlx does not parse (its issue
//! #2290): `postgres://user@h1:5432,h2:5432/db?target_session_attrs=read-write`
//! names every server that may be the primary, and which one a shard may use.
//! A URL is split into one single-host URL per server, in the order given, for
//! [`crate::reconnect`] to try (docs/design.md#database-failover).
//!
//! Parsed by hand on purpose: the address part is all that differs from a
//! URL sqlx reads, and everything else (user, password, database, the other
//! parameters) is copied byte for byte into each single-host URL, so sqlx
//! sees exactly what the operator wrote.

use std::fmt;

/// What a server must be for this shard to use it: libpq's
/// `target_session_attrs`, restricted to the values that suit a shard that
/// writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionTarget {
    /// The first server that accepts a connection (libpq's default).
    Any,
    /// A server whose sessions take writes (`transaction_read_only` is off).
    ReadWrite,
    /// A server that is not in recovery (not a standby).
    Primary,
}

impl SessionTarget {
    /// The query that tells whether a server is one this target accepts:
    /// it answers `true` for a server to use. `None`: any server will do.
    pub fn check(self) -> Option<&'static str> {
        match self {
            Self::Any => None,
            Self::ReadWrite => Some("SELECT current_setting('transaction_read_only') = 'off'"),
            Self::Primary => Some("SELECT NOT pg_is_in_recovery()"),
        }
    }
}

/// One server of a database URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Server {
    /// `host:port` as written, for logs (never the whole URL: it can hold a password).
    pub address: String,
    /// The URL to reach this server alone.
    pub url: String,
}

/// A PostgreSQL URL with one or more servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseUrl {
    pub servers: Vec<Server>,
    pub target: SessionTarget,
}

/// Why a database URL cannot be used; never quotes the URL (it can hold a password).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum DatabaseUrlError {
    #[error("--database-url names an empty host; write every server as host:port, separated by commas")]
    EmptyHost,
    #[error("--database-url has a bad port after {host:?}; write every server as host:port with a port of 1 to 65535")]
    BadPort { host: String },
    #[error("--database-url has an unclosed [ in an IPv6 address; write it as [::1]:5432")]
    BadIpv6,
    #[error(
        "--database-url asks for target_session_attrs={0}, which a shard cannot use: it writes; use read-write or \
         primary (or leave it out to take the first server that answers)"
    )]
    ReadOnlyTarget(String),
    #[error("--database-url has an unknown target_session_attrs={0}; use read-write, primary or any")]
    UnknownTarget(String),
    #[error("--database-url lists several hosts in its host= or port= parameter; list them in the address instead: postgres://user@h1:5432,h2:5432/db")]
    HostListInParameter,
}

impl DatabaseUrl {
    /// Splits a `postgres://` or `postgresql://` URL into its servers.
    pub fn parse(url: &str) -> Result<Self, DatabaseUrlError> {
        let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        let (user, hosts) = match authority.rfind('@') {
            Some(at) => authority.split_at(at + 1),
            None => ("", authority),
        };
        let (tail, target) = take_target(tail)?;
        let several = hosts.contains(',');
        let servers = hosts
            .split(',')
            .map(|host| {
                let address = check_host(host, several)?;
                Ok(Server { url: format!("{scheme}://{user}{address}{tail}"), address: address.to_owned() })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { servers, target })
    }

    /// Whether there is more than one server to choose from.
    pub fn is_multi_host(&self) -> bool {
        self.servers.len() > 1
    }
}

impl fmt::Display for DatabaseUrl {
    /// The servers' addresses and the target, safe to log.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let addresses: Vec<&str> = self.servers.iter().map(|server| server.address.as_str()).collect();
        write!(f, "{} ({:?})", addresses.join(","), self.target)
    }
}

/// `host`, `host:port`, `[v6]` or `[v6]:port`, checked; returned as written.
/// An empty host means sqlx's default (a `host=` parameter or localhost),
/// which only makes sense when it is the only one.
fn check_host(host: &str, several: bool) -> Result<&str, DatabaseUrlError> {
    let port = if let Some(v6) = host.strip_prefix('[') {
        let (_, after) = v6.split_once(']').ok_or(DatabaseUrlError::BadIpv6)?;
        after.strip_prefix(':')
    } else {
        host.split_once(':').map(|(_, port)| port)
    };
    let name = host.split(':').next().unwrap_or_default();
    if several && name.is_empty() && !host.starts_with('[') {
        return Err(DatabaseUrlError::EmptyHost);
    }
    match port {
        None => Ok(host),
        Some(port) if port.parse::<u16>().is_ok_and(|port| port > 0) => Ok(host),
        Some(_) => Err(DatabaseUrlError::BadPort { host: name.to_owned() }),
    }
}

/// Removes `target_session_attrs` from the path-and-query `tail` (sqlx
/// would only warn about it), leaving every other parameter as written.
fn take_target(tail: &str) -> Result<(String, SessionTarget), DatabaseUrlError> {
    let Some((path, query)) = tail.split_once('?') else {
        return Ok((tail.to_owned(), SessionTarget::Any));
    };
    let mut target = SessionTarget::Any;
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "target_session_attrs" => target = session_target(value)?,
            "host" | "port" | "hostaddr" if value.contains(',') || value.contains("%2C") => {
                return Err(DatabaseUrlError::HostListInParameter)
            }
            _ => kept.push(pair),
        }
    }
    let tail = if kept.is_empty() { path.to_owned() } else { format!("{path}?{}", kept.join("&")) };
    Ok((tail, target))
}

fn session_target(value: &str) -> Result<SessionTarget, DatabaseUrlError> {
    match value {
        "any" => Ok(SessionTarget::Any),
        "read-write" => Ok(SessionTarget::ReadWrite),
        "primary" => Ok(SessionTarget::Primary),
        "read-only" | "standby" | "prefer-standby" => Err(DatabaseUrlError::ReadOnlyTarget(value.to_owned())),
        other => Err(DatabaseUrlError::UnknownTarget(other.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(parsed: &DatabaseUrl) -> Vec<&str> {
        parsed.servers.iter().map(|server| server.url.as_str()).collect()
    }

    #[test]
    fn a_multi_host_url_becomes_one_url_per_server_in_order() {
        let parsed = DatabaseUrl::parse(
            "postgres://k:s%40cret@db1:5432,db2:5433,[::1]:6000/keys?sslmode=disable&target_session_attrs=read-write",
        )
        .unwrap();
        assert_eq!(parsed.target, SessionTarget::ReadWrite);
        assert_eq!(
            urls(&parsed),
            [
                "postgres://k:s%40cret@db1:5432/keys?sslmode=disable",
                "postgres://k:s%40cret@db2:5433/keys?sslmode=disable",
                "postgres://k:s%40cret@[::1]:6000/keys?sslmode=disable",
            ]
        );
        assert!(parsed.is_multi_host());
        assert_eq!(parsed.to_string(), "db1:5432,db2:5433,[::1]:6000 (ReadWrite)");
    }

    #[test]
    fn a_single_host_url_is_kept_as_written() {
        let written = [
            "postgres://postgres@127.0.0.1:5432/postgres",
            "postgresql://h/db?sslmode=require",
            "postgres://h",
            "postgres:///db?host=/run/postgresql",
        ];
        for url in written {
            let parsed = DatabaseUrl::parse(url).unwrap();
            assert_eq!(urls(&parsed), [url]);
            assert_eq!(parsed.target, SessionTarget::Any);
            assert!(!parsed.is_multi_host());
        }
    }

    #[test]
    fn primary_and_any_are_understood_and_the_parameter_is_dropped() {
        let parsed = DatabaseUrl::parse("postgres://a:1,b:2/db?target_session_attrs=primary").unwrap();
        assert_eq!(
            (parsed.target, urls(&parsed)),
            (SessionTarget::Primary, vec!["postgres://a:1/db", "postgres://b:2/db"])
        );
        let parsed = DatabaseUrl::parse("postgres://a,b/db?application_name=k&target_session_attrs=any").unwrap();
        assert_eq!(
            (parsed.target, urls(&parsed)),
            (SessionTarget::Any, vec!["postgres://a/db?application_name=k", "postgres://b/db?application_name=k"])
        );
    }

    #[test]
    fn bad_input_is_refused_with_what_to_write_instead() {
        let cases = [
            ("postgres://a:1,,b:2/db", DatabaseUrlError::EmptyHost),
            ("postgres://u@:5432,b/db", DatabaseUrlError::EmptyHost),
            ("postgres://a:1,b:x/db", DatabaseUrlError::BadPort { host: "b".into() }),
            ("postgres://a:0/db", DatabaseUrlError::BadPort { host: "a".into() }),
            ("postgres://a:70000/db", DatabaseUrlError::BadPort { host: "a".into() }),
            ("postgres://[::1:5432/db", DatabaseUrlError::BadIpv6),
            ("postgres://a,b/db?target_session_attrs=standby", DatabaseUrlError::ReadOnlyTarget("standby".into())),
            ("postgres://a,b/db?target_session_attrs=read-only", DatabaseUrlError::ReadOnlyTarget("read-only".into())),
            ("postgres://a,b/db?target_session_attrs=rw", DatabaseUrlError::UnknownTarget("rw".into())),
            ("postgres:///db?host=a,b", DatabaseUrlError::HostListInParameter),
        ];
        for (url, expected) in cases {
            assert_eq!(DatabaseUrl::parse(url), Err(expected), "{url}");
        }
    }

    #[test]
    fn an_error_never_quotes_the_password() {
        let error = DatabaseUrl::parse("postgres://k:hunter2@a:1,b:x/db").unwrap_err().to_string();
        assert!(!error.contains("hunter2"), "{error}");
        assert!(error.contains("host:port"), "{error}");
    }
}
