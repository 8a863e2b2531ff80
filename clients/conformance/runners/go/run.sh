#!/usr/bin/env bash
# Builds the Go conformance runner against this checkout's clients/go (a
# replace directive in go.mod) and runs it with the harness's arguments.
# Go's caches are the go step's (target/go) unless GOMODCACHE/GOCACHE are set.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
export GOMODCACHE="${GOMODCACHE:-$repo/target/go/mod}" GOCACHE="${GOCACHE:-$repo/target/go/cache}"
export GOFLAGS="${GOFLAGS:-} -modcacherw"
mkdir -p "$repo/target/conformance"
(cd "$here" && go build -o "$repo/target/conformance/go-runner" .) >&2
exec "$repo/target/conformance/go-runner" "$@"
