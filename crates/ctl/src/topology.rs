//! `ctl topology init` and `ctl topology show`: the one-time handover of
//! today's ranges to etcd, and what etcd says now
//! (docs/design.md#ownership-on-etcd, docs/operations.md#topology).

use std::{io::Write, sync::Arc, time::Duration};

use pastebin_shards::{describe_once, ShardKind};
use pastebin_topology::{Authority, Kind, Swap, Topology};

use crate::{deployment::listed_shards, CtlError, EndpointArgs, Exit};

#[derive(Debug, Clone, clap::Args)]
pub struct TopologyArgs {
    #[command(subcommand)]
    pub action: TopologyAction,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum TopologyAction {
    /// Write the ranges the shards hold today into etcd, once: every shard
    /// must answer, no slot may have two owners or none. From then on etcd
    /// alone says which shard owns which slots.
    Init,
    /// Print each kind's topology as etcd holds it: its version, every
    /// shard's slots and whether it confirmed its database's marker, the
    /// move in progress and the moves finished last.
    Show,
}

/// How long `init` waits for the shards to confirm their grants.
const CONFIRMATION_PATIENCE: Duration = Duration::from_secs(15);

pub async fn run(
    args: &TopologyArgs,
    endpoints: &EndpointArgs,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    let authority = authority(endpoints)?.ok_or_else(|| {
        CtlError::Usage(
            "name the etcd members: --topology etcd://HOST:PORT[,HOST:PORT...] (or PASTEBIN_TOPOLOGY)".into(),
        )
    })?;
    match args.action {
        TopologyAction::Init => init(&*authority, endpoints, out, err).await,
        TopologyAction::Show => show(&*authority, out).await,
    }
}

/// The authority `--topology` names, if it names one, reached with the
/// command's own certificate.
pub(crate) fn authority(endpoints: &EndpointArgs) -> Result<Option<Arc<dyn Authority>>, CtlError> {
    let tls = endpoints.tls.load().map_err(|error| CtlError::Usage(error.to_string()))?;
    let etcd = endpoints
        .shards
        .authority(&endpoints.topology_tls, tls.as_ref())
        .map_err(|error| CtlError::Usage(format!("{error:#}")))?;
    Ok(etcd.map(|etcd| Arc::new(etcd) as Arc<dyn Authority>))
}

async fn init(
    authority: &dyn Authority,
    endpoints: &EndpointArgs,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<Exit, CtlError> {
    let (keys, pastes) = listed_shards(endpoints)?.required().map_err(|error| CtlError::Usage(error.to_string()))?;
    let timeout = Duration::from_secs(endpoints.timeout_secs.max(1));
    let tls = endpoints.tls.load().map_err(|error| CtlError::Usage(error.to_string()))?;
    // Both kinds are checked before either is written: a refusal writes nothing.
    let mut initial = Vec::new();
    for (kind, addresses) in [(Kind::Key, &keys), (Kind::Paste, &pastes)] {
        let mut claims = Vec::new();
        for address in addresses {
            let slots = describe_once(shard_kind(kind), address, tls.as_ref(), timeout)
                .await
                .map_err(|error| CtlError::Usage(error.to_string()))?
                .ok_or_else(|| {
                    CtlError::Unreachable(format!(
                        "the {kind} shard {address} did not say which slots it owns: start it (with --topology and \
                         --advertise {address}), then run `pastebin ctl topology init` again; nothing was written"
                    ))
                })?;
            claims.push((address.clone(), slots));
        }
        let topology = Topology::initial(claims).map_err(|refused| {
            CtlError::Usage(format!("the {kind} shards' ranges cannot be the topology: {refused}; nothing was written"))
        })?;
        initial.push((kind, topology));
    }
    for (kind, topology) in &initial {
        write_initial(authority, *kind, topology, out).await?;
    }
    for (kind, _) in &initial {
        await_confirmations(authority, *kind, out, err).await?;
    }
    Ok(Exit::Ok)
}

/// Stores `topology` unless the kind has one: an existing topology is kept,
/// whatever it says, since it may already record moves.
async fn write_initial(
    authority: &dyn Authority,
    kind: Kind,
    topology: &Topology,
    out: &mut (dyn Write + Send),
) -> Result<(), CtlError> {
    let unavailable = |error: pastebin_topology::AuthorityError| CtlError::Unreachable(error.to_string());
    let existing = match authority.swap(kind, None, topology).await.map_err(unavailable)? {
        Swap::Written(_) => {
            writeln!(out, "{kind} topology written (version {}): {}", topology.version, grants(topology))?;
            return Ok(());
        }
        Swap::Changed(now) => now.topology,
    };
    let Some(existing) = existing else {
        return Err(CtlError::Failed(format!("the {kind} topology changed while it was written: run this again")));
    };
    let same =
        existing.shards.iter().all(|(address, grant)| topology.grant(address).map(|g| g.slots) == Some(grant.slots))
            && existing.shards.len() == topology.shards.len();
    if same {
        writeln!(out, "{kind} topology already written (version {}): {}", existing.version, grants(&existing))?;
        Ok(())
    } else {
        Err(CtlError::Usage(format!(
            "etcd already holds a {kind} topology (version {}: {}), which is not what the shards say now ({}): \
             etcd decides; `pastebin ctl topology show` prints it, and a shard whose database says otherwise obeys \
             it. Nothing was written",
            existing.version,
            grants(&existing),
            grants(topology)
        )))
    }
}

/// Waits until every shard of `kind` has confirmed its marker, which it
/// does when it sees the topology: a shard that never does is not running
/// with `--topology`, or advertises another address.
async fn await_confirmations(
    authority: &dyn Authority,
    kind: Kind,
    out: &mut (dyn Write + Send),
    err: &mut (dyn Write + Send),
) -> Result<(), CtlError> {
    let deadline = tokio::time::Instant::now() + CONFIRMATION_PATIENCE;
    loop {
        let read = authority.read(kind).await.map_err(|error| CtlError::Unreachable(error.to_string()))?;
        let topology = read.topology.ok_or_else(|| CtlError::Failed(format!("the {kind} topology vanished")))?;
        let unconfirmed: Vec<&String> =
            topology.shards.iter().filter(|(_, grant)| grant.marker.is_none()).map(|(address, _)| address).collect();
        if unconfirmed.is_empty() {
            writeln!(out, "every {kind} shard confirmed its grant")?;
            return Ok(());
        }
        if tokio::time::Instant::now() >= deadline {
            for address in unconfirmed {
                writeln!(
                    err,
                    "warning: the {kind} shard {address} has not confirmed its grant: start it with --topology and \
                     --advertise {address}; until it does, it serves the range in its own database"
                )?;
            }
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn show(authority: &dyn Authority, out: &mut (dyn Write + Send)) -> Result<Exit, CtlError> {
    for kind in Kind::ALL {
        let read = authority.read(kind).await.map_err(|error| CtlError::Unreachable(error.to_string()))?;
        let Some(topology) = read.topology else {
            writeln!(out, "{kind}: no topology yet (`pastebin ctl topology init` writes it)")?;
            continue;
        };
        writeln!(out, "{kind} topology, version {}:", topology.version)?;
        for (address, grant) in &topology.shards {
            let confirmed = if grant.marker.is_some() { "confirmed" } else { "not confirmed yet" };
            writeln!(out, "  {address}  slots {}  ({confirmed})", grant.slots)?;
        }
        match &topology.moving {
            Some(moving) => writeln!(out, "  in progress: {moving}, {}", moving.phase.name())?,
            None => writeln!(out, "  no move in progress")?,
        }
        for finished in topology.finished.iter().rev().take(3) {
            writeln!(out, "  finished: {finished}, {}", finished.phase.name())?;
        }
    }
    Ok(Exit::Ok)
}

/// `A 0-127, B 128-255`.
fn grants(topology: &Topology) -> String {
    let grants = topology.shards.iter().map(|(address, grant)| format!("{address} {}", grant.slots));
    grants.collect::<Vec<_>>().join(", ")
}

fn shard_kind(kind: Kind) -> ShardKind {
    match kind {
        Kind::Key => ShardKind::Key,
        Kind::Paste => ShardKind::Paste,
    }
}
