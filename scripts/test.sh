#!/usr/bin/env bash
# The one command that runs every test: installs what the tests need
# (scripts/setup.sh), points them at the Valkey and Redis binaries, then runs
# all unit/integration tests and the doc tests. Extra args go to the first
# `cargo test`, e.g. `scripts/test.sh quorum -- --nocapture`.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bash scripts/setup.sh >/dev/null
# shellcheck source=/dev/null
source .venv/redlockd-env

cargo test --all-targets "$@"
cargo test --doc
