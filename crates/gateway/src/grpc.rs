//! The public gRPC API: the same [`Gateway`] as HTTP, with the status mapping
//! of docs/design.md#status-codes (from [`ApiError`]).

use pastebin_proto::api::v1::{self as pb, paste_api_server::PasteApiServer};
use tonic::{Request, Response, Status};

use crate::{CreateCommand, Gateway};

pub(crate) const SERVICE_NAME: &str = "pastebin.v1.PasteApi";

pub struct PasteApiService {
    gateway: Gateway,
}

impl PasteApiService {
    pub fn new(gateway: Gateway) -> Self {
        Self { gateway }
    }

    pub fn into_server(self) -> PasteApiServer<Self> {
        let limit = self.gateway.settings().max_content_bytes;
        // Messages up to 4x the content limit are decoded so that a paste
        // just over the limit gets our RESOURCE_EXHAUSTED; anything larger is
        // refused by tonic before decoding (OUT_OF_RANGE), bounding memory.
        PasteApiServer::new(self).max_decoding_message_size(limit.saturating_mul(4).saturating_add(64 * 1024))
    }
}

#[tonic::async_trait]
impl pb::paste_api_server::PasteApi for PasteApiService {
    async fn create_paste(
        &self,
        request: Request<pb::CreatePasteRequest>,
    ) -> Result<Response<pb::CreatePasteResponse>, Status> {
        // Over gRPC the client is the socket peer: no proxy header is believed here.
        let bearer = request
            .metadata()
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .and_then(crate::admission::bearer_token)
            .map(str::to_owned);
        self.gateway.admit_create(request.remote_addr().map(|peer| peer.ip()), bearer.as_deref())?;
        let request = request.into_inner();
        let answer = self
            .gateway
            .create(CreateCommand {
                idempotency_key: Some(request.request_id),
                content: request.content,
                expires_in_seconds: request.expires_in_seconds,
            })
            .await?;
        let created = answer.created;
        Ok(Response::new(pb::CreatePasteResponse {
            id: created.id,
            url: created.url,
            raw_url: created.raw_url,
            expires_at: created.expires_at,
            delete_token: created.delete_token,
            replayed: answer.replayed,
        }))
    }

    async fn get_paste(&self, request: Request<pb::GetPasteRequest>) -> Result<Response<pb::Paste>, Status> {
        let paste = self.gateway.get(&request.into_inner().id).await?;
        Ok(Response::new(pb::Paste {
            id: paste.id,
            content: paste.content,
            created_at: paste.created_at,
            expires_at: paste.expires_at,
            size: paste.size,
        }))
    }

    async fn delete_paste(
        &self,
        request: Request<pb::DeletePasteRequest>,
    ) -> Result<Response<pb::DeletePasteResponse>, Status> {
        let request = request.into_inner();
        self.gateway.delete(&request.id, &request.delete_token).await?;
        Ok(Response::new(pb::DeletePasteResponse {}))
    }
}
