#!/usr/bin/env bash
# Runs the buf CLI at the pinned version, installing it first if needed from
# npm (@bufbuild/buf ships buf's release binaries) into target/buf, with its
# npm cache beside it. Usage: scripts/buf.sh lint | breaking ... | generate ...
# Arguments are passed to buf as given, from the repository's root.
set -euo pipefail

BUF_VERSION=1.75.0

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$repo/target/buf"
bin="$dir/node_modules/.bin/buf"

if [ ! -x "$bin" ] || [ "$("$bin" --version 2>/dev/null)" != "$BUF_VERSION" ]; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "buf.sh: npm not found; installing Debian's nodejs and npm" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends nodejs npm >/dev/null
  fi
  mkdir -p "$dir"
  (cd "$dir" && npm_config_cache="$dir/npm-cache" timeout 300 \
    npm install --no-audit --no-fund --no-save --loglevel=error "@bufbuild/buf@$BUF_VERSION" >&2)
fi

cd "$repo"
exec "$bin" "$@"
