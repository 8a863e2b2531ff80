#!/usr/bin/env bash
# Checks the Go client module (clients/go, github.com/redlockd/redlockd/clients/go):
#   1. the checked-in stubs (clients/go/redlockv1) equal a fresh generation
#      from proto/redlock/v1 (clients/go/generate.sh --check);
#   2. clients/go/LICENSE equals the root LICENSE (a Go module zip holds only
#      its own directory, so pkg.go.dev needs the copy); go.mod and go.sum
#      are tidy (`go mod tidy -diff`), the code is gofmt'ed;
#   3. `go vet ./...`;
#   4. `go test -race ./...` against real daemons (the workspace's
#      target/debug/redlockd, or $REDLOCKD_BIN; masters from
#      $REDLOCKD_VALKEY_BIN), started by the test kit's launcher
#      (target/debug/redlockd-cluster, or $REDLOCKD_CLUSTER_BIN), the
#      Example included.
# Go's module and build caches live under target/go (GOMODCACHE, GOCACHE)
# unless set; modules come from the Go module proxy. Each step is bounded.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pkg="$repo/clients/go"
cd "$repo"

if [ -z "${REDLOCKD_VALKEY_BIN:-}" ]; then
  bash scripts/setup.sh >/dev/null
  # shellcheck source=/dev/null
  source .venv/redlockd-env
fi
if ! command -v go >/dev/null 2>&1; then
  echo "check-go-client: go not found; the module needs Go >= 1.26 (https://go.dev/dl)" >&2
  exit 1
fi
if [ -z "${REDLOCKD_CLUSTER_BIN:-}" ]; then
  # The same build as scripts/test.sh's `build` step, so that after it this
  # is a no-op (building only -p redlockd unifies features differently).
  timeout 1200 cargo build -q --workspace --bins
fi
export GOMODCACHE="${GOMODCACHE:-$repo/target/go/mod}" GOCACHE="${GOCACHE:-$repo/target/go/cache}"
export GOFLAGS="${GOFLAGS:-} -modcacherw"

echo "--- the checked-in stubs are a fresh generation"
timeout 600 bash clients/go/generate.sh --check

echo "--- LICENSE, go mod tidy, gofmt"
if ! cmp -s LICENSE "$pkg/LICENSE"; then
  echo "check-go-client: clients/go/LICENSE differs from LICENSE; copy it: cp LICENSE clients/go/LICENSE" >&2
  exit 1
fi
(cd "$pkg" && timeout 300 go mod tidy -diff)
(cd "$pkg/tools" && timeout 300 go mod tidy -diff)
unformatted="$(cd "$pkg" && gofmt -l .)"
if [ -n "$unformatted" ]; then
  echo "check-go-client: not gofmt'ed: $unformatted" >&2
  exit 1
fi

echo "--- go vet"
(cd "$pkg" && timeout 600 go vet ./...)

echo "--- go test -race"
(cd "$pkg" && timeout 900 go test -race -count=1 -v ./... 2>&1 | grep -E '^(=== RUN|--- |PASS|FAIL|ok|panic|\s+\S+_test\.go)' ; exit "${PIPESTATUS[0]}")
