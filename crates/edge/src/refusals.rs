//! Every refusal the edge makes, counted by protocol and reason: in the
//! Prometheus counter [`METRIC`] and in a table of this process that the
//! dashboard reads ([`counted`]), so an operator sees who is being turned
//! away and why without a Prometheus server.

use std::{
    collections::BTreeMap,
    sync::{Mutex, PoisonError},
};

/// Connections, requests and messages the edge turned away, by `protocol`
/// (`http`, `grpc`) and `reason` (docs/security.md#total-bounds lists them).
pub const METRIC: &str = "pastebin_edge_refusals_total";

/// The listener a refusal happened on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Protocol {
    Http,
    Grpc,
}

impl Protocol {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Grpc => "grpc",
        }
    }
}

static COUNTS: Mutex<BTreeMap<(Protocol, &'static str), u64>> = Mutex::new(BTreeMap::new());

/// Counts one refusal.
pub fn refused(protocol: Protocol, reason: &'static str) {
    metrics::counter!(METRIC, "protocol" => protocol.as_str(), "reason" => reason).increment(1);
    *COUNTS.lock().unwrap_or_else(PoisonError::into_inner).entry((protocol, reason)).or_insert(0) += 1;
}

/// The refusals of one protocol and reason since this process started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusals {
    pub protocol: Protocol,
    pub reason: &'static str,
    pub count: u64,
}

/// Every refusal this process counted, by protocol, then reason.
pub fn counted() -> Vec<Refusals> {
    let counts = COUNTS.lock().unwrap_or_else(PoisonError::into_inner);
    counts.iter().map(|(&(protocol, reason), &count)| Refusals { protocol, reason, count }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_counted_by_protocol_and_reason() {
        refused(Protocol::Grpc, "test_reason");
        refused(Protocol::Grpc, "test_reason");
        refused(Protocol::Http, "test_reason");
        let count = |protocol| {
            counted().into_iter().find(|r| r.protocol == protocol && r.reason == "test_reason").map(|r| r.count)
        };
        assert_eq!(count(Protocol::Grpc), Some(2));
        assert_eq!(count(Protocol::Http), Some(1));
    }
}
