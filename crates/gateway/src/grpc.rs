//! The public gRPC API: the same [`Gateway`] as HTTP, with the status mapping
//! of docs/design.md#status-codes (from [`ApiError`]).

use pastebin_edge::refusals::Protocol;
use pastebin_proto::api::v1::{self as pb, paste_api_server::PasteApiServer};
use tonic::{Request, Response, Status};

use bytes::Bytes;

use crate::{
    access_log::grpc_call,
    gateway::{HeldRead, Reader},
    ApiError, CreateCommand, Gateway, ReadPaste,
};

pub(crate) const SERVICE_NAME: &str = "pastebin.v1.PasteApi";

pub struct PasteApiService {
    gateway: Gateway,
}

impl PasteApiService {
    pub fn new(gateway: Gateway) -> Self {
        Self { gateway }
    }

    pub fn into_server(self) -> PasteApiServer<Self> {
        let limit = max_message_bytes(self.gateway.settings().max_content_bytes);
        PasteApiServer::new(self).max_decoding_message_size(limit)
    }
}

/// The longest request message the API decodes. Messages up to 4x the
/// content limit are decoded so that a paste just over the limit gets our
/// RESOURCE_EXHAUSTED; anything larger is refused on its prefix, before a
/// byte of it is held (pastebin_edge::grpc).
pub(crate) fn max_message_bytes(max_content_bytes: usize) -> usize {
    max_content_bytes.saturating_mul(4).saturating_add(64 * 1024)
}

/// The client as the listener's edge admitted the call: the socket peer,
/// or behind a trusted proxy the address it forwarded (docs/security.md#fair-shares).
fn admitted_client<T>(request: &Request<T>) -> Option<std::net::IpAddr> {
    let admitted = request.extensions().get::<pastebin_edge::grpc::Client>().map(|client| client.0);
    admitted.or_else(|| request.remote_addr().map(|peer| peer.ip()))
}

/// Text travels in `content`, binary in `data` with `media_type`, a sealed
/// envelope in `data` with `sealed`; a
/// request with both is ambiguous and refused. Clients that predate `data`
/// send only `content` and keep their old request hashes.
fn create_command(request: pb::CreatePasteRequest) -> Result<CreateCommand, ApiError> {
    let binary = !request.data.is_empty() || request.media_type.is_some() || request.sealed;
    if binary && !request.content.is_empty() {
        return Err(ApiError::InvalidRequest("send text in content or bytes in data, not both".into()));
    }
    let (content, media_type) = if request.sealed {
        (request.data, request.media_type)
    } else if binary {
        (request.data, Some(request.media_type.unwrap_or_else(|| "application/octet-stream".into())))
    } else {
        (request.content.into_bytes(), None)
    };
    Ok(CreateCommand {
        idempotency_key: Some(request.request_id),
        content,
        expires_in_seconds: request.expires_in_seconds,
        media_type,
        file_name: request.file_name,
        language: request.language,
        burn_after_reading: request.burn_after_reading,
        sealed: request.sealed,
    })
}

/// Each call's full method name, as its access line and counter name it.
const CREATE: &str = "/pastebin.v1.PasteApi/CreatePaste";
const GET: &str = "/pastebin.v1.PasteApi/GetPaste";
const DELETE: &str = "/pastebin.v1.PasteApi/DeletePaste";
const REPORT: &str = "/pastebin.v1.PasteApi/ReportPaste";

/// Every call is logged and counted once its answer is known
/// ([`crate::access_log::grpc_call`]); the calls themselves are below.
#[tonic::async_trait]
impl pb::paste_api_server::PasteApi for PasteApiService {
    async fn create_paste(
        &self,
        request: Request<pb::CreatePasteRequest>,
    ) -> Result<Response<pb::CreatePasteResponse>, Status> {
        let (started, key) = (std::time::Instant::now(), request.get_ref().request_id.clone());
        grpc_call(CREATE, started, Some(&key), self.create(request).await)
    }

    async fn get_paste(&self, request: Request<pb::GetPasteRequest>) -> Result<Response<pb::Paste>, Status> {
        let started = std::time::Instant::now();
        grpc_call(GET, started, None, self.get(request).await)
    }

    async fn delete_paste(
        &self,
        request: Request<pb::DeletePasteRequest>,
    ) -> Result<Response<pb::DeletePasteResponse>, Status> {
        let started = std::time::Instant::now();
        grpc_call(DELETE, started, None, self.delete(request).await)
    }

    async fn report_paste(
        &self,
        request: Request<pb::ReportPasteRequest>,
    ) -> Result<Response<pb::ReportPasteResponse>, Status> {
        let started = std::time::Instant::now();
        grpc_call(REPORT, started, None, self.report(request).await)
    }
}

impl PasteApiService {
    async fn create(
        &self,
        request: Request<pb::CreatePasteRequest>,
    ) -> Result<Response<pb::CreatePasteResponse>, Status> {
        let client = admitted_client(&request);
        let bearer = request
            .metadata()
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .and_then(crate::admission::bearer_token)
            .map(str::to_owned);
        self.gateway.admit_create(client, bearer.as_deref())?;
        let answer = self.gateway.create(create_command(request.into_inner())?).await?;
        let created = answer.created;
        Ok(Response::new(pb::CreatePasteResponse {
            id: created.id,
            url: created.url,
            raw_url: created.raw_url,
            expires_at: created.expires_at,
            delete_token: created.delete_token,
            replayed: answer.replayed,
            adopted: created.adopted,
        }))
    }

    /// The paste, its bytes shared with the cache or the store's read (a
    /// text paste's are copied into its string), holding its share of the
    /// answer budget until the answer is sent (pastebin_edge::answer_budget).
    async fn get(&self, request: Request<pb::GetPasteRequest>) -> Result<Response<pb::Paste>, Status> {
        let reader = Reader { protocol: Protocol::Grpc, client: admitted_client(&request) };
        let HeldRead { read: ReadPaste { view, content }, held } =
            self.gateway.read_for(reader, &request.into_inner().id).await?;
        let attributes = view.attributes;
        let (text, data) = if attributes.is_binary() {
            (String::new(), content)
        } else {
            (String::from_utf8_lossy(&content).into_owned(), Bytes::new())
        };
        let mut answer = Response::new(pb::Paste {
            id: view.id,
            content: text,
            created_at: view.created_at,
            expires_at: view.expires_at,
            size: view.size,
            data,
            media_type: attributes.media_type.map(|t| t.as_str().to_owned()),
            language: attributes.language.map(|l| l.as_str().to_owned()),
            burn_after_reading: attributes.burn_after_reading,
            file_name: attributes.file_name.map(|n| n.as_str().to_owned()),
            sealed: attributes.sealed,
        });
        answer.extensions_mut().insert(held);
        Ok(answer)
    }

    async fn delete(
        &self,
        request: Request<pb::DeletePasteRequest>,
    ) -> Result<Response<pb::DeletePasteResponse>, Status> {
        self.gateway.admit_delete(Protocol::Grpc, admitted_client(&request))?;
        let request = request.into_inner();
        self.gateway.delete(&request.id, &request.delete_token).await?;
        Ok(Response::new(pb::DeletePasteResponse {}))
    }

    async fn report(
        &self,
        request: Request<pb::ReportPasteRequest>,
    ) -> Result<Response<pb::ReportPasteResponse>, Status> {
        self.gateway.admit_report(Protocol::Grpc, admitted_client(&request))?;
        let request = request.into_inner();
        self.gateway.report(&request.id, &request.reason, request.note.as_deref()).await?;
        Ok(Response::new(pb::ReportPasteResponse {}))
    }
}
