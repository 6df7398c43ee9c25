//! Asking the shards for their ranges: the thin I/O layer over
//! [`SlotTable`](crate::SlotTable). Every address is asked `Describe`; the
//! map is built from the answers, so the order of a list does not matter.

use std::time::Duration;

use pastebin_core::OwnedSlots;
use pastebin_keys::KeyClient;
use pastebin_pastes::PasteClient;
use pastebin_runtime::{grpc::CallError, tls::MutualTls};
use pastebin_slots::shard_slots::Described;
use tokio::time::Instant;

use crate::{address_book, AddressError, CoverageError, Shard, ShardAddresses, SlotMap};

/// What to do about a shard that does not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patience {
    /// Gateway and sweeper: wait for it, saying which one, and retry; a
    /// process that routes creates never starts on a guess.
    WaitForEveryShard,
    /// Operator tools: ask once, and go on with what answered; calls routed
    /// to a silent shard fail as unreachable.
    AskOnce,
}

#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    #[error(transparent)]
    Address(#[from] AddressError),
    #[error("{kind} shard {address} refused to say which slots it owns ({reason}): is it a {kind} service?")]
    Refused { kind: &'static str, address: String, reason: String },
    #[error("cannot build the slot map: {0}")]
    Coverage(#[from] CoverageError),
    /// Plaintext to a TLS shard or the reverse: the sentence says which flags to add.
    #[error("{0}")]
    TlsMismatch(String),
}

/// The longest wait between two tries of a silent shard.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(5);

/// Asks every shard in `addresses` for its range and builds the slot map.
/// Each call is bounded by `call_timeout`.
pub async fn discover(
    addresses: &ShardAddresses,
    tls: Option<&MutualTls>,
    patience: Patience,
    call_timeout: Duration,
) -> Result<SlotMap, DiscoveryError> {
    let (keys, pastes) = addresses.required()?;
    let (keys, pastes) = futures::future::join(
        describe_all::<KeyClient>(&keys, tls, patience, call_timeout),
        describe_all::<PasteClient>(&pastes, tls, patience, call_timeout),
    )
    .await;
    Ok(SlotMap::described(keys?, pastes?)?)
}

/// How a running gateway or sweeper discovers its slot map again: every
/// shard is asked once, within `timeout`; the answers are followed and a
/// silent shard keeps its slots ([`crate::SlotMapCell::refresh`]).
pub fn rediscovery(addresses: ShardAddresses, tls: Option<MutualTls>, timeout: Duration) -> crate::Rediscover {
    std::sync::Arc::new(move || {
        let (addresses, tls) = (addresses.clone(), tls.clone());
        Box::pin(async move {
            let discovery = discover(&addresses, tls.as_ref(), Patience::AskOnce, timeout);
            match tokio::time::timeout(timeout, discovery).await {
                Ok(map) => Ok(map?),
                Err(_) => anyhow::bail!("no answer within {timeout:?}"),
            }
        })
    })
}

/// A client of one kind of shard, as discovery needs it.
trait DescribedShard: Sized {
    const KIND: &'static str;
    fn connect(channel: tonic::transport::Channel) -> Self;
    async fn describe_by(&self, deadline: Instant) -> Result<Described, CallError>;
}

impl DescribedShard for KeyClient {
    const KIND: &'static str = "key";
    fn connect(channel: tonic::transport::Channel) -> Self {
        KeyClient::new(channel)
    }
    async fn describe_by(&self, deadline: Instant) -> Result<Described, CallError> {
        self.with_deadline(deadline).describe().await
    }
}

impl DescribedShard for PasteClient {
    const KIND: &'static str = "paste";
    fn connect(channel: tonic::transport::Channel) -> Self {
        PasteClient::new(channel)
    }
    async fn describe_by(&self, deadline: Instant) -> Result<Described, CallError> {
        self.with_deadline(deadline).describe().await
    }
}

/// Each shard with its generation (0 for a silent one).
async fn describe_all<C: DescribedShard>(
    addresses: &[String],
    tls: Option<&MutualTls>,
    patience: Patience,
    call_timeout: Duration,
) -> Result<Vec<(Shard<C>, u64)>, DiscoveryError> {
    let shards = addresses.iter().map(|address| describe_one::<C>(address, tls, patience, call_timeout));
    futures::future::join_all(shards).await.into_iter().collect()
}

/// When a call to the `kind` shard at `address` failed because one side
/// speaks TLS and the other does not, the sentence with the flags to add;
/// `None` for any other failure. A mismatch is a configuration to fix, not a
/// shard to wait for: [`discover`] asks this after a failed first call, and
/// so does every tool that calls a shard without it
/// (docs/operations.md#refusals-you-will-see).
pub async fn tls_mismatch(kind: &str, address: &str, tls: Option<&MutualTls>) -> Option<String> {
    let url = pastebin_runtime::grpc::shard_url(address, tls.is_some()).ok()?;
    crate::tls_probe::mismatch(kind, address, &url, tls.is_some()).await
}

/// The slots one shard of `kind` owns, asked once as an operator tool asks
/// (`None` when it did not answer); a TLS mismatch is an error that names
/// the flags to add, the same sentence every command gives.
pub async fn describe_once(
    kind: ShardKind,
    address: &str,
    tls: Option<&MutualTls>,
    call_timeout: Duration,
) -> Result<Option<OwnedSlots>, DiscoveryError> {
    let patience = Patience::AskOnce;
    Ok(match kind {
        ShardKind::Key => describe_one::<KeyClient>(address, tls, patience, call_timeout).await?.0.slots,
        ShardKind::Paste => describe_one::<PasteClient>(address, tls, patience, call_timeout).await?.0.slots,
    })
}

/// Which kind of shard [`describe_once`] asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardKind {
    Key,
    Paste,
}

async fn describe_one<C: DescribedShard>(
    address: &str,
    tls: Option<&MutualTls>,
    patience: Patience,
    call_timeout: Duration,
) -> Result<(Shard<C>, u64), DiscoveryError> {
    let client = C::connect(address_book::channel(address, tls)?);
    let mut delay = Duration::from_millis(200);
    loop {
        let answer = tokio::time::timeout(call_timeout, client.describe_by(Instant::now() + call_timeout)).await;
        let error = match answer {
            Ok(Ok(described)) => {
                tracing::debug!(kind = C::KIND, %address, slots = %described.owned, "shard owns slots");
                let (slots, colocated) = (Some(described.owned), described.colocated);
                let shard = Shard { address: address.to_owned(), slots, client, colocated };
                return Ok((shard, described.generation));
            }
            Ok(Err(CallError::Refused(status))) => {
                let reason = status.message().to_owned();
                return Err(DiscoveryError::Refused { kind: C::KIND, address: address.to_owned(), reason });
            }
            Ok(Err(CallError::Uncertain(status))) => {
                if let Some(hint) = tls_mismatch(C::KIND, address, tls).await {
                    return Err(DiscoveryError::TlsMismatch(hint));
                }
                status.message().to_owned()
            }
            Ok(Err(CallError::NotExecuted(status))) => status.message().to_owned(),
            Err(_) => "no answer in time".to_owned(),
        };
        if patience == Patience::AskOnce {
            tracing::warn!(kind = C::KIND, %address, %error, "shard did not say which slots it owns");
            return Ok((Shard { address: address.to_owned(), slots: None, client, colocated: false }, 0));
        }
        tracing::warn!(kind = C::KIND, %address, %error, "waiting for the shard to say which slots it owns");
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(MAX_RETRY_DELAY);
    }
}
