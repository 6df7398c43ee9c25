//! A reader's report of a paste (docs/operations.md#reports-and-takedowns):
//! why, from a short list, and an optional note of bounded length.

/// Why a reader reports a paste.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportReason {
    Spam,
    Malware,
    Illegal,
    PersonalData,
    Other,
}

/// The longest note a report may carry, in characters: enough to say what
/// is wrong, too little to be a second paste.
pub const MAX_REPORT_NOTE_CHARS: usize = 500;

/// The longest reason an operator may give for a takedown, in characters.
pub const MAX_TAKEDOWN_REASON_CHARS: usize = 500;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReportError {
    #[error("reason must be one of spam, malware, illegal, personal-data, other")]
    Reason,
    #[error("note must be at most 500 characters")]
    NoteTooLong,
}

impl ReportReason {
    pub const ALL: [ReportReason; 5] = [Self::Spam, Self::Malware, Self::Illegal, Self::PersonalData, Self::Other];

    pub fn parse(raw: &str) -> Result<Self, ReportError> {
        Self::ALL.into_iter().find(|reason| reason.as_str() == raw).ok_or(ReportError::Reason)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Spam => "spam",
            Self::Malware => "malware",
            Self::Illegal => "illegal",
            Self::PersonalData => "personal-data",
            Self::Other => "other",
        }
    }
}

/// A sealed paste's key is 32 bytes in base64url without padding: 43
/// characters (docs/api.md#sealed-pastes). A delete token has the same shape.
const KEY_CHARS: usize = 43;

/// What stands in a note for a removed `#` fragment: no longer than the
/// shortest fragment it replaces (`#` and one character), so a note within
/// [`MAX_REPORT_NOTE_CHARS`] stays within it.
const FRAGMENT_REMOVED: &str = "#…";
/// What stands for a removed key-like token (shorter than any token).
const KEY_REMOVED: &str = "[key removed]";

/// A report's note: trimmed, `None` when empty, refused past
/// [`MAX_REPORT_NOTE_CHARS`], and with anything that looks like a link key
/// taken out ([`without_link_keys`]): a reporter who pastes a sealed
/// paste's whole link must not put its key in the server's database.
pub fn report_note(raw: Option<&str>) -> Result<Option<String>, ReportError> {
    let note = raw.map(str::trim).filter(|note| !note.is_empty());
    match note {
        Some(note) if note.chars().count() > MAX_REPORT_NOTE_CHARS => Err(ReportError::NoteTooLong),
        note => Ok(note.map(without_link_keys)),
    }
}

/// `note` without link keys (docs/security.md#reports): every `#` fragment
/// (a `#` and the non-blank characters after it, where a link carries a
/// sealed paste's key) becomes `#…`, and every run of at least 43 base64url
/// characters (a key or a delete token, even outside a link) becomes
/// `[key removed]`. Never longer than `note`.
pub fn without_link_keys(note: &str) -> String {
    let is_key_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    let mut kept = String::with_capacity(note.len());
    let mut rest = note;
    while let Some(c) = rest.chars().next() {
        if c == '#' {
            let fragment = rest[1..].find(char::is_whitespace).map_or(rest.len(), |end| end + 1);
            if fragment > 1 {
                kept.push_str(FRAGMENT_REMOVED);
                rest = &rest[fragment..];
                continue;
            }
        } else if is_key_char(c) {
            let run = rest.find(|c: char| !is_key_char(c)).unwrap_or(rest.len());
            kept.push_str(if run >= KEY_CHARS { KEY_REMOVED } else { &rest[..run] });
            rest = &rest[run..];
            continue;
        }
        kept.push(c);
        rest = &rest[c.len_utf8()..];
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_read_back_and_others_are_refused() {
        for reason in ReportReason::ALL {
            assert_eq!(ReportReason::parse(reason.as_str()), Ok(reason));
        }
        assert_eq!(ReportReason::parse("Spam"), Err(ReportError::Reason));
    }

    #[test]
    fn notes_are_trimmed_and_bounded() {
        assert_eq!(report_note(Some("  ")), Ok(None));
        assert_eq!(report_note(Some(" x ")), Ok(Some("x".into())));
        assert_eq!(report_note(Some(&"é".repeat(500))).map(|n| n.map(|n| n.chars().count())), Ok(Some(500)));
        assert_eq!(report_note(Some(&"é".repeat(501))), Err(ReportError::NoteTooLong));
    }

    #[test]
    fn a_note_keeps_no_link_key() {
        let key = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_AbCdE";
        assert_eq!(key.len(), KEY_CHARS);
        let note = format!("see https://paste.example/00AbCdEfGhIjKl#{key} and {key}, also #5 and # alone");
        assert_eq!(
            report_note(Some(&note)),
            Ok(Some("see https://paste.example/00AbCdEfGhIjKl#… and [key removed], also #… and # alone".into()))
        );
        // Shorter runs are words, ids and hashes of the note's own.
        assert_eq!(without_link_keys("id 00AbCdEfGhIjKl é"), "id 00AbCdEfGhIjKl é");
        assert_eq!(without_link_keys(&format!("x{key}y")), "[key removed]");
        // Never longer than what came in, so the bound still holds.
        let dense = "#a ".repeat(166);
        assert!(report_note(Some(&dense)).unwrap().unwrap().chars().count() <= dense.trim().chars().count());
    }
}
