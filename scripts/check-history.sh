#!/usr/bin/env bash
# Checks chaos histories (tools/chaos/HISTORY.md) for linearizability with
# tools/porcupine (Porcupine, a fenced lock service with leases):
#
#   scripts/check-history.sh [--timeout 60s] HISTORY_FILE...
#       builds the checker once, runs it on each file; fails unless every
#       one is accepted (a rejected, malformed or undecided history fails);
#   scripts/check-history.sh --self-test
#       the CI step: go mod tidy, gofmt, go vet and go test of
#       tools/porcupine, then the checker on its fixtures: the clean one must
#       be accepted (exit 0) and the one with an injected overlap rejected
#       (exit 1): a checker that accepts it checks nothing; and a Hold
#       retried on a new connection whose first session's end is no end of
#       the retry's hold must be rejected too (exit 1).
#
# Go's module and build caches live under target/go (GOMODCACHE, GOCACHE)
# unless set; modules come from the Go module proxy. Each step is bounded.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pkg="$repo/tools/porcupine"
checker="$repo/target/tools/porcupine"

usage() {
  echo "usage: scripts/check-history.sh [--timeout DURATION] HISTORY_FILE... | --self-test" >&2
  exit 64
}

self_test=0
timeout_flag=60s
files=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --self-test) self_test=1 ;;
    --timeout)
      [ "$#" -ge 2 ] || usage
      timeout_flag="$2"
      shift ;;
    -*) usage ;;
    /*) files+=("$1") ;;
    *) files+=("$PWD/$1") ;; # the checks run from the repository's root
  esac
  shift
done
if [ "$self_test" -eq 1 ] && [ "${#files[@]}" -gt 0 ]; then usage; fi
if [ "$self_test" -eq 0 ] && [ "${#files[@]}" -eq 0 ]; then usage; fi
cd "$repo"

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
if ! command -v go >/dev/null 2>&1; then
  echo "check-history: go not found; tools/porcupine needs Go >= 1.26 (https://go.dev/dl)" >&2
  exit 1
fi
export GOMODCACHE="${GOMODCACHE:-$repo/target/go/mod}" GOCACHE="${GOCACHE:-$repo/target/go/cache}"
export GOFLAGS="${GOFLAGS:-} -modcacherw"

if [ "$self_test" -eq 1 ]; then
  echo "--- go mod tidy, gofmt"
  (cd "$pkg" && timeout 300 go mod tidy -diff)
  unformatted="$(cd "$pkg" && gofmt -l .)"
  if [ -n "$unformatted" ]; then
    echo "check-history: not gofmt'ed: $unformatted" >&2
    exit 1
  fi
  echo "--- go vet"
  (cd "$pkg" && timeout 300 go vet ./...)
  echo "--- go test"
  (cd "$pkg" && timeout 600 go test -count=1 ./...)
fi

echo "--- go build tools/porcupine"
mkdir -p "$(dirname "$checker")"
timeout 300 go build -C "$pkg" -buildvcs=false -o "$checker" .

# check FILE WANT: runs the checker on FILE; fails unless it exits WANT.
check() {
  local file="$1" want="$2" got=0
  echo "--- $file (want exit $want)"
  timeout 900 "$checker" --history "$file" --timeout "$timeout_flag" || got=$?
  if [ "$got" -ne "$want" ]; then
    echo "check-history: $file: exit $got, want $want" >&2
    return 1
  fi
}

if [ "$self_test" -eq 1 ]; then
  check tools/porcupine/testdata/clean.jsonl 0
  # The counterfactual: the same history with one grant moved into another
  # holder's window. Accepting it would mean the check sees nothing.
  check tools/porcupine/testdata/overlap.jsonl 1
  # A Hold retried with its request id (same token) on a new connection;
  # the first session ends; another client is granted while the retry
  # holds. A checker that lets the first session's release end the lock
  # accepts it.
  check tools/porcupine/testdata/retried-session.jsonl 1
  echo "check-history: self-test passed"
  exit 0
fi

failed=0
for file in "${files[@]}"; do
  check "$file" 0 || failed=$((failed + 1))
done
if [ "$failed" -gt 0 ]; then
  echo "check-history: $failed of ${#files[@]} histories not accepted" >&2
  exit 1
fi
echo "check-history: ${#files[@]} histories accepted"
