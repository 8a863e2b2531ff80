#!/usr/bin/env bash
# The one command that runs every test: installs what the tests need
# (scripts/setup.sh), points them at the Valkey and Redis binaries, checks
# formatting and lints, builds every binary of the workspace (the
# integration tests run them as processes), then runs all unit and
# integration tests and the doc tests. Extra args go to the first
# `cargo test`, e.g. `scripts/test.sh quorum -- --nocapture`.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bash scripts/setup.sh >/dev/null
# shellcheck source=/dev/null
source .venv/redlockd-env

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
cargo build --workspace --bins
cargo test --workspace --all-targets "$@"
cargo test --workspace --doc
