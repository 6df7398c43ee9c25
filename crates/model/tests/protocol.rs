//! The model checked: the protocol holds every property at the CI bound,
//! explored to completion, and each broken variant fails with a
//! counterexample trace (run with `--nocapture` to read them).
//!
//! `PASTEBIN_MODEL_BOUNDS=keys,gateways,sweepers,attempts,faults` checks a
//! bigger bound instead, off CI (docs/model.md has the measured sizes).

use pastebin_model::{
    check_exhaustively, find_counterexample,
    properties::{
        DONE_PASTE_KEPT, NAMES_LIVE_PASTE, NO_201_BEFORE_DONE, ONE_PASTE_PER_KEY, REACHABLE, REACHABLE_ONE_COMMIT,
        UNDISTURBED_CREATES_SUCCEED,
    },
    Bounds, Flaw, Protocol,
};

fn bounds() -> Bounds {
    let Ok(spec) = std::env::var("PASTEBIN_MODEL_BOUNDS") else { return Bounds::CI };
    let n: Vec<u8> = spec.split(',').map(|n| n.trim().parse().expect("PASTEBIN_MODEL_BOUNDS holds numbers")).collect();
    match n[..] {
        [keys, gateways, sweepers, attempts, faults] => {
            Bounds { keys, gateways, sweepers, attempts, faults, colocated: false }
        }
        _ => panic!("PASTEBIN_MODEL_BOUNDS is keys,gateways,sweepers,attempts,faults"),
    }
}

#[test]
fn the_protocol_holds_every_property_in_every_reachable_world() {
    let bounds = bounds();
    let outcome = check_exhaustively(Protocol::new(bounds, None), 2);
    println!("{bounds:?}: {}", outcome.summary());
    for (property, trace) in &outcome.failures {
        println!("FAILS: {property}\n{trace}");
    }
    assert!(outcome.failures.is_empty(), "the protocol breaks {:?}", outcome.failures);
    assert_eq!(outcome.examples, REACHABLE, "every reachability check finds an example: the model is not vacuous");
    assert!(outcome.unique_states > 100_000, "the whole space was explored: {}", outcome.summary());
}

/// The colocated create beside the saga, on the same keys: attempts of
/// either kind, crashes and lost answers between its lookup, its PUT and
/// its one commit, racing each other and the saga's steps and the
/// sweeper, keep every property; and the model reaches a 201 made by one
/// commit and a one commit finishing a key a saga left behind.
#[test]
fn the_colocated_create_holds_every_property_beside_the_saga() {
    let outcome = check_exhaustively(Protocol::new(Bounds::CI_COLOCATED, None), 2);
    println!("{:?}: {}", Bounds::CI_COLOCATED, outcome.summary());
    for (property, trace) in &outcome.failures {
        println!("FAILS: {property}\n{trace}");
    }
    assert!(outcome.failures.is_empty(), "the colocated create breaks {:?}", outcome.failures);
    let every: Vec<&str> = REACHABLE.iter().chain(&REACHABLE_ONE_COMMIT).copied().collect();
    assert_eq!(outcome.examples, every, "every reachability check finds an example: the model is not vacuous");
}

/// Each broken variant and the property it must break. The done and
/// restart id guards are not here: see the test after this one.
const CAUGHT: [(Flaw, &str); 10] = [
    (Flaw::SweeperAbortsWithoutFence, ONE_PASTE_PER_KEY),
    (Flaw::SweeperFinishesBlind, NAMES_LIVE_PASTE),
    (Flaw::SweeperAbortsWhenUnreachable, ONE_PASTE_PER_KEY),
    (Flaw::SagaAbortsWithoutFence, ONE_PASTE_PER_KEY),
    (Flaw::AbortWithoutIdGuard, ONE_PASTE_PER_KEY),
    (Flaw::FenceDoesNotHold, ONE_PASTE_PER_KEY),
    (Flaw::AnswersBeforeDone, NO_201_BEFORE_DONE),
    (Flaw::ReapsWithoutFence, DONE_PASTE_KEPT),
    (Flaw::ReapsWithoutAgeFloor, UNDISTURBED_CREATES_SUCCEED),
    (Flaw::NoSearchAfterKLoss, ONE_PASTE_PER_KEY),
];

/// Behind the fence, a done or a restart never meets a record of another
/// id (a live id is never aborted, an aborted id is never live again), so
/// their paste-id guards are defence in depth, not load bearing; the
/// abort's guard is load bearing.
const DEFENCE_IN_DEPTH: [Flaw; 2] = [Flaw::DoneWithoutIdGuard, Flaw::RestartWithoutIdGuard];

/// The colocated create's broken variants, checked at the mixed bound.
const CAUGHT_ONE_COMMIT: [(Flaw, &str); 2] =
    [(Flaw::OneCommitSplitInTwo, DONE_PASTE_KEPT), (Flaw::OneCommitOverTombstone, DONE_PASTE_KEPT)];

#[test]
fn each_broken_variant_fails_with_a_counterexample() {
    let saga = CAUGHT.iter().map(|caught| (Bounds::CI, caught));
    let one_commit = CAUGHT_ONE_COMMIT.iter().map(|caught| (Bounds::CI_COLOCATED, caught));
    for (bounds, &(flaw, property)) in saga.chain(one_commit) {
        let outcome = find_counterexample(Protocol::new(bounds, Some(flaw)), property);
        let trace = outcome.failures.iter().find(|(name, _)| *name == property).map(|(_, trace)| trace);
        println!("{flaw:?} breaks \"{property}\" ({}):\n{}", outcome.summary(), trace.map_or("none", |t| t.as_str()));
        assert!(trace.is_some_and(|t| !t.is_empty()), "{flaw:?} must break \"{property}\"");
    }
}

#[test]
fn the_done_and_restart_id_guards_are_defence_in_depth_behind_the_fence() {
    for flaw in DEFENCE_IN_DEPTH {
        let outcome = check_exhaustively(Protocol::new(Bounds::CI, Some(flaw)), 2);
        println!("{flaw:?}: {}", outcome.summary());
        assert!(outcome.failures.is_empty(), "{flaw:?}: {:?}", outcome.failures);
    }
}

#[test]
fn every_broken_variant_is_accounted_for() {
    for flaw in Flaw::ALL {
        let listed =
            CAUGHT.iter().chain(&CAUGHT_ONE_COMMIT).any(|(f, _)| *f == flaw) || DEFENCE_IN_DEPTH.contains(&flaw);
        assert!(listed, "{flaw:?} needs a property it breaks, or a reason it breaks none");
    }
}
