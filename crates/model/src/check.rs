//! Running the checker and reporting what it found, for the tests and for
//! the off-CI example.

use std::time::{Duration, Instant};

use stateright::{Checker, HasDiscoveries, Model};

use crate::{properties, protocol::Protocol};

/// What one check found.
#[derive(Debug)]
pub struct Outcome {
    /// States generated, and distinct states (after symmetry reduction).
    pub states: usize,
    pub unique_states: usize,
    pub max_depth: usize,
    pub elapsed: Duration,
    /// Failed properties, each with its counterexample trace.
    pub failures: Vec<(&'static str, String)>,
    /// Reachability checks the checker found an example for.
    pub examples: Vec<&'static str>,
}

impl Outcome {
    pub fn failed(&self, property: &str) -> bool {
        self.failures.iter().any(|(name, _)| *name == property)
    }

    pub fn summary(&self) -> String {
        format!(
            "{} states ({} distinct), depth {}, {:.1} s",
            self.states,
            self.unique_states,
            self.max_depth,
            self.elapsed.as_secs_f64()
        )
    }
}

/// Explores every reachable world (depth first, one world per symmetry
/// class) and reports every property that fails.
pub fn check_exhaustively(protocol: Protocol, threads: usize) -> Outcome {
    let started = Instant::now();
    let checker = protocol.checker().symmetry_fn(|world| world.representative()).threads(threads).spawn_dfs().join();
    outcome(&checker, started)
}

/// Searches breadth first, on one thread, until `property` fails: the
/// counterexample is a shortest one, and the same on every run. A model
/// without the bug is explored to the end.
pub fn find_counterexample(protocol: Protocol, property: &'static str) -> Outcome {
    let started = Instant::now();
    let wanted = HasDiscoveries::AnyOf([property].into_iter().collect());
    let checker = protocol.checker().finish_when(wanted).threads(1).spawn_bfs().join();
    outcome(&checker, started)
}

fn outcome(checker: &impl Checker<Protocol>, started: Instant) -> Outcome {
    let discoveries = checker.discoveries();
    let mut failures: Vec<(&'static str, String)> = properties::SAFETY
        .iter()
        .filter_map(|name| discoveries.get(name).map(|path| (*name, trace(path.clone().into_actions()))))
        .collect();
    failures.sort();
    Outcome {
        states: checker.state_count(),
        unique_states: checker.unique_state_count(),
        max_depth: checker.max_depth(),
        elapsed: started.elapsed(),
        failures,
        examples: properties::REACHABLE
            .iter()
            .chain(&properties::REACHABLE_ONE_COMMIT)
            .copied()
            .filter(|name| discoveries.contains_key(name))
            .collect(),
    }
}

fn trace(actions: Vec<<Protocol as Model>::Action>) -> String {
    actions.iter().enumerate().map(|(step, action)| format!("{:>3}. {action:?}\n", step + 1)).collect()
}

/// Checks every state of `model`: which of `safety` failed, which of
/// `reachable` were found, and how many distinct states there were.
pub fn check_properties<M>(
    model: M,
    safety: &[&'static str],
    reachable: &[&'static str],
) -> (Vec<&'static str>, Vec<&'static str>, usize)
where
    M: Model + Send + Sync + 'static,
    M::State: Send + Sync + std::hash::Hash + std::fmt::Debug + Clone + PartialEq,
    M::Action: Send + Sync + std::fmt::Debug + Clone + PartialEq,
{
    let checker = model.checker().spawn_bfs().join();
    let discoveries = checker.discoveries();
    let failed = safety.iter().copied().filter(|name| discoveries.contains_key(name)).collect();
    let found = reachable.iter().copied().filter(|name| discoveries.contains_key(name)).collect();
    (failed, found, checker.unique_state_count())
}

/// The shortest trace to `property`'s failure in `model`, if there is one.
pub fn shortest_counterexample<M>(model: M, property: &'static str) -> Option<Vec<M::Action>>
where
    M: Model + Send + Sync + 'static,
    M::State: Send + Sync + std::hash::Hash + std::fmt::Debug + Clone + PartialEq,
    M::Action: Send + Sync + std::fmt::Debug + Clone + PartialEq,
{
    let wanted = HasDiscoveries::AnyOf([property].into_iter().collect());
    let checker = model.checker().finish_when(wanted).spawn_bfs().join();
    checker.discoveries().get(property).map(|path| path.clone().into_actions())
}
