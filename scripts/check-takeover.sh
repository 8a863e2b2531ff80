#!/usr/bin/env bash
# Leader election, measured: a Python, a Go, a Java and a Node candidate
# campaign for one election through their own client's election API, two
# on each of two redlockd replicas (target/debug/redlockd, or $REDLOCKD_BIN)
# of five real valkey-server masters, started by the test kit's launcher
# (target/debug/redlockd-cluster, or $REDLOCKD_CLUSTER_BIN), with one
# observer per replica; clients/takeover/harness.py SIGKILLs and SIGSTOPs
# the leader for four rounds (each language frozen once) and checks the
# shared log: one leader at a time, terms strictly increasing, take-over
# within its bound, a resumed leader reporting its loss before it acts,
# observers never going back and told every term, every language leading.
# It prints the take-over times and observer lags.
#   1. the harness's own checks on made-up bad logs (--selftest);
#   2. the candidates' toolchains, exactly as scripts/check-fourway.sh
#      prepares them, reusing what the python, node, go and java steps left
#      under target/ (the venv in target/python-client, clients/node's
#      node_modules or npm's cache in target/node-client-cache, target/go,
#      target/m2); run alone, this script prepares them itself;
#   3. the run: four rounds, ttl 2 s.
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
work="$repo/target/takeover"
mkdir -p "$work"

echo "--- selftest"
python3 clients/takeover/harness.py --selftest

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

echo "--- go: build the candidate"
export GOMODCACHE="${GOMODCACHE:-$repo/target/go/mod}" GOCACHE="${GOCACHE:-$repo/target/go/cache}"
export GOFLAGS="${GOFLAGS:-} -modcacherw"
(cd clients/takeover/go && timeout 300 go mod tidy -diff && timeout 300 go vet . \
  && timeout 600 go build -o "$work/go-candidate" .)

echo "--- java: clients/java's classes and their classpath"
# After the java step (mvn verify) the classes are fresh: Maven runs only to
# build them when missing, or to list the dependencies again when the pom changed.
if [ ! -d clients/java/target/classes/dev ] || [ ! -s "$work/java-classpath.txt" ] \
  || [ clients/java/pom.xml -nt "$work/java-classpath.txt" ]; then
  (cd clients/java && timeout 600 mvn -B -q -Dmaven.repo.local="$repo/target/m2" -Dstyle.color=never \
    -DskipTests package dependency:build-classpath -Dmdep.outputFile="$work/java-classpath.txt")
fi
classpath="$repo/clients/java/target/classes:$(cat "$work/java-classpath.txt")"

echo "--- four runtimes, one election"
timeout --kill-after=30 300 python3 clients/takeover/harness.py --python "$venv/bin/python" \
  --go "$work/go-candidate" --java-classpath "$classpath" --node node --rounds 4
