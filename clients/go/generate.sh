#!/usr/bin/env bash
# Regenerates the Go stubs checked in under clients/go/redlockv1 from the
# contract (every file of proto/redlock/v1: lock.proto, election.proto,
# admin.proto), with buf (scripts/buf.sh) and the
# plugins protoc-gen-go and protoc-gen-go-grpc at the versions pinned in
# clients/go/tools/go.mod (built from the Go module proxy into target/go/bin).
#   clients/go/generate.sh          rewrite the checked-in stubs
#   clients/go/generate.sh --check  exit 1 if they differ from a fresh generation
# Go's caches go under target/go unless GOMODCACHE/GOCACHE are set.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
pkg="$repo/clients/go"
check=0
case "${1:-}" in
  --check) check=1 ;;
  "") ;;
  *) echo "usage: clients/go/generate.sh [--check]" >&2; exit 64 ;;
esac

export GOMODCACHE="${GOMODCACHE:-$repo/target/go/mod}" GOCACHE="${GOCACHE:-$repo/target/go/cache}"
export GOFLAGS="${GOFLAGS:-} -modcacherw"
bin="$repo/target/go/bin"
mkdir -p "$bin"
(cd "$pkg/tools" && go build -o "$bin/" \
  google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc)

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
# buf writes under the template's `out` (clients/go), relative to where it
# runs: generate into a scratch copy of that layout, then compare or copy.
mkdir -p "$out/clients/go"
PATH="$bin:$PATH" bash "$repo/scripts/buf.sh" generate --template clients/go/buf.gen.yaml -o "$out"

fresh="$out/clients/go/redlockv1"
if [ "$check" -eq 1 ]; then
  if ! diff -ru "$pkg/redlockv1" "$fresh" >&2; then
    echo "generate.sh: clients/go/redlockv1 differs from a fresh generation; run clients/go/generate.sh" >&2
    exit 1
  fi
  echo "Go stubs are up to date"
else
  rm -rf "$pkg/redlockv1"
  cp -r "$fresh" "$pkg/redlockv1"
  echo "rewrote clients/go/redlockv1"
fi
