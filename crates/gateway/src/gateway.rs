use std::{net::IpAddr, path::PathBuf, sync::Arc, time::Duration};

use bytes::Bytes;
use pastebin_core::{
    Clock, CreateRequest, DeleteToken, Expiry, ExpiryPolicy, FileName, IdempotencyKey, Language, MediaType, Minter,
    PasteAttributes, PasteId, PublishedExpiry, PublishedLimits, PublishedRate, ReportReason, RequestHash, ResponseBody,
};
use pastebin_edge::{
    answer_budget::{HeldAnswer, Short},
    refusals::Protocol,
};
use pastebin_objects::ObjectStore;
use pastebin_pastes::{BurnClaim, DeleteOutcome, PasteClient, PasteRead, PasteRow};
use pastebin_runtime::grpc::CallError;
use pastebin_runtime::metrics as names;
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Instant,
};
use tracing::Instrument;

use crate::{
    admission::{Admission, RateLimit},
    cache::{Lookup, ReadCache},
    step::{within, FollowMoves, StepError},
    storage::StorageWatermark,
    ApiError, Created, SlotMap, SlotMapCell,
};

/// Why a shed create was refused (its 503 message).
const SHED: &str = "too many creates in flight on this shard";

/// What an operator configures about the gateway itself.
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    /// Base of the links in a 201, without a trailing slash (e.g. `https://paste.example`).
    pub public_url: String,
    /// The largest paste accepted, in bytes of content (default 1 MiB).
    pub max_content_bytes: usize,
    /// The whole create's budget, propagated as a deadline to every call (docs/design.md#saga: 2 s).
    pub request_budget: Duration,
    /// Bytes of pastes the read cache holds (0: no cache).
    pub read_cache_bytes: u64,
    /// Creates in flight at once per K shard; past it a create is shed at
    /// once with 503 + `Retry-After` instead of queueing into its budget.
    pub creates_in_flight_per_shard: usize,
    /// Creates per client address, if limited (docs/security.md#abuse-controls).
    pub create_rate_limit: Option<RateLimit>,
    /// Deletes (API and form) per client address, if limited.
    pub delete_rate_limit: Option<RateLimit>,
    /// When set, a create needs a token listed in this file (`pastebin ctl tokens`).
    pub create_tokens_file: Option<PathBuf>,
    /// The lifetimes a create may ask for (docs/configuration.md#expiry-policy).
    pub expiry: ExpiryPolicy,
    /// Reports (API, gRPC and the report form) per client address, if limited.
    pub report_rate_limit: Option<RateLimit>,
    /// Directories whose filesystems' free space the watermark watches (none: no watermark).
    pub watched_storage: Vec<PathBuf>,
    /// Below this many bytes free on a watched filesystem, creates are refused with 507
    /// (docs/operations.md#a-full-disk).
    pub min_free_bytes: u64,
    /// Whether a create whose slot's K and P are one colocated shard is one
    /// commit there (docs/design.md#the-colocated-create); off: the saga everywhere.
    pub one_commit_creates: bool,
}

/// The default shedding limit of a gateway in a deployment: creates in
/// flight at once per K shard. A create there waits on remote shards and a
/// remote object store, so more of them are in flight at the same rate than
/// in `pastebin up`, which sets its own (docs/performance.md#load-shedding).
pub const CREATES_IN_FLIGHT_PER_SHARD: usize = 64;

/// Deletes per client address unless configured: generous for a person or
/// a script cleaning up, a bound on one address's load on the paste shards.
pub const DEFAULT_DELETE_RATE_LIMIT: RateLimit =
    RateLimit { count: std::num::NonZeroU32::new(300).expect("300 is not zero"), period: Duration::from_secs(60) };

/// Reports per client address unless configured: a reader reports a
/// handful of pastes; a flood of reports must not bury the real ones.
pub const DEFAULT_REPORT_RATE_LIMIT: RateLimit =
    RateLimit { count: std::num::NonZeroU32::new(20).expect("20 is not zero"), period: Duration::from_secs(3600) };

/// The free-space watermark unless configured: room for the fences, aborts
/// and tombstones of the creates under way and of the sweeper's recovery,
/// many times over (docs/operations.md#a-full-disk).
pub const DEFAULT_MIN_FREE_BYTES: u64 = 64 * 1024 * 1024;

impl GatewaySettings {
    pub fn new(public_url: impl Into<String>) -> Self {
        Self {
            public_url: public_url.into().trim_end_matches('/').to_owned(),
            max_content_bytes: 1024 * 1024,
            request_budget: pastebin_core::CREATE_BUDGET,
            read_cache_bytes: 64 * 1024 * 1024,
            creates_in_flight_per_shard: CREATES_IN_FLIGHT_PER_SHARD,
            create_rate_limit: None,
            delete_rate_limit: Some(DEFAULT_DELETE_RATE_LIMIT),
            create_tokens_file: None,
            expiry: ExpiryPolicy::default(),
            report_rate_limit: Some(DEFAULT_REPORT_RATE_LIMIT),
            watched_storage: Vec::new(),
            min_free_bytes: DEFAULT_MIN_FREE_BYTES,
            one_commit_creates: true,
        }
    }
}

/// The gateway's state, shared by the HTTP and gRPC front ends. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) slots: SlotMapCell,
    pub(crate) objects: Arc<dyn ObjectStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) minter: Arc<dyn Minter>,
    pub(crate) settings: GatewaySettings,
    pub(crate) reads: ReadCache,
    /// Told of each paste deleted through this gateway (see [`Gateway::on_delete`]).
    pub(crate) delete_listeners: std::sync::RwLock<Vec<DeleteListener>>,
    /// Creates in flight per K shard, each limited (see [`GatewaySettings::creates_in_flight_per_shard`]).
    pub(crate) creates_in_flight: std::sync::Mutex<std::collections::HashMap<usize, Arc<Semaphore>>>,
    pub(crate) admission: Admission,
    pub(crate) storage: StorageWatermark,
}

/// What a cache beside the gateway (the pages' renders) runs when a paste
/// is deleted through this gateway: it takes the paste's id.
type DeleteListener = Box<dyn Fn(&str) + Send + Sync>;

/// A create as a client sent it, before validation.
#[derive(Debug, Clone, Default)]
pub struct CreateCommand {
    pub idempotency_key: Option<String>,
    /// UTF-8 text unless `media_type` is given (then any bytes).
    pub content: Vec<u8>,
    pub expires_in_seconds: Option<u64>,
    pub media_type: Option<String>,
    pub file_name: Option<String>,
    pub language: Option<String>,
    pub burn_after_reading: bool,
    /// `content` is a sealed envelope (docs/api.md#sealed-pastes).
    pub sealed: bool,
}

/// A create that passed step 1's validation.
pub(crate) struct ValidCreate {
    pub(crate) key: IdempotencyKey,
    pub(crate) content: Bytes,
    pub(crate) expiry: Expiry,
    pub(crate) attributes: PasteAttributes,
    pub(crate) request_hash: RequestHash,
}

/// The answer to a create: the stored body, and whether it is a replay.
#[derive(Debug, Clone)]
pub struct CreateAnswer {
    pub body: ResponseBody,
    pub created: Created,
    pub replayed: bool,
}

/// What a reader may know of a paste without reading (or burning) it.
#[derive(Debug, Clone)]
pub struct PasteView {
    pub id: String,
    pub created_at: String,
    pub expires_at: String,
    pub size: u64,
    pub attributes: PasteAttributes,
}

impl PasteView {
    /// Whether the paste never expires (its expiry is the far-future
    /// "never" time, docs/configuration.md#expiry-policy).
    pub fn never_expires(&self) -> bool {
        chrono::DateTime::parse_from_rfc3339(&self.expires_at).is_ok_and(|at| pastebin_core::is_never(at.to_utc()))
    }
}

/// A paste read in full. For a burn-after-reading paste, holding one means
/// this reader won the claim: the paste is gone for everyone else.
#[derive(Debug, Clone)]
pub struct ReadPaste {
    pub view: PasteView,
    pub content: Bytes,
}

/// A paste read for one answer, and what that answer holds of its client's
/// share and the process's answer budget until it has been sent (the
/// listener gives it back when the answer's body is dropped).
#[derive(Debug)]
pub(crate) struct HeldRead {
    pub(crate) read: ReadPaste,
    pub(crate) held: HeldAnswer,
}

/// Who an answer is for: the listener it goes out on, and the client address.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader {
    pub(crate) protocol: Protocol,
    pub(crate) client: Option<IpAddr>,
}

fn rfc3339(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Gateway {
    pub fn new(
        slots: SlotMapCell,
        objects: Arc<dyn ObjectStore>,
        clock: Arc<dyn Clock>,
        minter: Arc<dyn Minter>,
        settings: GatewaySettings,
    ) -> Self {
        let reads = ReadCache::new(settings.read_cache_bytes);
        let creates_in_flight = std::sync::Mutex::default();
        let admission =
            Admission::new(settings.create_rate_limit, settings.delete_rate_limit, settings.create_tokens_file.clone())
                .with_reports(settings.report_rate_limit);
        let storage = StorageWatermark::new(settings.watched_storage.clone(), settings.min_free_bytes);
        Self {
            inner: Arc::new(Inner {
                slots,
                objects,
                clock,
                minter,
                settings,
                reads,
                delete_listeners: std::sync::RwLock::default(),
                creates_in_flight,
                admission,
                storage,
            }),
        }
    }

    /// Keeps the free space of the watched filesystems read and exported
    /// (`pastebin_storage_free_bytes`) while no create asks; runs until dropped.
    pub async fn watch_storage(&self) {
        self.inner.storage.watch(Duration::from_secs(5)).await;
    }

    /// The slot map, or 503 while the shards have not all said which slots
    /// they own (docs/design.md#shard-identity).
    pub(crate) fn slots(&self) -> Result<Arc<SlotMap>, ApiError> {
        self.inner
            .slots
            .get()
            .ok_or(ApiError::Unavailable("not ready: waiting for every shard to say which slots it owns"))
    }

    pub fn settings(&self) -> &GatewaySettings {
        &self.inner.settings
    }

    /// Runs `forget` with the id of every paste deleted through this gateway
    /// (or maybe deleted: an uncertain answer counts), before the delete
    /// answers: a cache kept beside the gateway (which this crate does not
    /// know) drops it at once, as the read cache does.
    pub fn on_delete(&self, forget: impl Fn(&str) + Send + Sync + 'static) {
        self.inner.delete_listeners.write().unwrap_or_else(std::sync::PoisonError::into_inner).push(Box::new(forget));
    }

    fn tell_deleted(&self, id: &PasteId) {
        let listeners = self.inner.delete_listeners.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        listeners.iter().for_each(|forget| forget(id.as_str()));
    }

    /// The gate before a gRPC create: the caller's create token, then its
    /// address's rate. Checked before anything else, so a refusal changes nothing.
    pub fn admit_create(&self, client: Option<IpAddr>, bearer: Option<&str>) -> Result<(), ApiError> {
        counted(Protocol::Grpc, self.inner.admission.admit(client, bearer))
    }

    /// The create token alone, for a front end that checks more of a
    /// request's headers before it spends the client's rate.
    /// Whether creates need a create token: the new-paste page asks for one.
    pub fn requires_create_token(&self) -> bool {
        self.inner.admission.requires_token()
    }

    pub(crate) fn check_create_token(&self, bearer: Option<&str>) -> Result<(), ApiError> {
        counted(Protocol::Http, self.inner.admission.check_token(bearer))
    }

    /// The client's create rate, once every other check of the headers passed.
    pub(crate) fn check_create_rate(&self, client: Option<IpAddr>) -> Result<(), ApiError> {
        counted(Protocol::Http, self.inner.admission.check_create_rate(client))
    }

    /// The client's delete rate, before a delete touches a shard; a
    /// refusal is counted for the listener the delete came over.
    pub fn admit_delete(&self, protocol: Protocol, client: Option<IpAddr>) -> Result<(), ApiError> {
        counted(protocol, self.inner.admission.check_delete_rate(client))
    }

    /// Step 1's validation: key, size, expiry, then the reader attributes,
    /// in that order; nothing is stored for a request that fails here.
    pub(crate) fn validate(&self, command: CreateCommand) -> Result<ValidCreate, ApiError> {
        let key = IdempotencyKey::parse(command.idempotency_key.as_deref().unwrap_or(""))
            .map_err(|e| ApiError::InvalidKey(e.to_string()))?;
        let limit = self.inner.settings.max_content_bytes;
        if command.content.len() > limit {
            return Err(ApiError::TooLarge { limit });
        }
        let expiry = (self.inner.settings.expiry.admit(command.expires_in_seconds))
            .map_err(|e| ApiError::InvalidExpiry(e.to_string()))?;
        let attributes = attributes_of(&command)?;
        if attributes.sealed {
            crate::sealed::check(&command.content, &attributes)?;
        } else if !attributes.is_binary() && std::str::from_utf8(&command.content).is_err() {
            return Err(ApiError::InvalidRequest("text content must be UTF-8 (send binary with a media type)".into()));
        }
        let request_hash = CreateRequest {
            content: &command.content,
            expires_in_seconds: expiry.seconds(),
            title: None,
            language: attributes.language.as_ref().map(Language::as_str),
            media_type: attributes.media_type.as_ref().map(MediaType::as_str),
            file_name: attributes.file_name.as_ref().map(FileName::as_str),
            burn_after_reading: attributes.burn_after_reading,
            sealed: attributes.sealed,
        }
        .hash();
        Ok(ValidCreate { key, content: Bytes::from(command.content), expiry, attributes, request_hash })
    }

    /// Runs the create saga to completion in its own task: a client that
    /// hangs up does not cut a saga short between two steps (which would be
    /// safe, but leaves work for the sweeper).
    pub async fn create(&self, command: CreateCommand) -> Result<CreateAnswer, ApiError> {
        let started = std::time::Instant::now();
        let gateway = self.clone();
        // The watermark is checked before anything is written: a create it
        // refuses has begun no key and PUT no object.
        let admitted = self.validate(command).and_then(|request| {
            self.inner.storage.admit(request.content.len())?;
            Ok((self.admit(&request)?, request))
        });
        let result = match admitted {
            // The task stays in the request's span: its steps are part of the request's trace.
            Ok((admitted, request)) => tokio::spawn(
                async move {
                    let answer = gateway.run_create(request).await;
                    drop(admitted);
                    answer
                }
                .in_current_span(),
            )
            .await
            .unwrap_or(Err(ApiError::Unavailable("the create was interrupted"))),
            Err(error) => Err(error),
        };
        let outcome = match &result {
            Ok(answer) if answer.replayed => "replayed",
            Ok(answer) if answer.created.adopted => "adopted",
            Ok(_) => "created",
            Err(ApiError::KeyConflict) => "conflict",
            Err(ApiError::Unavailable(SHED)) => "shed",
            Err(ApiError::Unavailable(_)) => "unavailable",
            Err(ApiError::SlotMoving) => "slot_moving",
            Err(ApiError::TooLarge { .. }) => "too_large",
            Err(ApiError::StorageFull) => "storage_full",
            Err(_) => "invalid",
        };
        metrics::counter!(names::CREATES, "outcome" => outcome).increment(1);
        metrics::histogram!(names::SAGA_STEP_SECONDS, "step" => "create").record(started.elapsed().as_secs_f64());
        result
    }

    /// Load shedding: a place among its K shard's creates in flight, or a
    /// 503 now. Nothing has been written for a shed create, and answering at
    /// once beats letting it wait out its budget behind the others.
    fn admit(&self, request: &ValidCreate) -> Result<OwnedSemaphorePermit, ApiError> {
        let shard = self.slots()?.key_shard_index(request.key.slot());
        let limit = self.inner.settings.creates_in_flight_per_shard.max(1);
        let in_flight = self
            .inner
            .creates_in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(shard)
            .or_insert_with(|| Arc::new(Semaphore::new(limit)))
            .clone();
        in_flight.try_acquire_owned().map_err(|_| ApiError::Unavailable(SHED))
    }

    /// `GET /{id}` for a client that does not ask for a page: the content,
    /// as `/raw` reads it, except that a burn paste is not read: like its
    /// page, the link stays sealed until the explicit read.
    pub(crate) async fn read_unsealed(&self, reader: Reader, raw_id: &str) -> Result<HeldRead, ApiError> {
        let view = self.describe(raw_id).await?;
        if view.attributes.burn_after_reading {
            return Err(ApiError::BurnNeedsReveal {
                raw_url: format!("{}/raw/{}", self.settings().public_url, view.id),
            });
        }
        self.read_for(reader, raw_id).await
    }

    /// A live paste's row, without its content: never burns anything (the
    /// HTML page of a burn paste, `HEAD`).
    pub async fn describe(&self, raw_id: &str) -> Result<PasteView, ApiError> {
        let id = PasteId::parse(raw_id).map_err(|_| ApiError::NotFound)?;
        let deadline = Instant::now() + self.inner.settings.request_budget;
        let row = self.live_row(&id, deadline).await?;
        Ok(view_of(row))
    }

    /// A live paste with its content, as [`Self::read_for`] reads it for
    /// an answer with no client address: the pages, which render and stream
    /// it themselves, pass the process's answer budget (refused when it is
    /// full) but do not hold it.
    pub async fn get(&self, raw_id: &str) -> Result<ReadPaste, ApiError> {
        let reader = Reader { protocol: Protocol::Http, client: None };
        Ok(self.read_for(reader, raw_id).await?.read)
    }

    /// A live paste with its content, from the read cache when P confirmed
    /// it recently (docs/design.md#caching), else from P and the object
    /// store, charged to the reader's share of the answer budget and then to
    /// the budget before the content is fetched (docs/security.md#total-bounds).
    /// A burn-after-reading paste is never cached: it is read first
    /// and then claimed on P; only the claimer gets it, everyone else a 404
    /// (docs/design.md#burn-after-reading).
    pub(crate) async fn read_for(&self, reader: Reader, raw_id: &str) -> Result<HeldRead, ApiError> {
        let id = PasteId::parse(raw_id).map_err(|_| ApiError::NotFound)?;
        let cached = match self.inner.reads.lookup(&id, self.inner.clock.now()) {
            Lookup::Fresh(read) => return Ok(HeldRead { held: answer_charge(reader, read.view.size)?, read }),
            Lookup::Unconfirmed(paste) => Some(paste),
            Lookup::Miss => None,
        };
        let deadline = Instant::now() + self.inner.settings.request_budget;
        let read_started = Instant::now();
        let row = match self.live_row(&id, deadline).await {
            Err(gone @ (ApiError::NotFound | ApiError::Removed { .. })) => {
                self.inner.reads.forget(&id);
                return Err(gone);
            }
            other => other?,
        };
        let held = answer_charge(reader, row.size)?;
        if let Some(cached) = cached {
            // Content never changes under an id: only liveness needed P.
            self.inner.reads.keep(cached.paste.clone(), cached.expires_at, read_started);
            return Ok(HeldRead { read: cached.paste.clone(), held });
        }
        let content = within(deadline, self.inner.objects.get(id.as_str()))
            .await
            .map_err(|_| ApiError::Unavailable("the object store is unavailable"))?
            .ok_or_else(|| {
                // A live row is only ever inserted after its PUT succeeded.
                tracing::error!(paste_id = %id, "live paste row without its object");
                ApiError::NotFound
            })?;
        let expires_at = row.expires_at;
        let read = ReadPaste { view: view_of(row), content };
        if read.view.attributes.burn_after_reading {
            self.claim_burn(&id, deadline).await?;
            return Ok(HeldRead { read, held });
        }
        self.inner.reads.keep(read.clone(), expires_at, read_started);
        Ok(HeldRead { read, held })
    }

    /// The live row from P, or why there is none. A takedown also drops the
    /// renders kept beside the gateway: the pages read the row first on
    /// every view anyway, so this only frees their memory early.
    async fn live_row(&self, id: &PasteId, deadline: Instant) -> Result<PasteRow, ApiError> {
        let read = self
            .on_paste_shard(id, deadline, |pastes| async move { pastes.read(id).await })
            .await?
            .map_err(|_| ApiError::Unavailable("the paste service is unavailable"))?;
        match read {
            PasteRead::Live(row) => Ok(row),
            PasteRead::RemovedByOperator { reason } => {
                self.tell_deleted(id);
                Err(ApiError::Removed { reason })
            }
            PasteRead::Missing => Err(ApiError::NotFound),
        }
    }

    /// The client's report rate, spent before a report's body is read
    /// ([`crate::WithinRate`] over HTTP); a refusal is counted for the
    /// listener the report came over.
    pub fn admit_report(&self, protocol: Protocol, client: Option<IpAddr>) -> Result<(), ApiError> {
        counted(protocol, self.inner.admission.check_report_rate(client))
    }

    /// A reader's report of a live paste (docs/operations.md#reports-and-takedowns),
    /// once [`Self::admit_report`] let it in. Returns the paste's report count.
    pub async fn report(&self, raw_id: &str, reason: &str, note: Option<&str>) -> Result<u64, ApiError> {
        let invalid = |e: pastebin_core::ReportError| ApiError::InvalidRequest(e.to_string());
        let reason = ReportReason::parse(reason).map_err(invalid)?;
        let note = pastebin_core::report_note(note).map_err(invalid)?;
        let id = PasteId::parse(raw_id).map_err(|_| ApiError::NotFound)?;
        let deadline = Instant::now() + self.inner.settings.request_budget;
        let stored = self
            .on_paste_shard(&id, deadline, |pastes| {
                let (id, note) = (&id, note.as_deref());
                async move { pastes.report(id, reason.as_str(), note).await }
            })
            .await?
            .map_err(|_| ApiError::Unavailable("the paste service is unavailable"))?;
        match stored {
            Some(count) => Ok(count),
            // Gone by now: say why, as a read would.
            None => self.live_row(&id, deadline).await.and(Err(ApiError::NotFound)),
        }
    }

    /// What this instance accepts, as `GET /api/v1/limits` publishes it.
    pub fn limits(&self) -> PublishedLimits {
        let settings = &self.inner.settings;
        PublishedLimits {
            max_content_bytes: settings.max_content_bytes as u64,
            expiry: PublishedExpiry::of(&settings.expiry),
            burn_after_reading: true,
            // Sealed pastes (docs/api.md#sealed-pastes): the page and the
            // client encrypt; this gateway stores their envelopes.
            encryption: true,
            create_tokens_required: settings.create_tokens_file.is_some(),
            create_rate_limit: settings
                .create_rate_limit
                .map(|limit| PublishedRate { count: limit.count.get(), period_seconds: limit.period.as_secs() }),
            report_reasons: ReportReason::ALL.iter().map(|reason| reason.as_str().to_owned()).collect(),
        }
    }

    /// `call` on the P shard of `id`'s slot, following the slot if it moves:
    /// on "not executed" (frozen, or owned elsewhere now) the slot map is
    /// discovered again and the call made again, within `deadline`
    /// (docs/design.md#moving-slots). The outer error: no slot map yet.
    async fn on_paste_shard<'a, T, F, Fut>(
        &self,
        id: &'a PasteId,
        deadline: Instant,
        call: F,
    ) -> Result<Result<T, StepError>, ApiError>
    where
        F: Fn(PasteClient) -> Fut,
        Fut: std::future::Future<Output = Result<T, CallError>> + 'a,
    {
        let mut moves = FollowMoves::new();
        loop {
            let pastes = self.slots()?.paste_shard(id.slot()).with_deadline(deadline);
            match within(deadline, call(pastes)).await {
                Err(StepError::NotExecuted(_)) if moves.again(&self.inner.slots, deadline).await => {}
                answer => return Ok(answer),
            }
        }
    }

    /// The one guarded update that picks the single reader. The object is
    /// deleted behind the claim (best effort; the reaper gets any leftover,
    /// since the id is a tombstone now).
    async fn claim_burn(&self, id: &PasteId, deadline: Instant) -> Result<(), ApiError> {
        let claim = self
            .on_paste_shard(id, deadline, |pastes| async move { pastes.claim_burn(id).await })
            .await?
            .map_err(|_| ApiError::Unavailable("the paste service is unavailable"))?;
        if claim == BurnClaim::Gone {
            return Err(ApiError::NotFound);
        }
        metrics::counter!(names::PASTES_BURNED).increment(1);
        let (objects, id) = (self.inner.objects.clone(), id.clone());
        tokio::spawn(async move {
            if let Err(error) = objects.delete(id.as_str()).await {
                tracing::warn!(paste_id = %id, %error, "burned object delete failed; the reaper will remove it");
            }
        });
        Ok(())
    }

    /// Deletes the row (it becomes a tombstone), then the object. If the
    /// object delete fails the paste is already gone; the reaper finishes.
    pub async fn delete(&self, raw_id: &str, token: &str) -> Result<(), ApiError> {
        let id = PasteId::parse(raw_id).map_err(|_| ApiError::NotFound)?;
        let deadline = Instant::now() + self.inner.settings.request_budget;
        let token = DeleteToken::presented(token);
        let outcome = self
            .on_paste_shard(&id, deadline, |pastes| {
                let (token, id) = (&token, &id);
                async move { pastes.delete(id, token).await }
            })
            .await?;
        if !matches!(outcome, Ok(DeleteOutcome::WrongToken)) {
            // Before answering, on every outcome but a refused token: an
            // uncertain delete may have tombstoned the row, and this gateway
            // must not serve what a retried DELETE would call gone.
            self.inner.reads.forget_deleted(&id);
            self.tell_deleted(&id);
        }
        match outcome.map_err(|_| ApiError::Unavailable("the paste service is unavailable"))? {
            DeleteOutcome::NotFound => Err(ApiError::NotFound),
            DeleteOutcome::WrongToken => Err(ApiError::WrongToken),
            DeleteOutcome::Deleted => {
                if let Err(error) = within(deadline, self.inner.objects.delete(id.as_str())).await {
                    tracing::warn!(paste_id = %id, %error, "object delete failed; the reaper will remove it");
                }
                Ok(())
            }
        }
    }
}

/// An admission refusal, counted by why.
/// `bytes` of an answer for `reader`, from its share of the answer budget
/// and then from the budget, or the refusal, counted by why.
fn answer_charge(reader: Reader, bytes: u64) -> Result<HeldAnswer, ApiError> {
    let bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
    pastebin_edge::answer_budget::charge(reader.client, bytes).map_err(|short| {
        let (reason, refusal) = match short {
            Short::ClientShare => ("client_answer_bytes", ApiError::ClientShareFull("answers not yet read")),
            Short::Budget => ("answer_budget", ApiError::Overloaded),
        };
        pastebin_edge::refusals::refused(reader.protocol, reason);
        refusal
    })
}

fn counted(protocol: Protocol, admitted: Result<(), ApiError>) -> Result<(), ApiError> {
    if let Err(error) = &admitted {
        let reason = match error {
            ApiError::RateLimited { what: "deletes", .. } => "delete_rate_limited",
            ApiError::RateLimited { what: "reports", .. } => "report_rate_limited",
            ApiError::RateLimited { .. } => "rate_limited",
            _ => "create_token",
        };
        pastebin_edge::refusals::refused(protocol, reason);
    }
    admitted
}

fn view_of(row: PasteRow) -> PasteView {
    PasteView {
        id: row.id.to_string(),
        created_at: rfc3339(row.created_at),
        expires_at: rfc3339(row.expires_at),
        size: row.size,
        attributes: row.attributes,
    }
}

/// The reader attributes of a create, each checked (400 on a bad one).
fn attributes_of(command: &CreateCommand) -> Result<PasteAttributes, ApiError> {
    let invalid = |e: pastebin_core::AttributeError| ApiError::InvalidRequest(e.to_string());
    Ok(PasteAttributes {
        media_type: command.media_type.as_deref().map(MediaType::parse).transpose().map_err(invalid)?,
        file_name: command.file_name.as_deref().map(FileName::parse).transpose().map_err(invalid)?,
        language: command.language.as_deref().map(Language::parse).transpose().map_err(invalid)?,
        burn_after_reading: command.burn_after_reading,
        sealed: command.sealed,
    })
}
