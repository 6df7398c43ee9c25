//! What an instance accepts, as `GET /api/v1/limits` publishes it
//! (docs/api.md#limits): the gateway writes it, the client reads it and
//! refuses locally with the gateway's own messages.

use serde::{Deserialize, Serialize};

use crate::{Expiry, ExpiryError, ExpiryPolicy};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedLimits {
    /// The largest content accepted, in bytes.
    pub max_content_bytes: u64,
    pub expiry: PublishedExpiry,
    /// Whether a paste may be burned after reading.
    pub burn_after_reading: bool,
    /// Whether the server takes client-side encrypted (sealed) pastes.
    pub encryption: bool,
    /// Whether a create needs `Authorization: Bearer <create token>`.
    pub create_tokens_required: bool,
    /// Creates per client address, when limited.
    pub create_rate_limit: Option<PublishedRate>,
    /// The reasons `POST /api/v1/pastes/{id}/reports` takes.
    pub report_reasons: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedExpiry {
    /// The only values of `expires_in_seconds` taken, when the operator
    /// fixed a list; `null`: any whole number of seconds from 60 to `max_seconds`.
    pub choices_seconds: Option<Vec<u64>>,
    /// What the new-paste page offers (0 is "never").
    pub offered_seconds: Vec<u64>,
    /// What a create without `expires_in_seconds` gets.
    pub default_seconds: u64,
    pub max_seconds: u64,
    /// Whether `expires_in_seconds: 0` (never expires) is taken.
    pub never_allowed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedRate {
    pub count: u32,
    pub period_seconds: u64,
}

/// The size refusal, word for word the gateway's (`content_too_large`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("content exceeds the limit of {limit} bytes")]
pub struct TooLarge {
    pub limit: usize,
}

impl PublishedExpiry {
    pub fn of(policy: &ExpiryPolicy) -> Self {
        Self {
            choices_seconds: policy.choices().map(<[u64]>::to_vec),
            offered_seconds: policy.offered(),
            default_seconds: policy.default_seconds(),
            max_seconds: policy.max_seconds(),
            never_allowed: policy.allow_never(),
        }
    }

    /// The policy back, to check a create the way the gateway will. An
    /// inconsistent document (a server that does not check its own rules)
    /// is `None`: the client then leaves the checking to the server.
    pub fn policy(&self) -> Option<ExpiryPolicy> {
        ExpiryPolicy::new(
            self.choices_seconds.clone(),
            Some(self.default_seconds),
            Some(self.max_seconds),
            self.never_allowed,
        )
        .ok()
    }
}

impl PublishedLimits {
    /// A create checked as the gateway checks it (size, then expiry), with
    /// the gateway's messages.
    pub fn check_create(&self, content_len: usize, expires_in_seconds: Option<u64>) -> Result<(), LimitError> {
        let limit = usize::try_from(self.max_content_bytes).unwrap_or(usize::MAX);
        if content_len > limit {
            return Err(LimitError::TooLarge(TooLarge { limit }));
        }
        if let Some(policy) = self.expiry.policy() {
            policy.admit(expires_in_seconds).map(|_: Expiry| ()).map_err(LimitError::Expiry)?;
        }
        Ok(())
    }
}

/// Why a create would be refused, in the gateway's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitError {
    #[error(transparent)]
    TooLarge(TooLarge),
    #[error(transparent)]
    Expiry(ExpiryError),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_published_policy_reads_back_as_the_same_policy() {
        let policy = ExpiryPolicy::new(Some(vec![600, 3600]), Some(3600), Some(86_400), true).unwrap();
        assert_eq!(PublishedExpiry::of(&policy).policy(), Some(policy.clone()));
        let open = ExpiryPolicy::default();
        assert_eq!(PublishedExpiry::of(&open).policy(), Some(open));
    }
}
