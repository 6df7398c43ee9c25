use std::fmt;

use pastebin_core::{DeleteToken, PasteId, ResponseBody};
use serde::{Deserialize, Serialize};

/// The 201 body: minted at step 1, stored on K at step 2, shown only after
/// step 5. Its JSON form is what K stores, so a replay returns the very same
/// bytes; the text form is derived from it deterministically.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Created {
    pub id: String,
    pub url: String,
    pub raw_url: String,
    /// RFC 3339, UTC, whole seconds.
    pub expires_at: String,
    pub delete_token: String,
}

impl Created {
    pub fn new(id: &PasteId, public_url: &str, expires_at: chrono::DateTime<chrono::Utc>, token: &DeleteToken) -> Self {
        Self {
            id: id.to_string(),
            url: format!("{public_url}/{id}"),
            raw_url: format!("{public_url}/raw/{id}"),
            expires_at: expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            delete_token: token.expose().to_owned(),
        }
    }

    pub fn to_stored(&self) -> ResponseBody {
        // Serializing a struct of strings cannot fail.
        ResponseBody::new(serde_json::to_string(self).expect("a struct of strings serializes"))
    }

    pub fn from_stored(body: &ResponseBody) -> Option<Self> {
        serde_json::from_str(body.expose()).ok()
    }

    /// The `text/plain` answer: the share URL, then the delete token.
    pub fn to_text(&self) -> String {
        format!("{}\n{}\n", self.url, self.delete_token)
    }

    pub fn expires_at(&self) -> Option<chrono::DateTime<chrono::Utc>> {
        chrono::DateTime::parse_from_rfc3339(&self.expires_at).ok().map(|at| at.to_utc())
    }
}

impl fmt::Debug for Created {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Created").field("id", &self.id).field("expires_at", &self.expires_at).finish_non_exhaustive()
    }
}
