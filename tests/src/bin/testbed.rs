//! The `pastebin` binary built with failpoints compiled in, for crash tests.
//! Identical to `pastebin` otherwise.

fn main() -> anyhow::Result<()> {
    pastebin::main_from_args()
}
