//! What `ctl reshard` checks before it asks either shard about a move
//! (docs/operations.md#moving-slots): the move is between shards the
//! gateways and sweepers list, so no slot is ever left owned by a shard no
//! caller can reach; `--from` and `--to` are addresses of those lists, so a
//! typo or a list position (`K1`) is a usage error that says what was
//! expected, not an outage to wait out; and a TLS mismatch is named with the
//! flags to add, in the same sentence every ctl command gives.

use std::time::Duration;

use pastebin_shards::{describe_once, DiscoveryError, ShardKind};

use crate::{
    deployment::listed_shards,
    reshard::{Kind, ReshardArgs},
    CtlError, EndpointArgs,
};

/// Refuses, as a usage error and before anything moves, a move the callers
/// could not follow. `--status` and `--abandon` only read or undo, so they
/// accept a shard outside the lists (a move begun before it was dropped
/// from them); their names must still be addresses.
pub(crate) async fn check(args: &ReshardArgs, endpoints: &EndpointArgs) -> Result<(), CtlError> {
    let lists = listed_shards(endpoints)?;
    let (listed, flag, kind) = match args.kind {
        Kind::Key => (&lists.key_shards, "--key-shards", ShardKind::Key),
        Kind::Paste => (&lists.paste_shards, "--paste-shards", ShardKind::Paste),
    };
    let callers = Callers { listed, flag, kind: args.kind };
    for (end, name) in [("--from", &args.from), ("--to", &args.to)] {
        callers.resolves(end, name).await?;
        if !(args.status || args.abandon) {
            callers.lists(end, name)?;
        }
    }
    let tls = endpoints.tls.load().map_err(|error| CtlError::Usage(error.to_string()))?;
    let timeout = Duration::from_secs(endpoints.timeout_secs.max(1));
    for name in [&args.from, &args.to] {
        // Only a TLS mismatch stops here; a shard that does not answer, or
        // answers as another kind, is reported by the step that calls it.
        if let Err(DiscoveryError::TlsMismatch(hint)) = describe_once(kind, name, tls.as_ref(), timeout).await {
            return Err(CtlError::Usage(hint));
        }
    }
    Ok(())
}

/// The shards of the moving kind that the gateways and sweepers are given.
struct Callers<'a> {
    listed: &'a [String],
    flag: &'static str,
    kind: Kind,
}

impl Callers<'_> {
    fn expected(&self) -> String {
        format!(
            "expected the host:port of one of the {kind} shards the gateways and sweepers list ({flag}, its \
             variable or PASTEBIN_CONFIG): {}",
            self.listed.join(", "),
            kind = noun(self.kind),
            flag = self.flag,
        )
    }

    /// `name` is an entry of the list, however its scheme is written.
    fn lists(&self, end: &str, name: &str) -> Result<(), CtlError> {
        if self.listed.iter().any(|listed| authority(listed).eq_ignore_ascii_case(authority(name))) {
            return Ok(());
        }
        Err(CtlError::Usage(format!(
            "{end} {name} is not a listed {kind} shard: a move to or from it would leave slots owned by a shard no \
             caller can reach; {}",
            self.expected(),
            kind = noun(self.kind),
        )))
    }

    /// `name` is a host:port whose host resolves.
    async fn resolves(&self, end: &str, name: &str) -> Result<(), CtlError> {
        let address = authority(name);
        if name.trim().starts_with(pastebin_runtime::grpc::UNIX_SCHEME) {
            return Ok(());
        }
        let usage = |why: String| CtlError::Usage(format!("{end} {name} {why}; {}", self.expected()));
        if !address.rsplit_once(':').is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok()) {
            return Err(usage("is not a host:port".into()));
        }
        match tokio::net::lookup_host(address).await {
            Ok(_) => Ok(()),
            Err(error) => Err(usage(format!("does not resolve ({error})"))),
        }
    }
}

fn noun(kind: Kind) -> &'static str {
    match kind {
        Kind::Key => "key",
        Kind::Paste => "paste",
    }
}

/// `host:port` of an address written with or without `http://` or `https://`.
fn authority(address: &str) -> &str {
    let address = address.trim();
    let address = address.split_once("://").map_or(address, |(_, rest)| rest);
    address.trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn callers(listed: &[String]) -> Callers<'_> {
        Callers { listed, flag: "--key-shards", kind: Kind::Key }
    }

    #[test]
    fn an_address_is_listed_however_its_scheme_is_written() {
        let listed = ["http://127.0.0.1:7161".to_owned(), "10.0.0.2:7162".to_owned()];
        assert!(callers(&listed).lists("--to", "127.0.0.1:7161").is_ok());
        assert!(callers(&listed).lists("--to", "https://10.0.0.2:7162/").is_ok());
    }

    #[test]
    fn a_shard_outside_the_lists_or_a_list_position_is_a_usage_error_naming_the_list() {
        let listed = ["127.0.0.1:7161".to_owned(), "127.0.0.1:7162".to_owned()];
        for name in ["127.0.0.1:7163", "K1"] {
            let Err(CtlError::Usage(message)) = callers(&listed).lists("--to", name) else { panic!("{name} accepted") };
            assert!(message.starts_with(&format!("--to {name} is not a listed key shard")), "{message}");
            assert!(
                message.contains("--key-shards") && message.contains("127.0.0.1:7161, 127.0.0.1:7162"),
                "{message}"
            );
        }
    }

    #[tokio::test]
    async fn a_name_that_is_no_host_port_or_does_not_resolve_is_a_usage_error() {
        let listed = ["127.0.0.1:7161".to_owned()];
        let Err(CtlError::Usage(message)) = callers(&listed).resolves("--from", "K0").await else { panic!() };
        assert!(message.starts_with("--from K0 is not a host:port; expected the host:port"), "{message}");
        let unresolvable = "no-such-shard.invalid:7161";
        let Err(CtlError::Usage(message)) = callers(&listed).resolves("--from", unresolvable).await else { panic!() };
        assert!(message.contains("does not resolve"), "{message}");
        assert!(callers(&listed).resolves("--from", "http://127.0.0.1:7161").await.is_ok());
    }
}
