//! Where the shards and the object store are: flags, `PASTEBIN_*` variables,
//! or the `endpoints.json` a running `pastebin up` writes into its data
//! directory. Flags and variables win over the data directory. The shards
//! are asked which slots they own; one that does not answer is reported,
//! and calls routed to it fail as unreachable.

use std::{path::PathBuf, sync::Arc, time::Duration};

use pastebin_keys::KeyClient;
use pastebin_objects::ObjectStore;
use pastebin_pastes::PasteClient;
use pastebin_runtime::tls::TlsArgs;
use pastebin_shards::{
    discover, DiscoveryError, Endpoints, ObjectStoreArgs, ObjectStoreConfig, Patience, ShardAddresses, SlotMap,
    DEFAULT_DATA_DIR,
};
use tokio::time::Instant;

use crate::CtlError;

#[derive(Debug, Clone, Default, clap::Args)]
pub struct EndpointArgs {
    /// Data directory of a running `pastebin up`: shard addresses from its
    /// `endpoints.json`, objects from its `objects/` directory. Without it and
    /// without shard addresses, `./pastebin-data` if it exists.
    #[arg(long, env = "PASTEBIN_DATA_DIR", global = true, help_heading = pastebin_runtime::help::SHARDS)]
    pub data_dir: Option<PathBuf>,
    #[command(flatten)]
    pub shards: ShardAddresses,
    /// The object store (reconcile only).
    #[command(flatten)]
    pub objects: ObjectStoreArgs,
    /// Deadline of each call to a shard or the object store, in seconds.
    #[arg(long, env = "PASTEBIN_CTL_TIMEOUT_SECS", default_value_t = 5, global = true,
          value_parser = clap::value_parser!(u64).range(1..=3600), help_heading = pastebin_runtime::help::LIMITS)]
    pub timeout_secs: u64,
    /// ctl's own identity towards K and P.
    #[command(flatten)]
    pub tls: TlsArgs,
    #[command(flatten)]
    pub topology_tls: pastebin_runtime::tls::TopologyTlsArgs,
}

/// What the arguments and the data directory say, before any shard is asked.
#[derive(Debug)]
struct Chosen {
    shards: ShardAddresses,
    objects: Option<ObjectStoreConfig>,
    /// The data directory whose `endpoints.json` named the shards.
    up_dir: Option<PathBuf>,
}

impl Chosen {
    fn from_args(args: &EndpointArgs) -> Result<Self, CtlError> {
        let data_dir = args.data_dir.clone().or_else(|| default_data_dir(&args.shards));
        let endpoints =
            data_dir.as_deref().map(Endpoints::read).transpose().map_err(|error| CtlError::Usage(error.to_string()))?;
        let shards = args.shards.or_from(endpoints.as_ref());
        let given = args.shards.key_shards.iter().chain(&args.shards.paste_shards).any(|a| !a.trim().is_empty());
        let up_dir = data_dir.clone().filter(|_| endpoints.is_some() && !given);
        shards
            .required()
            .map_err(|error| CtlError::Usage(format!("{error}, or --data-dir of a running `pastebin up`")))?;
        let written_dir = endpoints.and_then(|e| e.objects_dir);
        let objects = args.objects.config().or_else(|| {
            written_dir.or_else(|| data_dir.as_ref().map(|d| d.join("objects"))).map(ObjectStoreConfig::Dir)
        });
        Ok(Self { shards, objects, up_dir })
    }
}

/// The shard lists the command was given, read as every command reads them
/// (flags, `PASTEBIN_*` variables set by hand or by `PASTEBIN_CONFIG`, or the
/// data directory's `endpoints.json`), before any shard is asked: the lists
/// the gateways and sweepers are given.
pub(crate) fn listed_shards(args: &EndpointArgs) -> Result<ShardAddresses, CtlError> {
    Chosen::from_args(args).map(|chosen| chosen.shards)
}

/// `./pastebin-data`, where `pastebin up` writes by default, when no shard
/// address is given and it exists: `ctl` beside a running `up` needs no flags.
fn default_data_dir(shards: &ShardAddresses) -> Option<PathBuf> {
    let given = shards.key_shards.iter().chain(&shards.paste_shards).any(|address| !address.trim().is_empty());
    let dir = PathBuf::from(DEFAULT_DATA_DIR);
    (!given && dir.is_dir()).then_some(dir)
}

/// The shards (and where the objects are) of the deployment a command talks to.
pub struct Deployment {
    pub slots: SlotMap,
    pub timeout: Duration,
    objects: Option<ObjectStoreConfig>,
}

impl Deployment {
    pub async fn resolve(args: &EndpointArgs) -> Result<Self, CtlError> {
        let chosen = Chosen::from_args(args)?;
        let timeout = Duration::from_secs(args.timeout_secs.max(1));
        // Every discovery failure is a configuration to fix (a bad address, a
        // shard of the other kind, overlapping or missing ranges); a shard
        // that does not answer is not one: its calls fail as unreachable.
        let tls = args.tls.load().map_err(|error| CtlError::Usage(error.to_string()))?;
        let slots = discover(&chosen.shards, tls.as_ref(), Patience::AskOnce, timeout)
            .await
            .map_err(|error: DiscoveryError| CtlError::Usage(error.to_string()))?;
        if let (Some(dir), true) = (&chosen.up_dir, slots.none_answered()) {
            return Err(CtlError::Unreachable(format!(
                "nothing answers at the shards {}/endpoints.json names: is `pastebin up` running? Start it with \
                 --data-dir {}, then run this again",
                dir.display(),
                dir.display()
            )));
        }
        Ok(Self { slots, timeout, objects: chosen.objects })
    }

    pub fn key_addresses(&self) -> &[String] {
        self.slots.key_addresses()
    }

    pub fn paste_addresses(&self) -> &[String] {
        self.slots.paste_addresses()
    }

    /// How K shard `shard` is named to people: `ADDRESS (slots 0-127)`.
    pub fn key_name(&self, shard: usize) -> String {
        self.slots.key_shard_name(shard)
    }

    /// How P shard `shard` is named to people: `ADDRESS (slots 128-255)`.
    pub fn paste_name(&self, shard: usize) -> String {
        self.slots.paste_shard_name(shard)
    }

    /// The deadline for a call started now.
    pub fn deadline(&self) -> Instant {
        Instant::now() + self.timeout
    }

    pub fn keys(&self, shard: usize) -> KeyClient {
        self.slots.key_shards()[shard].with_deadline(self.deadline())
    }

    pub fn pastes(&self, shard: usize) -> PasteClient {
        self.slots.paste_shards()[shard].with_deadline(self.deadline())
    }

    /// Opens the object store, if one was configured.
    pub async fn object_store(&self) -> Result<Arc<dyn ObjectStore>, CtlError> {
        let config = self.objects.as_ref().ok_or_else(|| {
            CtlError::Usage(
                "this command reads the object store: pass --objects-dir DIR or --s3-bucket NAME (or --data-dir)"
                    .into(),
            )
        })?;
        if let ObjectStoreConfig::Dir(dir) = config {
            if !dir.is_dir() {
                return Err(CtlError::Usage(format!("object directory {} does not exist", dir.display())));
            }
        }
        config.open().await.map_err(|error| CtlError::Unreachable(format!("object store: {error:#}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(data_dir: Option<PathBuf>) -> EndpointArgs {
        EndpointArgs {
            data_dir,
            objects: ObjectStoreArgs { s3_region: "us-east-1".into(), ..Default::default() },
            timeout_secs: 5,
            ..EndpointArgs::default()
        }
    }

    #[test]
    fn a_data_dir_supplies_shards_and_objects() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("endpoints.json"),
            r#"{"key_shards":["http://127.0.0.1:1"],"paste_shards":["127.0.0.1:2"],"http":"x","grpc":"y"}"#,
        )
        .unwrap();
        let chosen = Chosen::from_args(&args(Some(dir.path().into()))).unwrap();
        assert_eq!(chosen.shards.key_shards, ["http://127.0.0.1:1"]);
        assert_eq!(chosen.shards.paste_shards, ["127.0.0.1:2"]);
        assert!(matches!(chosen.objects, Some(ObjectStoreConfig::Dir(ref d)) if d == &dir.path().join("objects")));
    }

    #[test]
    fn flags_win_over_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("endpoints.json"), r#"{"key_shards":["a:1"],"paste_shards":["b:2"]}"#).unwrap();
        let mut args = args(Some(dir.path().into()));
        args.shards.key_shards = vec!["c:3".into(), "d:4".into()];
        let chosen = Chosen::from_args(&args).unwrap();
        assert_eq!(chosen.shards.key_shards, ["c:3", "d:4"]);
        assert_eq!(chosen.shards.paste_shards, ["b:2"]);
    }

    #[test]
    fn nothing_configured_is_a_usage_error() {
        assert!(matches!(Chosen::from_args(&args(None)), Err(CtlError::Usage(_))));
        let missing = tempfile::tempdir().unwrap();
        let error = Chosen::from_args(&args(Some(missing.path().into()))).err().unwrap();
        assert!(matches!(error, CtlError::Usage(ref m) if m.contains("endpoints.json")), "{error}");
    }

    #[tokio::test]
    async fn no_object_store_configured_is_a_usage_error() {
        let mut args = args(None);
        args.shards = ShardAddresses {
            key_shards: vec!["127.0.0.1:1".into()],
            paste_shards: vec!["127.0.0.1:2".into()],
            ..Default::default()
        };
        args.timeout_secs = 1;
        let deployment = Deployment::resolve(&args).await.unwrap();
        assert!(matches!(deployment.object_store().await, Err(CtlError::Usage(_))));
    }
}
