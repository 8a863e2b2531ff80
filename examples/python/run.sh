#!/usr/bin/env bash
# Creates examples/python/.venv on first use, installs the repository's
# Python client (clients/python, which brings grpcio and protobuf) into it
# whenever the package's sources changed, and runs the example. Extra args
# go to lock_example.py.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
package="$here/../../clients/python"
if [ ! -x "$here/.venv/bin/python" ]; then
  python3 -m venv "$here/.venv"
fi
stamp="$here/.venv/redlockd-client.sha256"
sources="$(cd "$package" && find pyproject.toml src -type f ! -path '*.egg-info*' ! -name '*.pyc' -print0 |
  sort -z | xargs -0 sha256sum | sha256sum)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$sources" ]; then
  # Built from a copy, so that nothing is written into the source tree.
  copy="$(mktemp -d)"
  cp -r "$package/pyproject.toml" "$package/README.md" "$package/src" "$copy/"
  rm -rf "$copy"/src/*.egg-info
  status=0
  "$here/.venv/bin/python" -m pip install -q --disable-pip-version-check "$copy" || status=$?
  rm -rf -- "$copy"
  [ "$status" -eq 0 ] || exit "$status"
  echo "$sources" >"$stamp"
fi
exec "$here/.venv/bin/python" "$here/lock_example.py" "$@"
