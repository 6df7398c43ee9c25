//! The simulation on every run of the suite: a few hundred seeds, and one
//! seed with crashes replayed (docs/testing.md#simulation).

use std::process::Command;

fn simulate(args: &[&str]) -> (bool, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_simulate")).args(args).output().expect("simulate runs");
    (output.status.success(), String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn two_hundred_seeds_keep_every_invariant() {
    let (held, output) = simulate(&["--seeds", "200", "--from", "1000", "--jobs", "2"]);
    assert!(held, "a seed broke an invariant (replay it with `simulate --seed N --history`):\n{output}");
    assert!(output.contains("200 seeds (1000..1200): 0 failing"), "{output}");
}

#[test]
fn a_seed_with_crashes_and_partitions_replays_the_same_history() {
    let (held, output) = simulate(&["--seed", "3", "--replay"]);
    assert!(held, "{output}");
    assert!(output.contains("replay of seed 3: the same history"), "{output}");
    for fault in ["Crash(", "Restart(", "PartitionOneWay(", "Hold(", "Skew("] {
        assert!(output.contains(fault), "seed 3 no longer has a {fault}..) fault; pick another seed:\n{output}");
    }
    assert!(output.contains("Created {"), "{output}");
}
