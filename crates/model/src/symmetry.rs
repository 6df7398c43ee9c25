//! Symmetry reduction: keys are interchangeable, and so are gateways and
//! sweepers. A world's representative is the smallest of its renamings, so
//! the checker visits one world per class instead of every renaming.

use crate::world::World;

impl World {
    /// The smallest renaming of keys, gateways and sweepers.
    pub fn representative(&self) -> World {
        let mut best: Option<World> = None;
        for keys in permutations(self.keys.len()) {
            for gateways in permutations(self.gateways.len()) {
                for sweepers in permutations(self.sweepers.len()) {
                    let renamed = self.renamed(&keys, &gateways, &sweepers);
                    if best.as_ref().is_none_or(|b| renamed < *b) {
                        best = Some(renamed);
                    }
                }
            }
        }
        best.unwrap_or_else(|| self.clone())
    }

    /// This world with key `i` renamed `keys[i]`, and so on.
    fn renamed(&self, keys: &[u8], gateways: &[u8], sweepers: &[u8]) -> World {
        let mut world = self.clone();
        for (i, key) in self.keys.iter().enumerate() {
            let mut key = key.clone();
            key.client.waiting_on = key.client.waiting_on.map(|g| gateways[usize::from(g)]);
            world.keys[usize::from(keys[i])] = key;
        }
        for (i, attempt) in self.gateways.iter().enumerate() {
            world.gateways[usize::from(gateways[i])] = attempt.clone().map(|mut a| {
                a.key = keys[usize::from(a.key)];
                a
            });
        }
        for (i, job) in self.sweepers.iter().enumerate() {
            world.sweepers[usize::from(sweepers[i])] = job.clone().map(|mut j| {
                j.key = keys[usize::from(j.key)];
                j
            });
        }
        world.orphans = self
            .orphans
            .iter()
            .map(|call| {
                let mut call = *call;
                call.key = keys[usize::from(call.key)];
                call
            })
            .collect();
        world
    }
}

/// Every ordering of `0..n`.
fn permutations(n: usize) -> Vec<Vec<u8>> {
    let mut all = vec![Vec::new()];
    for next in 0..n {
        let next = u8::try_from(next).expect("bounds are far below 256");
        all = all
            .into_iter()
            .flat_map(|perm| {
                (0..=perm.len()).map(move |at| {
                    let mut longer = perm.clone();
                    longer.insert(at, next);
                    longer
                })
            })
            .collect();
    }
    all
}

#[cfg(test)]
mod tests {
    use super::permutations;

    #[test]
    fn permutations_are_all_orderings() {
        let mut three = permutations(3);
        three.sort();
        assert_eq!(three.len(), 6);
        three.dedup();
        assert_eq!(three.len(), 6);
        assert_eq!(permutations(1), vec![vec![0]]);
    }
}
