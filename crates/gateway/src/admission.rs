//! Who may create or delete, and how often (docs/security.md#abuse-controls):
//! the per-client-address create and delete rate limits and the create
//! tokens. They are checked before a create touches any shard, so a refused
//! create changes nothing, and a replay of a key answers only to a caller
//! who passes them: a token check can never be used to fetch another user's
//! stored 201.

use std::{
    convert::Infallible, marker::PhantomData, net::IpAddr, num::NonZeroU32, str::FromStr, sync::Arc, time::Duration,
};

use axum::extract::{FromRef, FromRequestParts};
use governor::{clock::Clock as _, DefaultDirectRateLimiter, Quota};
use pastebin_edge::{client_shares::share_key, refusals::Protocol};

use crate::{create_tokens::CreateTokens, ApiError, Gateway};

/// An action limited per client address over HTTP, other than a create
/// (whose rate [`crate::create_request`] checks last among its headers).
pub trait RateLimitedAction {
    fn admit(gateway: &Gateway, client: Option<IpAddr>) -> Result<(), ApiError>;
}

/// A report (`--report-rate-limit`).
pub enum Report {}

/// A delete (`--delete-rate-limit`).
pub enum Delete {}

impl RateLimitedAction for Report {
    fn admit(gateway: &Gateway, client: Option<IpAddr>) -> Result<(), ApiError> {
        gateway.admit_report(Protocol::Http, client)
    }
}

impl RateLimitedAction for Delete {
    fn admit(gateway: &Gateway, client: Option<IpAddr>) -> Result<(), ApiError> {
        gateway.admit_delete(Protocol::Http, client)
    }
}

/// A request whose client spent one action `A` of its rate, checked from
/// the request's head: an extractor placed before the body's, so the body
/// of a client past its rate is never read (docs/security.md#fair-shares).
/// The body itself was charged by the listener (pastebin_edge::http).
pub struct WithinRate<A>(PhantomData<A>);

impl<S, A> FromRequestParts<S> for WithinRate<A>
where
    Gateway: FromRef<S>,
    S: Send + Sync,
    A: RateLimitedAction,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut ::http::request::Parts, state: &S) -> Result<Self, ApiError> {
        let client = parts.extensions.get::<pastebin_edge::http::Client>().map(|client| client.address);
        A::admit(&Gateway::from_ref(state), client)?;
        Ok(Self(PhantomData))
    }
}

/// `--create-rate-limit N/PERIOD` (and `--delete-rate-limit`): at most N
/// actions per period from one client address, in a burst or spread out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub count: NonZeroU32,
    pub period: Duration,
}

impl FromStr for RateLimit {
    type Err = String;

    /// `30/min`, `5/s`, `1000/hour`.
    fn from_str(raw: &str) -> Result<Self, String> {
        let bad = || format!("`{raw}` is not a rate: use N/s, N/min or N/hour (e.g. 30/min)");
        let (count, unit) = raw.trim().split_once('/').ok_or_else(bad)?;
        let count = count.trim().parse::<NonZeroU32>().map_err(|_| bad())?;
        let period = match unit.trim() {
            "s" | "sec" | "second" => Duration::from_secs(1),
            "m" | "min" | "minute" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            _ => return Err(bad()),
        };
        Ok(Self { count, period })
    }
}

/// How many client addresses the limiter remembers: a bounded table whose
/// coldest entries are evicted in O(1), so an attacker with many addresses
/// (one IPv6 /47 holds 131,072 /64s) costs neither memory nor a scan per
/// create. An evicted address starts with a full budget, so past this many
/// busy addresses the limit is looser, never stricter, for anyone.
const REMEMBERED_CLIENTS: usize = 100_000;

/// The token of an `Authorization: Bearer <token>` value, for create and
/// delete alike. The scheme is case-insensitive (RFC 9110 §11.1), so
/// `bearer` and `BEARER` work too.
pub(crate) fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once([' ', '\t'])?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|token| !token.is_empty())
}

/// Each client address's budget of one kind of action, in a bounded table.
struct ClientBudgets {
    quota: Quota,
    budgets: quick_cache::sync::Cache<IpAddr, Arc<DefaultDirectRateLimiter>>,
    /// What is limited, for the refusal's message ("pastes", "deletes").
    what: &'static str,
}

impl ClientBudgets {
    fn new(limit: RateLimit, what: &'static str) -> Self {
        // Evenly refilled: one action's worth every period / N, at most N banked.
        let refill = (limit.period / limit.count.get()).max(Duration::from_nanos(1));
        let quota = Quota::with_period(refill).map(|q| q.allow_burst(limit.count));
        // `refill` is at least 1 ns, so a quota always exists.
        let quota = quota.unwrap_or_else(|| Quota::per_second(limit.count));
        Self { quota, budgets: quick_cache::sync::Cache::new(REMEMBERED_CLIENTS), what }
    }

    /// Spends one action of `client`'s budget (an IPv6 host counts by its
    /// /64), or a 429 that says when one is back.
    fn spend(&self, client: IpAddr) -> Result<(), ApiError> {
        let budget = self.budgets.get_or_insert_with(&share_key(client), || {
            Ok::<_, Infallible>(Arc::new(governor::RateLimiter::direct(self.quota)))
        });
        let Ok(budget) = budget;
        budget.check().map_err(|not_until| {
            let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
            let retry_after_seconds = wait.as_secs().saturating_add(u64::from(wait.subsec_nanos() > 0)).max(1);
            ApiError::RateLimited { retry_after_seconds, what: self.what }
        })
    }

    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.budgets.len()
    }
}

/// The gate in front of every create and delete.
pub(crate) struct Admission {
    creates: Option<ClientBudgets>,
    deletes: Option<ClientBudgets>,
    reports: Option<ClientBudgets>,
    tokens: Option<CreateTokens>,
}

impl Admission {
    pub(crate) fn new(
        creates: Option<RateLimit>,
        deletes: Option<RateLimit>,
        tokens_file: Option<std::path::PathBuf>,
    ) -> Self {
        Self {
            creates: creates.map(|limit| ClientBudgets::new(limit, "pastes")),
            deletes: deletes.map(|limit| ClientBudgets::new(limit, "deletes")),
            reports: None,
            tokens: tokens_file.map(CreateTokens::new),
        }
    }

    /// The same gate, with reports limited per client address too.
    pub(crate) fn with_reports(self, reports: Option<RateLimit>) -> Self {
        Self { reports: reports.map(|limit| ClientBudgets::new(limit, "reports")), ..self }
    }

    /// Lets a create through, or says why not. The token is checked before
    /// the rate, so that only callers allowed to create spend a client's budget.
    pub(crate) fn admit(&self, client: Option<IpAddr>, bearer: Option<&str>) -> Result<(), ApiError> {
        self.check_token(bearer)?;
        self.check_create_rate(client)
    }

    /// Whether a create needs a token (`--require-create-token`).
    pub(crate) fn requires_token(&self) -> bool {
        self.tokens.is_some()
    }

    /// The create token, when this instance asks for one.
    pub(crate) fn check_token(&self, bearer: Option<&str>) -> Result<(), ApiError> {
        if let Some(tokens) = &self.tokens {
            let presented = bearer.ok_or(ApiError::CreateTokenRequired)?;
            if !tokens.accepts(presented) {
                return Err(ApiError::InvalidCreateToken);
            }
        }
        Ok(())
    }

    pub(crate) fn check_create_rate(&self, client: Option<IpAddr>) -> Result<(), ApiError> {
        spend(self.creates.as_ref(), client)
    }

    pub(crate) fn check_delete_rate(&self, client: Option<IpAddr>) -> Result<(), ApiError> {
        spend(self.deletes.as_ref(), client)
    }

    pub(crate) fn check_report_rate(&self, client: Option<IpAddr>) -> Result<(), ApiError> {
        spend(self.reports.as_ref(), client)
    }
}

/// One action of `client`'s budget, where both a limit and an address exist.
fn spend(budgets: Option<&ClientBudgets>, client: Option<IpAddr>) -> Result<(), ApiError> {
    match (budgets, client) {
        (Some(budgets), Some(client)) => budgets.spend(client),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(raw: &str) -> IpAddr {
        raw.parse().unwrap()
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        for value in ["Bearer abc", "bearer abc", "BEARER  abc ", "bEaReR\tabc"] {
            assert_eq!(bearer_token(value), Some("abc"), "{value:?}");
        }
        for value in ["Basic abc", "Bearer", "Bearer   ", "abc", ""] {
            assert_eq!(bearer_token(value), None, "{value:?}");
        }
    }

    #[test]
    fn rates_parse_with_their_units() {
        let limit: RateLimit = "30/min".parse().unwrap();
        assert_eq!((limit.count.get(), limit.period), (30, Duration::from_secs(60)));
        assert_eq!("5/s".parse::<RateLimit>().unwrap().period, Duration::from_secs(1));
        for bad in ["0/min", "30", "30/fortnight", "-1/s", "x/min", "99999999999/min"] {
            assert!(bad.parse::<RateLimit>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_limit_is_per_client_and_says_when_to_retry() {
        let admission = Admission::new(Some("2/min".parse().unwrap()), None, None);
        let (a, b) = (Some(ip("192.0.2.1")), Some(ip("192.0.2.2")));
        assert!(admission.admit(a, None).is_ok());
        assert!(admission.admit(a, None).is_ok());
        match admission.admit(a, None) {
            Err(ApiError::RateLimited { retry_after_seconds, what }) => {
                assert!((1..=30).contains(&retry_after_seconds));
                assert_eq!(what, "pastes");
            }
            other => panic!("expected 429, got {other:?}"),
        }
        assert!(admission.admit(b, None).is_ok(), "another client has its own budget");
    }

    #[test]
    fn deletes_have_their_own_rate() {
        let admission = Admission::new(None, Some("1/min".parse().unwrap()), None);
        let client = Some(ip("192.0.2.1"));
        assert!(admission.admit(client, None).is_ok(), "creates are not limited here");
        assert!(admission.check_delete_rate(client).is_ok());
        assert!(matches!(admission.check_delete_rate(client), Err(ApiError::RateLimited { what: "deletes", .. })));
        assert!(admission.check_delete_rate(Some(ip("2001:db8::1"))).is_ok());
    }

    #[test]
    fn the_table_of_client_budgets_is_bounded() {
        let admission = Admission::new(Some("1/hour".parse().unwrap()), None, None);
        for n in 0..(REMEMBERED_CLIENTS as u128 + 20_000) {
            let host = std::net::Ipv6Addr::from((0x2001_0db8_u128 << 96) | (n << 64));
            assert!(admission.admit(Some(IpAddr::V6(host)), None).is_ok(), "each /64 has its own first create");
        }
        let remembered = admission.creates.as_ref().unwrap().remembered();
        assert!(remembered <= REMEMBERED_CLIENTS + REMEMBERED_CLIENTS / 10, "{remembered} addresses remembered");
    }
}
