use std::sync::Mutex;

use rand::{rngs::StdRng, SeedableRng};

use crate::{DeleteToken, PasteId, Slot};

/// Where a create's fresh paste id and delete token come from: the
/// OS-seeded CSPRNG in every deployment ([`RandomMinter`]); a seeded
/// generator in the deterministic simulation ([`SeededMinter`]), so that one
/// seed replays one run exactly (docs/testing.md#simulation).
pub trait Minter: Send + Sync + 'static {
    fn paste_id(&self, slot: Slot) -> PasteId;
    fn delete_token(&self) -> DeleteToken;
}

#[derive(Debug, Clone, Copy, Default)]
pub struct RandomMinter;

impl Minter for RandomMinter {
    fn paste_id(&self, slot: Slot) -> PasteId {
        PasteId::mint(slot)
    }

    fn delete_token(&self) -> DeleteToken {
        DeleteToken::generate()
    }
}

/// Ids and tokens from a seeded generator: reproducible, hence guessable.
/// Never for a deployment.
#[derive(Debug)]
pub struct SeededMinter(Mutex<StdRng>);

impl SeededMinter {
    pub fn new(seed: u64) -> Self {
        Self(Mutex::new(StdRng::seed_from_u64(seed)))
    }

    fn rng(&self) -> std::sync::MutexGuard<'_, StdRng> {
        self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Minter for SeededMinter {
    fn paste_id(&self, slot: Slot) -> PasteId {
        PasteId::mint_with(slot, &mut *self.rng())
    }

    fn delete_token(&self) -> DeleteToken {
        DeleteToken::generate_with(&mut *self.rng())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_mints_the_same_ids_and_tokens_again() {
        let (a, b) = (SeededMinter::new(7), SeededMinter::new(7));
        for slot in [Slot(0), Slot(200)] {
            assert_eq!(a.paste_id(slot), b.paste_id(slot));
            assert_eq!(a.delete_token().expose(), b.delete_token().expose());
        }
        assert_ne!(SeededMinter::new(8).paste_id(Slot(0)), SeededMinter::new(7).paste_id(Slot(0)));
    }

    #[test]
    fn minted_ids_keep_the_slot_prefix() {
        assert_eq!(RandomMinter.paste_id(Slot(131)).slot(), Slot(131));
        assert_eq!(SeededMinter::new(1).paste_id(Slot(131)).slot(), Slot(131));
    }
}
