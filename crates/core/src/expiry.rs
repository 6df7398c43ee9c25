/// How long a paste lives, as the client asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    seconds: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expires_in_seconds must be between {min} and {max}", min = Expiry::MIN_SECONDS, max = Expiry::MAX_SECONDS)]
pub struct ExpiryError;

impl Expiry {
    pub const DEFAULT_SECONDS: u64 = 30 * 24 * 3600;
    pub const MIN_SECONDS: u64 = 60;
    pub const MAX_SECONDS: u64 = 365 * 24 * 3600;

    /// `None` is the 30-day default; anything outside 60 s ..= 365 d is refused.
    pub fn from_seconds(seconds: Option<u64>) -> Result<Self, ExpiryError> {
        let seconds = seconds.unwrap_or(Self::DEFAULT_SECONDS);
        if (Self::MIN_SECONDS..=Self::MAX_SECONDS).contains(&seconds) {
            Ok(Self { seconds })
        } else {
            Err(ExpiryError)
        }
    }

    pub fn seconds(self) -> u64 {
        self.seconds
    }

    pub fn duration(self) -> chrono::Duration {
        // Bounded by MAX_SECONDS, far inside i64 seconds.
        chrono::Duration::seconds(self.seconds as i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive_and_default_is_30_days() {
        assert_eq!(Expiry::from_seconds(None).unwrap().seconds(), 2_592_000);
        assert!(Expiry::from_seconds(Some(60)).is_ok());
        assert!(Expiry::from_seconds(Some(31_536_000)).is_ok());
        assert_eq!(Expiry::from_seconds(Some(59)), Err(ExpiryError));
        assert_eq!(Expiry::from_seconds(Some(31_536_001)), Err(ExpiryError));
        assert_eq!(Expiry::from_seconds(Some(0)), Err(ExpiryError));
    }
}
