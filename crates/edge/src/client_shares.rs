//! Fair shares per client address (docs/security.md#fair-shares): how many
//! connections, requests in flight and request-body bytes in flight one
//! client may hold, so that one address cannot take every global slot and
//! lock everyone else out. The global caps stay as the last line behind
//! these. A client is its IP address, an IPv6 host its /64 (one host usually
//! owns a whole /64), and behind a trusted proxy the address the proxy forwards.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex, PoisonError},
};

use ipnet::IpNet;

/// How many client addresses the defaults are sized for: that many, each
/// at its full share, leave room under every global cap for everyone else
/// (docs/security.md#total-bounds). Each default cap is checked against it
/// when the crate builds.
pub const SIZED_FOR_ADDRESSES: usize = 16;

/// `--max-connections-per-client` when not given, HTTP and gRPC alike.
pub const DEFAULT_CONNECTIONS_PER_CLIENT: usize = 64;

/// `--max-requests-in-flight-per-client` when not given: HTTP requests in
/// flight, and gRPC calls open.
pub const DEFAULT_REQUESTS_PER_CLIENT: usize = 32;

/// `--max-body-bytes-per-client` when not given: 7 MiB. Enough for one
/// JSON create of the largest paste at the default `--max-content-bytes`
/// (6 MiB + 4 KiB on the wire), and few enough that 16 addresses at their
/// full share (112 MiB) fit in the default body budget
/// ([`crate::body_budget::DEFAULT_BODY_BUDGET_BYTES`], 128 MiB), so the
/// global cap stays the last line (docs/security.md#total-bounds).
pub const DEFAULT_BODY_BYTES_PER_CLIENT: usize = 7 * 1024 * 1024;

// Checked when the crate builds: a larger default share would not compile.
const _: () =
    assert!(SIZED_FOR_ADDRESSES * DEFAULT_BODY_BYTES_PER_CLIENT < crate::body_budget::DEFAULT_BODY_BUDGET_BYTES);

/// The address a client's shares are counted by: an IPv6 host's /64, an
/// IPv4-mapped IPv6 address as the IPv4 address it is.
pub fn share_key(ip: IpAddr) -> IpAddr {
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

/// One kind of share (connections, requests, body bytes): at most `cap`
/// units per client at once. Only clients holding something have an entry,
/// so the table is as small as what is in flight.
#[derive(Debug)]
pub struct Shares {
    cap: usize,
    held: Mutex<HashMap<IpAddr, usize>>,
}

impl Shares {
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Self { cap, held: Mutex::new(HashMap::new()) })
    }

    /// `amount` more units for `client`, or `None` when that would pass its
    /// cap. Never waits: a client past its share is answered at once.
    pub fn try_take(self: &Arc<Self>, client: IpAddr, amount: usize) -> Option<Share> {
        let key = share_key(client);
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        let entry = held.entry(key).or_insert(0);
        match entry.checked_add(amount).filter(|total| *total <= self.cap) {
            Some(total) => *entry = total,
            None => {
                if *entry == 0 {
                    held.remove(&key);
                }
                return None;
            }
        }
        Some(Share { shares: self.clone(), key, amount })
    }

    /// What `client` holds now.
    #[cfg(test)]
    fn held_by(&self, client: IpAddr) -> usize {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).get(&share_key(client)).copied().unwrap_or(0)
    }
}

/// Units of a client's share, given back when dropped.
#[derive(Debug)]
pub struct Share {
    shares: Arc<Shares>,
    key: IpAddr,
    amount: usize,
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut held = self.shares.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(entry) = held.get_mut(&self.key) {
            *entry = entry.saturating_sub(self.amount);
            if *entry == 0 {
                held.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(raw: &str) -> IpAddr {
        raw.parse().unwrap()
    }

    #[test]
    fn a_client_gets_its_cap_and_others_their_own() {
        let shares = Shares::new(3);
        let first = shares.try_take(ip("192.0.2.1"), 2).unwrap();
        assert!(shares.try_take(ip("192.0.2.1"), 2).is_none(), "past the cap");
        let _second = shares.try_take(ip("192.0.2.1"), 1).unwrap();
        assert!(shares.try_take(ip("192.0.2.2"), 3).is_some(), "another client has its own share");
        drop(first);
        assert_eq!(shares.held_by(ip("192.0.2.1")), 1);
        assert!(shares.try_take(ip("192.0.2.1"), 2).is_some(), "given back when dropped");
        assert!(shares.try_take(ip("192.0.2.9"), usize::MAX).is_none(), "an amount past any cap never overflows");
        assert!(shares.held.lock().unwrap().len() <= 2, "idle clients leave no entry");
    }

    #[test]
    fn an_ipv6_host_is_counted_by_its_64() {
        assert_eq!(share_key(ip("2001:db8::1")), share_key(ip("2001:db8::ffff:1")));
        assert_ne!(share_key(ip("2001:db8::1")), share_key(ip("2001:db8:0:1::1")));
        assert_eq!(share_key(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
        let shares = Shares::new(1);
        let _held = shares.try_take(ip("2001:db8::1"), 1).unwrap();
        assert!(shares.try_take(ip("2001:db8::2"), 1).is_none(), "the same /64 shares one cap");
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
}
