//! A new migration file is a change of this crate: `sqlx::migrate!` embeds
//! the directory, and cargo would not rebuild for a file added to it.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations/keys");
}
