//! The slot handover checked: the shards' own transition function
//! (`pastebin_handover::step`) and ctl's own choice of step
//! (`pastebin_handover::next`), in every interleaving with two writers and
//! an operator who reruns, mistypes `--to`, abandons in two calls or runs
//! twice at once, keep one writer and lose no committed write; and each
//! broken variant (a guard of `step` removed, or a rule of the writes
//! broken) is caught with a trace (run with `--nocapture` to read them).

use pastebin_model::handover::{
    check, counterexample, Handover, HandoverFlaw, Operator, NOTHING_LOST, ONE_WRITER, SOME_ABANDON, SOME_MOVE,
};

#[test]
fn the_handover_keeps_one_writer_and_loses_no_write_whatever_the_operator_does() {
    for (operator, writers) in
        [(Operator::Reruns, 2), (Operator::WrongPeer, 1), (Operator::AbandonInTwoCalls, 1), (Operator::TwoRuns, 1)]
    {
        let (failed, found, states) = check(Handover { writers, operator, flaw: None });
        assert!(failed.is_empty(), "{operator:?}: the handover breaks {failed:?}");
        assert!(found.contains(&SOME_MOVE), "{operator:?}: the model is not vacuous: {found:?}");
        println!("{operator:?}: {states} distinct states, found {found:?}");
        assert!(states > 1_000, "{states} states");
    }
    let (_, found, _) = check(Handover { writers: 1, operator: Operator::AbandonInTwoCalls, flaw: None });
    assert!(found.contains(&SOME_ABANDON), "{found:?}");
}

#[test]
fn each_broken_handover_is_caught() {
    for (flaw, operator, property) in [
        (HandoverFlaw::ReleaseWithoutVerify, Operator::Reruns, NOTHING_LOST),
        (HandoverFlaw::FreezeDoesNotRefuse, Operator::Reruns, NOTHING_LOST),
        (HandoverFlaw::RecordBeforeCommit, Operator::Reruns, NOTHING_LOST),
        (HandoverFlaw::UntrackedWrite, Operator::Reruns, NOTHING_LOST),
        (HandoverFlaw::PermitDropsOnCancel, Operator::Reruns, NOTHING_LOST),
        (HandoverFlaw::NoIdentityGuard, Operator::WrongPeer, NOTHING_LOST),
        (HandoverFlaw::NoReceiptGuard, Operator::WrongPeer, ONE_WRITER),
        (HandoverFlaw::NoEpochFence, Operator::TwoRuns, NOTHING_LOST),
    ] {
        let trace = counterexample(Handover { writers: 1, operator, flaw: Some(flaw) }, property);
        let trace = trace.unwrap_or_else(|| panic!("{flaw:?} with {operator:?} breaks {property}"));
        println!("{flaw:?} with {operator:?} breaks {property:?}:\n{trace:#?}");
    }
}
