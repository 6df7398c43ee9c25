//! Where the shards and the object store are: flags, `PASTEBIN_*` variables,
//! or the `endpoints.json` a running `pastebin up` writes into its data
//! directory. Flags and variables win over the data directory.

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

use pastebin_keys::KeyClient;
use pastebin_objects::{LocalDirStore, ObjectStore, S3Settings, S3Store};
use pastebin_pastes::PasteClient;
use pastebin_runtime::grpc::channel;
use pastebin_shards::SlotMap;
use serde::Deserialize;
use tokio::time::Instant;

use crate::CtlError;

#[derive(Debug, Clone, Default, clap::Args)]
pub struct EndpointArgs {
    /// Data directory of a running `pastebin up`: shard addresses from its
    /// `endpoints.json`, objects from its `objects/` directory.
    #[arg(long, env = "PASTEBIN_DATA_DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    /// Key service (K) addresses, comma-separated, in slot-map order.
    #[arg(long, env = "PASTEBIN_KEY_SHARDS", value_delimiter = ',', global = true)]
    pub key_shards: Vec<String>,
    /// Paste service (P) addresses, comma-separated, in slot-map order.
    #[arg(long, env = "PASTEBIN_PASTE_SHARDS", value_delimiter = ',', global = true)]
    pub paste_shards: Vec<String>,
    /// Object directory (reconcile only).
    #[arg(long, env = "PASTEBIN_OBJECTS_DIR", global = true, conflicts_with = "s3_bucket")]
    pub objects_dir: Option<PathBuf>,
    /// S3 bucket of the objects (reconcile only; credentials from the standard AWS chain).
    #[arg(long, env = "PASTEBIN_S3_BUCKET", global = true)]
    pub s3_bucket: Option<String>,
    #[arg(long, env = "PASTEBIN_S3_ENDPOINT", global = true)]
    pub s3_endpoint: Option<String>,
    #[arg(long, env = "PASTEBIN_S3_REGION", default_value = "us-east-1", global = true)]
    pub s3_region: String,
    #[arg(long, env = "PASTEBIN_S3_PATH_STYLE", global = true)]
    pub s3_path_style: bool,
    /// Deadline of each call to a shard or the object store, in seconds.
    #[arg(long, env = "PASTEBIN_CTL_TIMEOUT_SECS", default_value_t = 5, global = true,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub timeout_secs: u64,
}

/// `<data-dir>/endpoints.json`, as `pastebin up` writes it.
#[derive(Debug, Clone, Deserialize)]
pub struct Endpoints {
    pub key_shards: Vec<String>,
    pub paste_shards: Vec<String>,
    #[serde(default)]
    pub objects_dir: Option<PathBuf>,
    #[serde(default)]
    pub admin: Option<String>,
}

impl Endpoints {
    pub fn read(data_dir: &Path) -> Result<Self, CtlError> {
        let path = data_dir.join("endpoints.json");
        let text = std::fs::read_to_string(&path).map_err(|error| {
            CtlError::Usage(format!(
                "cannot read {} ({error}): is `pastebin up --data-dir {}` running?",
                path.display(),
                data_dir.display()
            ))
        })?;
        serde_json::from_str(&text)
            .map_err(|error| CtlError::Usage(format!("{} is not valid: {error}", path.display())))
    }
}

enum ObjectsConfig {
    None,
    Dir(PathBuf),
    S3(S3Settings),
}

/// The shards (and where the objects are) of the deployment a command talks to.
pub struct Deployment {
    pub key_addresses: Vec<String>,
    pub paste_addresses: Vec<String>,
    pub slots: SlotMap,
    pub timeout: Duration,
    objects: ObjectsConfig,
}

fn normalized(address: &str) -> String {
    let address = address.trim();
    if address.contains("://") {
        address.to_owned()
    } else {
        format!("http://{address}")
    }
}

impl Deployment {
    pub fn resolve(args: &EndpointArgs) -> Result<Self, CtlError> {
        let endpoints = args.data_dir.as_deref().map(Endpoints::read).transpose()?;
        let pick = |flags: &[String], from_file: Option<&Vec<String>>| -> Vec<String> {
            let chosen: Vec<String> = flags.iter().filter(|a| !a.trim().is_empty()).cloned().collect();
            if chosen.is_empty() {
                from_file.cloned().unwrap_or_default()
            } else {
                chosen
            }
        };
        let key_addresses: Vec<String> =
            pick(&args.key_shards, endpoints.as_ref().map(|e| &e.key_shards)).iter().map(|a| normalized(a)).collect();
        let paste_addresses: Vec<String> = pick(&args.paste_shards, endpoints.as_ref().map(|e| &e.paste_shards))
            .iter()
            .map(|a| normalized(a))
            .collect();
        if key_addresses.is_empty() || paste_addresses.is_empty() {
            return Err(CtlError::Usage(
                "no shard addresses: pass --key-shards and --paste-shards (or PASTEBIN_KEY_SHARDS and \
                 PASTEBIN_PASTE_SHARDS), or --data-dir of a running `pastebin up`"
                    .into(),
            ));
        }
        let connect = |address: &String| {
            channel(address).map_err(|error| CtlError::Usage(format!("bad shard address {address}: {error}")))
        };
        let keys = key_addresses.iter().map(|a| Ok(KeyClient::new(connect(a)?))).collect::<Result<_, CtlError>>()?;
        let pastes =
            paste_addresses.iter().map(|a| Ok(PasteClient::new(connect(a)?))).collect::<Result<_, CtlError>>()?;
        let slots = SlotMap::new(keys, pastes).map_err(|error| CtlError::Usage(error.to_string()))?;
        let objects = match (&args.objects_dir, &args.s3_bucket) {
            (Some(dir), _) => ObjectsConfig::Dir(dir.clone()),
            (None, Some(bucket)) => ObjectsConfig::S3(S3Settings {
                bucket: bucket.clone(),
                endpoint: args.s3_endpoint.clone().filter(|e| !e.is_empty()),
                region: args.s3_region.clone(),
                force_path_style: args.s3_path_style,
            }),
            (None, None) => match (&args.data_dir, endpoints.as_ref().and_then(|e| e.objects_dir.clone())) {
                (_, Some(dir)) => ObjectsConfig::Dir(dir),
                (Some(data_dir), None) => ObjectsConfig::Dir(data_dir.join("objects")),
                (None, None) => ObjectsConfig::None,
            },
        };
        Ok(Self {
            key_addresses,
            paste_addresses,
            slots,
            timeout: Duration::from_secs(args.timeout_secs.max(1)),
            objects,
        })
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
        match &self.objects {
            ObjectsConfig::None => Err(CtlError::Usage(
                "this command reads the object store: pass --objects-dir DIR or --s3-bucket NAME (or --data-dir)"
                    .into(),
            )),
            ObjectsConfig::Dir(dir) => {
                if !dir.is_dir() {
                    return Err(CtlError::Usage(format!("object directory {} does not exist", dir.display())));
                }
                Ok(Arc::new(LocalDirStore::open(dir).map_err(|error| CtlError::Unreachable(error.to_string()))?))
            }
            ObjectsConfig::S3(settings) => Ok(Arc::new(
                S3Store::connect(settings.clone())
                    .await
                    .map_err(|error| CtlError::Unreachable(format!("object store: {error}")))?,
            )),
        }
    }
}

/// The object store of a command that must not touch one (`recover` builds
/// a sweeper, whose one-key recovery never reads objects): every call fails.
pub(crate) struct NoObjectStore;

#[async_trait::async_trait]
impl ObjectStore for NoObjectStore {
    async fn put(
        &self,
        _: &str,
        _: bytes::Bytes,
    ) -> Result<pastebin_objects::PutOutcome, pastebin_objects::ObjectError> {
        Err(Self::refused())
    }
    async fn get(&self, _: &str) -> Result<Option<bytes::Bytes>, pastebin_objects::ObjectError> {
        Err(Self::refused())
    }
    async fn delete(&self, _: &str) -> Result<(), pastebin_objects::ObjectError> {
        Err(Self::refused())
    }
    async fn list(
        &self,
        _: Option<&str>,
        _: usize,
    ) -> Result<Vec<pastebin_objects::ObjectInfo>, pastebin_objects::ObjectError> {
        Err(Self::refused())
    }
}

impl NoObjectStore {
    fn refused() -> pastebin_objects::ObjectError {
        pastebin_objects::ObjectError::Refused("pastebin ctl opened no object store for this command".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(data_dir: Option<PathBuf>) -> EndpointArgs {
        EndpointArgs { data_dir, s3_region: "us-east-1".into(), timeout_secs: 5, ..EndpointArgs::default() }
    }

    #[tokio::test]
    async fn a_data_dir_supplies_shards_and_objects() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("endpoints.json"),
            r#"{"key_shards":["http://127.0.0.1:1"],"paste_shards":["127.0.0.1:2"],"http":"x","grpc":"y"}"#,
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("objects")).unwrap();
        let deployment = Deployment::resolve(&args(Some(dir.path().into()))).unwrap();
        assert_eq!(deployment.key_addresses, ["http://127.0.0.1:1"]);
        assert_eq!(deployment.paste_addresses, ["http://127.0.0.1:2"]);
        assert!(deployment.object_store().await.is_ok());
    }

    #[tokio::test]
    async fn flags_win_over_the_data_dir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("endpoints.json"), r#"{"key_shards":["a:1"],"paste_shards":["b:2"]}"#).unwrap();
        let mut args = args(Some(dir.path().into()));
        args.key_shards = vec!["c:3".into(), "d:4".into()];
        let deployment = Deployment::resolve(&args).unwrap();
        assert_eq!(deployment.key_addresses, ["http://c:3", "http://d:4"]);
        assert_eq!(deployment.paste_addresses, ["http://b:2"]);
    }

    #[tokio::test]
    async fn nothing_configured_is_a_usage_error() {
        assert!(matches!(Deployment::resolve(&args(None)), Err(CtlError::Usage(_))));
        let missing = tempfile::tempdir().unwrap();
        let error = Deployment::resolve(&args(Some(missing.path().into()))).err().unwrap();
        assert!(matches!(error, CtlError::Usage(ref m) if m.contains("endpoints.json")), "{error}");
    }

    #[tokio::test]
    async fn no_object_store_configured_is_a_usage_error() {
        let mut args = args(None);
        args.key_shards = vec!["a:1".into()];
        args.paste_shards = vec!["b:2".into()];
        let deployment = Deployment::resolve(&args).unwrap();
        assert!(matches!(deployment.object_store().await, Err(CtlError::Usage(_))));
    }
}
