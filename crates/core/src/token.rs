use std::fmt;

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The paste's only credential: 32 random bytes, base64url without padding.
/// Shown once in the 201; `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct DeleteToken(String);

/// A create token as a client holds it (`--create-token`): who may create
/// on an instance that requires one. `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct CreateToken(String);

/// What shard P keeps instead of the token.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DeleteTokenHash(pub [u8; 32]);

/// 32 bytes from the OS-seeded CSPRNG, base64url without padding: the
/// shape of every credential this system mints (delete and create tokens).
pub fn random_secret() -> String {
    secret_from(&mut rand::rng())
}

/// `len` (at most 43) letters and digits of a [`random_secret`]: names a
/// run, a move or a release, where the name need only be unguessable and
/// easy to read back.
pub fn random_name(len: usize) -> String {
    random_secret().chars().filter(char::is_ascii_alphanumeric).take(len).collect()
}

fn secret_from(rng: &mut impl RngCore) -> String {
    let mut bytes = [0u8; 32];
    rng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

impl DeleteToken {
    pub fn generate() -> Self {
        Self(random_secret())
    }

    pub fn generate_with(rng: &mut impl RngCore) -> Self {
        Self(secret_from(rng))
    }

    /// A token as presented by a client. Any string is accepted: a malformed
    /// one simply does not match, which is the same answer as a wrong one.
    pub fn presented(raw: &str) -> Self {
        Self(raw.to_owned())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn hash(&self) -> DeleteTokenHash {
        DeleteTokenHash(Sha256::digest(self.0.as_bytes()).into())
    }
}

impl fmt::Debug for DeleteToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DeleteToken(<redacted>)")
    }
}

impl CreateToken {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for CreateToken {
    type Err = std::convert::Infallible;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Ok(Self(raw.to_owned()))
    }
}

impl fmt::Debug for CreateToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CreateToken(<redacted>)")
    }
}

impl DeleteTokenHash {
    /// Constant-time, so response timing does not leak how much of a guess matched.
    pub fn verify(&self, presented: &DeleteToken) -> bool {
        self.0.ct_eq(&presented.hash().0).into()
    }

    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    pub fn from_hex(raw: &str) -> Option<Self> {
        crate::sha256_from_hex(raw).map(Self)
    }
}

impl fmt::Debug for DeleteTokenHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DeleteTokenHash({})", self.to_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_tokens_are_43_char_base64url_and_distinct() {
        let (a, b) = (DeleteToken::generate(), DeleteToken::generate());
        assert_eq!(a.expose().len(), 43);
        assert!(a.expose().bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert_ne!(a, b);
    }

    #[test]
    fn verifies_only_the_right_token() {
        let token = DeleteToken::generate();
        let stored = DeleteTokenHash::from_hex(&token.hash().to_hex()).unwrap();
        assert!(stored.verify(&DeleteToken::presented(token.expose())));
        assert!(!stored.verify(&DeleteToken::generate()));
        assert!(!stored.verify(&DeleteToken::presented("")));
    }

    #[test]
    fn debug_never_prints_a_token() {
        let token = DeleteToken::generate();
        assert!(!format!("{token:?}").contains(token.expose()));
        let token: CreateToken = format!("pbc_{}", random_secret()).parse().unwrap();
        let printed = format!("{:?}", Some(&token));
        assert!(!printed.contains(token.expose()) && printed.contains("redacted"), "{printed}");
    }
}
