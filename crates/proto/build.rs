//! Compiles `proto/**/*.proto` with protox (pure Rust: no system `protoc`) and
//! writes one file descriptor set per API, so each server's reflection
//! describes only its own API: the gateway's public reflection must not
//! reveal the internal K and P services (docs/design.md#mtls).

use std::{env, path::PathBuf};

use prost::Message;

/// Each proto file and the name of its own descriptor set in `OUT_DIR`.
const PROTOS: &[(&str, &str)] = &[
    ("pastebin/keys/v1/keys.proto", "keys_descriptor"),
    ("pastebin/pastes/v1/pastes.proto", "pastes_descriptor"),
    ("pastebin/colocated/v1/colocated.proto", "colocated_descriptor"),
    ("pastebin/v1/pastebin.proto", "api_descriptor"),
];

const SHARD_PROTO: &str = "pastebin/shard/v1/shard.proto";

/// Messages that carry a secret (a delete token, a stored 201, an
/// idempotency key): their `Debug` is written by hand in `src/redacted.rs`,
/// so printing one never prints the secret.
const REDACTED: &[&str] = &[
    ".pastebin.v1.CreatePasteRequest",
    ".pastebin.v1.CreatePasteResponse",
    ".pastebin.v1.DeletePasteRequest",
    ".pastebin.pastes.v1.DeleteRequest",
    ".pastebin.keys.v1.KeyRecord",
    ".pastebin.keys.v1.BeginRequest",
    ".pastebin.keys.v1.RestartRequest",
    ".pastebin.keys.v1.AdoptRequest",
];

/// Byte fields decoded and encoded as `bytes::Bytes`: a read's content is
/// shared with the gateway's cache or store read, never copied per answer
/// (docs/security.md#total-bounds).
const SHARED_BYTES: &str = ".pastebin.v1.Paste.data";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let out = PathBuf::from(env::var("OUT_DIR")?);
    for (proto, descriptor) in PROTOS {
        println!("cargo:rerun-if-changed={}", root.join(proto).display());
        let own = protox::compile([proto], [&root])?;
        std::fs::write(out.join(format!("{descriptor}.bin")), own.encode_to_vec())?;
    }
    // The shard description is no API of its own: K and P both import it.
    println!("cargo:rerun-if-changed={}", root.join(SHARD_PROTO).display());
    let all = protox::compile(PROTOS.iter().map(|(proto, _)| *proto).chain([SHARD_PROTO]), [&root])?;
    tonic_prost_build::configure().skip_debug(REDACTED).bytes(SHARED_BYTES).compile_fds(all)?;
    Ok(())
}
