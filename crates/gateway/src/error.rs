use axum::{
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde_json::json;

/// Every way a request can fail, named for what the client should do next.
/// Mapped to HTTP and to gRPC here and nowhere else.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    InvalidKey(String),
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    InvalidExpiry(String),
    #[error("{}", pastebin_core::TooLarge { limit: *limit })]
    TooLarge { limit: usize },
    #[error("this idempotency key was already used for a different request")]
    KeyConflict,
    /// The saga could not finish now; the key is left for a retry (same key)
    /// or the sweeper. Never a statement that nothing happened.
    #[error("{0}; retry with the same idempotency key")]
    Unavailable(&'static str),
    /// The key's slot is moving between shards (docs/design.md#moving-slots)
    /// and stayed so for the whole request budget. Like [`Self::Unavailable`]
    /// for the client; apart so the saga retries it while its budget lasts.
    #[error("this key's slot is moving to another shard; retry with the same idempotency key")]
    SlotMoving,
    #[error("no such paste")]
    NotFound,
    /// An operator took the paste down (docs/operations.md#reports-and-takedowns).
    #[error("removed by the operator: {reason}")]
    Removed { reason: String },
    /// A burn-after-reading paste asked for without the explicit read that
    /// deletes it (`GET /{id}` from curl): its link must survive previews.
    #[error("this paste is deleted when it is read; read it once with: curl {raw_url}")]
    BurnNeedsReveal { raw_url: String },
    #[error("wrong delete token")]
    WrongToken,
    /// This instance takes creates only with a create token (docs/security.md).
    #[error("creating a paste needs a create token: send `Authorization: Bearer <token>`")]
    CreateTokenRequired,
    #[error("the create token is not valid")]
    InvalidCreateToken,
    /// Too many creates (or deletes) from one client address in the window.
    #[error("too many {what} from this address; retry after {retry_after_seconds} s")]
    RateLimited { retry_after_seconds: u64, what: &'static str },
    #[error("this method is not allowed here")]
    MethodNotAllowed,
    #[error("the request was not received in time")]
    RequestTimeout,
    /// Every request slot is busy; nothing was started.
    #[error("the server is busy; retry shortly")]
    Overloaded,
    /// The storage is full (below the free-space watermark, or a write
    /// found no room): the create is refused; reads and deletes go on
    /// (docs/operations.md#a-full-disk).
    #[error("the storage is full: creates are refused until space is freed (reads and deletes still work); retry later with the same idempotency key")]
    StorageFull,
    /// This client address holds its whole share of something the process
    /// bounds in total (answers not yet sent); nothing was started.
    #[error("this address holds as many {0} as it may; retry when one has ended")]
    ClientShareFull(&'static str),
}

/// How long a client should wait before retrying a 503.
pub const RETRY_AFTER_SECONDS: u64 = 1;
/// How long a client should wait before retrying a 507: space is freed by an
/// operator or by expiry, not in a second.
pub const STORAGE_FULL_RETRY_AFTER_SECONDS: u64 = 10;

impl ApiError {
    /// Stable machine-readable codes, documented in the API reference.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidKey(_) => "invalid_idempotency_key",
            Self::InvalidRequest(_) => "invalid_request",
            Self::InvalidExpiry(_) => "invalid_expiry",
            Self::TooLarge { .. } => "content_too_large",
            Self::KeyConflict => "idempotency_key_conflict",
            Self::Unavailable(_) | Self::SlotMoving => "unavailable",
            Self::NotFound => "not_found",
            Self::Removed { .. } => "removed_by_operator",
            Self::BurnNeedsReveal { .. } => "burn_after_reading",
            Self::WrongToken => "wrong_delete_token",
            Self::CreateTokenRequired => "create_token_required",
            Self::InvalidCreateToken => "invalid_create_token",
            Self::RateLimited { .. } => "rate_limited",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::RequestTimeout => "request_timeout",
            Self::Overloaded | Self::ClientShareFull(_) => "overloaded",
            Self::StorageFull => "storage_full",
        }
    }

    pub fn http_status(&self) -> StatusCode {
        match self {
            Self::InvalidKey(_) | Self::InvalidRequest(_) | Self::InvalidExpiry(_) => StatusCode::BAD_REQUEST,
            Self::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::KeyConflict | Self::BurnNeedsReveal { .. } => StatusCode::CONFLICT,
            Self::Unavailable(_) | Self::SlotMoving => StatusCode::SERVICE_UNAVAILABLE,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::Removed { .. } => StatusCode::GONE,
            Self::WrongToken => StatusCode::FORBIDDEN,
            Self::CreateTokenRequired | Self::InvalidCreateToken => StatusCode::UNAUTHORIZED,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::RequestTimeout => StatusCode::REQUEST_TIMEOUT,
            Self::Overloaded | Self::ClientShareFull(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::StorageFull => StatusCode::INSUFFICIENT_STORAGE,
        }
    }

    /// The error a bare status stands for, when a layer or the router (not
    /// a handler) refused the request: it still gets the JSON envelope.
    pub(crate) fn from_bare_status(status: StatusCode) -> Option<Self> {
        match status {
            StatusCode::METHOD_NOT_ALLOWED => Some(Self::MethodNotAllowed),
            StatusCode::REQUEST_TIMEOUT => Some(Self::RequestTimeout),
            StatusCode::SERVICE_UNAVAILABLE => Some(Self::Overloaded),
            StatusCode::NOT_FOUND => Some(Self::NotFound),
            _ => None,
        }
    }

    /// Seconds a client should wait before retrying, for the errors that have one.
    fn retry_after_seconds(&self) -> Option<u64> {
        match self {
            Self::Unavailable(_) | Self::SlotMoving => Some(RETRY_AFTER_SECONDS),
            Self::Overloaded | Self::ClientShareFull(_) => Some(pastebin_edge::http::OVERLOADED_RETRY_AFTER_SECONDS),
            Self::RateLimited { retry_after_seconds, .. } => Some(*retry_after_seconds),
            Self::StorageFull => Some(STORAGE_FULL_RETRY_AFTER_SECONDS),
            _ => None,
        }
    }
}

/// An error answer's one-line text form, carried beside its JSON envelope
/// (or HTML page) so that the edge can answer an `Accept: text/plain`
/// client with it instead (docs/api.md#status-codes-and-error-codes).
#[derive(Debug, Clone)]
pub struct ErrorLine(pub String);

impl ErrorLine {
    /// The message on one line, ending in a newline, as a terminal wants it.
    pub fn of(message: &str) -> Self {
        Self(format!("{}\n", message.replace(['\r', '\n'], " ")))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = self.to_string();
        let line = ErrorLine::of(&message);
        let body = json!({ "error": { "code": self.code(), "message": message } });
        let mut response = (self.http_status(), Json(body)).into_response();
        response.extensions_mut().insert(line);
        let headers = response.headers_mut();
        if let Some(seconds) = self.retry_after_seconds() {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if matches!(self, Self::CreateTokenRequired | Self::InvalidCreateToken) {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

impl From<ApiError> for tonic::Status {
    /// The status, with a `retry-after` hint when the error has one.
    fn from(error: ApiError) -> Self {
        let message = error.to_string();
        let retry_after = error.retry_after_seconds();
        let mut status = match error {
            ApiError::InvalidKey(_) | ApiError::InvalidRequest(_) | ApiError::InvalidExpiry(_) => {
                Self::invalid_argument(message)
            }
            ApiError::TooLarge { .. } => Self::resource_exhausted(message),
            ApiError::KeyConflict | ApiError::BurnNeedsReveal { .. } => Self::failed_precondition(message),
            ApiError::Unavailable(_) | ApiError::SlotMoving => Self::unavailable(message),
            ApiError::NotFound | ApiError::Removed { .. } => Self::not_found(message),
            ApiError::WrongToken => Self::permission_denied(message),
            ApiError::CreateTokenRequired | ApiError::InvalidCreateToken => Self::unauthenticated(message),
            ApiError::RateLimited { .. } => Self::resource_exhausted(message),
            ApiError::MethodNotAllowed => Self::unimplemented(message),
            ApiError::RequestTimeout => Self::deadline_exceeded(message),
            ApiError::Overloaded => Self::unavailable(message),
            ApiError::StorageFull => Self::resource_exhausted(message),
            ApiError::ClientShareFull(_) => Self::resource_exhausted(message),
        };
        if let Some(seconds) = retry_after {
            status.metadata_mut().insert("retry-after", seconds.into());
        }
        status
    }
}
