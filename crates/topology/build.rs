//! Compiles the subset of etcd's v3 API this crate calls (`proto/etcd/`) with
//! protox, as crates/proto does ours: no system `protoc`. The `etcd-client`
//! crate would need one at build time (its build script runs prost-build),
//! which these machines and a fresh checkout do not have (README, "Stack").

use std::{env, path::PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let protos = ["etcd/mvccpb/kv.proto", "etcd/etcdserverpb/rpc.proto"];
    for proto in protos {
        println!("cargo:rerun-if-changed={}", root.join(proto).display());
    }
    let files = protox::compile(protos, [&root])?;
    tonic_prost_build::configure().build_server(false).compile_fds(files)?;
    Ok(())
}
