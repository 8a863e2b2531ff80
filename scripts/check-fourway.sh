#!/usr/bin/env bash
# One lock, five runtimes: a Python, a Node, a Go, a Java and a Rust
# process hold the same resource through their own client's Hold API against
# five real valkey-server masters and the workspace's redlockd
# (target/debug/redlockd, or $REDLOCKD_BIN), started by the test kit's
# launcher (target/debug/redlockd-cluster, or $REDLOCKD_CLUSTER_BIN);
# clients/fourway/harness.py checks the shared log: no overlap, fences
# strictly increasing.
#   1. the harness's own checks on made-up bad logs (--selftest);
#   2. the contenders' toolchains, reusing what the python, node, go and java
#      steps left under target/ (the venv in target/python-client, npm's cache,
#      target/go, target/m2); run alone, this script prepares them itself;
#   3. the run: 15 sections per runtime.
# Bounded: each step has its own time limit. Prints the harness's
# `N passed, M failed` last.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
if [ -z "${REDLOCKD_VALKEY_BIN:-}" ]; then
  bash scripts/setup.sh >/dev/null
  # shellcheck source=/dev/null
  source .venv/redlockd-env
fi
work="$repo/target/fourway"
mkdir -p "$work"

echo "--- selftest"
python3 clients/fourway/harness.py --selftest

if [ -z "${REDLOCKD_CLUSTER_BIN:-}" ]; then
  timeout 1200 cargo build -q --workspace --bins
fi

echo "--- python: redlockd_client in target/python-client/venv"
venv="$repo/target/python-client/venv"
if ! "$venv/bin/python" -c 'import redlockd_client' 2>/dev/null; then
  export PIP_CACHE_DIR="$repo/target/python-client/pip-cache" PIP_DISABLE_PIP_VERSION_CHECK=1
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  rm -rf "$work/python-package" && mkdir "$work/python-package"
  cp -r clients/python/pyproject.toml clients/python/README.md clients/python/src "$work/python-package/"
  timeout 300 "$venv/bin/pip" install -q "$work/python-package"
fi

echo "--- node: clients/node/node_modules"
if [ ! -d clients/node/node_modules/@grpc/grpc-js ]; then
  (cd clients/node && npm_config_cache="$repo/target/node-client-cache" \
    timeout 300 npm ci --no-audit --no-fund --loglevel=error)
fi

echo "--- go: build the contender"
export GOMODCACHE="${GOMODCACHE:-$repo/target/go/mod}" GOCACHE="${GOCACHE:-$repo/target/go/cache}"
export GOFLAGS="${GOFLAGS:-} -modcacherw"
(cd clients/fourway/go && timeout 300 go mod tidy -diff && timeout 300 go vet . \
  && timeout 600 go build -o "$work/go-contender" .)

echo "--- java: clients/java's classes and their classpath"
# After the java step (mvn verify) the classes are fresh: Maven runs only to
# build them when missing, or to list the dependencies again when the pom changed.
if [ ! -d clients/java/target/classes/dev ] || [ ! -s "$work/java-classpath.txt" ] \
  || [ clients/java/pom.xml -nt "$work/java-classpath.txt" ]; then
  (cd clients/java && timeout 600 mvn -B -q -Dmaven.repo.local="$repo/target/m2" -Dstyle.color=never \
    -DskipTests package dependency:build-classpath -Dmdep.outputFile="$work/java-classpath.txt")
fi
classpath="$repo/clients/java/target/classes:$(cat "$work/java-classpath.txt")"

echo "--- rust: the contender (a workspace package: a no-op after the build step)"
timeout 1200 cargo build -q -p redlockd-fourway-rust

echo "--- five runtimes, one lock"
timeout 400 python3 clients/fourway/harness.py --python "$venv/bin/python" \
  --go "$work/go-contender" --java-classpath "$classpath" \
  --rust "$repo/target/debug/contender-rust" --rounds 15
