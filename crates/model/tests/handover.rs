//! The slot handover checked: every interleaving of two writers with ctl's
//! steps (a ctl killed and rerun anywhere is one of them) keeps one writer
//! and loses nothing, and each broken variant is caught with a trace.

use pastebin_model::handover::{check, counterexample, Handover, HandoverFlaw, NOTHING_LOST, ONE_WRITER, REACHABLE};

#[test]
fn the_handover_keeps_one_writer_and_loses_no_write_in_every_interleaving() {
    let (failed, found, states) = check(Handover { writers: 2, flaw: None });
    assert!(failed.is_empty(), "the handover breaks {failed:?}");
    assert_eq!(found, REACHABLE, "the model is not vacuous");
    println!("{states} distinct states");
    assert!(states > 1_000, "{states} states");
}

#[test]
fn each_broken_handover_is_caught() {
    for (flaw, property) in [
        (HandoverFlaw::ReleaseWithoutVerify, NOTHING_LOST),
        (HandoverFlaw::FreezeDoesNotRefuse, NOTHING_LOST),
        (HandoverFlaw::TakeBeforeRelease, ONE_WRITER),
        (HandoverFlaw::RecordBeforeCommit, NOTHING_LOST),
        (HandoverFlaw::UntrackedWrite, NOTHING_LOST),
    ] {
        let trace = counterexample(Handover { writers: 1, flaw: Some(flaw) }, property);
        let trace = trace.unwrap_or_else(|| panic!("{flaw:?} breaks {property}"));
        println!("{flaw:?} breaks {property:?}:\n{trace:#?}");
    }
}
