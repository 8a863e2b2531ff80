//! Finds the workspace's binaries (`redlockd`, `redlockctl`,
//! `redlockd-bench`, `chaos`) for tests and tools that run them as
//! processes.
//!
//! Cargo tells an integration test where its *own* package's binaries are
//! (`CARGO_BIN_EXE_*`), not another package's. Every binary of the
//! workspace lands in the same profile directory, though: the parent of
//! the `deps/` directory a test executable runs from, or the directory of
//! a tool's own executable. `scripts/test.sh` builds them all first
//! (`cargo build --workspace --bins`).

use std::path::PathBuf;

/// The path of the workspace binary `name`, built in the same profile as
/// the running executable.
pub fn path(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current executable: {e}"))?;
    let mut dir = exe
        .parent()
        .ok_or("the running executable has no directory")?
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let binary = dir.join(name);
    match binary.is_file() {
        true => Ok(binary),
        false => Err(format!(
            "{} not found: build the workspace's binaries first \
             (cargo build --workspace --bins, as scripts/test.sh does)",
            binary.display()
        )),
    }
}

/// Like [`path`], panicking with the reason: for tests.
pub fn require(name: &str) -> PathBuf {
    path(name).unwrap_or_else(|e| panic!("{e}"))
}
