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
    #[error("content exceeds the limit of {limit} bytes")]
    TooLarge { limit: usize },
    #[error("this idempotency key was already used for a different request")]
    KeyConflict,
    /// The saga could not finish now; the key is left for a retry (same key)
    /// or the sweeper. Never a statement that nothing happened.
    #[error("{0}; retry with the same idempotency key")]
    Unavailable(&'static str),
    #[error("no such paste")]
    NotFound,
    #[error("wrong delete token")]
    WrongToken,
}

/// How long a client should wait before retrying a 503.
pub const RETRY_AFTER_SECONDS: u64 = 1;

impl ApiError {
    /// Stable machine-readable codes, documented in the API reference.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidKey(_) => "invalid_idempotency_key",
            Self::InvalidRequest(_) => "invalid_request",
            Self::InvalidExpiry(_) => "invalid_expiry",
            Self::TooLarge { .. } => "content_too_large",
            Self::KeyConflict => "idempotency_key_conflict",
            Self::Unavailable(_) => "unavailable",
            Self::NotFound => "not_found",
            Self::WrongToken => "wrong_delete_token",
        }
    }

    pub fn http_status(&self) -> StatusCode {
        match self {
            Self::InvalidKey(_) | Self::InvalidRequest(_) | Self::InvalidExpiry(_) => StatusCode::BAD_REQUEST,
            Self::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Self::KeyConflict => StatusCode::CONFLICT,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::NotFound => StatusCode::NOT_FOUND,
            Self::WrongToken => StatusCode::FORBIDDEN,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "code": self.code(), "message": self.to_string() } });
        let mut response = (self.http_status(), Json(body)).into_response();
        if matches!(self, Self::Unavailable(_)) {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECONDS));
        }
        response
    }
}

impl From<ApiError> for tonic::Status {
    fn from(error: ApiError) -> Self {
        let message = error.to_string();
        match error {
            ApiError::InvalidKey(_) | ApiError::InvalidRequest(_) | ApiError::InvalidExpiry(_) => {
                Self::invalid_argument(message)
            }
            ApiError::TooLarge { .. } => Self::resource_exhausted(message),
            ApiError::KeyConflict => Self::failed_precondition(message),
            ApiError::Unavailable(_) => Self::unavailable(message),
            ApiError::NotFound => Self::not_found(message),
            ApiError::WrongToken => Self::permission_denied(message),
        }
    }
}
