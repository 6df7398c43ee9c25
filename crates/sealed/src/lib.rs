//! Sealed pastes (docs/api.md#sealed-pastes): text the client encrypts
//! before it sends it, with a key that lives only in the share link's
//! fragment (`#…`), which browsers never send to a server.
//!
//! [`seal`] makes a random 256-bit key and IV (and, with a password, a
//! salt) and returns the [`Envelope`]'s bytes and the fragment; [`open`]
//! reads them back. The server only ever calls [`Envelope::parse`], to
//! refuse what no reader could open. A writer keeps what [`seal`] gave it
//! until its save is done: a retry must send the same envelope bytes under
//! the same idempotency key, and only new content gets a new key and IV.

mod envelope;

use std::num::NonZeroU32;

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use ring::{
    aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM},
    rand::{SecureRandom, SystemRandom},
};
use zeroize::{Zeroize, Zeroizing};

pub use envelope::{
    Envelope, EnvelopeError, PasswordParams, ALGORITHM, ITERATIONS, IV_BYTES, KDF, MAX_ITERATIONS, MIN_ITERATIONS,
    SALT_BYTES, TAG_BYTES, VERSION,
};

/// The `Content-Type` a sealed create is sent with.
pub const MEDIA_TYPE: &str = "application/vnd.pastebin.sealed+json";

/// The key's bytes.
pub const KEY_BYTES: usize = 32;

/// Why a paste could not be sealed or opened. Each message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum SealedError {
    #[error(transparent)]
    Envelope(#[from] EnvelopeError),
    #[error(
        "this paste is sealed and the link has no key: use the whole link, with the part after '#' that was shared with it"
    )]
    MissingKey,
    #[error("the key after '#' in the link is damaged (it must be 43 letters, digits, '-' or '_'): copy the whole link again")]
    MalformedKey,
    #[error("this paste is sealed with a password as well as the link's key: give the password")]
    PasswordNeeded,
    #[error(
        "the link's key or the password does not open this paste: check that the link was copied whole and the password is right"
    )]
    WrongKey,
    #[error("the system's random number source failed")]
    Random,
}

/// The key of one sealed paste, as the link's fragment carries it: 32
/// random bytes, unpadded base64url (43 characters). Wiped when dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct FragmentKey(Zeroizing<[u8; KEY_BYTES]>);

impl std::fmt::Debug for FragmentKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FragmentKey(<redacted>)")
    }
}

impl FragmentKey {
    /// The fragment of a link, with or without its `#`. Empty is [`SealedError::MissingKey`].
    pub fn parse(fragment: &str) -> Result<Self, SealedError> {
        let text = fragment.strip_prefix('#').unwrap_or(fragment).trim();
        if text.is_empty() {
            return Err(SealedError::MissingKey);
        }
        let mut bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| SealedError::MalformedKey)?;
        let key = <[u8; KEY_BYTES]>::try_from(bytes.as_slice()).map_err(|_| SealedError::MalformedKey);
        bytes.zeroize();
        Ok(Self(Zeroizing::new(key?)))
    }

    pub fn from_bytes(bytes: [u8; KEY_BYTES]) -> Self {
        Self(Zeroizing::new(bytes))
    }

    /// The fragment, without its `#`.
    pub fn to_fragment(&self) -> String {
        URL_SAFE_NO_PAD.encode(*self.0)
    }
}

/// A sealed paste as a writer keeps it until its save is done.
#[derive(Debug, Clone)]
pub struct Sealed {
    /// The bytes to send, and to send again on every retry.
    pub envelope: Vec<u8>,
    pub key: FragmentKey,
}

/// Everything random in a seal, chosen by the caller (for the published
/// test vectors) or by [`seal`].
pub struct Randomness {
    pub key: [u8; KEY_BYTES],
    pub iv: [u8; IV_BYTES],
    pub salt: [u8; SALT_BYTES],
}

impl Randomness {
    /// Fresh bytes from the operating system.
    pub fn fresh() -> Result<Self, SealedError> {
        let mut randomness = Self { key: [0; KEY_BYTES], iv: [0; IV_BYTES], salt: [0; SALT_BYTES] };
        let system = SystemRandom::new();
        for bytes in [&mut randomness.key[..], &mut randomness.iv[..], &mut randomness.salt[..]] {
            system.fill(bytes).map_err(|_| SealedError::Random)?;
        }
        Ok(randomness)
    }
}

impl Drop for Randomness {
    fn drop(&mut self) {
        self.key.zeroize();
    }
}

/// Seals `plaintext` with a new key and IV, and a new salt if there is a password.
pub fn seal(plaintext: &[u8], password: Option<&str>) -> Result<Sealed, SealedError> {
    Ok(seal_with(plaintext, password, ITERATIONS, &Randomness::fresh()?))
}

/// Seals `plaintext` with the given randomness: [`seal`] with fresh bytes,
/// or the test vectors with fixed ones.
pub fn seal_with(plaintext: &[u8], password: Option<&str>, iterations: u32, randomness: &Randomness) -> Sealed {
    let key = FragmentKey::from_bytes(randomness.key);
    let params = password.map(|_| PasswordParams { salt: randomness.salt, iterations });
    let mut ciphertext = plaintext.to_vec();
    cipher(&key, params.as_ref(), password)
        .seal_in_place_append_tag(Nonce::assume_unique_for_key(randomness.iv), Aad::empty(), &mut ciphertext)
        .expect("AES-GCM seals any plaintext shorter than 64 GiB");
    let envelope = Envelope { iv: randomness.iv, ciphertext, password: params };
    Sealed { envelope: envelope.to_bytes(), key }
}

/// Opens an envelope with the link's fragment (with or without its `#`)
/// and, if it was sealed with one, the password: the plaintext, or what is
/// missing or wrong.
pub fn open(envelope: &[u8], fragment: &str, password: Option<&str>) -> Result<Vec<u8>, SealedError> {
    let envelope = Envelope::parse(envelope)?;
    let key = FragmentKey::parse(fragment)?;
    if envelope.password.is_some() && password.is_none() {
        return Err(SealedError::PasswordNeeded);
    }
    let mut plaintext = envelope.ciphertext;
    let opened = cipher(&key, envelope.password.as_ref(), password)
        .open_in_place(Nonce::assume_unique_for_key(envelope.iv), Aad::empty(), &mut plaintext)
        .map_err(|_| SealedError::WrongKey)?
        .len();
    plaintext.truncate(opened);
    Ok(plaintext)
}

/// PBKDF2-HMAC-SHA-256 of `secret` into 32 bytes.
pub fn pbkdf2_sha256(secret: &[u8], salt: &[u8], iterations: NonZeroU32) -> Zeroizing<[u8; KEY_BYTES]> {
    let mut derived = Zeroizing::new([0u8; KEY_BYTES]);
    ring::pbkdf2::derive(ring::pbkdf2::PBKDF2_HMAC_SHA256, iterations, salt, secret, &mut *derived);
    derived
}

/// The AES-256-GCM key: the fragment's key itself, or with a password
/// PBKDF2-HMAC-SHA-256 over the fragment's 32 bytes followed by the
/// password's UTF-8 bytes, so that both are needed.
fn cipher(key: &FragmentKey, params: Option<&PasswordParams>, password: Option<&str>) -> LessSafeKey {
    let derived = match (params, password) {
        (Some(params), Some(password)) => {
            let mut material = Zeroizing::new(Vec::with_capacity(KEY_BYTES + password.len()));
            material.extend_from_slice(&*key.0);
            material.extend_from_slice(password.as_bytes());
            // Envelope::parse and seal's callers keep the count within MIN..=MAX.
            let iterations = NonZeroU32::new(params.iterations).unwrap_or(NonZeroU32::MIN);
            pbkdf2_sha256(&material, &params.salt, iterations)
        }
        _ => key.0.clone(),
    };
    LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &*derived).expect("a 32-byte key is an AES-256 key"))
}

#[cfg(test)]
mod tests;
