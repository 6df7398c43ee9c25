//! `Debug` for the messages that carry a secret (the list is in `build.rs`):
//! the delete token, the stored 201 (which holds it) and the idempotency key
//! print as `<redacted>`, so a `?request` in a log line or a panic cannot
//! leak one (docs/security.md#the-secrets-and-where-they-live).

use std::fmt;

use crate::{
    api::v1::{CreatePasteRequest, CreatePasteResponse, DeletePasteRequest},
    keys::v1::{AdoptRequest, BeginRequest, KeyRecord, RestartRequest},
    pastes::v1::DeleteRequest,
};

const REDACTED: &str = "<redacted>";

impl fmt::Debug for CreatePasteRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CreatePasteRequest")
            .field("request_id", &REDACTED)
            .field("content_bytes", &self.content.len())
            .field("data_bytes", &self.data.len())
            .field("expires_in_seconds", &self.expires_in_seconds)
            .field("media_type", &self.media_type)
            .field("language", &self.language)
            .field("burn_after_reading", &self.burn_after_reading)
            .field("file_name", &self.file_name)
            .field("sealed", &self.sealed)
            .finish()
    }
}

impl fmt::Debug for CreatePasteResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CreatePasteResponse")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("raw_url", &self.raw_url)
            .field("expires_at", &self.expires_at)
            .field("delete_token", &REDACTED)
            .field("replayed", &self.replayed)
            .field("adopted", &self.adopted)
            .finish()
    }
}

impl fmt::Debug for DeletePasteRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeletePasteRequest").field("id", &self.id).field("delete_token", &REDACTED).finish()
    }
}

impl fmt::Debug for DeleteRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeleteRequest").field("id", &self.id).field("delete_token", &REDACTED).finish()
    }
}

impl fmt::Debug for KeyRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyRecord")
            .field("key", &REDACTED)
            .field("paste_id", &self.paste_id)
            .field("state", &self.state)
            .field("response_body", &REDACTED)
            .field("created_at_ms", &self.created_at_ms)
            .field("retain_until_ms", &self.retain_until_ms)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for BeginRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BeginRequest")
            .field("key", &REDACTED)
            .field("paste_id", &self.paste_id)
            .field("response_body", &REDACTED)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for RestartRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RestartRequest")
            .field("key", &REDACTED)
            .field("aborted_paste_id", &self.aborted_paste_id)
            .field("paste_id", &self.paste_id)
            .field("response_body", &REDACTED)
            .finish()
    }
}

impl fmt::Debug for AdoptRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdoptRequest")
            .field("key", &REDACTED)
            .field("pending_paste_id", &self.pending_paste_id)
            .field("paste_id", &self.paste_id)
            .field("response_body", &REDACTED)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "6f9619ff-8b86-d011-b42d-00c04fc964ff";
    const TOKEN: &str = "q3Yc-delete-token-never-printed-8Jd0";
    const STORED: &[u8] = b"{\"id\":\"AB12\",\"delete_token\":\"q3Yc-delete-token-never-printed-8Jd0\"}";

    /// Every redacted message, formatted, and the id it still shows.
    fn printed() -> Vec<(String, &'static str)> {
        let id = "AB12cd34EF56gh";
        let stored = STORED.to_vec();
        vec![
            (format!("{:?}", CreatePasteRequest { request_id: KEY.into(), ..Default::default() }), ""),
            (
                format!(
                    "{:?}",
                    CreatePasteResponse { id: id.into(), delete_token: TOKEN.into(), ..Default::default() }
                ),
                id,
            ),
            (format!("{:?}", DeletePasteRequest { id: id.into(), delete_token: TOKEN.into() }), id),
            (format!("{:?}", DeleteRequest { id: id.into(), delete_token: TOKEN.into() }), id),
            (
                format!(
                    "{:?}",
                    KeyRecord {
                        key: KEY.into(),
                        paste_id: id.into(),
                        response_body: stored.clone(),
                        ..Default::default()
                    }
                ),
                id,
            ),
            (
                format!(
                    "{:?}",
                    BeginRequest {
                        key: KEY.into(),
                        paste_id: id.into(),
                        response_body: stored.clone(),
                        ..Default::default()
                    }
                ),
                id,
            ),
            (
                format!(
                    "{:?}",
                    RestartRequest {
                        key: KEY.into(),
                        paste_id: id.into(),
                        response_body: stored.clone(),
                        ..Default::default()
                    }
                ),
                id,
            ),
            (
                format!(
                    "{:?}",
                    AdoptRequest { key: KEY.into(), paste_id: id.into(), response_body: stored, ..Default::default() }
                ),
                id,
            ),
        ]
    }

    #[test]
    fn a_message_with_a_secret_prints_without_it() {
        let stored_bytes = format!("{:?}", STORED.to_vec());
        for (printed, id) in printed() {
            assert!(printed.contains(REDACTED), "{printed}");
            assert!(printed.contains(id), "the non-secret fields still show: {printed}");
            for secret in [KEY, TOKEN, &stored_bytes] {
                assert!(!printed.contains(secret), "{printed}");
            }
        }
    }
}
