//! Compiles `proto/**/*.proto` with protox (pure Rust: no system `protoc`) and
//! writes the file descriptor set that the servers hand to reflection.

use std::{env, path::PathBuf};

use prost::Message;

const PROTOS: &[&str] = &[
    "pastebin/shard/v1/shard.proto",
    "pastebin/keys/v1/keys.proto",
    "pastebin/pastes/v1/pastes.proto",
    "pastebin/v1/pastebin.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    for proto in PROTOS {
        println!("cargo:rerun-if-changed={}", root.join(proto).display());
    }
    let fds = protox::compile(PROTOS, [&root])?;
    let out = PathBuf::from(env::var("OUT_DIR")?);
    std::fs::write(out.join("pastebin_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
