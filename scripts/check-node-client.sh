#!/usr/bin/env bash
# Checks the Node client package (clients/node, npm `redlockd-client`):
#   1. npm ci (download cache under target/node-client-cache);
#   2. the package's copy of the contract equals proto/redlock/v1/ (lock,
#      election and admin .proto);
#   3. `npm pack --dry-run` ships the sources, the types and the contract;
#   4. the hand-written types: `tsc` on types/usage.ts;
#   5. `node --test` against real daemons (the workspace's target/debug/
#      redlockd, or $REDLOCKD_BIN; masters from $REDLOCKD_VALKEY_BIN),
#      started by the test kit's launcher (target/debug/redlockd-cluster,
#      or $REDLOCKD_CLUSTER_BIN).
# Each step is bounded; the test runner's summary is printed at the end.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pkg="$repo/clients/node"
cd "$repo"

if [ -z "${REDLOCKD_VALKEY_BIN:-}" ]; then
  bash scripts/setup.sh >/dev/null
  # shellcheck source=/dev/null
  source .venv/redlockd-env
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "check-node-client: node not found; installing Debian's nodejs and npm" >&2
  DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm >/dev/null
fi
if [ -z "${REDLOCKD_CLUSTER_BIN:-}" ]; then
  # The launcher and the daemon, by the same build as scripts/test.sh's
  # build step (same feature set): a no-op after it.
  timeout 1200 cargo build -q --workspace --bins
fi

echo "--- npm ci"
export npm_config_cache="$repo/target/node-client-cache"
(cd "$pkg" && timeout 300 npm ci --no-audit --no-fund --loglevel=error)

echo "--- the package's contract is proto/redlock/v1/{lock,election,admin}.proto"
for proto in lock election admin; do
  if ! cmp -s "proto/redlock/v1/$proto.proto" "$pkg/proto/redlock/v1/$proto.proto"; then
    diff -u "proto/redlock/v1/$proto.proto" "$pkg/proto/redlock/v1/$proto.proto" >&2 || true
    echo "check-node-client: clients/node/proto/redlock/v1/$proto.proto differs from the contract; copy it:" >&2
    echo "  cp proto/redlock/v1/$proto.proto clients/node/proto/redlock/v1/$proto.proto" >&2
    exit 1
  fi
done

echo "--- npm pack ships the sources, types and contract"
packed="$(cd "$pkg" && timeout 120 npm pack --dry-run --json --loglevel=error)"
for file in src/index.js src/election.js src/index.d.ts proto/redlock/v1/lock.proto proto/redlock/v1/election.proto README.md package.json; do
  if ! grep -q "\"path\": \"$file\"" <<<"$packed"; then
    echo "check-node-client: npm pack would not ship $file" >&2
    exit 1
  fi
done

echo "--- types (tsc on types/usage.ts)"
(cd "$pkg" && timeout 300 npx --no-install tsc -p types/tsconfig.json)

echo "--- node --test"
(cd "$pkg" && timeout 900 node --test --test-concurrency=1 --test-reporter=spec test/*.test.js)
