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

/// A report's note: trimmed, `None` when empty, refused past
/// [`MAX_REPORT_NOTE_CHARS`].
pub fn report_note(raw: Option<&str>) -> Result<Option<String>, ReportError> {
    let note = raw.map(str::trim).filter(|note| !note.is_empty());
    match note {
        Some(note) if note.chars().count() > MAX_REPORT_NOTE_CHARS => Err(ReportError::NoteTooLong),
        note => Ok(note.map(str::to_owned)),
    }
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
}
