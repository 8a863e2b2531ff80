#!/usr/bin/env bash
# Runs redlockd in --dev mode (five local Valkey masters, no config needed),
# after installing what it needs. Extra args go to redlockd.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bash scripts/setup.sh >/dev/null
# shellcheck source=/dev/null
source .venv/redlockd-env
export REDLOCKD_SERVER_BIN="$REDLOCKD_VALKEY_BIN"

exec cargo run --release -p redlockd --bin redlockd -- --dev "$@"
