#!/usr/bin/env bash
# The peers in the same run (a benchmark: figures, not a test, not in CI):
# ONE redlockd-bench run over five local Valkey masters, so that every ratio
# between redlockd and its peers is a same-run one (docs/benchmarks.md,
# "Peers in the same run"):
#   W1 at C=1 and C=64: grpc, floor, engine, raw, library (rslock),
#      redsync (go-redsync v4) and etcd (etcd 3.7's concurrency.Mutex);
#   W2, 16 contenders on one resource: the daemon with wake-ups and with
#      polling, then redsync and etcd.
# Builds first: redlockd and redlockd-bench (release, feature bench-library)
# with cargo, and tools/peers with go build, next to redlockd-bench (Go
# modules from the Go module proxy; Go's caches under the target directory
# unless GOMODCACHE and GOCACHE are set).
#   bash scripts/bench-peers.sh [SECONDS_PER_RUN [REDLOCKD_BENCH_ARGS...]]
# SECONDS_PER_RUN defaults to 10; further arguments go to redlockd-bench, e.g.
# `--daemon-set server.worker_threads=1` for the sidecar manifests' setting.
# Prints the load average before and after the run around redlockd-bench's
# output (a JSON line per run, then the tables).
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
seconds="${1:-10}"
shift || true
if [ -z "${REDLOCKD_VALKEY_BIN:-}" ]; then
  bash scripts/setup.sh >/dev/null
  # shellcheck source=/dev/null
  source .venv/redlockd-env
fi
if ! command -v go >/dev/null 2>&1; then
  echo "bench-peers: go not found; tools/peers needs Go >= 1.26 (https://go.dev/dl)" >&2
  exit 1
fi
target="${CARGO_TARGET_DIR:-$repo/target}"
case "$target" in
  /*) ;;
  *) target="$repo/$target" ;;
esac
export GOMODCACHE="${GOMODCACHE:-$target/go/mod}" GOCACHE="${GOCACHE:-$target/go/cache}"
export GOFLAGS="${GOFLAGS:-} -modcacherw"

timeout 3600 cargo build -q --release -p redlockd -p redlockd-bench \
  --features redlockd-bench/bench-library --bins
timeout 1200 go build -C tools/peers -buildvcs=false -o "$target/release/redlockd-peers" .

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$target/release/redlockd-bench" --dev --workloads w1,w2 --duration "$seconds" --concurrency 1,64 \
  --modes grpc,floor,engine,raw,library,redsync,etcd --w2-modes wake,poll,redsync,etcd "$@"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
