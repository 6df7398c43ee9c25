//! The authority's interface: read a kind's topology, replace it only if
//! nobody wrote since (compare-and-swap), and watch it change. etcd serves
//! it in a deployment ([`crate::etcd`]); [`crate::memory`] serves it in one
//! process (unit tests, the simulation).

use std::{future::Future, time::Duration};

use futures::stream::BoxStream;

use crate::grants::{Kind, Refused, Topology};

/// Which write of a topology a read saw: the compare of the next write.
/// `None` is "no topology yet" (before `ctl topology init`).
pub type Revision = Option<i64>;

/// A topology as read, with the revision it was read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    pub topology: Option<Topology>,
    pub revision: Revision,
}

#[derive(Debug, thiserror::Error)]
pub enum AuthorityError {
    /// No answer (no quorum, no connection, a deadline): whether a write
    /// happened is unknown; read again before deciding anything.
    #[error("the topology store at {endpoints} did not answer ({reason}): is etcd up, with a quorum of its members?")]
    Unavailable { endpoints: String, reason: String },
    #[error("the {kind} topology stored at {key} cannot be read ({reason}): it was not written by pastebin; restore it from an etcd snapshot")]
    Corrupt { kind: Kind, key: String, reason: String },
}

impl AuthorityError {
    pub fn unavailable(&self) -> bool {
        matches!(self, Self::Unavailable { .. })
    }
}

/// Outcome of a compare-and-swap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Swap {
    /// Stored; the new revision.
    Written(i64),
    /// Somebody wrote first: what is there now.
    Changed(Box<Read>),
}

#[async_trait::async_trait]
pub trait Authority: Send + Sync + 'static {
    /// A linearizable read: no write that completed before it is missed.
    async fn read(&self, kind: Kind) -> Result<Read, AuthorityError>;

    /// Stores `next` if the stored topology is still at `expected`.
    async fn swap(&self, kind: Kind, expected: Revision, next: &Topology) -> Result<Swap, AuthorityError>;

    /// Every topology of `kind` from now on, the current one first. The
    /// stream ends (or yields an error) when the watch is lost; watch again.
    async fn watch(&self, kind: Kind) -> Result<BoxStream<'static, Result<Topology, AuthorityError>>, AuthorityError>;

    /// Where it is, for messages.
    fn describe(&self) -> String;
}

/// Why [`change`] did not store a change.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    #[error(transparent)]
    Refused(#[from] Refused),
    #[error(transparent)]
    Authority(#[from] AuthorityError),
    #[error("there is no {0} topology yet: run `pastebin ctl topology init` first")]
    NotInitialised(Kind),
}

/// Reads the topology, asks `decide` for the next one (`None`: nothing to
/// change) and stores it; on a concurrent write, decides again from what
/// is there now. Returns the topology that holds afterwards.
pub async fn change(
    authority: &dyn Authority,
    kind: Kind,
    mut decide: impl FnMut(&Topology) -> Result<Option<Topology>, Refused>,
) -> Result<Topology, ChangeError> {
    let mut read = authority.read(kind).await?;
    loop {
        let current = read.topology.clone().ok_or(ChangeError::NotInitialised(kind))?;
        let Some(next) = decide(&current)? else { return Ok(current) };
        match authority.swap(kind, read.revision, &next).await? {
            Swap::Written(_) => return Ok(next),
            Swap::Changed(now) => read = *now,
        }
    }
}

/// Runs `attempt` until the authority answers, saying once (and then every
/// 30 s) what it waits for: a shard's start or re-confirmation, and a move,
/// wait for etcd rather than guess.
pub async fn patiently<T, F, Fut>(what: &str, mut attempt: F) -> Result<T, ChangeError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, ChangeError>>,
{
    let mut said_at: Option<tokio::time::Instant> = None;
    loop {
        match attempt().await {
            Err(ChangeError::Authority(error)) if error.unavailable() => {
                if said_at.is_none_or(|at| at.elapsed() >= Duration::from_secs(30)) {
                    tracing::warn!(%error, "{what}: waiting for the topology store");
                    said_at = Some(tokio::time::Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            outcome => return outcome,
        }
    }
}
