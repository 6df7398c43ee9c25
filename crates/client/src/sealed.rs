//! The client's part in sealed pastes (docs/api.md#sealed-pastes): sealing
//! a save before its first send, knowing a sealed save again on a later
//! run, and opening what `pastebin get` fetched.
//!
//! A seal is random (a new key and IV each time), so the envelope cannot
//! say whether two runs saved the same thing. The journal matches a sealed
//! save by its [`identity`] instead: the plaintext request and the password,
//! never the envelope. Once matched, the record's envelope and key are what
//! is sent again, byte for byte, under the record's idempotency key.

use pastebin_core::CreateRequest;
use sha2::{Digest, Sha256};

use crate::journal::{Body, LinkKey};

pub use pastebin_sealed::SealedError;

/// What `--encrypt` asks for: sealing, with a password or not. `Debug`
/// never prints the password.
#[derive(Clone, PartialEq, Eq)]
pub struct Seal {
    password: Option<String>,
}

impl std::fmt::Debug for Seal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seal").field("password", &self.password.as_ref().map(|_| "<redacted>")).finish()
    }
}

impl Seal {
    pub fn new(password: Option<String>) -> Self {
        Self { password }
    }

    /// Which save this is, for the journal: SHA-256 over the plaintext
    /// request (marked sealed) and, with a password, a PBKDF2 of it salted by
    /// that request, as costly to guess from as the envelope itself. So the
    /// same content with the same password is one paste; another password
    /// is another save.
    pub(crate) fn identity(&self, plaintext_request: &CreateRequest<'_>) -> String {
        let encoding = CreateRequest { sealed: true, ..plaintext_request.clone() }.canonical_encoding();
        let mut hash = Sha256::new();
        hash.update(b"pastebin.sealed-save.v1\0");
        hash.update(&encoding);
        if let Some(password) = &self.password {
            let salt = Sha256::digest(&encoding);
            let rounds = std::num::NonZeroU32::new(pastebin_sealed::ITERATIONS).unwrap_or(std::num::NonZeroU32::MIN);
            let verifier = pastebin_sealed::pbkdf2_sha256(password.as_bytes(), &salt, rounds);
            hash.update([1]);
            hash.update(*verifier);
        }
        hex::encode(hash.finalize())
    }

    /// Seals `plaintext` afresh: the body to send (and keep sending) and
    /// the key for the link.
    pub(crate) fn seal(&self, plaintext: &[u8]) -> Result<(Body, LinkKey), SealedError> {
        let sealed = pastebin_sealed::seal(plaintext, self.password.as_deref())?;
        Ok((Body::Sealed { envelope: sealed.envelope }, LinkKey::new(sealed.key.to_fragment())))
    }
}

/// Opens a sealed paste's envelope with its link's fragment and, if it was
/// sealed with one, the password.
pub fn open(envelope: &[u8], fragment: &str, password: Option<&str>) -> Result<Vec<u8>, SealedError> {
    pastebin_sealed::open(envelope, fragment, password)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_save_is_known_by_its_plaintext_and_password_never_by_its_envelope() {
        let request = CreateRequest::text(b"secret", 3600);
        let plain = Seal::new(None);
        let locked = Seal::new(Some("pw".into()));
        assert_eq!(plain.identity(&request), plain.identity(&request));
        assert_ne!(plain.identity(&request), locked.identity(&request));
        assert_ne!(locked.identity(&request), Seal::new(Some("other".into())).identity(&request));
        assert_ne!(plain.identity(&request), plain.identity(&CreateRequest::text(b"secret!", 3600)));
        assert_ne!(plain.identity(&request), request.hash().to_hex(), "never the plain paste's hash");
        assert!(!format!("{locked:?}").contains("pw\""), "{locked:?}");

        let (body, key) = plain.seal(b"secret").unwrap();
        let Body::Sealed { envelope } = body else { panic!("a sealed body") };
        assert_eq!(open(&envelope, key.expose(), None).unwrap(), b"secret");
    }
}
