//! Who may create, and how often (docs/security.md#abuse-controls): the
//! per-client-address create rate limit and the create tokens. Both are
//! checked before a create touches any shard, so a refused create changes
//! nothing, and a replay of a key answers only to a caller who passes them:
//! a token check can never be used to fetch another user's stored 201.

use std::{convert::Infallible, net::IpAddr, num::NonZeroU32, str::FromStr, sync::Arc, time::Duration};

use governor::{clock::Clock as _, DefaultDirectRateLimiter, Quota};
use ipnet::IpNet;

use crate::{create_tokens::CreateTokens, ApiError};

/// `--create-rate-limit N/PERIOD`: at most N creates per period from one
/// client address, in a burst or spread out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CreateRateLimit {
    pub creates: NonZeroU32,
    pub period: Duration,
}

impl FromStr for CreateRateLimit {
    type Err = String;

    /// `30/min`, `5/s`, `1000/hour`.
    fn from_str(raw: &str) -> Result<Self, String> {
        let bad = || format!("`{raw}` is not a rate: use N/s, N/min or N/hour (e.g. 30/min)");
        let (count, unit) = raw.trim().split_once('/').ok_or_else(bad)?;
        let creates = count.trim().parse::<NonZeroU32>().map_err(|_| bad())?;
        let period = match unit.trim() {
            "s" | "sec" | "second" => Duration::from_secs(1),
            "m" | "min" | "minute" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            _ => return Err(bad()),
        };
        Ok(Self { creates, period })
    }
}

/// How many client addresses the limiter remembers: a bounded table whose
/// coldest entries are evicted in O(1), so an attacker with many addresses
/// (one IPv6 /47 holds 131,072 /64s) costs neither memory nor a scan per
/// create. An evicted address starts with a full budget, so past this many
/// busy addresses the limit is looser, never stricter, for anyone.
const REMEMBERED_CLIENTS: usize = 100_000;

/// Each client address's create budget, in a bounded table.
struct ClientBudgets {
    quota: Quota,
    budgets: quick_cache::sync::Cache<IpAddr, Arc<DefaultDirectRateLimiter>>,
}

impl ClientBudgets {
    fn new(quota: Quota) -> Self {
        Self { quota, budgets: quick_cache::sync::Cache::new(REMEMBERED_CLIENTS) }
    }

    /// Spends one create of `client`'s budget, or says how long until one is back.
    fn spend(&self, client: IpAddr) -> Result<(), Duration> {
        let budget = self.budgets.get_or_insert_with(&rate_key(client), || {
            Ok::<_, Infallible>(Arc::new(governor::RateLimiter::direct(self.quota)))
        });
        let Ok(budget) = budget;
        budget.check().map_err(|not_until| not_until.wait_time_from(governor::clock::DefaultClock::default().now()))
    }

    #[cfg(test)]
    fn remembered(&self) -> usize {
        self.budgets.len()
    }
}

/// The address a client is limited by: an IPv6 host usually owns a whole
/// /64, so its /64 counts as one client.
fn rate_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6((u128::from(v6) & !0xffff_ffff_ffff_ffff_u128).into()),
        },
    }
}

/// The client's address: the socket's peer, unless the peer is a trusted
/// proxy, in which case the nearest `X-Forwarded-For` entry that is not a
/// trusted proxy itself (entries further left are whatever the client said).
pub fn client_address(peer: IpAddr, forwarded_for: &[&str], trusted_proxies: &[IpNet]) -> IpAddr {
    let trusted = |ip: &IpAddr| trusted_proxies.iter().any(|net| net.contains(ip));
    if !trusted(&peer) {
        return peer;
    }
    let mut client = peer;
    for entry in forwarded_for.iter().rev().flat_map(|header| header.rsplit(',')) {
        match entry.trim().parse::<IpAddr>() {
            Ok(ip) if trusted(&ip) => client = ip,
            Ok(ip) => return ip,
            // An entry that is not an address ends what can be believed.
            Err(_) => break,
        }
    }
    client
}

/// The token of an `Authorization: Bearer <token>` value, for create and
/// delete alike. The scheme is case-insensitive (RFC 9110 §11.1), so
/// `bearer` and `BEARER` work too.
pub(crate) fn bearer_token(authorization: &str) -> Option<&str> {
    let (scheme, token) = authorization.trim().split_once([' ', '\t'])?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim()).filter(|token| !token.is_empty())
}

/// The gate in front of every create.
pub(crate) struct Admission {
    rate: Option<ClientBudgets>,
    tokens: Option<CreateTokens>,
}

impl Admission {
    pub(crate) fn new(rate: Option<CreateRateLimit>, tokens_file: Option<std::path::PathBuf>) -> Self {
        let rate = rate.map(|limit| {
            // Evenly refilled: one create's worth every period / N, at most N banked.
            let refill = (limit.period / limit.creates.get()).max(Duration::from_nanos(1));
            let quota = Quota::with_period(refill).map(|q| q.allow_burst(limit.creates));
            // `refill` is at least 1 ns, so a quota always exists.
            ClientBudgets::new(quota.unwrap_or_else(|| Quota::per_second(limit.creates)))
        });
        Self { rate, tokens: tokens_file.map(CreateTokens::new) }
    }

    /// Lets a create through, or says why not. The token is checked before
    /// the rate, so that only callers allowed to create spend a client's budget.
    pub(crate) fn admit(&self, client: Option<IpAddr>, bearer: Option<&str>) -> Result<(), ApiError> {
        if let Some(tokens) = &self.tokens {
            let presented = bearer.ok_or(ApiError::CreateTokenRequired)?;
            if !tokens.accepts(presented) {
                return Err(ApiError::InvalidCreateToken);
            }
        }
        if let (Some(budgets), Some(client)) = (&self.rate, client) {
            if let Err(wait) = budgets.spend(client) {
                let retry_after_seconds = wait.as_secs().saturating_add(u64::from(wait.subsec_nanos() > 0)).max(1);
                return Err(ApiError::RateLimited { retry_after_seconds });
            }
        }
        Ok(())
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
        let limit: CreateRateLimit = "30/min".parse().unwrap();
        assert_eq!((limit.creates.get(), limit.period), (30, Duration::from_secs(60)));
        assert_eq!("5/s".parse::<CreateRateLimit>().unwrap().period, Duration::from_secs(1));
        for bad in ["0/min", "30", "30/fortnight", "-1/s", "x/min", "99999999999/min"] {
            assert!(bad.parse::<CreateRateLimit>().is_err(), "{bad}");
        }
    }

    #[test]
    fn forwarded_for_is_believed_only_from_a_trusted_proxy() {
        let proxies: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let header = ["203.0.113.9, 10.1.2.3"];
        assert_eq!(client_address(ip("198.51.100.1"), &header, &proxies), ip("198.51.100.1"));
        assert_eq!(client_address(ip("10.0.0.1"), &header, &proxies), ip("203.0.113.9"));
        // A client cannot hide behind an address it made up further left.
        assert_eq!(client_address(ip("10.0.0.1"), &["1.1.1.1, 203.0.113.9"], &proxies), ip("203.0.113.9"));
        assert_eq!(client_address(ip("10.0.0.1"), &[], &proxies), ip("10.0.0.1"));
        assert_eq!(client_address(ip("10.0.0.1"), &["junk"], &proxies), ip("10.0.0.1"));
    }

    #[test]
    fn the_limit_is_per_client_and_says_when_to_retry() {
        let admission = Admission::new(Some("2/min".parse().unwrap()), None);
        let (a, b) = (Some(ip("192.0.2.1")), Some(ip("192.0.2.2")));
        assert!(admission.admit(a, None).is_ok());
        assert!(admission.admit(a, None).is_ok());
        match admission.admit(a, None) {
            Err(ApiError::RateLimited { retry_after_seconds }) => assert!((1..=30).contains(&retry_after_seconds)),
            other => panic!("expected 429, got {other:?}"),
        }
        assert!(admission.admit(b, None).is_ok(), "another client has its own budget");
    }

    #[test]
    fn an_ipv6_host_is_limited_by_its_64() {
        assert_eq!(rate_key(ip("2001:db8::1")), rate_key(ip("2001:db8::ffff:1")));
        assert_ne!(rate_key(ip("2001:db8::1")), rate_key(ip("2001:db8:0:1::1")));
    }

    #[test]
    fn the_table_of_client_budgets_is_bounded() {
        let admission = Admission::new(Some("1/hour".parse().unwrap()), None);
        for n in 0..(REMEMBERED_CLIENTS as u128 + 20_000) {
            let host = std::net::Ipv6Addr::from((0x2001_0db8_u128 << 96) | (n << 64));
            assert!(admission.admit(Some(IpAddr::V6(host)), None).is_ok(), "each /64 has its own first create");
        }
        let remembered = admission.rate.as_ref().unwrap().remembered();
        assert!(remembered <= REMEMBERED_CLIENTS + REMEMBERED_CLIENTS / 10, "{remembered} addresses remembered");
    }
}
