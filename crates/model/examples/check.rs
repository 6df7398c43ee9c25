//! Checks the model at any bound, off CI, and prints what it found.
//!
//! ```text
//! cargo run --release -p pastebin-model --example check -- [keys gateways sweepers attempts faults] [flaw]
//! cargo run --release -p pastebin-model --example check -- 2 2 2 3 3
//! cargo run --release -p pastebin-model --example check -- 2 2 1 3 2 SagaAbortsWithoutFence
//! ```
//! Without numbers it checks the CI bound. With a flaw it searches for a
//! counterexample to one property (by default "at most one paste per key";
//! name another by its first words, e.g. "a done key") and prints it.

use pastebin_model::{check_exhaustively, find_counterexample, properties, Bounds, Flaw, Protocol};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let numbers: Vec<u8> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let bounds = match numbers[..] {
        [keys, gateways, sweepers, attempts, faults] => Bounds { keys, gateways, sweepers, attempts, faults },
        [] => Bounds::CI,
        _ => panic!("give all five numbers: keys gateways sweepers attempts faults"),
    };
    let flaw = args.iter().find_map(|a| Flaw::ALL.into_iter().find(|f| format!("{f:?}") == *a));
    let threads = std::thread::available_parallelism().map_or(1, usize::from);
    println!("bounds {bounds:?}, flaw {flaw:?}, {threads} threads");
    let outcome = match flaw {
        None => check_exhaustively(Protocol::new(bounds, None), threads),
        Some(flaw) => {
            let property = args.iter().find_map(|a| properties::SAFETY.into_iter().find(|p| p.starts_with(a.as_str())));
            find_counterexample(Protocol::new(bounds, Some(flaw)), property.unwrap_or(properties::ONE_PASTE_PER_KEY))
        }
    };
    println!("{}", outcome.summary());
    println!("examples found: {:?}", outcome.examples);
    if outcome.failures.is_empty() {
        println!("every property holds");
    }
    for (property, trace) in &outcome.failures {
        println!("FAILS: {property}\n{trace}");
    }
}
