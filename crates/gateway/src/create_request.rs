//! A create over HTTP, admitted from its headers alone (docs/security.md#fair-shares):
//! the create token, the `Idempotency-Key`, the query, the `Content-Type`,
//! the declared length, and last the client's create rate, all checked in
//! one extractor the handler calls once, before a byte of the body is read
//! (the listener has charged the body to the client's share and the body
//! budget before the route runs, as every body: pastebin_edge::http). Then
//! the body is read within its limit.

use axum::{
    body::Body,
    extract::{FromRequestParts, Query},
    http::{header, request::Parts, HeaderMap},
};
use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, LengthLimitError};
use pastebin_core::IdempotencyKey;
use pastebin_edge::http::BodyDeadlineExceeded;
use serde::Deserialize;

use crate::{ApiError, CreateCommand, Gateway};

pub(crate) const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Stands for a bad `?expires_in_seconds=`; step 1 rejects it as `invalid_expiry`.
pub(crate) const OUT_OF_RANGE_EXPIRY: u64 = u64::MAX;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateJson {
    content: String,
    /// Any JSON value, so that a bad one (`"1h"`, `-5`, `1.5`) is reported as
    /// `invalid_expiry` like a bad `?expires_in_seconds=`, not as a bad body.
    expires_in_seconds: Option<serde_json::Value>,
    language: Option<String>,
    burn_after_reading: Option<bool>,
    file_name: Option<String>,
}

impl CreateJson {
    /// Decodes a JSON create body; anything that is not one is `invalid_request`.
    pub(crate) fn decode(raw: &[u8]) -> Result<Self, ApiError> {
        serde_json::from_slice(raw).map_err(|e| {
            ApiError::InvalidRequest(format!(
                "the body must be {{\"content\": string, \"expires_in_seconds\"?: integer, \"language\"?: string, \
                 \"burn_after_reading\"?: boolean, \"file_name\"?: string}}: {e}"
            ))
        })
    }

    /// The body's expiry: absent or `null` is none; anything that is not a
    /// whole number of seconds is out of range (step 1 says `invalid_expiry`).
    pub(crate) fn expiry(&self) -> Option<u64> {
        self.expires_in_seconds
            .as_ref()
            .filter(|value| !value.is_null())
            .map(|value| value.as_u64().unwrap_or(OUT_OF_RANGE_EXPIRY))
    }
}

/// What a create without a usable key is told: the header to send, and how.
const MISSING_KEY: &str = "the Idempotency-Key header is missing: send a new UUID with each save \
     (and the same one on its retries), e.g. curl -H \"Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)\" \
     --data-binary @file URL";
const KEY_NOT_A_UUID: &str =
    "the Idempotency-Key header must be a UUID, e.g. Idempotency-Key: 6f9619ff-8b86-d011-b42d-00c04fc964ff";

/// The one `Idempotency-Key` header, a UUID. Two of them are a client bug
/// that must not be resolved by guessing which one was meant.
pub(crate) fn idempotency_key(headers: &HeaderMap) -> Result<String, ApiError> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(ApiError::InvalidKey("send exactly one Idempotency-Key header".into()));
    }
    let raw = first.map(|value| value.to_str().map(str::trim)).unwrap_or(Ok(""));
    match raw {
        Ok("") => Err(ApiError::InvalidKey(MISSING_KEY.into())),
        Ok(raw) => IdempotencyKey::parse(raw)
            .map(|key| key.canonical())
            .map_err(|_| ApiError::InvalidKey(KEY_NOT_A_UUID.into())),
        Err(_) => Err(ApiError::InvalidKey(KEY_NOT_A_UUID.into())),
    }
}

#[derive(Debug, Default, Deserialize)]
struct CreateQuery {
    expires_in_seconds: Option<u64>,
}

/// The reader attributes as query parameters: documented for raw bodies;
/// with a JSON body they apply where the body leaves a field out.
#[derive(Debug, Default, Clone, Deserialize)]
struct AttributeQuery {
    language: Option<String>,
    burn_after_reading: Option<bool>,
    file_name: Option<String>,
}

/// What a create's body is, by its `Content-Type`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum BodyKind {
    Json,
    /// UTF-8 text: `text/plain`, no type, or curl's default form type.
    Text,
    /// Any bytes, stored with this media type.
    Binary(String),
    /// A sealed envelope (`application/vnd.pastebin.sealed+json`,
    /// docs/api.md#sealed-pastes), stored as opaque bytes.
    Sealed,
}

pub(crate) fn body_kind(headers: &HeaderMap) -> Result<BodyKind, ApiError> {
    let Some(raw) = headers.get(header::CONTENT_TYPE) else {
        return Ok(BodyKind::Text);
    };
    let raw = raw.to_str().map_err(|_| ApiError::InvalidRequest("Content-Type must be ASCII".into()))?;
    let essence = raw.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    Ok(match essence.as_str() {
        "application/json" => BodyKind::Json,
        pastebin_sealed::MEDIA_TYPE => BodyKind::Sealed,
        "" | "text/plain" | "application/x-www-form-urlencoded" => BodyKind::Text,
        "multipart/form-data" => {
            return Err(ApiError::InvalidRequest(
                "send a file as the raw request body with its own Content-Type, not as a form".into(),
            ))
        }
        _ => BodyKind::Binary(raw.to_owned()),
    })
}

/// A create whose headers passed every check.
pub(crate) struct AdmittedCreate {
    idempotency_key: String,
    /// The query's expiry, or `Err` for a bad one (reported in step 1's order).
    query_expiry: Result<Option<u64>, ()>,
    attributes: AttributeQuery,
    kind: BodyKind,
    wire_limit: usize,
    wants_text: bool,
}

impl FromRequestParts<Gateway> for AdmittedCreate {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, gateway: &Gateway) -> Result<Self, ApiError> {
        let headers = &parts.headers;
        let client = parts.extensions.get::<pastebin_edge::http::Client>();
        gateway.check_create_token(bearer_token(headers))?;
        let idempotency_key = idempotency_key(headers)?;
        let query_expiry = query_expiry(Query::<CreateQuery>::try_from_uri(&parts.uri), &gateway.settings().expiry);
        // Like a bad expiry, a bad attribute in the query is never ignored.
        let Query(attributes) = Query::<AttributeQuery>::try_from_uri(&parts.uri)
            .map_err(|e| ApiError::InvalidRequest(format!("language, burn_after_reading or file_name: {e}")))?;
        let kind = body_kind(headers)?;
        let wire_limit = wire_limit(&kind, gateway.settings().max_content_bytes);
        let declared = declared_length(headers);
        if declared.is_some_and(|length| length > wire_limit as u64) {
            return Err(ApiError::TooLarge { limit: wire_limit });
        }
        gateway.check_create_rate(client.map(|client| client.address))?;
        Ok(Self {
            idempotency_key,
            query_expiry,
            attributes,
            kind,
            wire_limit,
            wants_text: crate::http::wants_text(headers),
        })
    }
}

impl AdmittedCreate {
    pub(crate) fn wire_limit(&self) -> usize {
        self.wire_limit
    }

    pub(crate) fn wants_text(&self) -> bool {
        self.wants_text
    }

    /// The create this request and its `body` ask for.
    pub(crate) fn command(&self, body: &[u8]) -> Result<CreateCommand, ApiError> {
        let attributes = self.attributes.clone();
        let idempotency_key = Some(self.idempotency_key.clone());
        Ok(match &self.kind {
            BodyKind::Json => {
                let parsed = CreateJson::decode(body)?;
                // The body's own expiry wins; the query parameter (documented for raw
                // bodies) applies when the body leaves it out.
                let expires_in_seconds = match self.query_expiry {
                    Ok(from_query) => parsed.expiry().or(from_query),
                    Err(()) => Some(OUT_OF_RANGE_EXPIRY),
                };
                CreateCommand {
                    idempotency_key,
                    content: parsed.content.into_bytes(),
                    expires_in_seconds,
                    media_type: None,
                    file_name: parsed.file_name.or(attributes.file_name),
                    language: parsed.language.or(attributes.language),
                    burn_after_reading: parsed.burn_after_reading.or(attributes.burn_after_reading).unwrap_or(false),
                    sealed: false,
                }
            }
            kind => CreateCommand {
                idempotency_key,
                content: body.to_vec(),
                expires_in_seconds: self.query_expiry.unwrap_or(Some(OUT_OF_RANGE_EXPIRY)),
                media_type: match kind {
                    BodyKind::Binary(media_type) => Some(media_type.clone()),
                    BodyKind::Json | BodyKind::Text | BodyKind::Sealed => None,
                },
                file_name: attributes.file_name,
                language: attributes.language,
                burn_after_reading: attributes.burn_after_reading.unwrap_or(false),
                sealed: *kind == BodyKind::Sealed,
            },
        })
    }
}

/// A malformed or out-of-range query value is the client's mistake
/// whatever the body is (a JSON body's own expiry wins, but a bad query
/// value is never silently ignored). It is passed on as an out-of-range
/// expiry so that step 1 reports it in its own order: key, size, expiry.
fn query_expiry(
    query: Result<Query<CreateQuery>, axum::extract::rejection::QueryRejection>,
    policy: &pastebin_core::ExpiryPolicy,
) -> Result<Option<u64>, ()> {
    match query {
        Ok(Query(CreateQuery { expires_in_seconds: Some(seconds) })) if policy.admit(Some(seconds)).is_err() => Err(()),
        Ok(Query(query)) => Ok(query.expires_in_seconds),
        Err(_) => Err(()),
    }
}

/// The longest body the API takes: a JSON create of the largest paste. The
/// listener charges a body of no declared length this much.
pub fn largest_body_bytes(max_content_bytes: usize) -> usize {
    wire_limit(&BodyKind::Json, max_content_bytes)
}

/// The most bytes a body of this kind may have on the wire: the content
/// limit, or for JSON six times it (escaping can make content up to six
/// times longer) and room for the other fields.
fn wire_limit(kind: &BodyKind, max_content_bytes: usize) -> usize {
    match kind {
        BodyKind::Json => max_content_bytes.saturating_mul(6).saturating_add(4096),
        BodyKind::Text | BodyKind::Binary(_) | BodyKind::Sealed => max_content_bytes,
    }
}

fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok())
}

pub(crate) fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    crate::admission::bearer_token(headers.get(header::AUTHORIZATION)?.to_str().ok()?)
}

/// How much of an oversized upload is read and thrown away before its 413.
/// Beyond this the connection is simply closed (and the client may see a
/// reset instead of the 413): nobody sends 16 MiB to a 1 MiB limit by mistake.
const DRAIN_LIMIT: usize = 16 * 1024 * 1024;

/// The answer to a create refused from its headers. Only a 413 for a body
/// that is already on its way (no `Expect: 100-continue`, which would hold
/// it back) is drained first, up to [`DRAIN_LIMIT`] and within the body's
/// deadline, never kept: a server that answers and closes with request bytes
/// still unread makes the kernel reset the connection, and the client sees a
/// broken pipe instead of its 413. Every other refusal is answered at once.
pub(crate) async fn refused_create(refusal: ApiError, expects_continue: bool, body: Body) -> ApiError {
    if matches!(refusal, ApiError::TooLarge { .. }) && !expects_continue {
        let mut body = body.into_data_stream();
        let mut drained: usize = 0;
        while let Some(Ok(data)) = futures::StreamExt::next(&mut body).await {
            drained = drained.saturating_add(data.len());
            if drained > DRAIN_LIMIT {
                break;
            }
        }
    }
    refusal
}

/// Reads the body up to `limit` bytes. An oversized body (one that
/// declared no length) is drained up to [`DRAIN_LIMIT`] before the 413 is
/// answered, for the reason [`refused_create`] gives.
pub(crate) async fn read_body(mut body: Body, limit: usize) -> Result<Bytes, ApiError> {
    let mut collected = BytesMut::new();
    let mut received: usize = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            let source = std::error::Error::source(&error);
            if source.is_some_and(|source| source.is::<LengthLimitError>()) {
                ApiError::TooLarge { limit }
            } else if source.is_some_and(|source| source.is::<BodyDeadlineExceeded>()) {
                ApiError::RequestTimeout
            } else {
                ApiError::InvalidRequest("cannot read the request body".into())
            }
        })?;
        let Ok(data) = frame.into_data() else {
            continue; // trailers carry no content
        };
        received = received.saturating_add(data.len());
        if received <= limit {
            collected.extend_from_slice(&data);
        } else if received > DRAIN_LIMIT {
            break;
        }
    }
    if received > limit {
        return Err(ApiError::TooLarge { limit });
    }
    Ok(collected.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_json_create_of_the_largest_paste_fits_in_a_clients_default_body_share() {
        let largest = crate::gateway::GatewaySettings::new("http://pastebin").max_content_bytes;
        let on_the_wire = wire_limit(&BodyKind::Json, largest);
        assert!(on_the_wire <= pastebin_edge::client_shares::DEFAULT_BODY_BYTES_PER_CLIENT, "{on_the_wire} bytes");
    }
}
