use std::{fmt, str::FromStr};

/// Where a key's saga stands, as stored on shard K.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyState {
    /// Begun; the paste may or may not exist yet. Never "failed".
    Pending,
    /// The paste exists and the stored 201 is the answer for every retry.
    Done,
    /// The paste id is tombstoned; a retry restarts the key with a new id.
    Aborted,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown key state {0:?}")]
pub struct UnknownKeyState(pub String);

impl KeyState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Done => "done",
            Self::Aborted => "aborted",
        }
    }

    /// The only moves the guarded updates on K make: finish or abort a pending
    /// key, and restart an aborted one. Done is final: undoing it would undo a
    /// paste a client may already hold.
    pub fn can_become(self, next: KeyState) -> bool {
        matches!(
            (self, next),
            (Self::Pending, Self::Done) | (Self::Pending, Self::Aborted) | (Self::Aborted, Self::Pending)
        )
    }
}

impl FromStr for KeyState {
    type Err = UnknownKeyState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "pending" => Ok(Self::Pending),
            "done" => Ok(Self::Done),
            "aborted" => Ok(Self::Aborted),
            other => Err(UnknownKeyState(other.to_owned())),
        }
    }
}

impl fmt::Display for KeyState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::KeyState::{self, *};

    #[test]
    fn only_the_saga_moves_are_allowed() {
        let all = [Pending, Done, Aborted];
        let allowed: Vec<_> =
            all.iter().flat_map(|&a| all.iter().map(move |&b| (a, b))).filter(|&(a, b)| a.can_become(b)).collect();
        assert_eq!(allowed, vec![(Pending, Done), (Pending, Aborted), (Aborted, Pending)]);
    }

    #[test]
    fn round_trips_through_its_stored_name() {
        for s in [Pending, Done, Aborted] {
            assert_eq!(s.as_str().parse::<KeyState>(), Ok(s));
        }
        assert!("PENDING".parse::<KeyState>().is_err());
    }
}
