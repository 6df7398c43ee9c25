//! The two ways to reach the pastebin: its JSON API over HTTP (`http://...`)
//! and its gRPC API (`grpc://host:port`). Both read every failure as one of
//! two things, because the journal depends on telling them apart: the server
//! *refused* (nothing was created under this key), or the outcome is
//! *uncertain* (a paste may exist: keep the record pending, retry the key).

use std::time::Duration;

use pastebin_core::{CreateToken, IdempotencyKey, PublishedLimits};
use pastebin_proto::api::v1::{paste_api_client::PasteApiClient, CreatePasteRequest, DeletePasteRequest};
use reqwest::{header, StatusCode};
use serde::Deserialize;

use crate::{
    journal::{Answer, Body, Choices},
    trust::Trust,
};

/// The embedded default (`pastebin up`) listens here.
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

/// One create, as sent: the key and exactly the request it names.
#[derive(Debug, Clone, Copy)]
pub struct CreateCall<'a> {
    pub key: IdempotencyKey,
    pub body: &'a Body,
    pub choices: &'a Choices,
    pub expires_in_seconds: u64,
}

/// A 201 (or its gRPC equivalent).
#[derive(Debug, Clone)]
pub struct Created {
    pub answer: Answer,
    /// The server replayed an earlier create under this key.
    pub replayed: bool,
}

/// Why a create did not come back with an answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CreateFailure {
    /// The server may have created the paste (timeout, connection lost,
    /// 503 with the saga left pending, 5xx): retry with the same key.
    #[error("{reason}")]
    Uncertain { reason: String, retry_after: Option<Duration> },
    /// The server answered and refused (400, 409, 413): retrying the same
    /// request cannot succeed, and nothing was created under this key.
    #[error("the server refused the paste ({code}): {message}")]
    Refused { code: String, message: String },
    /// No connection to the server could be made at all (refused, no
    /// route, an unknown host): the request never left this machine.
    #[error("cannot connect to the server: {0}")]
    NotSent(String),
    /// No secure connection could be made (an unknown CA, a name mismatch,
    /// a server that does not speak TLS): nothing was sent, and retrying
    /// cannot help until the setup changes.
    #[error("{0}")]
    Configuration(String),
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum DeleteFailure {
    /// 404: missing, already deleted or expired (one answer for all).
    #[error("no such paste on the server (already deleted or expired)")]
    NotFound,
    #[error("the server refused the delete token")]
    WrongToken,
    #[error("{0}")]
    Uncertain(String),
    #[error("the server refused the delete ({code}): {message}")]
    Refused { code: String, message: String },
    #[error("{0}")]
    Configuration(String),
}

/// A pastebin server, by URL scheme.
#[derive(Debug, Clone)]
pub enum Server {
    Http(HttpServer),
    Grpc(GrpcServer),
}

impl Server {
    /// `http://host:port` speaks the JSON API; `grpc://host:port` the gRPC
    /// API (plaintext HTTP/2). `timeout` bounds each call; `trust` says
    /// which certificates an `https://` server may present.
    pub fn connect(url: &str, timeout: Duration, trust: &Trust) -> anyhow::Result<Self> {
        let url = normalize_url(url);
        if matches!(trust, Trust::Pinned(_)) && !url.starts_with("https://") {
            anyhow::bail!("--server-cert pins an https:// server's certificate; {url} is not https://");
        }
        if let Some(rest) = url.strip_prefix("grpc://") {
            let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{rest}"))?
                .connect_timeout(timeout)
                .timeout(timeout);
            // Lazy: a server that is down is an uncertain create, not a setup error.
            let client = PasteApiClient::new(endpoint.connect_lazy());
            return Ok(Self::Grpc(GrpcServer { url, client, create_token: None }));
        }
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            anyhow::bail!("server URL {url:?} must start with http:// or grpc://");
        }
        let http = http_client(timeout, trust)?;
        Ok(Self::Http(HttpServer { url, http, create_token: None }))
    }

    /// Sends `token` as `Authorization: Bearer` with every create, for a
    /// server started with `--require-create-token`.
    pub fn with_create_token(mut self, token: Option<CreateToken>) -> Self {
        match &mut self {
            Self::Http(s) => s.create_token = token,
            Self::Grpc(s) => s.create_token = token,
        }
        self
    }

    /// The URL as recorded in the journal (no trailing slash).
    pub fn url(&self) -> &str {
        match self {
            Self::Http(s) => &s.url,
            Self::Grpc(s) => &s.url,
        }
    }

    pub async fn create(&self, call: CreateCall<'_>) -> Result<Created, CreateFailure> {
        match self {
            Self::Http(s) => s.create(call).await,
            Self::Grpc(s) => s.create(call).await,
        }
    }

    pub async fn delete(&self, id: &str, token: &str) -> Result<(), DeleteFailure> {
        match self {
            Self::Http(s) => s.delete(id, token).await,
            Self::Grpc(s) => s.delete(id, token).await,
        }
    }

    /// What the server publishes at `GET /api/v1/limits`; `None` when it
    /// does not (a gRPC server, an older server, no answer): then the
    /// server alone checks.
    pub async fn limits(&self) -> Option<PublishedLimits> {
        match self {
            Self::Http(s) => s.limits().await,
            Self::Grpc(_) => None,
        }
    }
}

/// The HTTP client every command uses: `timeout` on each call, and the
/// certificates `trust` accepts (the system's CAs, or one pinned).
pub(crate) fn http_client(timeout: Duration, trust: &Trust) -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .use_preconfigured_tls(trust.tls_config()?)
        .timeout(timeout)
        .connect_timeout(timeout)
        .build()?)
}

/// Trailing slashes dropped, so one server has one spelling in the journal.
pub fn normalize_url(url: &str) -> String {
    url.trim().trim_end_matches('/').to_owned()
}

#[derive(Debug, Clone)]
pub struct HttpServer {
    url: String,
    http: reqwest::Client,
    create_token: Option<CreateToken>,
}

#[derive(Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Deserialize)]
struct ErrorDetail {
    code: String,
    message: String,
}

impl HttpServer {
    async fn limits(&self) -> Option<PublishedLimits> {
        let response = self.http.get(format!("{}/api/v1/limits", self.url)).send().await.ok()?;
        response.status().is_success().then_some(())?;
        response.json().await.ok()
    }

    async fn create(&self, call: CreateCall<'_>) -> Result<Created, CreateFailure> {
        let request = self
            .http
            .post(format!("{}/api/v1/pastes", self.url))
            .header("Idempotency-Key", call.key.canonical())
            .header(header::ACCEPT, "application/json");
        // Text as JSON (as always); a file's bytes or an envelope as they
        // are, with its type and the choices in the query.
        let Choices { file_name, language, burn_after_reading } = call.choices;
        let request = match call.body {
            Body::Text(text) => {
                let mut json = serde_json::json!({ "content": text, "expires_in_seconds": call.expires_in_seconds });
                let fields = [
                    ("file_name", file_name.clone().map(Into::into)),
                    ("language", language.clone().map(Into::into)),
                    ("burn_after_reading", burn_after_reading.then_some(true.into())),
                ];
                for (name, value) in fields {
                    if let Some(value) = value {
                        json[name] = value;
                    }
                }
                request.json(&json)
            }
            Body::Binary { bytes, .. } | Body::Sealed { envelope: bytes } => {
                let mut query = vec![("expires_in_seconds", call.expires_in_seconds.to_string())];
                query.extend(file_name.iter().map(|name| ("file_name", name.clone())));
                query.extend(language.iter().map(|language| ("language", language.clone())));
                query.extend(burn_after_reading.then(|| ("burn_after_reading", "true".to_owned())));
                let media_type = call.body.media_type().unwrap_or(pastebin_sealed::MEDIA_TYPE);
                request.query(&query).header(header::CONTENT_TYPE, media_type).body(bytes.clone())
            }
        };
        let sent = match &self.create_token {
            Some(token) => request.bearer_auth(token.expose()),
            None => request,
        }
        .send()
        .await;
        let response = sent.map_err(|e| match tls_failure(&e) {
            Some(reason) => CreateFailure::Configuration(reason),
            // No connection, so no byte of the request was written.
            None if e.is_connect() => CreateFailure::NotSent(describe(&e)),
            None => CreateFailure::Uncertain { reason: describe(&e), retry_after: None },
        })?;
        let status = response.status();
        let replayed = response.headers().get("idempotent-replayed").is_some_and(|v| v.as_bytes() == b"true");
        let retry_after = response
            .headers()
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        // Losing the body of a 201 is losing the answer: still uncertain.
        let text = response.text().await.map_err(|e| CreateFailure::Uncertain {
            reason: format!("the answer was cut off: {}", describe(&e)),
            retry_after,
        })?;
        if status == StatusCode::CREATED {
            let answer: Answer = serde_json::from_str(&text).map_err(|e| CreateFailure::Uncertain {
                reason: format!("the server's 201 could not be read: {e}"),
                retry_after: None,
            })?;
            return Ok(Created { answer, replayed });
        }
        let (code, message) = match serde_json::from_str::<ErrorBody>(&text) {
            Ok(body) => (body.error.code, body.error.message),
            Err(_) => {
                (status.as_u16().to_string(), status.canonical_reason().unwrap_or("unexpected status").to_owned())
            }
        };
        if is_refusal(status) {
            Err(CreateFailure::Refused { code, message })
        } else {
            Err(CreateFailure::Uncertain { reason: format!("HTTP {}: {message}", status.as_u16()), retry_after })
        }
    }

    async fn delete(&self, id: &str, token: &str) -> Result<(), DeleteFailure> {
        let sent =
            self.http.delete(format!("{}/api/v1/pastes/{id}", self.url)).bearer_auth(token).send().await.map_err(
                |e| {
                    tls_failure(&e).map_or_else(|| DeleteFailure::Uncertain(describe(&e)), DeleteFailure::Configuration)
                },
            )?;
        let status = sent.status();
        match status {
            StatusCode::NO_CONTENT | StatusCode::OK => Ok(()),
            StatusCode::NOT_FOUND => Err(DeleteFailure::NotFound),
            StatusCode::FORBIDDEN => Err(DeleteFailure::WrongToken),
            _ => {
                let text = sent.text().await.unwrap_or_default();
                let (code, message) = match serde_json::from_str::<ErrorBody>(&text) {
                    Ok(body) => (body.error.code, body.error.message),
                    Err(_) => (status.as_u16().to_string(), text),
                };
                if is_refusal(status) {
                    Err(DeleteFailure::Refused { code, message })
                } else {
                    Err(DeleteFailure::Uncertain(format!("HTTP {}: {message}", status.as_u16())))
                }
            }
        }
    }
}

/// 4xx except 408 and 429 are the server's considered "no". Anything else
/// (5xx, 503 with the saga pending, a proxy's 502/504) may hide a success.
fn is_refusal(status: StatusCode) -> bool {
    status.is_client_error() && status != StatusCode::REQUEST_TIMEOUT && status != StatusCode::TOO_MANY_REQUESTS
}

/// A TLS handshake failure, explained as the setup problem it is; `None`
/// for any other failure.
pub(crate) fn tls_failure(error: &reqwest::Error) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = cause {
        if let Some(tls) = rustls_error_in(current) {
            return Some(format!(
                "cannot make a TLS connection to the server: {tls}. Nothing was sent. Check the --server URL, \
                 and if the server's certificate comes from a private CA (or is self-signed), point SSL_CERT_FILE \
                 at that CA's (or that certificate's) PEM file, or pin it with --server-cert"
            ));
        }
        cause = current.source();
    }
    None
}

/// The rustls error `error` is or wraps. rustls reports through an
/// `io::Error`, often boxed, and both skip the wrapped error in `source()`,
/// so each wrapper is opened by hand.
fn rustls_error_in<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    if let Some(tls) = error.downcast_ref::<rustls::Error>() {
        return Some(tls);
    }
    if let Some(inner) = error.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
        return rustls_error_in(inner);
    }
    None
}

/// reqwest's top-level message plus its causes ("error sending request" alone
/// says nothing).
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[derive(Debug, Clone)]
pub struct GrpcServer {
    url: String,
    client: PasteApiClient<tonic::transport::Channel>,
    create_token: Option<CreateToken>,
}

impl GrpcServer {
    async fn create(&self, call: CreateCall<'_>) -> Result<Created, CreateFailure> {
        let (content, data) = match call.body {
            Body::Text(text) => (text.clone(), Vec::new()),
            Body::Binary { bytes, .. } | Body::Sealed { envelope: bytes } => (String::new(), bytes.clone()),
        };
        let request = CreatePasteRequest {
            request_id: call.key.canonical(),
            content,
            expires_in_seconds: Some(call.expires_in_seconds),
            data,
            media_type: call.body.media_type().map(str::to_owned),
            file_name: call.choices.file_name.clone(),
            language: call.choices.language.clone(),
            burn_after_reading: call.choices.burn_after_reading,
            sealed: matches!(call.body, Body::Sealed { .. }),
        };
        let mut request = tonic::Request::new(request);
        if let Some(token) = &self.create_token {
            let value = format!("Bearer {}", token.expose()).parse().map_err(|_| {
                CreateFailure::Configuration("the create token has characters a header cannot carry".into())
            })?;
            request.metadata_mut().insert("authorization", value);
        }
        match self.client.clone().create_paste(request).await {
            Ok(response) => {
                let r = response.into_inner();
                let answer = Answer {
                    id: r.id,
                    url: r.url,
                    raw_url: r.raw_url,
                    expires_at: r.expires_at,
                    delete_token: r.delete_token,
                };
                Ok(Created { answer, replayed: r.replayed })
            }
            Err(status) if is_grpc_refusal(status.code()) => Err(CreateFailure::Refused {
                code: format!("{:?}", status.code()),
                message: status.message().to_owned(),
            }),
            Err(status) if never_connected(&status) => Err(CreateFailure::NotSent(status.message().to_owned())),
            Err(status) => Err(CreateFailure::Uncertain {
                reason: format!("gRPC {:?}: {}", status.code(), status.message()),
                // The gateway asks for 1 s over HTTP; gRPC carries no hint.
                retry_after: None,
            }),
        }
    }

    async fn delete(&self, id: &str, token: &str) -> Result<(), DeleteFailure> {
        let request = DeletePasteRequest { id: id.to_owned(), delete_token: token.to_owned() };
        match self.client.clone().delete_paste(request).await {
            Ok(_) => Ok(()),
            Err(status) => Err(match status.code() {
                tonic::Code::NotFound => DeleteFailure::NotFound,
                tonic::Code::PermissionDenied => DeleteFailure::WrongToken,
                code if is_grpc_refusal(code) => {
                    DeleteFailure::Refused { code: format!("{code:?}"), message: status.message().to_owned() }
                }
                code => DeleteFailure::Uncertain(format!("gRPC {code:?}: {}", status.message())),
            }),
        }
    }
}

/// Whether the call failed for want of a connection: the channel connects
/// lazily, and a refused connection means the request was never written.
fn never_connected(status: &tonic::Status) -> bool {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    while let Some(current) = cause {
        if current.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            return true;
        }
        cause = current.source();
    }
    false
}

/// The codes the gateway uses for a considered "no" (docs/design.md#status-codes). Everything
/// else — UNAVAILABLE, DEADLINE_EXCEEDED, UNKNOWN, INTERNAL — may hide a success.
fn is_grpc_refusal(code: tonic::Code) -> bool {
    use tonic::Code::*;
    matches!(
        code,
        InvalidArgument
            | FailedPrecondition
            | AlreadyExists
            | ResourceExhausted
            | NotFound
            | PermissionDenied
            | Unimplemented
            | Unauthenticated
            | OutOfRange
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TLS client that meets a server speaking plain HTTP: a setup problem.
    #[tokio::test]
    async fn a_tls_failure_is_a_configuration_error_not_an_uncertain_create() {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n").await;
            }
        });
        let server = Server::connect(&url, Duration::from_secs(5), &Trust::System).unwrap();
        let call = CreateCall {
            key: IdempotencyKey::new_random(),
            body: &Body::Text("x".into()),
            choices: &Choices::default(),
            expires_in_seconds: 3600,
        };
        match server.create(call).await {
            Err(CreateFailure::Configuration(reason)) => assert!(reason.contains("SSL_CERT_FILE"), "{reason}"),
            other => panic!("expected a configuration error, got {other:?}"),
        }
    }
}
