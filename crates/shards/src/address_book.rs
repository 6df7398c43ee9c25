//! The deployment's address book: where the shards and the object store
//! are, as flags (each also a `PASTEBIN_*` variable) flattened into every
//! command, as the `endpoints.json` a running `pastebin up` writes, and the
//! one function every client channel to a shard is made by.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::Context;
use pastebin_objects::{CheckedS3Store, CreateOnlyError, LocalDirStore, ObjectStore, S3Settings, S3Store};
use pastebin_runtime::{
    grpc::shard_url,
    tls::{MutualTls, TopologyTlsArgs},
};
use serde::{Deserialize, Serialize};

/// Where the K and P shards are. The order of a list does not matter: each
/// shard says which slots it owns (see [`crate::discover`]).
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = pastebin_runtime::help::SHARDS)]
pub struct ShardAddresses {
    /// Key service (shard K) addresses, comma-separated, in any order.
    #[arg(long, env = "PASTEBIN_KEY_SHARDS", value_delimiter = ',', global = true)]
    pub key_shards: Vec<String>,
    /// Paste service (shard P) addresses, comma-separated, in any order.
    #[arg(long, env = "PASTEBIN_PASTE_SHARDS", value_delimiter = ',', global = true)]
    pub paste_shards: Vec<String>,
    /// The etcd members that decide which shard owns which slots
    /// (docs/design.md#ownership-on-etcd): etcd://HOST:PORT[,HOST:PORT...][/PREFIX].
    /// A move (`ctl reshard`) records every step there.
    #[arg(long, env = "PASTEBIN_TOPOLOGY", global = true)]
    pub topology: Option<pastebin_topology::TopologyUrl>,
}

impl ShardAddresses {
    /// Both lists, normalised, blanks dropped; an error when either is empty.
    pub fn required(&self) -> Result<(Vec<String>, Vec<String>), AddressError> {
        let (keys, pastes) = (normalized_list(&self.key_shards), normalized_list(&self.paste_shards));
        match (keys.is_empty(), pastes.is_empty()) {
            (true, true) => Err(AddressError::NoShards),
            (true, false) => Err(AddressError::NoKeyShards),
            (false, true) => Err(AddressError::NoPasteShards),
            (false, false) => Ok((keys, pastes)),
        }
    }

    /// These addresses where given, else the ones in `endpoints`, list by list.
    pub fn or_from(&self, endpoints: Option<&Endpoints>) -> ShardAddresses {
        let pick = |given: &[String], written: Option<&Vec<String>>| {
            let given = normalized_list(given);
            if given.is_empty() {
                written.map(|list| normalized_list(list)).unwrap_or_default()
            } else {
                given
            }
        };
        ShardAddresses {
            key_shards: pick(&self.key_shards, endpoints.map(|e| &e.key_shards)),
            paste_shards: pick(&self.paste_shards, endpoints.map(|e| &e.paste_shards)),
            topology: self.topology.clone(),
        }
    }

    /// The etcd `--topology` names, if it names one, met with the
    /// `--topology-tls-*` files or else the part's own `tls`.
    pub fn authority(
        &self,
        topology_tls: &TopologyTlsArgs,
        tls: Option<&MutualTls>,
    ) -> anyhow::Result<Option<pastebin_topology::EtcdAuthority>> {
        let Some(url) = &self.topology else { return Ok(None) };
        let tls = topology_tls.load_or(tls)?;
        Ok(Some(pastebin_topology::EtcdAuthority::new(url.clone(), tls.as_ref().map(MutualTls::client))?))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    #[error(
        "no shard addresses: pass --key-shards and --paste-shards (or PASTEBIN_KEY_SHARDS and PASTEBIN_PASTE_SHARDS)"
    )]
    NoShards,
    #[error(
        "--key-shards is missing (the paste shards are given): pass the key service addresses with --key-shards \
         (or PASTEBIN_KEY_SHARDS)"
    )]
    NoKeyShards,
    #[error(
        "--paste-shards is missing (the key shards are given): pass the paste service addresses with \
         --paste-shards (or PASTEBIN_PASTE_SHARDS)"
    )]
    NoPasteShards,
    #[error("bad shard address {address}: {reason}")]
    BadAddress { address: String, reason: String },
}

/// An address as given, without surrounding blanks. The scheme is decided
/// when a channel is made: a bare `host:port` means TLS exactly when the
/// part has TLS files ([`pastebin_runtime::grpc::shard_url`]).
pub fn normalized(address: &str) -> String {
    address.trim().to_owned()
}

fn normalized_list(addresses: &[String]) -> Vec<String> {
    addresses.iter().filter(|a| !a.trim().is_empty()).map(|a| normalized(a)).collect()
}

/// How often a client pings each shard connection over HTTP/2, and how long
/// it waits for the answer before it drops the connection.
pub const PING_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);
pub const PING_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// A lazily connecting channel to a shard at `address`, over mutual TLS
/// when `tls` is given: a shard that is down is an error per call, not a
/// failure to build the channel. Every client of K and P is made here.
pub fn channel(address: &str, tls: Option<&MutualTls>) -> Result<tonic::transport::Channel, AddressError> {
    Ok(endpoint(address, tls)?.connect_lazy())
}

/// How every client reaches a shard at `address`, before any connection:
/// the deterministic simulation connects the same endpoint through its
/// simulated network (docs/testing.md#simulation).
pub fn endpoint(address: &str, tls: Option<&MutualTls>) -> Result<tonic::transport::Endpoint, AddressError> {
    let bad = |reason: String| AddressError::BadAddress { address: address.trim().to_owned(), reason };
    let url = shard_url(address, tls.is_some()).map_err(|error| bad(error.to_string()))?;
    let endpoint = tonic::transport::Endpoint::from_shared(url)
        .map_err(|error| bad(error.to_string()))?
        .connect_timeout(std::time::Duration::from_secs(1))
        .tcp_nodelay(true)
        // A connection whose peer vanished without a reset (a host gone, a
        // partition that outlived the peer's connection state) would
        // otherwise take every call until TCP gives up, many minutes later:
        // HTTP/2 pings close it within PING_INTERVAL + PING_TIMEOUT, and the
        // next call connects afresh (docs/design.md#shard-connections).
        .http2_keep_alive_interval(PING_INTERVAL)
        .keep_alive_timeout(PING_TIMEOUT)
        .keep_alive_while_idle(true);
    let endpoint = match tls {
        Some(tls) => endpoint
            .tls_config(tls.client())
            .map_err(|error| bad(format!("cannot use --tls-cert and --tls-key ({error})")))?,
        None => endpoint,
    };
    Ok(endpoint)
}

/// Where the objects are: a directory or an S3 bucket.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = pastebin_runtime::help::OBJECT_STORE)]
pub struct ObjectStoreArgs {
    /// Keep objects in this directory (the embedded default's choice).
    #[arg(long, env = "PASTEBIN_OBJECTS_DIR", conflicts_with = "s3_bucket", global = true)]
    pub objects_dir: Option<PathBuf>,
    /// Keep objects in this S3 bucket (credentials from the standard AWS chain).
    #[arg(long, env = "PASTEBIN_S3_BUCKET", global = true)]
    pub s3_bucket: Option<String>,
    /// Endpoint of an S3-compatible server (default: AWS).
    #[arg(long, env = "PASTEBIN_S3_ENDPOINT", global = true)]
    pub s3_endpoint: Option<String>,
    #[arg(long, env = "PASTEBIN_S3_REGION", default_value = "us-east-1", global = true)]
    pub s3_region: String,
    /// Path-style addressing (most S3-compatible servers need it).
    #[arg(long, env = "PASTEBIN_S3_PATH_STYLE", default_value_t = false, global = true)]
    pub s3_path_style: bool,
}

/// An object store chosen by [`ObjectStoreArgs`], not yet opened.
#[derive(Debug, Clone)]
pub enum ObjectStoreConfig {
    Dir(PathBuf),
    S3(S3Settings),
}

impl ObjectStoreArgs {
    /// The store these flags choose, if they choose one.
    pub fn config(&self) -> Option<ObjectStoreConfig> {
        match (&self.objects_dir, &self.s3_bucket) {
            (Some(dir), _) => Some(ObjectStoreConfig::Dir(dir.clone())),
            (None, Some(bucket)) => Some(ObjectStoreConfig::S3(S3Settings {
                bucket: bucket.clone(),
                endpoint: self.s3_endpoint.clone().filter(|e| !e.trim().is_empty()),
                region: self.s3_region.clone(),
                force_path_style: self.s3_path_style,
            })),
            (None, None) => None,
        }
    }

    /// Opens the store the flags choose; choosing none is an error.
    pub async fn open(&self) -> anyhow::Result<Arc<dyn ObjectStore>> {
        self.chosen()?.open().await
    }

    /// [`ObjectStoreConfig::open_for_creates`] of the store the flags choose.
    pub async fn open_for_creates(&self) -> anyhow::Result<Arc<dyn ObjectStore>> {
        self.chosen()?.open_for_creates().await
    }

    fn chosen(&self) -> anyhow::Result<ObjectStoreConfig> {
        self.config().context("choose an object store: --objects-dir DIR or --s3-bucket NAME")
    }
}

/// How long a writer waits at start for the store to answer the create-only probe
/// before it starts anyway and leaves the question to its first PUT.
const CREATE_ONLY_PROBE_AT_START: std::time::Duration = std::time::Duration::from_secs(10);

impl ObjectStoreConfig {
    pub async fn open(&self) -> anyhow::Result<Arc<dyn ObjectStore>> {
        Ok(match self {
            Self::Dir(dir) => Arc::new(LocalDirStore::open(dir)?),
            Self::S3(settings) => Arc::new(S3Store::connect(settings.clone()).await?),
        })
    }

    /// The store for a process that writes pastes (the gateway): an S3 store must first
    /// refuse an overwrite of a probe object (docs/design.md#create-only-put). One that
    /// overwrites is an error, so the process ends at start naming what is missing; one
    /// that cannot be asked yet is opened all the same, and its first PUT asks again.
    /// A directory is create-only by construction (a hard link never replaces a file).
    pub async fn open_for_creates(&self) -> anyhow::Result<Arc<dyn ObjectStore>> {
        let Self::S3(settings) = self else { return self.open().await };
        let store = CheckedS3Store::new(S3Store::connect(settings.clone()).await?);
        let endpoint = settings.endpoint.as_deref().unwrap_or("AWS S3");
        match tokio::time::timeout(CREATE_ONLY_PROBE_AT_START, store.check()).await {
            Ok(Ok(())) => tracing::info!(%endpoint, "the object store refuses overwrites (If-None-Match: *)"),
            Ok(Err(ignored @ CreateOnlyError::Ignored { .. })) => {
                return Err(anyhow::Error::new(ignored).context(format!("object store at {endpoint}")))
            }
            Ok(Err(unknown)) => tracing::warn!(%endpoint, %unknown, "no paste is written until it can tell"),
            Err(_) => tracing::warn!(
                %endpoint,
                "the object store did not answer the create-only probe within {CREATE_ONLY_PROBE_AT_START:?}; \
                 no paste is written until it does"
            ),
        }
        Ok(Arc::new(store))
    }
}

/// `<data-dir>/endpoints.json`: where the parts of a running `pastebin up`
/// listen, so operator tools find them from the data directory alone.
/// Written by `pastebin up`, read by `pastebin ctl`; this one type does both.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoints {
    pub key_shards: Vec<String>,
    pub paste_shards: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grpc: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub admin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects_dir: Option<PathBuf>,
}

#[derive(Debug, thiserror::Error)]
pub enum EndpointsError {
    #[error("cannot read {path} ({error}): is `pastebin up --data-dir {data_dir}` running?")]
    Missing { path: String, data_dir: String, error: std::io::Error },
    #[error("{path} is not valid: {error}")]
    Invalid { path: String, error: serde_json::Error },
    #[error("cannot write {path}: {error}")]
    Write { path: String, error: std::io::Error },
}

/// Where `pastebin up` keeps its state unless told otherwise, relative to
/// where it runs; `pastebin ctl` looks there when given no addresses.
pub const DEFAULT_DATA_DIR: &str = "pastebin-data";

impl Endpoints {
    pub const FILE_NAME: &'static str = "endpoints.json";

    pub fn read(data_dir: &Path) -> Result<Self, EndpointsError> {
        let path = data_dir.join(Self::FILE_NAME);
        let text = std::fs::read_to_string(&path).map_err(|error| EndpointsError::Missing {
            path: path.display().to_string(),
            data_dir: data_dir.display().to_string(),
            error,
        })?;
        serde_json::from_str(&text).map_err(|error| EndpointsError::Invalid { path: path.display().to_string(), error })
    }

    pub fn write(&self, data_dir: &Path) -> Result<(), EndpointsError> {
        let path = data_dir.join(Self::FILE_NAME);
        let write_error = |error| EndpointsError::Write { path: path.display().to_string(), error };
        let text = serde_json::to_vec_pretty(self).map_err(|e| write_error(std::io::Error::other(e)))?;
        // Private like the databases beside it (docs/security.md#private-files).
        pastebin_runtime::files::write_private(&path, &text).map_err(write_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_normalised_and_blanks_dropped() {
        assert_eq!(normalized(" 127.0.0.1:1 "), "127.0.0.1:1");
        assert_eq!(normalized("https://k.example:443"), "https://k.example:443");
        let given = ShardAddresses {
            key_shards: vec!["a:1".into(), " ".into()],
            paste_shards: vec!["b:2".into()],
            ..Default::default()
        };
        assert_eq!(given.required().unwrap(), (vec!["a:1".to_owned()], vec!["b:2".to_owned()]));
        assert_eq!(ShardAddresses::default().required(), Err(AddressError::NoShards));
        let keys_only = ShardAddresses { key_shards: vec!["a:1".into()], paste_shards: vec![], ..Default::default() };
        assert_eq!(keys_only.required(), Err(AddressError::NoPasteShards));
        assert!(AddressError::NoPasteShards.to_string().starts_with("--paste-shards is missing"));
        let pastes_only =
            ShardAddresses { key_shards: vec![" ".into()], paste_shards: vec!["b:2".into()], ..Default::default() };
        assert_eq!(pastes_only.required(), Err(AddressError::NoKeyShards));
        assert!(matches!(channel("http://bad host:1", None), Err(AddressError::BadAddress { .. })));
        assert!(matches!(channel("https://k:1", None), Err(AddressError::BadAddress { .. })));
    }

    #[test]
    fn given_lists_win_over_the_endpoints_file_list_by_list() {
        let written =
            Endpoints { key_shards: vec!["a:1".into()], paste_shards: vec!["b:2".into()], ..Default::default() };
        let given =
            ShardAddresses { key_shards: vec!["c:3".into(), "d:4".into()], paste_shards: vec![], ..Default::default() };
        let chosen = given.or_from(Some(&written));
        assert_eq!(chosen.key_shards, ["c:3", "d:4"]);
        assert_eq!(chosen.paste_shards, ["b:2"]);
    }

    #[test]
    fn endpoints_written_are_read_back_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let endpoints = Endpoints {
            key_shards: vec!["http://127.0.0.1:1".into()],
            paste_shards: vec!["http://127.0.0.1:2".into()],
            http: Some("http://127.0.0.1:3".into()),
            grpc: Some("http://127.0.0.1:4".into()),
            admin: None,
            objects_dir: Some(dir.path().join("objects")),
        };
        endpoints.write(dir.path()).unwrap();
        assert_eq!(Endpoints::read(dir.path()).unwrap(), endpoints);
        std::fs::write(dir.path().join(Endpoints::FILE_NAME), "{").unwrap();
        assert!(matches!(Endpoints::read(dir.path()), Err(EndpointsError::Invalid { .. })));
    }

    #[test]
    fn object_flags_choose_a_directory_a_bucket_or_nothing() {
        let mut args = ObjectStoreArgs { s3_region: "us-east-1".into(), ..Default::default() };
        assert!(args.config().is_none());
        args.s3_bucket = Some("b".into());
        args.s3_endpoint = Some(" ".into());
        assert!(matches!(args.config(), Some(ObjectStoreConfig::S3(ref s)) if s.endpoint.is_none()));
        args.objects_dir = Some("d".into());
        assert!(matches!(args.config(), Some(ObjectStoreConfig::Dir(_))));
    }
}
