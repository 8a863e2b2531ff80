#!/usr/bin/env bash
# Checks the Python client package (clients/python) the way a user gets it:
#   1. a virtualenv under target/python-client/ (kept between runs, as is
#      pip's download cache there) with the pinned test tools
#      (clients/python/requirements-dev.txt) and `pip install ./clients/python`;
#   2. the checked-in gRPC stubs equal a fresh generation from
#      proto/redlock/v1/lock.proto (tools/generate_stubs.py --check);
#   3. mypy --strict on the package (it ships py.typed);
#   4. pytest against real valkey-server masters and the workspace's
#      redlockd, started by the test kit's launcher, redlockd-cluster
#      (both built here, a no-op when up to date; $REDLOCKD_CLUSTER_BIN
#      names a launcher built elsewhere, $REDLOCKD_BIN another daemon).
# Bounded: every install and the test run have their own time limit.
# Prints pytest's summary line last.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
if [ -z "${REDLOCKD_VALKEY_BIN:-}" ]; then
  bash scripts/setup.sh >/dev/null
  # shellcheck source=/dev/null
  source .venv/redlockd-env
fi

work="$repo/target/python-client"
venv="$work/venv"
export PIP_CACHE_DIR="$work/pip-cache"
export PIP_DISABLE_PIP_VERSION_CHECK=1
mkdir -p "$work"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
timeout 600 "$venv/bin/pip" install -q -r clients/python/requirements-dev.txt
# `pip install ./clients/python`, from a copy under target/ so that the
# build leaves nothing in the source tree; pip reinstalls a directory every
# time, so the tests see this checkout's package.
rm -rf "$work/package"
mkdir "$work/package"
cp -r clients/python/pyproject.toml clients/python/README.md clients/python/src "$work/package/"
rm -rf "$work"/package/src/*.egg-info
timeout 300 "$venv/bin/pip" install -q "$work/package"

echo "--- stubs"
"$venv/bin/python" clients/python/tools/generate_stubs.py --check

echo "--- mypy"
(cd clients/python && timeout 300 "$venv/bin/python" -m mypy --cache-dir "$work/mypy-cache" src/redlockd_client)

if [ -z "${REDLOCKD_CLUSTER_BIN:-}" ]; then
  # The same build as scripts/test.sh's, so that features never flip.
  timeout 1200 cargo build -q --workspace --bins
fi

echo "--- pytest"
cd clients/python
# -p no:cacheprovider: nothing written into the source tree.
timeout 900 "$venv/bin/python" -m pytest -p no:cacheprovider -q -rfE --basetemp="$work/pytest" tests
