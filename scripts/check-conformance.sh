#!/usr/bin/env bash
# Runs the client conformance suite (clients/conformance): the
# scenarios of clients/conformance/scenarios.json through the Python, Node,
# Go and Java runners, against real masters and daemons started by
# clients/conformance/harness.py through the test kit's launcher
# (target/debug/redlockd-cluster, or $REDLOCKD_CLUSTER_BIN). Meant to run after the python, node, go and
# java steps, whose caches it reuses: the venv in target/python-client (the
# package is reinstalled from this checkout, without its dependencies), the
# Node package's node_modules, Go's caches in target/go, Maven's repository
# in target/m2. Each one is made here when missing. Bounded; prints
# `conformance: <client> <passed>/<scenarios>` per client.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

if [ -z "${REDLOCKD_VALKEY_BIN:-}" ]; then
  bash scripts/setup.sh >/dev/null
  # shellcheck source=/dev/null
  source .venv/redlockd-env
fi
if [ -z "${REDLOCKD_CLUSTER_BIN:-}" ]; then
  # The same build as scripts/test.sh's build step: a no-op after it.
  timeout 1200 cargo build -q --workspace --bins
fi

echo "--- the Python client, from this checkout"
work="$repo/target/python-client"
export PIP_CACHE_DIR="$work/pip-cache" PIP_DISABLE_PIP_VERSION_CHECK=1
if [ ! -x "$work/venv/bin/python" ]; then
  mkdir -p "$work"
  python3 -m venv "$work/venv"
  timeout 600 "$work/venv/bin/pip" install -q -r clients/python/requirements-dev.txt
fi
package="$repo/target/conformance/python-package"
rm -rf "$package"
mkdir -p "$package"
cp -r clients/python/pyproject.toml clients/python/README.md clients/python/src "$package/"
rm -rf "$package"/src/*.egg-info
timeout 300 "$work/venv/bin/pip" install -q --no-deps --force-reinstall "$package"

echo "--- the Node client's dependencies"
if [ ! -d clients/node/node_modules ]; then
  export npm_config_cache="$repo/target/node-client-cache"
  (cd clients/node && timeout 300 npm ci --no-audit --no-fund --loglevel=error)
fi

echo "--- the Rust runner (a workspace package: a no-op after the build step)"
timeout 1200 cargo build -q -p redlockd-conformance-rust

echo "--- the harness's own unit tests"
timeout 120 python3 clients/conformance/test_harness.py

echo "--- the suite"
CONFORMANCE_PYTHON="$work/venv/bin/python" timeout 900 python3 clients/conformance/harness.py "$@"
