//! Flags shared by the subcommands (gateway, sweeper, admin listener) and
//! the wiring they configure. Shard addresses and the object store are the
//! address book's flags (`pastebin_shards`).

use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

use pastebin_core::{from_millis, to_millis, LostCommits, OwnedSlots, RandomMinter, SystemClock};
use pastebin_edge::{
    grpc::{ClientLimits, GrpcLimits},
    http::HttpLimits,
};
use pastebin_gateway::{Gateway, GatewaySettings, RateLimit};
use pastebin_objects::ObjectStore;
use pastebin_runtime::help;
use pastebin_shards::{SlotMap, SlotMapCell};
use pastebin_slots::shard_slots::ShardSlots;

#[derive(Debug, Clone, clap::Args)]
pub struct GatewayArgs {
    /// HTTP listen address.
    #[arg(long, help_heading = help::LISTENERS, env = "PASTEBIN_HTTP", default_value = "127.0.0.1:8080",
          value_parser = listen_address)]
    pub http: SocketAddr,
    /// gRPC listen address for the public API.
    #[arg(long, help_heading = help::LISTENERS, env = "PASTEBIN_GRPC", default_value = "127.0.0.1:50051",
          value_parser = listen_address)]
    pub grpc: SocketAddr,
    /// Base URL of the links handed to clients (default: http://<--http>; required when --http is
    /// 0.0.0.0 or [::], which no browser can open).
    #[arg(long, help_heading = help::LISTENERS, env = "PASTEBIN_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// The largest paste, in bytes.
    #[arg(long, help_heading = help::LIMITS, env = "PASTEBIN_MAX_CONTENT_BYTES", default_value_t = 1024 * 1024)]
    pub max_content_bytes: usize,
    /// How long highlighting one paste may take, in milliseconds, before its
    /// page shows plain text instead (docs/reader-features.md#highlighting).
    #[arg(long, help_heading = help::READING, env = "PASTEBIN_HIGHLIGHT_BUDGET_MS", default_value_t = 2_000)]
    pub highlight_budget_ms: u64,
    /// The budget of one create, read or delete, in milliseconds: every call
    /// inside it carries what is left (docs/design.md#saga). Past it the
    /// answer is 503 and a create's retry rolls the same key forward.
    #[arg(long, help_heading = help::LIMITS, env = "PASTEBIN_REQUEST_BUDGET_MS", default_value_t = pastebin_core::CREATE_BUDGET.as_millis() as u64)]
    pub request_budget_ms: u64,
    /// Run every create as the saga, even where one colocated shard holds
    /// both kinds of its slot and could take it in one commit
    /// (docs/design.md#the-colocated-create): to compare the two on one
    /// database, or to behave as a gateway from before colocated shards.
    #[arg(long, help_heading = help::SHARDS, env = "PASTEBIN_SAGA_ONLY")]
    pub saga_only: bool,
    /// Bytes of pastes kept in the gateway's read cache (0 turns it off).
    #[arg(long, help_heading = help::READING, env = "PASTEBIN_READ_CACHE_BYTES", default_value_t = 64 * 1024 * 1024)]
    pub read_cache_bytes: u64,
    /// Creates in flight at once per key shard; past it creates get 503 + Retry-After at once
    /// [default: 64; 32 in `pastebin up`].
    #[arg(long, help_heading = help::LIMITS, env = "PASTEBIN_CREATES_IN_FLIGHT_PER_SHARD")]
    pub creates_in_flight_per_shard: Option<usize>,
    /// Bytes that must stay free on the storage's filesystem (`up`'s data directory, the gateway's
    /// --objects-dir); below it creates are refused with 507 while reads and deletes go on. 0: off.
    #[arg(long, help_heading = help::LIMITS, env = "PASTEBIN_MIN_FREE_BYTES",
          default_value_t = pastebin_gateway::DEFAULT_MIN_FREE_BYTES)]
    pub min_free_bytes: u64,
    /// Creates allowed per client address, as N/s, N/min or N/hour (e.g. 30/min), or `off`.
    #[arg(long, help_heading = help::ABUSE, env = "PASTEBIN_CREATE_RATE_LIMIT", default_value = "60/min")]
    pub create_rate_limit: RateLimitOrOff,
    /// Deletes (API, gRPC and the delete form) allowed per client address, as N/s, N/min or N/hour.
    #[arg(long, help_heading = help::ABUSE, env = "PASTEBIN_DELETE_RATE_LIMIT", default_value = "300/min")]
    pub delete_rate_limit: RateLimit,
    /// Reports (API, gRPC and the report form) allowed per client address, as N/s, N/min or N/hour.
    #[arg(long, help_heading = help::ABUSE, env = "PASTEBIN_REPORT_RATE_LIMIT", default_value = "20/hour")]
    pub report_rate_limit: RateLimit,
    /// A proxy (IP or CIDR, repeatable or comma-separated) whose X-Forwarded-For names the client.
    #[arg(long, help_heading = help::ABUSE, env = "PASTEBIN_TRUSTED_PROXY", value_delimiter = ',', value_parser = parse_proxy)]
    pub trusted_proxy: Vec<ipnet::IpNet>,
    /// Refuse creates without a valid `Authorization: Bearer` create token from --create-tokens-file.
    #[arg(long, help_heading = help::ABUSE, env = "PASTEBIN_REQUIRE_CREATE_TOKEN", requires = "create_tokens_file")]
    pub require_create_token: bool,
    /// The create tokens file (`pastebin ctl tokens add|list|revoke --file PATH`); re-read when it changes.
    #[arg(long, help_heading = help::ABUSE, env = "PASTEBIN_CREATE_TOKENS_FILE")]
    pub create_tokens_file: Option<PathBuf>,
    #[command(flatten)]
    pub expiry: ExpiryArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
}

/// The operator's expiry policy (docs/configuration.md#expiry-policy).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = help::EXPIRY)]
pub struct ExpiryArgs {
    /// The only lifetimes a create may ask for, comma-separated (e.g. 10m,1h,1d,1w,30d); the
    /// new-paste page offers exactly these. Unset: any whole number of seconds from 60 to --max-expiry.
    #[arg(long, env = "PASTEBIN_EXPIRY_CHOICES", value_delimiter = ',', value_parser = pastebin_core::parse_lifetime)]
    pub expiry_choices: Vec<u64>,
    /// The lifetime of a create that names none [default: 30d, or the longest choice up to 30d].
    #[arg(long, env = "PASTEBIN_DEFAULT_EXPIRY", value_parser = pastebin_core::parse_lifetime)]
    pub default_expiry: Option<u64>,
    /// The longest lifetime a create may ask for (at most 365d).
    #[arg(long, env = "PASTEBIN_MAX_EXPIRY", value_parser = pastebin_core::parse_lifetime, default_value = "365d")]
    pub max_expiry: u64,
    /// Let a create ask for a paste that never expires (`expires_in_seconds: 0`); such a paste
    /// stays until it is deleted or taken down.
    #[arg(long, env = "PASTEBIN_ALLOW_NEVER_EXPIRE")]
    pub allow_never_expire: bool,
}

impl ExpiryArgs {
    /// The policy, or the rule that contradicts another (named by its flag).
    pub fn policy(&self) -> anyhow::Result<pastebin_core::ExpiryPolicy> {
        let choices = (!self.expiry_choices.is_empty()).then(|| self.expiry_choices.clone());
        pastebin_core::ExpiryPolicy::new(choices, self.default_expiry, Some(self.max_expiry), self.allow_never_expire)
            .map_err(|rule| {
                anyhow::anyhow!(
                    "{rule}: check --expiry-choices, --default-expiry, --max-expiry and --allow-never-expire"
                )
            })
    }
}

impl GatewayArgs {
    /// The gateway these flags describe; `creates_in_flight_per_shard` is the
    /// shedding limit when the flag is not given, and `storage` the
    /// directories whose free space --min-free-bytes keeps.
    pub fn gateway(
        &self,
        slots: SlotMapCell,
        objects: Arc<dyn ObjectStore>,
        http: SocketAddr,
        creates_in_flight_per_shard: usize,
        storage: Vec<PathBuf>,
    ) -> anyhow::Result<Gateway> {
        let mut settings = GatewaySettings::new(self.public_url(http)?);
        settings.max_content_bytes = self.max_content_bytes;
        settings.read_cache_bytes = self.read_cache_bytes;
        settings.one_commit_creates = !self.saga_only;
        settings.request_budget = std::time::Duration::from_millis(self.request_budget_ms);
        settings.creates_in_flight_per_shard = self.creates_in_flight_per_shard.unwrap_or(creates_in_flight_per_shard);
        settings.create_rate_limit = self.create_rate_limit.0;
        settings.delete_rate_limit = Some(self.delete_rate_limit);
        settings.create_tokens_file = self.create_tokens_file.clone().filter(|_| self.require_create_token);
        settings.report_rate_limit = Some(self.report_rate_limit);
        settings.expiry = self.expiry.policy()?;
        settings.watched_storage = if self.min_free_bytes == 0 { Vec::new() } else { storage };
        settings.min_free_bytes = self.min_free_bytes;
        Ok(Gateway::new(slots, objects, Arc::new(SystemClock), Arc::new(RandomMinter), settings))
    }

    /// The base URL of the links handed out: `--public-url`, or the HTTP
    /// listener's own address. A listener on every interface (0.0.0.0,
    /// [::]) has no address a browser can open, so it needs the flag: a
    /// gateway refuses to start rather than hand out links nobody can follow.
    pub fn public_url(&self, http: SocketAddr) -> anyhow::Result<String> {
        match &self.public_url {
            Some(url) => Ok(url.clone()),
            None if http.ip().is_unspecified() => anyhow::bail!(
                "--http {http} listens on every interface, and without --public-url the links handed out would \
                 name http://{http}, which no browser can open: give --public-url with the address users reach \
                 (e.g. --public-url https://paste.example.com), or listen on one address (e.g. --http 127.0.0.1:{})",
                http.port()
            ),
            None => Ok(format!("http://{http}")),
        }
    }

    /// The public listener's routes: the gateway's API and the browser's pages over it.
    pub fn public_routes(&self, gateway: &Gateway) -> axum::Router {
        let pages = pastebin_pages::PageSettings { highlight_budget: Duration::from_millis(self.highlight_budget_ms) };
        pastebin_gateway::api_router(gateway.clone()).merge(pastebin_pages::page_router(gateway.clone(), pages))
    }

    /// The public HTTP listener's limits, with the proxies whose
    /// `X-Forwarded-For` names the client every per-client limit counts.
    pub fn http_limits(&self) -> HttpLimits {
        HttpLimits {
            trusted_proxies: self.trusted_proxy.clone(),
            max_body_bytes: pastebin_gateway::largest_body_bytes(self.max_content_bytes),
            ..self.limits.http()
        }
    }

    /// The public gRPC listener's limits: the same shares per client address
    /// as the HTTP listener's (connections, calls, message bytes in flight),
    /// counted by the same rule, and the clock of its connections (the
    /// preface and idle timeouts, the maximum age, the send timeout).
    pub fn public_grpc_limits(&self) -> GrpcLimits {
        let limits = &self.limits;
        let per_client = ClientLimits {
            connections: usize::try_from(limits.max_connections_per_client).unwrap_or(usize::MAX),
            streams: usize::try_from(limits.max_requests_in_flight_per_client).unwrap_or(usize::MAX),
            message_bytes: limits.max_body_bytes_per_client,
            trusted_proxies: self.trusted_proxy.clone(),
        };
        GrpcLimits {
            per_client: Some(per_client),
            send_timeout: Some(Duration::from_secs(limits.grpc_send_timeout_secs)),
            preface_timeout: Some(Duration::from_secs(limits.grpc_preface_timeout_secs)),
            idle_timeout: Some(Duration::from_secs(limits.grpc_idle_timeout_secs)),
            max_connection_age: Some(Duration::from_secs(limits.grpc_max_connection_age_secs)),
            ..limits.grpc()
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = help::TELEMETRY)]
pub struct AdminArgs {
    /// Admin listener (`/metrics`, and `/dashboard` where a sweeper runs). Off when unset.
    #[arg(long, env = "PASTEBIN_ADMIN", value_parser = listen_address)]
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
            let listener = crate::bind(address, "admin", "--admin").await?;
            pastebin_admin::serve(listener, state, HttpLimits::default(), pastebin_runtime::shutdown_signal()).await
        }
        None => Ok(()),
    }
}

/// An address to listen on, IP:PORT; a refusal shows the forms to write
/// (`:8080`, as other servers take it, names no IP).
pub(crate) fn listen_address(raw: &str) -> Result<SocketAddr, String> {
    raw.trim().parse().map_err(|_| match raw.trim().strip_prefix(':') {
        Some(port) => {
            format!("`{raw}` names no IP: write 0.0.0.0:{port} (every interface) or 127.0.0.1:{port} (this host only)")
        }
        None => format!("`{raw}` is not IP:PORT, e.g. 127.0.0.1:8080, 0.0.0.0:8080 or [::]:8080"),
    })
}

/// A rate limit that an operator may turn off (`--create-rate-limit off`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitOrOff(pub Option<RateLimit>);

impl std::str::FromStr for RateLimitOrOff {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, String> {
        if raw.trim().eq_ignore_ascii_case("off") {
            return Ok(Self(None));
        }
        raw.parse().map(|limit| Self(Some(limit))).map_err(|error| format!("{error}, or off"))
    }
}

/// A trusted proxy: one address (`10.0.0.7`) or a network (`10.0.0.0/8`).
fn parse_proxy(raw: &str) -> Result<ipnet::IpNet, String> {
    let raw = raw.trim();
    raw.parse::<ipnet::IpNet>()
        .or_else(|_| raw.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| format!("`{raw}` is neither an IP address nor a CIDR network"))
}

/// The longest duration any flag accepts: 100 years. Past it a duration is
/// a mistake, and refusing it at parse time keeps every later time
/// computation far from overflow (docs/design.md#edge).
pub const MAX_FLAG_SECONDS: u64 = 100 * 365 * 24 * 3600;

/// A whole number of seconds up to [`MAX_FLAG_SECONDS`].
fn seconds_flag() -> clap::builder::RangedU64ValueParser {
    clap::value_parser!(u64).range(0..=MAX_FLAG_SECONDS)
}

/// A timeout in seconds: at least 1, at most a day.
fn timeout_flag() -> clap::builder::RangedU64ValueParser {
    clap::value_parser!(u64).range(1..=24 * 3600)
}

/// How much one listener takes before it refuses (docs/configuration.md#limits).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = help::LIMITS)]
pub struct LimitArgs {
    /// Seconds to receive a request's headers; also how long an idle kept-alive connection stays open.
    #[arg(long, env = "PASTEBIN_HEADER_READ_TIMEOUT_SECS", default_value_t = 10, value_parser = timeout_flag())]
    pub header_read_timeout_secs: u64,
    /// Seconds from a request's headers to the end of its body (a total, not per piece) before 408.
    #[arg(long, env = "PASTEBIN_BODY_READ_TIMEOUT_SECS", default_value_t = 10, value_parser = timeout_flag())]
    pub body_read_timeout_secs: u64,
    /// Seconds a write of an answer may wait for the client to read it; then the connection is closed.
    #[arg(long, env = "PASTEBIN_SEND_TIMEOUT_SECS", default_value_t = 10, value_parser = timeout_flag())]
    pub send_timeout_secs: u64,
    /// Bytes per second a client must read an answer at while the server waits to send it; slower,
    /// and the time it keeps writes waiting adds up to the send timeout and closes the connection. 0: no minimum.
    #[arg(long, env = "PASTEBIN_SEND_MIN_RATE_BYTES", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000_000))]
    pub send_min_rate_bytes: u64,
    /// Seconds from a request's headers to its whole answer before it is answered 408.
    #[arg(long, env = "PASTEBIN_REQUEST_TIMEOUT_SECS", default_value_t = 30, value_parser = timeout_flag())]
    pub request_timeout_secs: u64,
    /// Open HTTP connections per listener; more are closed on accept.
    #[arg(long, env = "PASTEBIN_MAX_CONNECTIONS", default_value_t = pastebin_edge::http::DEFAULT_MAX_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// HTTP requests handled at once per listener; more are answered 503 with Retry-After.
    #[arg(long, env = "PASTEBIN_MAX_REQUESTS_IN_FLIGHT",
          default_value_t = pastebin_edge::http::DEFAULT_MAX_REQUESTS_IN_FLIGHT as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_requests_in_flight: u64,
    /// Open connections from one client address (IPv6: per /64) on each public listener, HTTP and
    /// gRPC; more are closed on accept.
    #[arg(long, env = "PASTEBIN_MAX_CONNECTIONS_PER_CLIENT",
          default_value_t = pastebin_edge::client_shares::DEFAULT_CONNECTIONS_PER_CLIENT as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections_per_client: u64,
    /// HTTP requests handled, and gRPC calls open, at once for one client address; more are answered
    /// 503 with Retry-After (RESOURCE_EXHAUSTED with retry-after over gRPC).
    #[arg(long, env = "PASTEBIN_MAX_REQUESTS_IN_FLIGHT_PER_CLIENT",
          default_value_t = pastebin_edge::client_shares::DEFAULT_REQUESTS_PER_CLIENT as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_requests_in_flight_per_client: u64,
    /// Request-body (gRPC: request-message) bytes in flight for one client address, as declared; past
    /// it a body is answered 503 (RESOURCE_EXHAUSTED) before it is read.
    #[arg(long, env = "PASTEBIN_MAX_BODY_BYTES_PER_CLIENT",
          default_value_t = pastebin_edge::client_shares::DEFAULT_BODY_BYTES_PER_CLIENT)]
    pub max_body_bytes_per_client: usize,
    /// Request-body bytes the whole process holds in flight, HTTP and gRPC together; past it new
    /// bodies are answered 503 (UNAVAILABLE) before they are read.
    #[arg(long, env = "PASTEBIN_BODY_BUDGET_BYTES",
          default_value_t = pastebin_edge::body_budget::DEFAULT_BODY_BUDGET_BYTES)]
    pub body_budget_bytes: usize,
    /// Bytes the answers not yet sent may hold in the whole process, HTTP and gRPC together (a read
    /// is charged its content's size until its answer is sent); past it reads are answered 503
    /// (UNAVAILABLE) with Retry-After.
    #[arg(long, env = "PASTEBIN_ANSWER_BUDGET_BYTES",
          default_value_t = pastebin_edge::answer_budget::DEFAULT_ANSWER_BUDGET_BYTES)]
    pub answer_budget_bytes: usize,
    /// Bytes of the answer budget one client address may hold, HTTP and gRPC together; past it its
    /// reads are answered 503 (RESOURCE_EXHAUSTED) with Retry-After.
    #[arg(long, env = "PASTEBIN_MAX_ANSWER_BYTES_PER_CLIENT",
          default_value_t = pastebin_edge::answer_budget::DEFAULT_ANSWER_BYTES_PER_CLIENT)]
    pub max_answer_bytes_per_client: usize,
    /// gRPC connections open at once per listener; one more is closed as soon as it is accepted.
    #[arg(long, env = "PASTEBIN_GRPC_MAX_CONNECTIONS",
          default_value_t = pastebin_edge::grpc::DEFAULT_MAX_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub grpc_max_connections: u64,
    /// gRPC calls (HTTP/2 streams) open at once on one connection.
    #[arg(long, env = "PASTEBIN_GRPC_MAX_CONCURRENT_STREAMS", default_value_t = 100,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub grpc_max_concurrent_streams: u32,
    /// Seconds between gRPC keepalive pings; a peer that does not answer one within as long is dropped.
    #[arg(long, env = "PASTEBIN_GRPC_KEEPALIVE_SECS", default_value_t = 30, value_parser = timeout_flag())]
    pub grpc_keepalive_secs: u64,
    /// Seconds a gRPC call without its own deadline may take.
    #[arg(long, env = "PASTEBIN_GRPC_CALL_TIMEOUT_SECS", default_value_t = 30, value_parser = timeout_flag())]
    pub grpc_call_timeout_secs: u64,
    /// Seconds a gRPC request message may take to arrive (from the call's start, then from each
    /// message's first byte); later, the call ends DEADLINE_EXCEEDED and its bytes are given back.
    #[arg(long, env = "PASTEBIN_GRPC_MESSAGE_DEADLINE_SECS", default_value_t = 5, value_parser = timeout_flag())]
    pub grpc_message_deadline_secs: u64,
    /// Seconds an answer on the public gRPC listener may wait for its client to take what it handed
    /// over (its headers, a message); later, its connection is closed. A stream waiting for its own
    /// next message (a health watch) is not waiting on the client.
    #[arg(long, env = "PASTEBIN_GRPC_SEND_TIMEOUT_SECS", default_value_t = 60, value_parser = timeout_flag())]
    pub grpc_send_timeout_secs: u64,
    /// Seconds a new connection to the public gRPC listener has, from its accept, to open its first
    /// call (TLS handshake, HTTP/2 preface, the call's headers); later, it is closed.
    #[arg(long, env = "PASTEBIN_GRPC_PREFACE_TIMEOUT_SECS", default_value_t = 10, value_parser = timeout_flag())]
    pub grpc_preface_timeout_secs: u64,
    /// Seconds a connection to the public gRPC listener may stay open with no call open (pings do
    /// not count); later, it is closed.
    #[arg(long, env = "PASTEBIN_GRPC_IDLE_TIMEOUT_SECS", default_value_t = 300, value_parser = timeout_flag())]
    pub grpc_idle_timeout_secs: u64,
    /// Seconds after which a connection to the public gRPC listener is told to go (GOAWAY: its calls
    /// finish, new ones take a new connection); --grpc-call-timeout-secs later it is closed.
    #[arg(long, env = "PASTEBIN_GRPC_MAX_CONNECTION_AGE_SECS", default_value_t = 3600, value_parser = timeout_flag())]
    pub grpc_max_connection_age_secs: u64,
    /// Bytes of one gRPC request's headers (HTTP/2 SETTINGS_MAX_HEADER_LIST_SIZE).
    #[arg(long, env = "PASTEBIN_GRPC_MAX_HEADER_LIST_BYTES", default_value_t = 16 * 1024,
          value_parser = clap::value_parser!(u32).range(1024..=1024 * 1024))]
    pub grpc_max_header_list_bytes: u32,
    /// HTTP/2 streams a gRPC client may reset before they are served (rapid reset) before its
    /// connection is closed.
    #[arg(long, env = "PASTEBIN_GRPC_MAX_PENDING_RESETS", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub grpc_max_pending_resets: u64,
    /// HTTP/2 streams the server may reset for a gRPC client's errors before its connection is closed.
    #[arg(long, env = "PASTEBIN_GRPC_MAX_ERROR_RESETS", default_value_t = 1024,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub grpc_max_error_resets: u64,
}

impl LimitArgs {
    /// Sets the process-wide body and answer budgets (`--body-budget-bytes`,
    /// `--answer-budget-bytes`, `--max-answer-bytes-per-client`) before anything is served.
    pub fn set_budgets(&self) {
        pastebin_edge::body_budget::set_body_budget(self.body_budget_bytes);
        pastebin_edge::answer_budget::set_answer_budget(self.answer_budget_bytes, self.max_answer_bytes_per_client);
    }

    pub fn http(&self) -> HttpLimits {
        HttpLimits {
            header_read_timeout: Duration::from_secs(self.header_read_timeout_secs),
            body_read_timeout: Duration::from_secs(self.body_read_timeout_secs),
            request_timeout: Duration::from_secs(self.request_timeout_secs),
            send_timeout: Duration::from_secs(self.send_timeout_secs),
            send_min_bytes_per_second: self.send_min_rate_bytes,
            max_connections: usize::try_from(self.max_connections).unwrap_or(usize::MAX),
            max_requests_in_flight: usize::try_from(self.max_requests_in_flight).unwrap_or(usize::MAX),
            max_connections_per_client: usize::try_from(self.max_connections_per_client).unwrap_or(usize::MAX),
            max_requests_in_flight_per_client: usize::try_from(self.max_requests_in_flight_per_client)
                .unwrap_or(usize::MAX),
            max_body_bytes_in_flight_per_client: self.max_body_bytes_per_client,
            // Set from --max-content-bytes where the gateway's routes are served.
            max_body_bytes: HttpLimits::default().max_body_bytes,
            trusted_proxies: Vec::new(),
        }
    }

    pub fn grpc(&self) -> GrpcLimits {
        GrpcLimits {
            max_connections: usize::try_from(self.grpc_max_connections).unwrap_or(usize::MAX),
            max_concurrent_streams: self.grpc_max_concurrent_streams,
            max_calls_per_connection: usize::try_from(self.grpc_max_concurrent_streams).unwrap_or(usize::MAX),
            keepalive_interval: Duration::from_secs(self.grpc_keepalive_secs),
            call_timeout: Duration::from_secs(self.grpc_call_timeout_secs),
            message_deadline: Duration::from_secs(self.grpc_message_deadline_secs),
            max_message_bytes: None,
            send_timeout: None,
            preface_timeout: None,
            idle_timeout: None,
            max_connection_age: None,
            max_header_list_bytes: self.grpc_max_header_list_bytes,
            max_pending_accept_reset_streams: usize::try_from(self.grpc_max_pending_resets).unwrap_or(usize::MAX),
            max_local_error_reset_streams: usize::try_from(self.grpc_max_error_resets).unwrap_or(usize::MAX),
            per_client: None,
        }
    }
}

/// The key service's search-first mode (docs/design.md#adopting-after-a-k-loss).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = help::DATABASE)]
pub struct LostCommitsArgs {
    /// After an unsafe failover or a restore (RFC 3339, e.g.
    /// 2026-12-01T10:00:00Z): the key database may have lost commits since
    /// then. For 26 h after the later of it and the start, a create of a key K does not know
    /// searches its paste shard first and adopts the paste an erased
    /// earlier create of the key made (docs/operations.md#after-an-unsafe-failover).
    #[arg(long, env = "PASTEBIN_MAY_HAVE_LOST_COMMITS_SINCE", value_parser = parse_rfc3339)]
    pub may_have_lost_commits_since: Option<chrono::DateTime<chrono::Utc>>,
}

impl LostCommitsArgs {
    /// The mode a K shard serves in. The flag's window is stored over the
    /// slots the shard owns, so it moves with them and outlives restarts;
    /// without the flag, the window its database holds over all of them
    /// (the one `pastebin ctl restore` stores: docs/operations.md#backups).
    /// Noted for `/readyz` and logged: operators must see it.
    pub async fn held(&self, slots: &ShardSlots) -> anyhow::Result<Option<LostCommits>> {
        let now = chrono::Utc::now();
        let owned = match slots.ownership().await.owned {
            OwnedSlots::Range(owned) => Some(owned),
            OwnedSlots::Nothing => None,
        };
        let lost = match (self.may_have_lost_commits_since, owned) {
            (Some(since), owned) => {
                let lost = LostCommits::new(since, now);
                if let Some(owned) = owned {
                    let (since, until) = (to_millis(lost.since), to_millis(lost.search_first_until()));
                    slots.hold_window(owned, since, until).await?;
                }
                Some(lost)
            }
            (None, Some(owned)) => slots
                .search_windows()
                .over(owned, to_millis(now))
                .map(|(since, until)| LostCommits::described(from_millis(since), from_millis(until))),
            (None, None) => None,
        };
        let Some(lost) = lost else { return Ok(None) };
        pastebin_runtime::durability::note_lost_commits(lost);
        tracing::warn!(
            since = %lost.since,
            until = %lost.search_first_until(),
            "this key shard may have lost commits: creates of keys it does not know search their paste shard \
             before minting, and adopt what they find (docs/operations.md#after-an-unsafe-failover)"
        );
        Ok(Some(lost))
    }
}

fn parse_rfc3339(raw: &str) -> Result<chrono::DateTime<chrono::Utc>, String> {
    chrono::DateTime::parse_from_rfc3339(raw.trim())
        .map(|at| at.to_utc())
        .map_err(|error| format!("`{raw}` is not an RFC 3339 time such as 2026-12-01T10:00:00Z: {error}"))
}

#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = help::SWEEPER)]
pub struct SweeperArgs {
    /// Seconds between sweeper rounds.
    #[arg(long, env = "PASTEBIN_SWEEP_INTERVAL_SECS", default_value_t = 5, value_parser = seconds_flag())]
    pub sweep_interval_secs: u64,
    /// Pending keys younger than this are never touched (docs/design.md#sweeper: 60 s, 30x the create budget).
    #[arg(long, env = "PASTEBIN_RECOVERY_THRESHOLD_SECS", default_value_t = 60, value_parser = seconds_flag())]
    pub recovery_threshold_secs: u64,
    /// Keys per page and ids per P round trip.
    #[arg(long, env = "PASTEBIN_SWEEP_BATCH", default_value_t = 500)]
    pub sweep_batch: u32,
    /// Objects younger than this are never reaped.
    #[arg(long, env = "PASTEBIN_OBJECT_AGE_FLOOR_SECS", default_value_t = 3600, value_parser = seconds_flag())]
    pub object_age_floor_secs: u64,
    /// Seconds between object-reaper scans (each lists the whole store).
    #[arg(long, env = "PASTEBIN_REAP_INTERVAL_SECS", default_value_t = 600, value_parser = seconds_flag())]
    pub reap_interval_secs: u64,
    /// Seconds a tombstone is kept on P before it is purged (at least 93600, 26 h).
    #[arg(long, env = "PASTEBIN_TOMBSTONE_RETENTION_SECS", default_value_t = 7 * 24 * 3600, value_parser = seconds_flag())]
    pub tombstone_retention_secs: u64,
}

impl SweeperArgs {
    pub fn sweeper(&self, slots: SlotMap, objects: Arc<dyn ObjectStore>) -> pastebin_sweeper::Sweeper {
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
