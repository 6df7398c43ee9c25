//! A move under the authority checked: the authority's own functions
//! (`pastebin_topology::Topology`) and the shards' own rule of what they
//! serve (`Topology::serving`), with a nemesis that rolls either shard's
//! database back to an earlier state of itself at any moment, keep one
//! writer and never leave the slot's row on no shard; and each broken
//! variant is caught with a trace (run with `--nocapture` to read them).

use pastebin_model::ownership::{
    check, counterexample, Ownership, OwnershipFlaw, NOTHING_LOST, ONE_WRITER, SOME_FORGOTTEN_MOVE, SOME_MOVE,
};

#[test]
fn a_move_keeps_one_writer_and_the_row_whatever_a_database_forgets() {
    let (failed, found, states) = check(Ownership { flaw: None });
    assert!(failed.is_empty(), "the move breaks {failed:?}");
    assert!(found.contains(&SOME_MOVE) && found.contains(&SOME_FORGOTTEN_MOVE), "not vacuous: {found:?}");
    println!("{states} distinct states, found {found:?}");
    assert!(states > 100, "{states} states");
}

#[test]
fn each_broken_rule_of_the_authority_is_caught() {
    for (flaw, property) in
        [(OwnershipFlaw::TakeTrustsTheTargetAsItIs, NOTHING_LOST), (OwnershipFlaw::ServesFromItsOwnRecord, ONE_WRITER)]
    {
        let trace = counterexample(Ownership { flaw: Some(flaw) }, property);
        let trace = trace.unwrap_or_else(|| panic!("{flaw:?} breaks {property}"));
        println!("{flaw:?} breaks {property:?}:\n{trace:#?}");
    }
}
