//! The paste attributes on the wire, one conversion each way, shared by the
//! service and its client.

use pastebin_core::{AttributeError, FileName, Language, MediaType, PasteAttributes};
use pastebin_proto::pastes::v1 as pb;

pub(crate) fn attributes_to_pb(attributes: &PasteAttributes) -> pb::PasteAttributes {
    pb::PasteAttributes {
        media_type: attributes.media_type.as_ref().map(|t| t.as_str().to_owned()),
        file_name: attributes.file_name.as_ref().map(|n| n.as_str().to_owned()),
        language: attributes.language.as_ref().map(|l| l.as_str().to_owned()),
        burn_after_reading: attributes.burn_after_reading,
    }
}

/// An absent message is a plain text paste (what a caller that predates
/// the attributes sends).
pub(crate) fn attributes_from_pb(raw: Option<pb::PasteAttributes>) -> Result<PasteAttributes, AttributeError> {
    let raw = raw.unwrap_or_default();
    Ok(PasteAttributes {
        media_type: raw.media_type.as_deref().map(MediaType::parse).transpose()?,
        file_name: raw.file_name.as_deref().map(FileName::parse).transpose()?,
        language: raw.language.as_deref().map(Language::parse).transpose()?,
        burn_after_reading: raw.burn_after_reading,
    })
}
