use std::{sync::Arc, time::Duration};

use bytes::Bytes;
use pastebin_core::{Clock, CreateRequest, DeleteToken, Expiry, IdempotencyKey, PasteId, RequestHash, ResponseBody};
use pastebin_objects::ObjectStore;
use pastebin_pastes::DeleteOutcome;
use pastebin_runtime::metrics as names;
use tokio::time::Instant;
use tracing::Instrument;

use crate::{step::within, ApiError, Created, SlotMap, SlotMapCell};

/// What an operator configures about the gateway itself.
#[derive(Debug, Clone)]
pub struct GatewaySettings {
    /// Base of the links in a 201, without a trailing slash (e.g. `https://paste.example`).
    pub public_url: String,
    /// The largest paste accepted, in bytes of content (default 1 MiB).
    pub max_content_bytes: usize,
    /// The whole create's budget, propagated as a deadline to every call (SPEC: 2 s).
    pub request_budget: Duration,
}

impl GatewaySettings {
    pub fn new(public_url: impl Into<String>) -> Self {
        Self {
            public_url: public_url.into().trim_end_matches('/').to_owned(),
            max_content_bytes: 1024 * 1024,
            request_budget: pastebin_core::CREATE_BUDGET,
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
}

/// A create as a client sent it, before validation.
#[derive(Debug, Clone, Default)]
pub struct CreateCommand {
    pub idempotency_key: Option<String>,
    pub content: String,
    pub expires_in_seconds: Option<u64>,
}

/// A create that passed step 1's validation.
pub(crate) struct ValidCreate {
    pub(crate) key: IdempotencyKey,
    pub(crate) content: Bytes,
    pub(crate) expiry: Expiry,
    pub(crate) request_hash: RequestHash,
}

/// The answer to a create: the stored body, and whether it is a replay.
#[derive(Debug, Clone)]
pub struct CreateAnswer {
    pub body: ResponseBody,
    pub created: Created,
    pub replayed: bool,
}

/// A paste as `GET` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PasteView {
    pub id: String,
    pub content: String,
    pub created_at: String,
    pub expires_at: String,
    pub size: u64,
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
        Self { inner: Arc::new(Inner { slots, objects, clock, settings }) }
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

    /// Step 1's validation: key, size, expiry, in that order; nothing is
    /// stored for a request that fails here.
    pub(crate) fn validate(&self, command: CreateCommand) -> Result<ValidCreate, ApiError> {
        let key = IdempotencyKey::parse(command.idempotency_key.as_deref().unwrap_or(""))
            .map_err(|e| ApiError::InvalidKey(e.to_string()))?;
        let limit = self.inner.settings.max_content_bytes;
        if command.content.len() > limit {
            return Err(ApiError::TooLarge { limit });
        }
        let expiry =
            Expiry::from_seconds(command.expires_in_seconds).map_err(|e| ApiError::InvalidExpiry(e.to_string()))?;
        let request_hash = CreateRequest {
            content: command.content.as_bytes(),
            expires_in_seconds: expiry.seconds(),
            title: None,
            language: None,
        }
        .hash();
        Ok(ValidCreate { key, content: Bytes::from(command.content), expiry, request_hash })
    }

    /// Runs the create saga to completion in its own task: a client that
    /// hangs up does not cut a saga short between two steps (which would be
    /// safe, but leaves work for the sweeper).
    pub async fn create(&self, command: CreateCommand) -> Result<CreateAnswer, ApiError> {
        let started = std::time::Instant::now();
        let gateway = self.clone();
        let result = match self.validate(command) {
            // The task stays in the request's span: its steps are part of the request's trace.
            Ok(request) => tokio::spawn(async move { gateway.run_create(request).await }.in_current_span())
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

    pub async fn get(&self, raw_id: &str) -> Result<PasteView, ApiError> {
        let id = PasteId::parse(raw_id).map_err(|_| ApiError::NotFound)?;
        let deadline = Instant::now() + self.inner.settings.request_budget;
        let pastes = self.slots()?.paste_shard(id.slot()).with_deadline(deadline);
        let row = within(deadline, pastes.get(&id))
            .await
            .map_err(|_| ApiError::Unavailable("the paste service is unavailable"))?
            .ok_or(ApiError::NotFound)?;
        let bytes = within(deadline, self.inner.objects.get(id.as_str()))
            .await
            .map_err(|_| ApiError::Unavailable("the object store is unavailable"))?
            .ok_or_else(|| {
                // A live row is only ever inserted after its PUT succeeded.
                tracing::error!(paste_id = %id, "live paste row without its object");
                ApiError::NotFound
            })?;
        let content = String::from_utf8(bytes.to_vec()).map_err(|_| {
            tracing::error!(paste_id = %id, "stored object is not UTF-8");
            ApiError::NotFound
        })?;
        Ok(PasteView {
            id: id.to_string(),
            content,
            created_at: rfc3339(row.created_at),
            expires_at: rfc3339(row.expires_at),
            size: row.size,
        })
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
                if let Err(error) = within(deadline, self.inner.objects.delete(id.as_str())).await {
                    tracing::warn!(paste_id = %id, %error, "object delete failed; the reaper will remove it");
                }
                Ok(())
            }
        }
    }
}
