//! Why a move call was refused. Nothing changed; each message says what the
//! shard has and what to run instead.

use pastebin_core::{SlotMoveError, SlotRange};

use crate::record::{Identity, Lease, Role, Step};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The call names another move, another peer or other slots than the
    /// one this shard is in.
    #[error("{}", other_move(have, asked))]
    OtherMove { have: Box<Identity>, asked: Box<Identity> },
    #[error("this shard has no record of move {0}: check `pastebin ctl reshard --status`")]
    NoMove(String),
    #[error("this shard is the {} of {have}, not its {}", role.as_str(), asked.as_str())]
    WrongRole { have: Identity, role: Role, asked: Role },
    #[error("{have} is {} here: {what}", step.as_str())]
    WrongStep { have: Identity, step: Step, what: &'static str },
    #[error("{0} was finished here already")]
    Finished(Identity),
    /// A later ctl run took the move over: this one stops.
    #[error(
        "this run's epoch {asked} is older than epoch {} of {}: another `ctl reshard` run took this move over; \
         this one stops (the newer run finishes it)",
        lease.epoch, lease.holder
    )]
    Stale { asked: u64, lease: Lease },
    /// Another run holds the lease.
    #[error(
        "{} holds the lease of {have} until {} ms on this shard's clock (for {} s more): another `ctl reshard` \
         run is at work; let it finish, or rerun once it has stopped and its lease ran out",
        lease.holder, lease.until_ms, ((lease.until_ms - now_ms).max(0) + 999) / 1000
    )]
    Held { have: Box<Identity>, lease: Lease, now_ms: i64 },
    #[error("{0} is being abandoned: rerun with --abandon to finish undoing it")]
    Abandoning(Identity),
    #[error(
        "{have}: the source gave the slots up already, so it can no longer be abandoned: rerun without --abandon \
         to finish it"
    )]
    Released { have: Identity },
    /// A take without the source's release of these slots to this target.
    #[error("{have}: refusing to take the slots: {why}")]
    NoRelease { have: Identity, why: String },
    /// A delete of the source's copies before the target owns them.
    #[error("{have}: refusing to delete the source's copies: {why}")]
    NotTaken { have: Identity, why: String },
    #[error(transparent)]
    Slots(#[from] SlotMoveError),
}

/// "slots 128-255 are being moved from A to B (move M), not to C: rerun with --to B, or --abandon".
fn other_move(have: &Identity, asked: &Identity) -> String {
    let (mut not, mut rerun) = (Vec::new(), Vec::new());
    let mut differs = |what: &str, asked: String, have: String| {
        if asked != have {
            not.push(format!("{what} {asked}"));
            rerun.push(format!("--{what} {have}"));
        }
    };
    differs("slots", asked.slots.to_string(), have.slots.to_string());
    differs("from", asked.source.clone(), have.source.clone());
    differs("to", asked.target.clone(), have.target.clone());
    if not.is_empty() {
        return format!(
            "this shard is in move {}, not {}: finish that one first (`pastebin ctl reshard --status`)",
            have.id, asked.id
        );
    }
    let not = not.join(", ").replacen("slots ", "of slots ", 1);
    format!(
        "slots {} are being moved from {} to {} (move {}), not {not}: rerun with {}, or add --abandon to undo it",
        have.slots,
        have.source,
        have.target,
        have.id,
        rerun.join(" ")
    )
}

impl Refusal {
    /// Whether the call may succeed later unchanged (another run's lease).
    pub fn is_held(&self) -> bool {
        matches!(self, Self::Held { .. })
    }
}

/// What an operator asked for, checked against a move already recorded:
/// `slots` is `None` when not given (a resume).
pub fn check_asked(have: &Identity, source: &str, target: &str, slots: Option<SlotRange>) -> Result<(), Refusal> {
    let asked = Identity {
        id: have.id.clone(),
        slots: slots.unwrap_or(have.slots),
        source: source.to_owned(),
        target: target.to_owned(),
    };
    if asked == *have {
        Ok(())
    } else {
        Err(Refusal::OtherMove { have: Box::new(have.clone()), asked: Box::new(asked) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(target: &str) -> Identity {
        Identity { id: "move-1".into(), slots: "128-255".parse().unwrap(), source: "A".into(), target: target.into() }
    }

    #[test]
    fn a_wrong_peer_is_named_with_what_the_shard_has() {
        let refused = check_asked(&identity("B"), "A", "C", None).unwrap_err();
        assert_eq!(
            refused.to_string(),
            "slots 128-255 are being moved from A to B (move move-1), not to C: rerun with --to B, or add --abandon \
             to undo it"
        );
        let swapped = check_asked(&identity("B"), "B", "A", Some("128-255".parse().unwrap())).unwrap_err();
        assert!(swapped.to_string().contains("not from B, to A: rerun with --from A --to B"), "{swapped}");
        let slots = check_asked(&identity("B"), "A", "B", Some("0-9".parse().unwrap())).unwrap_err();
        assert!(slots.to_string().contains("not of slots 0-9: rerun with --slots 128-255"), "{slots}");
        assert_eq!(check_asked(&identity("B"), "A", "B", None), Ok(()));
    }
}
