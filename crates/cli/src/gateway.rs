//! Flags for the gateway and the object store, and their wiring.

use std::{net::SocketAddr, path::PathBuf, sync::Arc};

use pastebin_core::SystemClock;
use pastebin_gateway::{Gateway, GatewaySettings, SlotMap};
use pastebin_keys::KeyClient;
use pastebin_objects::{LocalDirStore, ObjectStore, S3Settings, S3Store};
use pastebin_pastes::PasteClient;
use pastebin_runtime::grpc::channel;

#[derive(Debug, Clone, clap::Args)]
pub struct GatewayArgs {
    /// HTTP listen address.
    #[arg(long, env = "PASTEBIN_HTTP", default_value = "127.0.0.1:8080")]
    pub http: SocketAddr,
    /// gRPC listen address for the public API.
    #[arg(long, env = "PASTEBIN_GRPC", default_value = "127.0.0.1:50051")]
    pub grpc: SocketAddr,
    /// Base URL of the links handed to clients (default: http://<--http>).
    #[arg(long, env = "PASTEBIN_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// The largest paste, in bytes.
    #[arg(long, env = "PASTEBIN_MAX_CONTENT_BYTES", default_value_t = 1024 * 1024)]
    pub max_content_bytes: usize,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ShardAddresses {
    /// Key service (shard K) addresses, comma-separated, in slot-map order.
    #[arg(long, env = "PASTEBIN_KEY_SHARDS", value_delimiter = ',', required = true)]
    pub key_shards: Vec<String>,
    /// Paste service (shard P) addresses, comma-separated, in slot-map order.
    #[arg(long, env = "PASTEBIN_PASTE_SHARDS", value_delimiter = ',', required = true)]
    pub paste_shards: Vec<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct ObjectStoreArgs {
    /// Keep objects in this directory (the embedded default's choice).
    #[arg(long, env = "PASTEBIN_OBJECTS_DIR", conflicts_with = "s3_bucket")]
    pub objects_dir: Option<PathBuf>,
    /// Keep objects in this S3 bucket (credentials from the standard AWS chain).
    #[arg(long, env = "PASTEBIN_S3_BUCKET")]
    pub s3_bucket: Option<String>,
    /// Endpoint of an S3-compatible server (default: AWS).
    #[arg(long, env = "PASTEBIN_S3_ENDPOINT")]
    pub s3_endpoint: Option<String>,
    #[arg(long, env = "PASTEBIN_S3_REGION", default_value = "us-east-1")]
    pub s3_region: String,
    /// Path-style addressing (most S3-compatible servers need it).
    #[arg(long, env = "PASTEBIN_S3_PATH_STYLE", default_value_t = false)]
    pub s3_path_style: bool,
}

impl ShardAddresses {
    fn normalized(address: &str) -> String {
        if address.contains("://") {
            address.to_owned()
        } else {
            format!("http://{address}")
        }
    }

    pub fn slot_map(&self) -> anyhow::Result<SlotMap> {
        let keys = self
            .key_shards
            .iter()
            .map(|a| Ok(KeyClient::new(channel(&Self::normalized(a))?)))
            .collect::<anyhow::Result<_>>()?;
        let pastes = self
            .paste_shards
            .iter()
            .map(|a| Ok(PasteClient::new(channel(&Self::normalized(a))?)))
            .collect::<anyhow::Result<_>>()?;
        SlotMap::new(keys, pastes)
    }
}

impl ObjectStoreArgs {
    pub async fn open(&self) -> anyhow::Result<Arc<dyn ObjectStore>> {
        match (&self.objects_dir, &self.s3_bucket) {
            (Some(dir), None) => Ok(Arc::new(LocalDirStore::open(dir)?)),
            (None, Some(bucket)) => Ok(Arc::new(
                S3Store::connect(S3Settings {
                    bucket: bucket.clone(),
                    endpoint: self.s3_endpoint.clone(),
                    region: self.s3_region.clone(),
                    force_path_style: self.s3_path_style,
                })
                .await?,
            )),
            _ => anyhow::bail!("choose an object store: --objects-dir DIR or --s3-bucket NAME"),
        }
    }
}

impl GatewayArgs {
    pub fn gateway(&self, slots: SlotMap, objects: Arc<dyn ObjectStore>, http: SocketAddr) -> Gateway {
        let public_url = self.public_url.clone().unwrap_or_else(|| format!("http://{http}"));
        let mut settings = GatewaySettings::new(public_url);
        settings.max_content_bytes = self.max_content_bytes;
        Gateway::new(slots, objects, Arc::new(SystemClock), settings)
    }
}
