#!/usr/bin/env bash
# Replays the fuzz target's corpus (fuzz/corpus/*/*) on stable: the target
# built as a plain binary (`--no-default-features`, no libFuzzer), which runs
# every file through the request-to-command path and fails on a panic. The
# fuzz crate is not in the workspace (cargo fuzz wants its own); it borrows
# the workspace's Cargo.lock and target directory for this run, so the
# dependencies are the ones the daemon is tested with and are not rebuilt.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

cp Cargo.lock fuzz/Cargo.lock
trap 'rm -f fuzz/Cargo.lock' EXIT
(cd fuzz && cargo run -q --no-default-features --target-dir ../target -- corpus/*/*)
