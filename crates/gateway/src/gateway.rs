use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use pastebin_core::{
    Clock, CreateRequest, DeleteToken, Expiry, FileName, IdempotencyKey, Language, MediaType, PasteAttributes, PasteId,
    RequestHash, ResponseBody,
};
use pastebin_objects::ObjectStore;
use pastebin_pastes::{BurnClaim, DeleteOutcome, PasteRow};
use pastebin_runtime::metrics as names;
use tokio::time::Instant;

use crate::{rendered::RenderedPages, step::within, ApiError, Created, SlotMap, SlotMapCell};

/// What an operator configures about the gateway itself.
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    /// Base of the links in a 201, without a trailing slash (e.g. `https://paste.example`).
    pub public_url: String,
    /// The largest paste accepted, in bytes of content (default 1 MiB).
    pub max_content_bytes: usize,
    /// The whole create's budget, propagated as a deadline to every call (SPEC: 2 s).
    pub request_budget: Duration,
    /// How long highlighting one paste may run before its page shows plain
    /// text (docs/reader-features.md#highlighting; default 2 s).
    pub highlight_budget: Duration,
}

impl GatewaySettings {
    pub fn new(public_url: impl Into<String>) -> Self {
        Self {
            public_url: public_url.into().trim_end_matches('/').to_owned(),
            max_content_bytes: 1024 * 1024,
            request_budget: pastebin_core::CREATE_BUDGET,
            highlight_budget: crate::highlight::TIME_BUDGET,
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
    pub(crate) settings: GatewaySettings,
    /// Highlighted paste bodies by id (an id's content never changes).
    pub(crate) rendered: RenderedPages,
}

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

/// A paste read in full. For a burn-after-reading paste, holding one means
/// this reader won the claim: the paste is gone for everyone else.
#[derive(Debug, Clone)]
pub struct ReadPaste {
    pub view: PasteView,
    pub content: Bytes,
}

fn rfc3339(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

impl Gateway {
    pub fn new(
        slots: SlotMapCell,
        objects: Arc<dyn ObjectStore>,
        clock: Arc<dyn Clock>,
        settings: GatewaySettings,
    ) -> Self {
        Self { inner: Arc::new(Inner { slots, objects, clock, settings, rendered: RenderedPages::default() }) }
    }

    /// The slot map, or 503 while the shards have not all said which slots
    /// they own (docs/design.md#shard-identity).
    pub(crate) fn slots(&self) -> Result<&SlotMap, ApiError> {
        self.inner
            .slots
            .get()
            .ok_or(ApiError::Unavailable("not ready: waiting for every shard to say which slots it owns"))
    }

    pub fn settings(&self) -> &GatewaySettings {
        &self.inner.settings
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
        let expiry =
            Expiry::from_seconds(command.expires_in_seconds).map_err(|e| ApiError::InvalidExpiry(e.to_string()))?;
        let attributes = attributes_of(&command)?;
        if !attributes.is_binary() && std::str::from_utf8(&command.content).is_err() {
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
        let result = match self.validate(command) {
            Ok(request) => tokio::spawn(async move { gateway.run_create(request).await })
                .await
                .unwrap_or(Err(ApiError::Unavailable("the create was interrupted"))),
            Err(error) => Err(error),
        };
        let outcome = match &result {
            Ok(answer) if answer.replayed => "replayed",
            Ok(_) => "created",
            Err(ApiError::KeyConflict) => "conflict",
            Err(ApiError::Unavailable(_)) => "unavailable",
            Err(ApiError::TooLarge { .. }) => "too_large",
            Err(_) => "invalid",
        };
        metrics::counter!(names::CREATES, "outcome" => outcome).increment(1);
        metrics::histogram!(names::SAGA_STEP_SECONDS, "step" => "create").record(started.elapsed().as_secs_f64());
        result
    }

    /// A live paste's row, without its content: never burns anything (the
    /// HTML page of a burn paste, `HEAD`).
    pub async fn describe(&self, raw_id: &str) -> Result<PasteView, ApiError> {
        let id = PasteId::parse(raw_id).map_err(|_| ApiError::NotFound)?;
        let deadline = Instant::now() + self.inner.settings.request_budget;
        let row = self.live_row(&id, deadline).await?;
        Ok(view_of(row))
    }

    /// A live paste with its content. A burn-after-reading paste is read
    /// first and then claimed on P; only the claimer gets it, everyone else
    /// a 404 (docs/reader-features.md#burn-after-reading).
    pub async fn get(&self, raw_id: &str) -> Result<ReadPaste, ApiError> {
        let id = PasteId::parse(raw_id).map_err(|_| ApiError::NotFound)?;
        let deadline = Instant::now() + self.inner.settings.request_budget;
        let view = view_of(self.live_row(&id, deadline).await?);
        let content = within(deadline, self.inner.objects.get(id.as_str()))
            .await
            .map_err(|_| ApiError::Unavailable("the object store is unavailable"))?
            .ok_or_else(|| {
                // A live row is only ever inserted after its PUT succeeded.
                tracing::error!(paste_id = %id, "live paste row without its object");
                ApiError::NotFound
            })?;
        if view.attributes.burn_after_reading {
            self.claim_burn(&id, deadline).await?;
        }
        Ok(ReadPaste { view, content })
    }

    async fn live_row(&self, id: &PasteId, deadline: Instant) -> Result<PasteRow, ApiError> {
        let pastes = self.slots()?.paste_shard(id.slot()).with_deadline(deadline);
        within(deadline, pastes.get(id))
            .await
            .map_err(|_| ApiError::Unavailable("the paste service is unavailable"))?
            .ok_or(ApiError::NotFound)
    }

    /// The one guarded update that picks the single reader. The object is
    /// deleted behind the claim (best effort; the reaper gets any leftover,
    /// since the id is a tombstone now).
    async fn claim_burn(&self, id: &PasteId, deadline: Instant) -> Result<(), ApiError> {
        let pastes = self.slots()?.paste_shard(id.slot()).with_deadline(deadline);
        let claim = within(deadline, pastes.claim_burn(id))
            .await
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
        let pastes = self.slots()?.paste_shard(id.slot()).with_deadline(deadline);
        let outcome = within(deadline, pastes.delete(&id, &DeleteToken::presented(token)))
            .await
            .map_err(|_| ApiError::Unavailable("the paste service is unavailable"))?;
        match outcome {
            DeleteOutcome::NotFound => Err(ApiError::NotFound),
            DeleteOutcome::WrongToken => Err(ApiError::WrongToken),
            DeleteOutcome::Deleted => {
                self.inner.rendered.forget(id.as_str());
                if let Err(error) = within(deadline, self.inner.objects.delete(id.as_str())).await {
                    tracing::warn!(paste_id = %id, %error, "object delete failed; the reaper will remove it");
                }
                Ok(())
            }
        }
    }
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
    })
}
