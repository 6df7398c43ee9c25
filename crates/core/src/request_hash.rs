use sha2::{Digest, Sha256};

/// Everything in a create request that changes its result. The idempotency
/// key is deliberately not here: it names the request, it is not part of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CreateRequest<'a> {
    pub content: &'a [u8],
    pub expires_in_seconds: u64,
    pub title: Option<&'a str>,
    pub language: Option<&'a str>,
}

/// SHA-256 over the canonical encoding of a [`CreateRequest`]: the same key
/// with another hash is a different request (409), not a retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestHash(pub [u8; 32]);

/// Bumped if a field is ever added, so old and new hashes can never collide.
const ENCODING_VERSION: &[u8] = b"pastebin.create.v1\0";

impl CreateRequest<'_> {
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
        out
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
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(raw, &mut bytes).ok()?;
        Some(Self(bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The inverse of `canonical_encoding`: if every encoding decodes back to
    /// the request it came from, the encoding is injective (unambiguous).
    type Decoded = (Vec<u8>, u64, Option<String>, Option<String>);

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
        raw.is_empty().then_some((content, expires, title, language))
    }

    proptest! {
        #[test]
        fn encoding_is_unambiguous(
            content in proptest::collection::vec(any::<u8>(), 0..64),
            expires in any::<u64>(),
            title in proptest::option::of(".{0,8}"),
            language in proptest::option::of("[a-z]{0,4}"),
        ) {
            let req = CreateRequest { content: &content, expires_in_seconds: expires, title: title.as_deref(), language: language.as_deref() };
            let decoded = decode(&req.canonical_encoding()).expect("every encoding decodes");
            prop_assert_eq!(decoded, (content.clone(), expires, title.clone(), language.clone()));
        }

        #[test]
        fn different_requests_hash_differently(a in ".{0,6}", b in ".{0,6}", c in ".{0,6}") {
            // Moving bytes across field boundaries must change the hash.
            let one = CreateRequest { content: a.as_bytes(), expires_in_seconds: 60, title: Some(&b), language: Some(&c) };
            let joined = format!("{a}{b}");
            let two = CreateRequest { content: joined.as_bytes(), expires_in_seconds: 60, title: Some(""), language: Some(&c) };
            prop_assert_eq!(one.hash() == two.hash(), b.is_empty());
        }
    }

    #[test]
    fn absent_title_differs_from_empty_title() {
        let base = CreateRequest { content: b"x", expires_in_seconds: 60, title: None, language: None };
        let empty = CreateRequest { title: Some(""), ..base.clone() };
        assert_ne!(base.hash(), empty.hash());
        assert_eq!(RequestHash::from_hex(&base.hash().to_hex()), Some(base.hash()));
    }
}
