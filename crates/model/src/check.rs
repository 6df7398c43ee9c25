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
        examples: properties::REACHABLE.iter().copied().filter(|name| discoveries.contains_key(name)).collect(),
    }
}

fn trace(actions: Vec<<Protocol as Model>::Action>) -> String {
    actions.iter().enumerate().map(|(step, action)| format!("{:>3}. {action:?}\n", step + 1)).collect()
}
