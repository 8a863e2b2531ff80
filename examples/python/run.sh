#!/usr/bin/env bash
# Creates examples/python/.venv on first use, installs requirements.txt into
# it, and runs the example. Extra args go to lock_example.py.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ ! -x "$here/.venv/bin/python" ]; then
  python3 -m venv "$here/.venv"
fi
"$here/.venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/requirements.txt"
exec "$here/.venv/bin/python" "$here/lock_example.py" "$@"
