//! Flags shared by the subcommands (gateway, sweeper, admin listener) and
//! the wiring they configure. Shard addresses and the object store are the
//! address book's flags (`pastebin_shards`).

use std::{net::SocketAddr, sync::Arc};

use pastebin_core::SystemClock;
use pastebin_gateway::{Gateway, GatewaySettings};
use pastebin_objects::ObjectStore;
use pastebin_shards::{SlotMap, SlotMapCell};

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
    /// How long highlighting one paste may take, in milliseconds, before its
    /// page shows plain text instead (docs/reader-features.md#highlighting).
    #[arg(long, env = "PASTEBIN_HIGHLIGHT_BUDGET_MS", default_value_t = 2_000)]
    pub highlight_budget_ms: u64,
}

impl GatewayArgs {
    pub fn gateway(&self, slots: SlotMapCell, objects: Arc<dyn ObjectStore>, http: SocketAddr) -> Gateway {
        let public_url = self.public_url.clone().unwrap_or_else(|| format!("http://{http}"));
        let mut settings = GatewaySettings::new(public_url);
        settings.max_content_bytes = self.max_content_bytes;
        settings.highlight_budget = std::time::Duration::from_millis(self.highlight_budget_ms);
        Gateway::new(slots, objects, Arc::new(SystemClock), settings)
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct AdminArgs {
    /// Admin listener (`/metrics`, and `/dashboard` where a sweeper runs). Off when unset.
    #[arg(long, env = "PASTEBIN_ADMIN")]
    pub admin: Option<SocketAddr>,
}

impl AdminArgs {
    /// Serves the admin listener until shutdown, or returns at once when none is configured.
    pub async fn serve(&self, state: pastebin_admin::AdminState) -> anyhow::Result<()> {
        serve_admin(self.admin, state).await
    }
}

/// Serves the admin listener on `address`, if any, until shutdown.
pub async fn serve_admin(address: Option<SocketAddr>, state: pastebin_admin::AdminState) -> anyhow::Result<()> {
    match address {
        Some(address) => {
            let listener = crate::bind(address, "admin").await?;
            pastebin_admin::serve(listener, state, pastebin_runtime::shutdown_signal()).await
        }
        None => Ok(()),
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct SweeperArgs {
    /// Seconds between sweeper rounds.
    #[arg(long, env = "PASTEBIN_SWEEP_INTERVAL_SECS", default_value_t = 5)]
    pub sweep_interval_secs: u64,
    /// Pending keys younger than this are never touched (SPEC: 60 s, 30x the create budget).
    #[arg(long, env = "PASTEBIN_RECOVERY_THRESHOLD_SECS", default_value_t = 60)]
    pub recovery_threshold_secs: u64,
    /// Keys per page and ids per P round trip.
    #[arg(long, env = "PASTEBIN_SWEEP_BATCH", default_value_t = 500)]
    pub sweep_batch: u32,
    /// Objects younger than this are never reaped.
    #[arg(long, env = "PASTEBIN_OBJECT_AGE_FLOOR_SECS", default_value_t = 3600)]
    pub object_age_floor_secs: u64,
    /// Seconds between object-reaper scans (each lists the whole store).
    #[arg(long, env = "PASTEBIN_REAP_INTERVAL_SECS", default_value_t = 600)]
    pub reap_interval_secs: u64,
    /// Seconds a tombstone is kept on P before it is purged (at least 93600, 26 h).
    #[arg(long, env = "PASTEBIN_TOMBSTONE_RETENTION_SECS", default_value_t = 7 * 24 * 3600)]
    pub tombstone_retention_secs: u64,
}

impl SweeperArgs {
    pub fn sweeper(&self, slots: SlotMap, objects: Arc<dyn ObjectStore>) -> pastebin_sweeper::Sweeper {
        use std::time::Duration;
        let settings = pastebin_sweeper::SweeperSettings {
            interval: Duration::from_secs(self.sweep_interval_secs.max(1)),
            recovery_threshold: Duration::from_secs(self.recovery_threshold_secs),
            batch_size: self.sweep_batch.clamp(1, 1000),
            object_age_floor: Duration::from_secs(self.object_age_floor_secs),
            reap_interval: Duration::from_secs(self.reap_interval_secs),
            tombstone_retention: Duration::from_secs(self.tombstone_retention_secs)
                .max(pastebin_pastes::MIN_TOMBSTONE_AGE),
            ..Default::default()
        };
        pastebin_sweeper::Sweeper::new(slots, objects, Arc::new(SystemClock), settings)
    }
}
