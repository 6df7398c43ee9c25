use sha2::{Digest, Sha256};

/// Everything in a create request that changes its result. The idempotency
/// key is deliberately not here: it names the request, it is not part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest<'a> {
    pub content: &'a [u8],
    pub expires_in_seconds: u64,
    pub title: Option<&'a str>,
    pub language: Option<&'a str>,
    /// `Some` for a binary paste (its media type); `None` for UTF-8 text.
    pub media_type: Option<&'a str>,
    pub file_name: Option<&'a str>,
    pub burn_after_reading: bool,
    /// The content is a sealed envelope (docs/api.md#sealed-pastes).
    pub sealed: bool,
}

/// SHA-256 over the canonical encoding of a [`CreateRequest`]: the same key
/// with another hash is a different request (409), not a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestHash(pub [u8; 32]);

/// Bumped if the meaning of an existing field ever changes, so old and new
/// hashes can never collide. Fields added later go into the extension
/// below instead, which keeps every hash stored before them valid.
const ENCODING_VERSION: &[u8] = b"pastebin.create.v1\0";

/// The byte after the first extension that marks a sealed paste.
const SEALED: u8 = 1;

impl<'a> CreateRequest<'a> {
    /// A plain text paste with nothing else chosen.
    pub fn text(content: &'a [u8], expires_in_seconds: u64) -> Self {
        Self {
            content,
            expires_in_seconds,
            title: None,
            language: None,
            media_type: None,
            file_name: None,
            burn_after_reading: false,
            sealed: false,
        }
    }

    /// Unambiguous by construction: a fixed field order, and every variable
    /// field is a presence byte plus a length prefix, so no two different
    /// requests share an encoding (e.g. moving bytes from title to content).
    pub fn canonical_encoding(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ENCODING_VERSION.len() + self.content.len() + 64);
        out.extend_from_slice(ENCODING_VERSION);
        put_field(&mut out, Some(self.content));
        out.extend_from_slice(&self.expires_in_seconds.to_be_bytes());
        put_field(&mut out, self.title.map(str::as_bytes));
        put_field(&mut out, self.language.map(str::as_bytes));
        if self.has_extension() {
            put_field(&mut out, self.media_type.map(str::as_bytes));
            put_field(&mut out, self.file_name.map(str::as_bytes));
            out.push(u8::from(self.burn_after_reading));
            // A second extension, written only for a sealed paste, so that
            // every hash stored before sealed pastes existed stays valid.
            if self.sealed {
                out.push(SEALED);
            }
        }
        out
    }

    /// The reader attributes (media type, file name, burn, sealed) are appended only
    /// when one of them is set: a request without them encodes exactly as it
    /// did before they existed, so a retry that spans an upgrade still
    /// replays. Still unambiguous: the v1 fields are self-delimiting, so an
    /// encoding either ends after them or carries a non-default extension.
    fn has_extension(&self) -> bool {
        self.media_type.is_some() || self.file_name.is_some() || self.burn_after_reading || self.sealed
    }

    pub fn hash(&self) -> RequestHash {
        RequestHash(Sha256::digest(self.canonical_encoding()).into())
    }
}

fn put_field(out: &mut Vec<u8>, field: Option<&[u8]>) {
    match field {
        None => out.push(0),
        Some(bytes) => {
            out.push(1);
            out.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
            out.extend_from_slice(bytes);
        }
    }
}

impl RequestHash {
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    pub fn from_hex(raw: &str) -> Option<Self> {
        crate::sha256_from_hex(raw).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The inverse of `canonical_encoding`: if every encoding decodes back to
    /// the request it came from, the encoding is injective (unambiguous).
    type Decoded = (Vec<u8>, u64, Option<String>, Option<String>, Option<String>, Option<String>, bool, bool);

    fn decode(mut raw: &[u8]) -> Option<Decoded> {
        raw = raw.strip_prefix(ENCODING_VERSION)?;
        fn field(raw: &mut &[u8]) -> Option<Option<Vec<u8>>> {
            let (&tag, rest) = raw.split_first()?;
            *raw = rest;
            if tag == 0 {
                return Some(None);
            }
            let len = u64::from_be_bytes(raw.get(..8)?.try_into().ok()?) as usize;
            let bytes = raw.get(8..8 + len)?.to_vec();
            *raw = &raw[8 + len..];
            Some(Some(bytes))
        }
        let content = field(&mut raw)??;
        let expires = u64::from_be_bytes(raw.get(..8)?.try_into().ok()?);
        raw = &raw[8..];
        let title = field(&mut raw)?.map(|b| String::from_utf8(b).unwrap());
        let language = field(&mut raw)?.map(|b| String::from_utf8(b).unwrap());
        if raw.is_empty() {
            return Some((content, expires, title, language, None, None, false, false));
        }
        let media_type = field(&mut raw)?.map(|b| String::from_utf8(b).unwrap());
        let file_name = field(&mut raw)?.map(|b| String::from_utf8(b).unwrap());
        let (&burn, rest) = raw.split_first()?;
        let sealed = match rest {
            [] => false,
            [SEALED] => true,
            _ => return None,
        };
        // An extension is only ever written with something in it.
        let extended = media_type.is_some() || file_name.is_some() || burn == 1 || sealed;
        (burn <= 1 && extended).then_some((content, expires, title, language, media_type, file_name, burn == 1, sealed))
    }

    proptest! {
        #[test]
        fn encoding_is_unambiguous(
            content in proptest::collection::vec(any::<u8>(), 0..64),
            expires in any::<u64>(),
            title in proptest::option::of(".{0,8}"),
            language in proptest::option::of("[a-z]{0,4}"),
            media_type in proptest::option::of("[a-z]{0,4}/[a-z]{0,4}"),
            file_name in proptest::option::of(".{0,8}"),
            burn_after_reading in any::<bool>(),
            sealed in any::<bool>(),
        ) {
            let req = CreateRequest {
                content: &content,
                expires_in_seconds: expires,
                title: title.as_deref(),
                language: language.as_deref(),
                media_type: media_type.as_deref(),
                file_name: file_name.as_deref(),
                burn_after_reading,
                sealed,
            };
            let decoded = decode(&req.canonical_encoding()).expect("every encoding decodes");
            prop_assert_eq!(
                decoded,
                (content.clone(), expires, title.clone(), language.clone(), media_type.clone(), file_name.clone(), burn_after_reading, sealed)
            );
        }

        #[test]
        fn different_requests_hash_differently(a in ".{0,6}", b in ".{0,6}", c in ".{0,6}") {
            // Moving bytes across field boundaries must change the hash.
            let one = CreateRequest { content: a.as_bytes(), title: Some(&b), language: Some(&c), ..text(b"") };
            let joined = format!("{a}{b}");
            let two = CreateRequest { content: joined.as_bytes(), title: Some(""), language: Some(&c), ..text(b"") };
            prop_assert_eq!(one.hash() == two.hash(), b.is_empty());
        }
    }

    /// SHA-256 of the v1 encoding of `text(b"hello")`, computed independently
    /// of this code (by hand from the layout above) before the extension existed.
    const V1_HELLO_60: &str = "4a15a1877ad445dabfe88087ccf9c7693d8fd0f9a42c3dfbc5ab56fcdee53db6";

    fn text(content: &[u8]) -> CreateRequest<'_> {
        CreateRequest::text(content, 60)
    }

    /// A plain text request hashes exactly as it did before the reader
    /// attributes existed (the value was computed by the v1 encoder), so
    /// keys stored before the upgrade still replay.
    #[test]
    fn a_request_without_new_fields_keeps_its_old_hash() {
        assert_eq!(text(b"hello").hash().to_hex(), V1_HELLO_60);
    }

    #[test]
    fn every_new_field_changes_the_hash() {
        let base = text(b"x");
        let variants = [
            CreateRequest { language: Some("rust"), ..base.clone() },
            CreateRequest { media_type: Some("image/png"), ..base.clone() },
            CreateRequest { file_name: Some("x.txt"), ..base.clone() },
            CreateRequest { burn_after_reading: true, ..base.clone() },
            CreateRequest { sealed: true, ..base.clone() },
        ];
        for variant in &variants {
            assert_ne!(variant.hash(), base.hash(), "{variant:?}");
        }
    }

    #[test]
    fn absent_title_differs_from_empty_title() {
        let base = text(b"x");
        let empty = CreateRequest { title: Some(""), ..base.clone() };
        assert_ne!(base.hash(), empty.hash());
        assert_eq!(RequestHash::from_hex(&base.hash().to_hex()), Some(base.hash()));
    }
}
