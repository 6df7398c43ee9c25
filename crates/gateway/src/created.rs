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
    /// True when a K loss erased this key's record and the paste its first
    /// create made was found and adopted, under a new delete token
    /// (docs/design.md#adopting-after-a-k-loss). Absent otherwise, so every
    /// other stored body is byte-identical to before the field existed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub adopted: bool,
}

impl Created {
    pub fn new(id: &PasteId, public_url: &str, expires_at: chrono::DateTime<chrono::Utc>, token: &DeleteToken) -> Self {
        Self {
            id: id.to_string(),
            url: format!("{public_url}/{id}"),
            raw_url: format!("{public_url}/raw/{id}"),
            expires_at: expires_at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            delete_token: token.expose().to_owned(),
            adopted: false,
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn a_body_that_was_not_adopted_does_not_say_so() {
        let expires_at = chrono::DateTime::from_timestamp(1_900_000_000, 0).unwrap();
        let created =
            Created::new(&PasteId::mint(pastebin_core::Slot(3)), "http://x", expires_at, &DeleteToken::generate());
        assert!(!created.to_stored().expose().contains("adopted"));
        let adopted = Created { adopted: true, ..created };
        assert!(adopted.to_stored().expose().contains("\"adopted\":true"));
    }

    // The stored-201 decoder reads what K hands back (docs/testing.md#fuzzing).
    proptest! {
        #[test]
        fn any_stored_body_decodes_or_is_refused(raw in ".{0,200}") {
            let _ = Created::from_stored(&ResponseBody::new(raw));
        }

        #[test]
        fn a_created_answer_round_trips_through_its_stored_form(id in "[0-9A-Za-z]{14}", url in "https?://[a-z.:0-9]{1,30}", seconds in 60u32..31_536_000, adopted: bool) {
            let expires_at = chrono::DateTime::from_timestamp(1_900_000_000 + i64::from(seconds), 0).unwrap();
            let created = Created::new(&PasteId::parse(&id).unwrap_or_else(|_| PasteId::mint(pastebin_core::Slot(0))), &url, expires_at, &DeleteToken::generate());
            let created = Created { adopted, ..created };
            let stored = created.to_stored();
            prop_assert_eq!(Created::from_stored(&stored), Some(created.clone()));
            prop_assert_eq!(created.expires_at(), Some(expires_at));
        }
    }
}
