//! `--topology etcd://HOST:PORT[,HOST:PORT...][/PREFIX]`: the etcd members
//! and the key prefix a deployment's topology lives under.

use std::{fmt, str::FromStr};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyUrl {
    members: Vec<String>,
    prefix: String,
}

/// The prefix when the URL names none.
pub const DEFAULT_PREFIX: &str = "pastebin";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--topology must be etcd://HOST:PORT[,HOST:PORT...][/PREFIX] (e.g. etcd://10.0.0.1:2379,10.0.0.2:2379,10.0.0.3:2379), not {0:?}: {1}")]
pub struct TopologyUrlError(String, &'static str);

impl TopologyUrl {
    pub fn members(&self) -> &[String] {
        &self.members
    }

    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

impl FromStr for TopologyUrl {
    type Err = TopologyUrlError;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        let bad = |why| TopologyUrlError(raw.to_owned(), why);
        let rest = raw.trim().strip_prefix("etcd://").ok_or_else(|| bad("it must start with etcd://"))?;
        let (hosts, prefix) = rest.split_once('/').unwrap_or((rest, DEFAULT_PREFIX));
        let prefix = prefix.trim_matches('/');
        if prefix.is_empty() || !prefix.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            return Err(bad("the prefix is letters, digits, '-', '_' or '.'"));
        }
        let members: Vec<String> = hosts.split(',').map(str::trim).map(str::to_owned).collect();
        let well_formed = |member: &String| {
            member.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok())
        };
        if members.is_empty() || !members.iter().all(well_formed) {
            return Err(bad("each member is HOST:PORT"));
        }
        Ok(Self { members, prefix: prefix.to_owned() })
    }
}

impl fmt::Display for TopologyUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "etcd://{}/{}", self.members.join(","), self.prefix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_members_and_an_optional_prefix() {
        let url: TopologyUrl = "etcd://10.0.0.1:2379,10.0.0.2:2379".parse().unwrap();
        assert_eq!(url.members(), ["10.0.0.1:2379", "10.0.0.2:2379"]);
        assert_eq!(url.prefix(), DEFAULT_PREFIX);
        let url: TopologyUrl = "etcd://localhost:2379/staging".parse().unwrap();
        assert_eq!((url.members().len(), url.prefix()), (1, "staging"));
        assert_eq!(url.to_string(), "etcd://localhost:2379/staging");
        for bad in ["http://a:1", "etcd://", "etcd://a", "etcd://a:x", "etcd://a:1/b c"] {
            assert!(bad.parse::<TopologyUrl>().is_err(), "{bad}");
        }
    }
}
