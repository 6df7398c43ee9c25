//! The flags of `pastebin bench ...` (clap derive, wired into the `pastebin` binary).

use std::{net::SocketAddr, time::Duration};

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub command: BenchCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum BenchCommand {
    /// Creates, each with a fresh idempotency key.
    Create(LoadArgs),
    /// Every key sent --repeat times in a row, so copies of a key race each other.
    RetryStorm(RetryStormArgs),
    /// GETs of existing ids (created first, unmeasured).
    Get(GetArgs),
    /// Creates and GETs at a ratio.
    Mixed(MixedArgs),
    /// Per-step saga cost: K begin, object PUT, P insert, K done, timed directly against the services.
    Steps(StepsArgs),
    /// The one-commit baseline: the same HTTP create API as one PostgreSQL transaction.
    OneCommitServer(OneCommitArgs),
    /// The HTTP layer's limit: reads each create's JSON and answers one fixed 201; one 1 KiB body for every GET /raw.
    LimitServer(LimitServerArgs),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    Http,
    Grpc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ReadPath {
    /// `GET /api/v1/pastes/{id}`
    Api,
    /// `GET /raw/{id}`
    Raw,
}

impl ReadPath {
    /// The URL path before the id.
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Api => "/api/v1/pastes/",
            Self::Raw => "/raw/",
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct LoadArgs {
    /// Base URL of the gateway's HTTP API, or of its gRPC API with --protocol grpc.
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub target: String,
    #[arg(long, value_enum, default_value_t = Protocol::Http)]
    pub protocol: Protocol,
    /// Closed loop: this many workers, each with one request in flight.
    /// With --rate: the number of connections the pool starts with.
    #[arg(short = 'c', long, default_value_t = 16)]
    pub connections: usize,
    /// Open loop: send at this fixed rate (requests/s) whatever the answers
    /// do; latency counts from the intended send time.
    #[arg(long)]
    pub rate: Option<f64>,
    /// How long to measure (e.g. 30s, 500ms, 2m).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Load sent before measuring starts (answers still replay-checked).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub warmup: Duration,
    /// Paste size in bytes.
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Per-request timeout.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Open loop: at most this many requests in flight; when full, sending
    /// waits (and the wait shows in latency, which counts from the intended time).
    #[arg(long, default_value_t = 4096)]
    pub max_in_flight: usize,
    /// What an HTTP GET reads: the JSON API or the raw text.
    #[arg(long, value_enum, default_value_t = ReadPath::Api)]
    pub read_path: ReadPath,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// No progress line on stderr.
    #[arg(long)]
    pub quiet: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RetryStormArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    /// Copies of each key, sent back to back (with C > 1 they are in flight together).
    #[arg(long, default_value_t = 5)]
    pub repeat: u64,
    /// Create this many keys first (unmeasured); the measured phase then
    /// sends only replays of them. 0: keys are fresh, the first copy creates.
    #[arg(long, default_value_t = 0)]
    pub prime_keys: usize,
}

#[derive(Debug, Clone, clap::Args)]
pub struct GetArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    /// Pastes of --size bytes created first (unmeasured) and then read at random.
    #[arg(long, default_value_t = 1000)]
    pub pastes: usize,
    /// Read the ids in this file (one per line, e.g. rows seeded by SQL)
    /// uniformly at random instead of creating --pastes first.
    #[arg(long, conflicts_with = "pastes")]
    pub ids_file: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct MixedArgs {
    #[command(flatten)]
    pub load: LoadArgs,
    #[arg(long, default_value_t = 1000)]
    pub pastes: usize,
    /// Fraction of operations that are creates (the rest are GETs).
    #[arg(long, default_value_t = 0.1)]
    pub create_ratio: f64,
}

#[derive(Debug, Clone, clap::Args)]
pub struct StepsArgs {
    /// Key service (shard K) gRPC address.
    #[arg(long)]
    pub key_service: String,
    /// Paste service (shard P) gRPC address.
    #[arg(long)]
    pub paste_service: String,
    /// The harness's identity towards K and P (mutual TLS).
    #[command(flatten)]
    pub tls: pastebin_runtime::tls::TlsArgs,
    #[command(flatten)]
    pub objects: pastebin_shards::ObjectStoreArgs,
    /// K's database: also time K begin's INSERT straight on it, without gRPC.
    #[arg(long)]
    pub key_database_url: Option<String>,
    /// Sagas in flight at once.
    #[arg(short = 'c', long, default_value_t = 8)]
    pub connections: usize,
    /// Sagas to run.
    #[arg(long, default_value_t = 2000)]
    pub requests: usize,
    #[arg(long, default_value_t = 1024)]
    pub size: usize,
    /// Time only the object PUT (the object store's own ceiling).
    #[arg(long)]
    pub put_only: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, clap::Args)]
pub struct LimitServerArgs {
    #[arg(long, default_value = "127.0.0.1:8091")]
    pub http: SocketAddr,
}

#[derive(Debug, Clone, clap::Args)]
pub struct OneCommitArgs {
    /// PostgreSQL database holding both tables (created if missing).
    #[arg(long)]
    pub database_url: String,
    #[arg(long, default_value = "127.0.0.1:8090")]
    pub http: SocketAddr,
    #[command(flatten)]
    pub objects: pastebin_shards::ObjectStoreArgs,
    /// Database connections in the pool (the shard services default to 16).
    #[arg(long, default_value_t = 16)]
    pub db_connections: u32,
}

/// `250ms`, `10s`, `2m`, or a bare number of seconds.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let (number, unit) = match raw.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(at) => raw.split_at(at),
        None => (raw, "s"),
    };
    let value: f64 = number.parse().map_err(|_| format!("not a duration: {raw:?} (try 10s, 500ms, 2m)"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("unknown unit in {raw:?} (use ms, s, m or h)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|e| format!("{raw:?}: {e}"))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn parse(args: &[&str]) -> Result<BenchCommand, clap::Error> {
        Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied())).map(|c| c.bench.command)
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5d").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn create_defaults_to_a_closed_loop_over_http() {
        let BenchCommand::Create(a) = parse(&["create"]).unwrap() else { panic!("not create") };
        assert_eq!(a.protocol, Protocol::Http);
        assert_eq!(a.connections, 16);
        assert_eq!(a.rate, None);
        assert_eq!(a.duration, Duration::from_secs(10));
        assert_eq!(a.size, 1024);
        assert!(!a.json);
    }

    #[test]
    fn open_loop_over_grpc() {
        let BenchCommand::Create(a) = parse(&[
            "create",
            "--protocol",
            "grpc",
            "--target",
            "http://127.0.0.1:50051",
            "--rate",
            "350",
            "--duration",
            "30s",
            "--json",
        ])
        .unwrap() else {
            panic!("not create")
        };
        assert_eq!(a.protocol, Protocol::Grpc);
        assert_eq!(a.rate, Some(350.0));
        assert_eq!(a.duration, Duration::from_secs(30));
        assert!(a.json);
    }

    #[test]
    fn workload_flags() {
        let BenchCommand::RetryStorm(a) =
            parse(&["retry-storm", "--repeat", "8", "--prime-keys", "500", "-c", "4"]).unwrap()
        else {
            panic!("not retry-storm")
        };
        assert_eq!((a.repeat, a.prime_keys, a.load.connections), (8, 500, 4));
        let BenchCommand::Get(a) = parse(&["get", "--pastes", "10", "--size", "102400"]).unwrap() else {
            panic!("not get")
        };
        assert_eq!((a.pastes, a.load.size), (10, 102_400));
        let BenchCommand::Mixed(a) = parse(&["mixed", "--create-ratio", "0.25"]).unwrap() else { panic!("not mixed") };
        assert_eq!(a.create_ratio, 0.25);
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(parse(&["create", "--protocol", "smtp"]).is_err());
        assert!(parse(&["create", "--duration", "soon"]).is_err());
        assert!(parse(&["get", "--pastes", "-3"]).is_err());
        assert!(parse(&["launch"]).is_err());
        assert!(parse(&["one-commit-server"]).is_err(), "the database URL is required");
        assert!(
            parse(&["steps", "--key-service", "a", "--paste-service", "b", "--objects-dir", "d", "--s3-bucket", "x"])
                .is_err(),
            "one object store, not two"
        );
    }
}
