//! What a reader sees besides the bytes: the media type of a binary paste,
//! the file name it was uploaded as, the language to highlight it in,
//! whether the first read burns it, and whether its bytes are a sealed
//! envelope the server cannot read. Chosen at create, part of the request
//! hash, stored on the paste row (docs/reader-features.md#where-attributes-live).

use std::fmt;

/// The longest media type, file name and language accepted, in bytes.
pub const MAX_MEDIA_TYPE_BYTES: usize = 255;
pub const MAX_FILE_NAME_BYTES: usize = 255;
pub const MAX_LANGUAGE_BYTES: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AttributeError {
    #[error("media_type must be a type/subtype such as image/png (at most 255 characters)")]
    MediaType,
    #[error("file_name must be 1 to 255 bytes with no path separators or control characters")]
    FileName,
    #[error("language must be 1 to 64 letters, digits or + # . _ -")]
    Language,
}

/// A binary paste's media type, lowercased, parameters kept (e.g.
/// `text/html; charset=utf-8`), so the same header always hashes the same.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct MediaType(String);

fn is_token(part: &str) -> bool {
    !part.is_empty() && part.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
}

impl MediaType {
    pub fn parse(raw: &str) -> Result<Self, AttributeError> {
        let normalized: String = raw.trim().to_ascii_lowercase();
        if normalized.len() > MAX_MEDIA_TYPE_BYTES || normalized.bytes().any(|b| !(b' '..=b'~').contains(&b)) {
            return Err(AttributeError::MediaType);
        }
        let essence = normalized.split(';').next().unwrap_or_default().trim();
        match essence.split_once('/') {
            Some((kind, subtype)) if is_token(kind) && is_token(subtype) => Ok(Self(normalized)),
            _ => Err(AttributeError::MediaType),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `type/subtype` without parameters.
    pub fn essence(&self) -> &str {
        self.0.split(';').next().unwrap_or_default().trim()
    }

    /// Types a browser shows by itself without running anything: `/raw`
    /// may serve these inline. Everything else (HTML, SVG, XML, PDF,
    /// scripts, and whatever is unknown) is served as an attachment, so
    /// opening a raw link can never render active content on this origin
    /// (docs/reader-features.md#binary-content).
    pub fn is_passive(&self) -> bool {
        let essence = self.essence();
        matches!(
            essence,
            "text/plain"
                | "application/json"
                | "image/png"
                | "image/jpeg"
                | "image/gif"
                | "image/webp"
                | "image/avif"
                | "image/bmp"
        ) || essence.starts_with("audio/")
            || essence.starts_with("video/")
    }

    /// Raster images the paste page may show inline with `<img>`.
    pub fn is_inline_image(&self) -> bool {
        self.is_passive() && self.essence().starts_with("image/")
    }
}

impl fmt::Debug for MediaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "MediaType({})", self.0)
    }
}

impl fmt::Display for MediaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The name a paste was uploaded as: the download's file name and, by its
/// extension, a language hint. A bare name, never a path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FileName(String);

impl FileName {
    pub fn parse(raw: &str) -> Result<Self, AttributeError> {
        let bad = raw.is_empty()
            || raw.len() > MAX_FILE_NAME_BYTES
            || raw == "."
            || raw == ".."
            || raw.chars().any(|c| c == '/' || c == '\\' || c.is_control());
        if bad {
            return Err(AttributeError::FileName);
        }
        Ok(Self(raw.to_owned()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The part after the last dot, if there is one that is not the whole name.
    pub fn extension(&self) -> Option<&str> {
        self.0.rsplit_once('.').filter(|(stem, ext)| !stem.is_empty() && !ext.is_empty()).map(|(_, ext)| ext)
    }
}

/// A language name or extension as the client gave it (`rust`, `rs`,
/// `Python`). Unknown names are kept: they render as plain text.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Language(String);

impl Language {
    pub fn parse(raw: &str) -> Result<Self, AttributeError> {
        let ok = !raw.is_empty()
            && raw.len() <= MAX_LANGUAGE_BYTES
            && raw.bytes().all(|b| b.is_ascii_alphanumeric() || b"+#._- ".contains(&b));
        if ok {
            Ok(Self(raw.to_owned()))
        } else {
            Err(AttributeError::Language)
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Everything about a paste besides its bytes and expiry. The default is a
/// plain text paste, readable many times: what every create was before
/// these attributes existed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PasteAttributes {
    /// `None`: a UTF-8 text paste. `Some`: binary bytes of this type.
    pub media_type: Option<MediaType>,
    pub file_name: Option<FileName>,
    pub language: Option<Language>,
    pub burn_after_reading: bool,
    /// The bytes are a sealed envelope, encrypted by the client with a key
    /// the server never sees (docs/api.md#sealed-pastes): opaque bytes,
    /// never highlighted or rendered, served as `application/octet-stream`.
    pub sealed: bool,
}

impl PasteAttributes {
    /// Bytes rather than UTF-8 text: a binary paste, or a sealed envelope.
    pub fn is_binary(&self) -> bool {
        self.media_type.is_some() || self.sealed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn media_types_are_normalized_and_checked() {
        assert_eq!(MediaType::parse(" Image/PNG ").unwrap().as_str(), "image/png");
        assert_eq!(MediaType::parse("text/html; charset=UTF-8").unwrap().essence(), "text/html");
        for bad in ["", "image", "/png", "image/", "a b/c", "image/\npng", "ïmage/png"] {
            assert_eq!(MediaType::parse(bad), Err(AttributeError::MediaType), "{bad:?}");
        }
    }

    #[test]
    fn active_types_are_never_passive() {
        for active in [
            "text/html",
            "image/svg+xml",
            "application/xml",
            "text/xml",
            "application/pdf",
            "text/javascript",
            "application/javascript",
            "application/xhtml+xml",
            "application/octet-stream",
        ] {
            assert!(!MediaType::parse(active).unwrap().is_passive(), "{active}");
        }
        assert!(MediaType::parse("image/png").unwrap().is_inline_image());
        assert!(!MediaType::parse("image/svg+xml").unwrap().is_inline_image());
    }

    #[test]
    fn file_names_are_bare_names() {
        assert_eq!(FileName::parse("main.rs").unwrap().extension(), Some("rs"));
        assert_eq!(FileName::parse(".bashrc").unwrap().extension(), None);
        assert_eq!(FileName::parse("Makefile").unwrap().extension(), None);
        for bad in ["", ".", "..", "a/b", "a\\b", "a\nb", &"x".repeat(256)] {
            assert_eq!(FileName::parse(bad), Err(AttributeError::FileName), "{bad:?}");
        }
    }

    #[test]
    fn languages_are_short_names() {
        assert!(Language::parse("C++").is_ok() && Language::parse("objective c").is_ok());
        for bad in ["", "<script>", &"x".repeat(65)] {
            assert_eq!(Language::parse(bad), Err(AttributeError::Language), "{bad:?}");
        }
    }
}
