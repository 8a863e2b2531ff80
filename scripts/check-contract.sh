#!/usr/bin/env bash
# Guards the contract (proto/redlock/v1/lock.proto) with buf (scripts/buf.sh,
# the npm package @bufbuild/buf at a pinned version; buf.yaml at the root):
#   1. `buf lint`, STANDARD rules, clean (the one exception is made on the
#      Hold rpc in the proto, with its reason);
#   2. `buf breaking` (FILE rules) against the committed baseline
#      proto/baseline/redlock-v1.binpb, the contract as released in 0.1.0.
#      This one works in any checkout, a shallow CI clone included;
#   3. `buf breaking` against the contract at a git ref: $REDLOCKD_CONTRACT_BASE
#      if set, else the merge base with `main` when the checkout has `main`
#      and HEAD is not on it, else HEAD~1 (CI builds main: the previous
#      commit). Skipped, saying so, when no such commit is in the clone;
#   4. a self-test: a copy of the contract with a field renumbered must fail
#      step 2's check, so that a check which cannot fail is noticed.
# Refresh the baseline at each release (see docs/api.md, "The contract and its
# compatibility").
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
buf() { bash "$repo/scripts/buf.sh" "$@"; }
baseline=proto/baseline/redlock-v1.binpb
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT

echo "--- buf lint"
buf lint

echo "--- buf breaking against $baseline"
buf breaking --against "$baseline"

echo "--- buf breaking against a git ref"
base="${REDLOCKD_CONTRACT_BASE:-}"
if [ -z "$base" ]; then
  head="$(git rev-parse HEAD)"
  if git rev-parse -q --verify 'main^{commit}' >/dev/null; then
    base="$(git merge-base HEAD main || true)"
  fi
  if [ -z "$base" ] || [ "$base" = "$head" ]; then
    base="$(git rev-parse -q --verify 'HEAD~1^{commit}' || true)"
  fi
fi
if [ -z "$base" ]; then
  echo "no base commit in this clone (shallow, single commit): only the baseline was compared"
elif ! git cat-file -e "$base:proto/redlock/v1/lock.proto" 2>/dev/null; then
  echo "no proto/redlock/v1/lock.proto at $base: only the baseline was compared"
else
  echo "against $(git rev-parse --short "$base")"
  mkdir -p "$scratch/base"
  git archive "$base" proto/redlock | tar -x -C "$scratch/base"
  buf breaking --against "$scratch/base/proto"
fi

echo "--- self-test: a renumbered field must be reported"
mkdir -p "$scratch/broken/redlock/v1"
sed 's/uint64 fence = 3;/uint64 fence = 15;/' proto/redlock/v1/lock.proto >"$scratch/broken/redlock/v1/lock.proto"
if cmp -s proto/redlock/v1/lock.proto "$scratch/broken/redlock/v1/lock.proto"; then
  echo "check-contract: the self-test's edit did not apply (Lock.fence moved?); update it" >&2
  exit 1
fi
if buf breaking "$scratch/broken" --against "$baseline" >"$scratch/broken.out" 2>&1; then
  echo "check-contract: buf breaking accepted a renumbered field; the check cannot fail" >&2
  exit 1
fi
grep -q 'fence' "$scratch/broken.out" || { cat "$scratch/broken.out" >&2; exit 1; }
echo "reported: $(head -1 "$scratch/broken.out")"
echo "contract OK"
