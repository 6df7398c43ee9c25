//! How long a paste lives (docs/design.md#expiry): a number of seconds
//! within 60 s ..= 365 d, or "never" where the operator allows it, chosen
//! under the instance's [`ExpiryPolicy`].

use chrono::{DateTime, TimeZone, Utc};

/// A paste's lifetime, admitted by an [`ExpiryPolicy`] (or the built-in range).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry {
    /// 0 is "never" ([`Expiry::NEVER_SECONDS`]); otherwise 60 ..= 365 d.
    seconds: u64,
}

/// A lifetime the instance does not offer; says which ones it does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expires_in_seconds must be {allowed}")]
pub struct ExpiryError {
    allowed: String,
}

impl Expiry {
    pub const DEFAULT_SECONDS: u64 = 30 * 24 * 3600;
    pub const MIN_SECONDS: u64 = 60;
    pub const MAX_SECONDS: u64 = 365 * 24 * 3600;
    /// `expires_in_seconds: 0`: the paste never expires (only where the
    /// operator allows it, [`ExpiryPolicy::allow_never`]).
    pub const NEVER_SECONDS: u64 = 0;

    /// `None` is the 30-day default; anything outside 60 s ..= 365 d is
    /// refused (the built-in range, [`ExpiryPolicy::default`]).
    pub fn from_seconds(seconds: Option<u64>) -> Result<Self, ExpiryError> {
        ExpiryPolicy::default().admit(seconds)
    }

    /// The seconds as the request carries them (0 for never).
    pub fn seconds(self) -> u64 {
        self.seconds
    }

    pub fn is_never(self) -> bool {
        self.seconds == Self::NEVER_SECONDS
    }

    /// When a paste made at `now` expires: [`never_expires_at`] for a paste
    /// that never does, so every reader and the reaper compare one time.
    pub fn expires_at(self, now: DateTime<Utc>) -> DateTime<Utc> {
        if self.is_never() {
            return never_expires_at();
        }
        // Bounded by MAX_SECONDS, far inside i64 seconds.
        now + chrono::Duration::seconds(self.seconds as i64)
    }
}

/// The expiry time stored for a paste that never expires: the last second
/// of the year 9999, later than any clock reaches, so the reaper (which
/// tombstones rows whose `expires_at` is past) never takes it.
pub fn never_expires_at() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).single().expect("a valid fixed date")
}

/// Whether `at` is the "never expires" time (for readers that show it).
pub fn is_never(at: DateTime<Utc>) -> bool {
    at >= never_expires_at()
}

/// The operator's expiry rules (`--expiry-choices`, `--default-expiry`,
/// `--max-expiry`, `--allow-never-expire`). Without choices any whole
/// number of seconds from 60 to the maximum is taken (the API as it always
/// was); with them, exactly those.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiryPolicy {
    /// Ascending; `None`: any seconds in 60 ..= `max_seconds`.
    choices: Option<Vec<u64>>,
    default_seconds: u64,
    max_seconds: u64,
    allow_never: bool,
}

impl Default for ExpiryPolicy {
    fn default() -> Self {
        Self {
            choices: None,
            default_seconds: Expiry::DEFAULT_SECONDS,
            max_seconds: Expiry::MAX_SECONDS,
            allow_never: false,
        }
    }
}

/// What the new-paste page offers when the operator chose no list: these,
/// up to the maximum.
const PRESET: [u64; 5] = [3_600, 86_400, 604_800, 2_592_000, 31_536_000];

impl ExpiryPolicy {
    /// Checks the rules against each other: every choice and the default
    /// within 60 s ..= `max` (at most 365 d), the default one of the choices
    /// (or "never" when allowed). The error says which rule to change.
    pub fn new(
        choices: Option<Vec<u64>>,
        default_seconds: Option<u64>,
        max_seconds: Option<u64>,
        allow_never: bool,
    ) -> Result<Self, String> {
        let max_seconds = max_seconds.unwrap_or(Expiry::MAX_SECONDS);
        if !(Expiry::MIN_SECONDS..=Expiry::MAX_SECONDS).contains(&max_seconds) {
            return Err(format!("the maximum expiry must be between 1m and 365d (got {})", label(max_seconds)));
        }
        let choices = match choices {
            Some(mut choices) => {
                choices.sort_unstable();
                choices.dedup();
                if choices.is_empty() {
                    return Err("the expiry choices are empty".into());
                }
                if let Some(bad) = choices.iter().find(|&&s| !(Expiry::MIN_SECONDS..=max_seconds).contains(&s)) {
                    return Err(format!(
                        "the expiry choice {} is outside 1m ..= {} (the maximum)",
                        label(*bad),
                        label(max_seconds)
                    ));
                }
                Some(choices)
            }
            None => None,
        };
        let default_seconds = default_seconds.unwrap_or_else(|| match &choices {
            Some(choices) => {
                choices.iter().copied().filter(|&s| s <= Expiry::DEFAULT_SECONDS).max().unwrap_or(choices[0])
            }
            None => Expiry::DEFAULT_SECONDS.min(max_seconds),
        });
        let policy = Self { choices, default_seconds, max_seconds, allow_never };
        if policy.admit(Some(default_seconds)).is_err() {
            return Err(format!(
                "the default expiry {} is not allowed: it must be {}",
                label(default_seconds),
                policy.allowed()
            ));
        }
        Ok(policy)
    }

    /// The lifetime a create asked for (`None`: the default), or a refusal
    /// that lists what is allowed.
    pub fn admit(&self, requested: Option<u64>) -> Result<Expiry, ExpiryError> {
        let seconds = requested.unwrap_or(self.default_seconds);
        let allowed = match &self.choices {
            _ if seconds == Expiry::NEVER_SECONDS => self.allow_never,
            Some(choices) => choices.contains(&seconds),
            None => (Expiry::MIN_SECONDS..=self.max_seconds).contains(&seconds),
        };
        if allowed {
            Ok(Expiry { seconds })
        } else {
            Err(ExpiryError { allowed: self.allowed() })
        }
    }

    /// What [`Self::admit`] takes, in words: "one of 600 (10m), 3600 (1h) or 0 (never)".
    fn allowed(&self) -> String {
        let never = if self.allow_never { " or 0 (never)" } else { "" };
        match &self.choices {
            Some(choices) => {
                let listed: Vec<String> = choices.iter().map(|&s| format!("{s} ({})", label(s))).collect();
                format!("one of {}{never}", listed.join(", "))
            }
            None => format!("between {} and {}{never}", Expiry::MIN_SECONDS, self.max_seconds),
        }
    }

    /// The operator's list, if any (ascending seconds, without "never").
    pub fn choices(&self) -> Option<&[u64]> {
        self.choices.as_deref()
    }

    /// What a form offers: the operator's list, or the preset up to the
    /// maximum; then 0 (never) when allowed.
    pub fn offered(&self) -> Vec<u64> {
        let mut offered: Vec<u64> = match &self.choices {
            Some(choices) => choices.clone(),
            None => {
                let mut preset: Vec<u64> = PRESET.iter().copied().filter(|&s| s <= self.max_seconds).collect();
                if !preset.contains(&self.default_seconds) {
                    preset.push(self.default_seconds);
                    preset.sort_unstable();
                }
                preset
            }
        };
        if self.allow_never {
            offered.push(Expiry::NEVER_SECONDS);
        }
        offered
    }

    pub fn default_seconds(&self) -> u64 {
        self.default_seconds
    }

    pub fn max_seconds(&self) -> u64 {
        self.max_seconds
    }

    pub fn allow_never(&self) -> bool {
        self.allow_never
    }
}

/// A lifetime for people and flags alike: `10m`, `1h`, `1d`, `1w`, `30d`,
/// `never`; whole units only (what [`parse_lifetime`] reads back).
pub fn label(seconds: u64) -> String {
    const UNITS: [(u64, &str); 4] = [(604_800, "w"), (86_400, "d"), (3_600, "h"), (60, "m")];
    if seconds == Expiry::NEVER_SECONDS {
        return "never".into();
    }
    // Weeks only when a day count would not read better (30d, not 4w2d).
    for (size, unit) in UNITS {
        if seconds.is_multiple_of(size) && !(unit == "w" && seconds.is_multiple_of(30 * 86_400)) {
            return format!("{}{unit}", seconds / size);
        }
    }
    format!("{seconds}s")
}

/// Reads a lifetime: `90s`, `10m`, `1h`, `1d`, `1w`, a bare number of
/// seconds, or `never` (0).
pub fn parse_lifetime(raw: &str) -> Result<u64, String> {
    let raw = raw.trim();
    if raw.eq_ignore_ascii_case("never") {
        return Ok(Expiry::NEVER_SECONDS);
    }
    let split = raw.find(|c: char| !c.is_ascii_digit()).unwrap_or(raw.len());
    let (number, unit) = raw.split_at(split);
    let value: u64 = number.parse().map_err(|_| format!("`{raw}` is not a lifetime (try 10m, 1h, 1d, 1w, never)"))?;
    let size = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 604_800,
        other => return Err(format!("unknown unit `{other}` in `{raw}` (use s, m, h, d or w)")),
    };
    value.checked_mul(size).ok_or_else(|| format!("`{raw}` is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_inclusive_and_default_is_30_days() {
        assert_eq!(Expiry::from_seconds(None).unwrap().seconds(), 2_592_000);
        assert!(Expiry::from_seconds(Some(60)).is_ok());
        assert!(Expiry::from_seconds(Some(31_536_000)).is_ok());
        assert!(Expiry::from_seconds(Some(59)).is_err());
        assert!(Expiry::from_seconds(Some(31_536_001)).is_err());
        assert!(Expiry::from_seconds(Some(0)).is_err(), "never is off by default");
    }

    #[test]
    fn choices_admit_exactly_themselves_and_the_refusal_lists_them() {
        let choices = ["10m", "1h", "1d", "1w", "30d"].iter().map(|c| parse_lifetime(c).unwrap()).collect();
        let policy = ExpiryPolicy::new(Some(choices), None, None, false).unwrap();
        assert_eq!(policy.admit(None).unwrap().seconds(), 2_592_000);
        assert_eq!(policy.admit(Some(600)).unwrap().seconds(), 600);
        let refused = policy.admit(Some(601)).unwrap_err().to_string();
        assert_eq!(
            refused,
            "expires_in_seconds must be one of 600 (10m), 3600 (1h), 86400 (1d), 604800 (1w), 2592000 (30d)"
        );
        assert!(policy.admit(Some(0)).is_err());
        assert_eq!(policy.offered(), vec![600, 3600, 86_400, 604_800, 2_592_000]);
    }

    #[test]
    fn never_is_admitted_only_when_allowed_and_expires_after_every_clock() {
        let policy = ExpiryPolicy::new(None, Some(3600), Some(86_400), true).unwrap();
        let never = policy.admit(Some(0)).unwrap();
        assert!(never.is_never() && is_never(never.expires_at(Utc::now())));
        assert!(policy.admit(Some(86_401)).unwrap_err().to_string().ends_with("between 60 and 86400 or 0 (never)"));
        assert_eq!(policy.offered(), vec![3_600, 86_400, 0]);
    }

    #[test]
    fn rules_that_contradict_each_other_are_refused_with_the_rule() {
        let too_long = ExpiryPolicy::new(Some(vec![3600, 2 * 86_400]), None, Some(86_400), false).unwrap_err();
        assert!(too_long.contains("2d is outside"), "{too_long}");
        let default = ExpiryPolicy::new(Some(vec![600]), Some(3600), None, false).unwrap_err();
        assert!(default.contains("default expiry 1h is not allowed"), "{default}");
        let never_default = ExpiryPolicy::new(None, Some(0), None, false).unwrap_err();
        assert!(never_default.contains("never"), "{never_default}");
        assert!(ExpiryPolicy::new(None, Some(0), None, true).is_ok());
    }

    #[test]
    fn labels_read_back_as_the_same_seconds() {
        for seconds in [60, 600, 3600, 86_400, 604_800, 2_592_000, 31_536_000, 90, 0] {
            assert_eq!(parse_lifetime(&label(seconds)).unwrap(), seconds, "{}", label(seconds));
        }
        assert_eq!(label(2_592_000), "30d");
        assert_eq!(label(1_209_600), "2w");
        assert!(parse_lifetime("1y").is_err());
    }
}
