//! Per-step cost of the saga (figure 2), measured from outside the gateway:
//! the harness plays the gateway's part, calling K begin, the object PUT,
//! P insert and K done itself against the real services, and times each
//! call. Beside them: a bare gRPC round trip (health check on K) and, when
//! K's database URL is given, K begin's INSERT sent straight to PostgreSQL,
//! so "gRPC and service overhead" = K begin minus the bare INSERT.

use std::{sync::Arc, time::Duration};

use anyhow::Context;
use bytes::Bytes;
use futures::StreamExt;
use pastebin_core::{CreateRequest, DeleteToken, Expiry, IdempotencyKey, PasteId, ResponseBody};
use pastebin_core::{OwnedSlots, SlotRange};
use pastebin_keys::{KeyClient, NewKey};
use pastebin_objects::{ObjectStore, S3Store};
use pastebin_pastes::{NewPaste, PasteClient};
use pastebin_runtime::{grpc::CallError, tls::MutualTls};
use pastebin_shards::{channel, tls_mismatch, ObjectStoreArgs, ObjectStoreConfig};
use pastebin_slots::shard_slots::Described;
use sha2::{Digest, Sha256};
use std::time::Instant;
use tokio::sync::Mutex;

use crate::{
    args::StepsArgs,
    replay::ReplayCheck,
    stats::{Recorder, Report},
};

/// The benchmark's object store; an S3 bucket is created if it does not exist yet.
pub(crate) async fn open_objects(flags: &ObjectStoreArgs) -> anyhow::Result<Arc<dyn ObjectStore>> {
    let created = match flags.config() {
        Some(ObjectStoreConfig::S3(settings)) => S3Store::connect(settings).await?.ensure_bucket().await,
        _ => Ok(()),
    };
    let objects = flags.open().await?;
    if let Err(error) = created {
        // Some servers (s3s-fs) answer BucketAlreadyExists for a bucket these
        // credentials own; a bucket they can list is one the harness can use.
        objects.list(None, 1).await.map_err(|_| error)?;
    }
    Ok(objects)
}

struct Harness {
    keys: KeyClient,
    pastes: PasteClient,
    objects: Arc<dyn ObjectStore>,
    health: tonic_health::pb::health_client::HealthClient<tonic::transport::Channel>,
    key_db: Option<sqlx::AnyPool>,
    content: Bytes,
    /// Slots both shards own: the harness only makes keys there, since a
    /// shard refuses any other.
    slots: SlotRange,
    recorder: Mutex<Recorder>,
}

fn timed_since(started: Instant) -> Duration {
    started.elapsed()
}

impl Harness {
    async fn record(&self, class: &'static str, latency: Duration) {
        self.recorder.lock().await.record_class(class, latency);
    }

    async fn failed(&self, step: &str, error: impl std::fmt::Display) {
        tracing::warn!(%error, step, "step failed");
        self.recorder.lock().await.count_status(&format!("{step} failed"));
    }

    fn key_in_range(&self) -> IdempotencyKey {
        loop {
            let key = IdempotencyKey::new_random();
            if self.slots.contains(key.slot()) {
                return key;
            }
        }
    }

    /// One saga, step by step, as the gateway runs it for a fresh key.
    async fn saga(&self, put_only: bool) {
        let key = self.key_in_range();
        let paste_id = PasteId::mint(key.slot());
        let saga_started = Instant::now();

        let started = Instant::now();
        if let Err(e) = self.objects.put(paste_id.as_str(), self.content.clone()).await {
            return self.failed("put", e).await;
        }
        self.record("put", timed_since(started)).await;
        if put_only {
            self.recorder.lock().await.count_status("ok");
            return;
        }

        let expiry = Expiry::from_seconds(None).unwrap_or_else(|_| unreachable!("the default expiry is valid"));
        let request_hash = CreateRequest::text(&self.content, expiry.seconds()).hash();
        let token = DeleteToken::generate();
        let expires_at = expiry.expires_at(chrono::Utc::now());
        let body = serde_json::json!({
            "id": paste_id.as_str(),
            "url": format!("http://127.0.0.1:8080/{paste_id}"),
            "raw_url": format!("http://127.0.0.1:8080/raw/{paste_id}"),
            "expires_at": expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            "delete_token": token.expose(),
        });
        let new = NewKey {
            key,
            request_hash,
            paste_id: paste_id.clone(),
            response_body: ResponseBody::new(body.to_string()),
        };
        // The harness PUTs first so that K begin is timed on its own; the
        // gateway's order is begin, PUT, insert, done, and each step is
        // independent of the others' timing.
        let started = Instant::now();
        if let Err(e) = self.keys.begin(&new).await {
            return self.failed("k_begin", e).await;
        }
        self.record("k_begin", timed_since(started)).await;

        let paste = NewPaste {
            id: paste_id.clone(),
            delete_token_hash: token.hash(),
            created_at: chrono::Utc::now(),
            expires_at,
            size: self.content.len() as u64,
            content_sha256: Sha256::digest(&self.content).into(),
            attributes: Default::default(),
            origin: Some(pastebin_core::PasteOrigin { key_hash: key.hash(), request_hash }),
        };
        let started = Instant::now();
        if let Err(e) = self.pastes.insert(&paste).await {
            return self.failed("p_insert", e).await;
        }
        self.record("p_insert", timed_since(started)).await;

        let started = Instant::now();
        if let Err(e) = self.keys.mark_done(&key, &paste_id).await {
            return self.failed("k_done", e).await;
        }
        self.record("k_done", timed_since(started)).await;
        self.record("saga", timed_since(saga_started)).await;
        self.recorder.lock().await.count_status("ok");

        let started = Instant::now();
        let ping = tonic_health::pb::HealthCheckRequest { service: String::new() };
        if self.health.clone().check(ping).await.is_ok() {
            self.record("grpc_ping", timed_since(started)).await;
        }

        if let Some(pool) = &self.key_db {
            // The same statement K begin runs, straight on PostgreSQL, for a
            // fresh key in state 'done' so the sweeper never sees it.
            let now = chrono::Utc::now().timestamp_millis();
            let started = Instant::now();
            let inserted = sqlx::query(
                "INSERT INTO idempotency_keys (key, request_hash, paste_id, state, response_body, created_at, retain_until)
                 VALUES ($1, $2, $3, 'done', $4, $5, $6) ON CONFLICT (key) DO NOTHING",
            )
            .bind(IdempotencyKey::new_random().canonical())
            .bind(request_hash.to_hex())
            .bind(PasteId::mint(key.slot()).as_str().to_owned())
            .bind(body.to_string())
            .bind(now)
            .bind(now + 25 * 3600 * 1000)
            .execute(pool)
            .await;
            match inserted {
                Ok(_) => self.record("sql_insert", timed_since(started)).await,
                Err(e) => self.failed("sql_insert", e).await,
            }
        }
    }
}

/// The slots the K and the P shard under test both own.
async fn shared_slots(
    args: &StepsArgs,
    tls: Option<&MutualTls>,
    keys: &KeyClient,
    pastes: &PasteClient,
) -> anyhow::Result<SlotRange> {
    let k = described("key", &args.key_service, tls, keys.describe().await).await?;
    let p = described("paste", &args.paste_service, tls, pastes.describe().await).await?;
    let no_slot_in_common = || anyhow::anyhow!("the K shard owns slots {k} and the P shard {p}: no slot in common");
    let (Some(kr), Some(pr)) = (k.range(), p.range()) else { return Err(no_slot_in_common()) };
    let (first, last) = (kr.first().max(pr.first()), kr.last().min(pr.last()));
    SlotRange::new(first.0, last.0).map_err(|_| no_slot_in_common())
}

/// A shard's answer to `Describe`, or why there is none: a TLS mismatch
/// named with the flags to add, as every client of K and P names it.
async fn described(
    kind: &str,
    address: &str,
    tls: Option<&MutualTls>,
    answer: Result<Described, CallError>,
) -> anyhow::Result<OwnedSlots> {
    match answer {
        Ok(described) => Ok(described.owned),
        Err(error) => Err(match tls_mismatch(kind, address, tls).await {
            Some(hint) => anyhow::anyhow!(hint),
            None => {
                anyhow::Error::new(error).context(format!("the {kind} shard {address} did not say which slots it owns"))
            }
        }),
    }
}

pub async fn run(args: StepsArgs) -> anyhow::Result<()> {
    let tls = args.tls.load()?;
    let key_channel = channel(&args.key_service, tls.as_ref())?;
    let keys = KeyClient::new(key_channel.clone());
    let pastes = PasteClient::new(channel(&args.paste_service, tls.as_ref())?);
    let slots = shared_slots(&args, tls.as_ref(), &keys, &pastes).await?;
    let key_db = match &args.key_database_url {
        Some(url) => Some(
            pastebin_runtime::db::connect(url, args.connections.max(1) as u32, &pastebin_keys::MIGRATIONS)
                .await
                .context("cannot open K's database")?
                .pool()
                .clone(),
        ),
        None => None,
    };
    let harness = Arc::new(Harness {
        keys,
        pastes,
        objects: open_objects(&args.objects).await?,
        health: tonic_health::pb::health_client::HealthClient::new(key_channel),
        key_db,
        content: Bytes::from(vec![b'x'; args.size]),
        slots,
        recorder: Mutex::new(Recorder::default()),
    });
    let started = Instant::now();
    futures::stream::iter(0..args.requests)
        .for_each_concurrent(args.connections.max(1), |_| {
            let harness = harness.clone();
            async move { harness.saga(args.put_only).await }
        })
        .await;
    let elapsed = started.elapsed();
    let recorder = harness.recorder.lock().await.clone();
    let mode = format!("c={}{}", args.connections.max(1), if args.put_only { ", PUT only" } else { "" });
    let report = Report::new("steps", "grpc", mode, elapsed, &recorder, ReplayCheck::default().summary());
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.table());
    }
    Ok(())
}
