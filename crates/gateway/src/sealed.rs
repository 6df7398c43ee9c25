//! What the gateway checks of a sealed paste (docs/api.md#sealed-pastes):
//! an envelope any reader with the key could open, and nothing beside it
//! that the server could read. The key never reaches the server, so this
//! is all it can check; the envelope is stored byte for byte.

use pastebin_core::PasteAttributes;

use crate::ApiError;

const READABLE_ATTRIBUTES: &str = "a sealed paste has no media type, file name or language: the server would \
     store them readable; keep them inside the sealed text";

/// Step 1's check of a sealed create, after its size (the envelope's bytes
/// count against the content limit) and before anything is stored.
pub(crate) fn check(envelope: &[u8], attributes: &PasteAttributes) -> Result<(), ApiError> {
    if attributes.media_type.is_some() || attributes.file_name.is_some() || attributes.language.is_some() {
        return Err(ApiError::InvalidRequest(READABLE_ATTRIBUTES.into()));
    }
    pastebin_sealed::Envelope::parse(envelope).map_err(|error| ApiError::InvalidRequest(error.to_string()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use pastebin_core::Language;

    use super::*;

    #[test]
    fn an_envelope_alone_passes_and_anything_else_is_a_400() {
        let sealed = pastebin_sealed::seal(b"secret", None).unwrap();
        let plain = PasteAttributes { sealed: true, ..PasteAttributes::default() };
        assert!(check(&sealed.envelope, &plain).is_ok());
        let error = check(b"secret", &plain).unwrap_err();
        assert_eq!(error.code(), "invalid_request");
        assert!(!error.to_string().contains("secret"), "the refusal never echoes the content: {error}");
        let labelled = PasteAttributes { language: Some(Language::parse("rust").unwrap()), ..plain };
        assert_eq!(check(&sealed.envelope, &labelled).unwrap_err().to_string(), READABLE_ATTRIBUTES);
    }
}
