//! The envelope: what a sealed paste's object holds, byte for byte as the
//! client sent it (docs/api.md#sealed-pastes). One JSON object, every binary
//! field unpadded base64url:
//!
//! ```json
//! {"version":1,"algorithm":"AES-256-GCM","iv":"…","ciphertext":"…",
//!  "password":{"kdf":"PBKDF2-SHA-256","salt":"…","iterations":600000}}
//! ```
//!
//! `password` only when one was set. The server parses it to refuse what
//! no reader could open; it never holds the key to go further.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use serde::{Deserialize, Serialize};

/// The only envelope version so far.
pub const VERSION: u64 = 1;
pub const ALGORITHM: &str = "AES-256-GCM";
pub const KDF: &str = "PBKDF2-SHA-256";
/// GCM's 96-bit IV, random per envelope.
pub const IV_BYTES: usize = 12;
/// GCM's tag, at the end of the ciphertext.
pub const TAG_BYTES: usize = 16;
/// A password's salt, random per envelope.
pub const SALT_BYTES: usize = 16;
/// What a writer uses: OWASP's figure for PBKDF2-HMAC-SHA-256 (2023).
/// The password only matters once the link itself has leaked (the key in
/// the fragment is 256 random bits), and then it stands alone against an
/// offline guesser; a reader pays it once per opening (under a second).
pub const ITERATIONS: u32 = 600_000;
/// The fewest a reader accepts: a writer that asks for less is refused.
pub const MIN_ITERATIONS: u32 = 100_000;
/// The most a reader accepts: an envelope cannot make a reader hash for minutes.
pub const MAX_ITERATIONS: u32 = 2_000_000;

/// Why bytes are not an envelope a reader could open. Each message says
/// what a correct one has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error(
        "a sealed paste must be a JSON envelope {{\"version\":1,\"algorithm\":\"AES-256-GCM\",\"iv\",\"ciphertext\"[,\"password\"]}} \
         (docs/api.md#sealed-pastes): {0}"
    )]
    NotAnEnvelope(String),
    #[error("this envelope's version is {0}; this server and its clients read version 1")]
    Version(u64),
    #[error("the envelope's algorithm must be \"AES-256-GCM\"")]
    Algorithm,
    #[error("the envelope's iv must be 12 bytes, as unpadded base64url")]
    Iv,
    #[error("the envelope's ciphertext must be unpadded base64url of at least 16 bytes (the GCM tag)")]
    Ciphertext,
    #[error("the envelope's password must be {{\"kdf\":\"PBKDF2-SHA-256\",\"salt\": 16 bytes as unpadded base64url,\"iterations\": 100000 to 2000000}}")]
    Password,
}

/// What a password adds: the salt and work of its PBKDF2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswordParams {
    pub salt: [u8; SALT_BYTES],
    pub iterations: u32,
}

/// An envelope, parsed and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    pub iv: [u8; IV_BYTES],
    /// AES-256-GCM's output: the encrypted bytes, then the 16-byte tag.
    pub ciphertext: Vec<u8>,
    pub password: Option<PasswordParams>,
}

/// The wire form, field by field, in the order a writer puts them.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Wire {
    version: u64,
    algorithm: String,
    iv: String,
    ciphertext: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    password: Option<WirePassword>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WirePassword {
    kdf: String,
    salt: String,
    iterations: u64,
}

impl Envelope {
    /// Parses and checks an envelope: everything a reader needs is there
    /// and in range. Whether it opens is known only to who holds the key.
    pub fn parse(bytes: &[u8]) -> Result<Self, EnvelopeError> {
        let wire: Wire =
            serde_json::from_slice(bytes).map_err(|error| EnvelopeError::NotAnEnvelope(where_wrong(&error)))?;
        if wire.version != VERSION {
            return Err(EnvelopeError::Version(wire.version));
        }
        if wire.algorithm != ALGORITHM {
            return Err(EnvelopeError::Algorithm);
        }
        let iv = decode(&wire.iv).and_then(|iv| iv.try_into().ok()).ok_or(EnvelopeError::Iv)?;
        let ciphertext = decode(&wire.ciphertext).filter(|c| c.len() >= TAG_BYTES).ok_or(EnvelopeError::Ciphertext)?;
        let password = wire.password.map(password_params).transpose()?;
        Ok(Self { iv, ciphertext, password })
    }

    /// The envelope's bytes, as a writer sends them (compact JSON, fields in
    /// the documented order).
    pub fn to_bytes(&self) -> Vec<u8> {
        let wire = Wire {
            version: VERSION,
            algorithm: ALGORITHM.to_owned(),
            iv: URL_SAFE_NO_PAD.encode(self.iv),
            ciphertext: URL_SAFE_NO_PAD.encode(&self.ciphertext),
            password: self.password.as_ref().map(|params| WirePassword {
                kdf: KDF.to_owned(),
                salt: URL_SAFE_NO_PAD.encode(params.salt),
                iterations: u64::from(params.iterations),
            }),
        };
        serde_json::to_vec(&wire).expect("strings and numbers always serialize")
    }
}

fn password_params(wire: WirePassword) -> Result<PasswordParams, EnvelopeError> {
    let salt = decode(&wire.salt).and_then(|salt| salt.try_into().ok());
    let iterations = u32::try_from(wire.iterations).ok().filter(|n| (MIN_ITERATIONS..=MAX_ITERATIONS).contains(n));
    match (wire.kdf == KDF, salt, iterations) {
        (true, Some(salt), Some(iterations)) => Ok(PasswordParams { salt, iterations }),
        _ => Err(EnvelopeError::Password),
    }
}

/// Where and how the bytes fail to be an envelope, never what they hold:
/// serde's own message may quote a value, and a client that sends its
/// plaintext here by mistake must not find it in a log line or an answer.
fn where_wrong(error: &serde_json::Error) -> String {
    let what = match error.classify() {
        serde_json::error::Category::Syntax | serde_json::error::Category::Io => "not JSON",
        serde_json::error::Category::Eof => "JSON cut short",
        serde_json::error::Category::Data => "a field is missing, unknown or of the wrong type",
    };
    format!("{what} (line {}, column {})", error.line(), error.column())
}

/// Unpadded base64url, strictly (no padding, no other alphabet).
fn decode(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(password: Option<PasswordParams>) -> Envelope {
        Envelope { iv: [7; IV_BYTES], ciphertext: vec![1; 40], password }
    }

    #[test]
    fn an_envelope_survives_its_bytes() {
        for password in [None, Some(PasswordParams { salt: [9; SALT_BYTES], iterations: ITERATIONS })] {
            let sealed = envelope(password);
            assert_eq!(Envelope::parse(&sealed.to_bytes()).unwrap(), sealed);
        }
    }

    #[test]
    fn what_no_reader_could_open_is_refused_with_what_is_wrong() {
        let good = String::from_utf8(envelope(None).to_bytes()).unwrap();
        let cases = [
            ("hello".to_owned(), "NotAnEnvelope"),
            (good.replace("\"version\":1", "\"version\":2"), "Version"),
            (good.replace("AES-256-GCM", "AES-128-GCM"), "Algorithm"),
            (good.replace("BwcHBwcHBwcHBwcH", "BwcHBwcHBwcHBwc"), "Iv"),
            (good.replace("\"ciphertext\":\"", "\"ciphertext\":\"=").to_owned(), "Ciphertext"),
            (good.replace('}', ",\"extra\":1}"), "NotAnEnvelope"),
            (
                good.replace('}', ",\"password\":{\"kdf\":\"PBKDF2-SHA-256\",\"salt\":\"CQkJCQkJCQkJCQkJCQkJCQ\",\"iterations\":1000}}"),
                "Password",
            ),
        ];
        for (bytes, expected) in cases {
            let error = Envelope::parse(bytes.as_bytes()).unwrap_err();
            assert!(format!("{error:?}").starts_with(expected), "{bytes}: {error:?}");
        }
        let quoted = good.replace("\"version\":1", "\"version\":\"my secret text\"");
        let error = Envelope::parse(quoted.as_bytes()).unwrap_err().to_string();
        assert!(!error.contains("secret"), "a refusal never quotes the bytes: {error}");
        let short = Envelope { ciphertext: vec![1; TAG_BYTES - 1], ..envelope(None) };
        assert_eq!(Envelope::parse(&short.to_bytes()), Err(EnvelopeError::Ciphertext));
    }
}
