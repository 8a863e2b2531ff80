#!/usr/bin/env bash
# Each client's own cost (a benchmark: figures, not a test, not in
# CI): the Python, Node, Go, Java and Rust clients beside the raw generated stub in
# the same language, one after another against ONE daemon (a release build,
# cargo build --release) over five valkey-server masters. Prints a table of
# C=1 acquire+release p50 and C=64 cycles/s (clients/fourway/bench/run.py).
# Prepares the toolchains as scripts/check-fourway.sh does.
#   bash scripts/bench-clients.sh [SECONDS_PER_RUN [ROUNDS]]
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
seconds="${1:-2}" rounds="${2:-3}"
if [ -z "${REDLOCKD_VALKEY_BIN:-}" ]; then
  bash scripts/setup.sh >/dev/null
  # shellcheck source=/dev/null
  source .venv/redlockd-env
fi
work="$repo/target/fourway"
mkdir -p "$work"

timeout 3600 cargo build -q --release -p redlockd --bin redlockd -p redlockd-fourway-rust --bin bench-rust
# The test kit's launcher starts the masters and that daemon (clients/cluster.py).
timeout 3600 cargo build -q -p redlockd-testkit --bin redlockd-cluster

venv="$repo/target/python-client/venv"
if ! "$venv/bin/python" -c 'import redlockd_client' 2>/dev/null; then
  export PIP_CACHE_DIR="$repo/target/python-client/pip-cache" PIP_DISABLE_PIP_VERSION_CHECK=1
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  rm -rf "$work/python-package" && mkdir "$work/python-package"
  cp -r clients/python/pyproject.toml clients/python/README.md clients/python/src "$work/python-package/"
  timeout 300 "$venv/bin/pip" install -q "$work/python-package"
fi
if [ ! -d clients/node/node_modules/@grpc/grpc-js ]; then
  (cd clients/node && npm_config_cache="$repo/target/node-client-cache" \
    timeout 300 npm ci --no-audit --no-fund --loglevel=error)
fi
export GOMODCACHE="${GOMODCACHE:-$repo/target/go/mod}" GOCACHE="${GOCACHE:-$repo/target/go/cache}"
export GOFLAGS="${GOFLAGS:-} -modcacherw"
(cd clients/fourway/go && timeout 600 go build -o "$work/go-bench" ./bench)
(cd clients/java && timeout 600 mvn -B -q -Dmaven.repo.local="$repo/target/m2" -Dstyle.color=never \
  -DskipTests package dependency:build-classpath -Dmdep.outputFile="$work/java-classpath.txt")
classpath="$repo/clients/java/target/classes:$(cat "$work/java-classpath.txt")"

python3 clients/fourway/bench/run.py --daemon "$repo/target/release/redlockd" --python "$venv/bin/python" \
  --go "$work/go-bench" --java-classpath "$classpath" --rust "$repo/target/release/bench-rust" --seconds "$seconds" --rounds "$rounds"
