//! Generates the gRPC code for `proto/` (at the workspace root) at build
//! time. The proto files are parsed by `protox` (pure Rust), so a fresh
//! machine needs no `protoc`. The encoded descriptor set is kept for gRPC
//! server reflection.

use prost::Message;
use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../proto");
    let protos = [
        root.join("redlock/v1/lock.proto"),
        root.join("redlock/v1/admin.proto"),
        root.join("redlock/v1/election.proto"),
    ];
    println!("cargo:rerun-if-changed={}", root.display());
    let fds = protox::compile(protos, [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("redlock_v1_descriptor.bin"), fds.encode_to_vec())?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        // Small per-call buffers (see src/codec.rs).
        .codec_path("crate::codec::SmallBufferCodec")
        .compile_fds(fds)?;
    Ok(())
}
