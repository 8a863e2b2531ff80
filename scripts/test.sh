#!/usr/bin/env bash
# The one command that runs every test, as CI does (.ci/run calls it).
# It installs what the tests need (scripts/setup.sh), then runs each step
# with its own time bound:
#   lint        cargo fmt --check; cargo clippy --workspace --all-targets -D warnings
#   docs        every relative link and #anchor of the Markdown resolves
#               (scripts/check-links.py), no import circle in any crate
#               (scripts/check-import-cycles.py), shellcheck scripts/*.sh, rustdoc
#               with -D warnings: cargo doc --workspace --no-deps
#               --document-private-items
#               (scripts/check-docs.sh)
#   rust        every unit, integration and doc test of the workspace but the
#               chaos checker and the model check, against real Valkey 9 and
#               Redis 7, and the fuzz corpus replayed (scripts/check-fuzz-corpus.sh)
#   model       the exhaustive model check of the masters' scripts and the
#               quorum rule (tools/model, stateright): every interleaving of
#               small worlds, and the counterfactuals it must catch
#   python      the Python client package against a real daemon: stub
#               freshness and pytest (scripts/check-python-client.sh)
#   chaos       the safety checker's short runs (tools/chaos), with every
#               kind mixed on the same resources; the full-schedule run writes
#               its history (target/tmp/chaos-history-*.jsonl)
#   history     the histories checked by a checker we did not write the
#               rules of: Porcupine (tools/porcupine, scripts/check-history.sh):
#               its self-test (an injected overlap must be rejected), then
#               every history the chaos step wrote
#   node        the Node client package against real daemons
#               (scripts/check-node-client.sh)
#   go          the Go client module against real daemons: stub freshness,
#               go vet, go test -race (scripts/check-go-client.sh)
#   contract    buf lint and buf breaking on proto/ (scripts/check-contract.sh)
#   java        the Java client library: mvn verify against real daemons
#               (scripts/check-java-client.sh; Maven repository in target/m2)
#   conformance one scenario file (clients/conformance/scenarios.json) run
#               by the Python, Node, Go and Java clients' runners against
#               real daemons (scripts/check-conformance.sh); after python,
#               node, go and java, whose caches it reuses
#   fourway     one lock, four runtimes: a Python, a Node, a Go and a Java
#               process contend through Hold; no overlap, fences increasing
#               (scripts/check-fourway.sh; reuses the four client steps' caches)
#   takeover    one election, four runtimes: a Python, a Go, a Java and a
#               Node candidate over two replicas, the leader SIGKILLed and
#               SIGSTOPped; one leader at a time, terms increasing, take-over
#               within its bound, a resumed leader stands down before it acts
#               (scripts/check-takeover.sh; reuses the client steps' caches)
#   quickstart  the README's quick start, literally (scripts/check-quickstart.sh)
#   readmes     each client README's install and first call, literally, from
#               a source tarball of the committed tree, against redlockd --dev
#               (scripts/check-client-readmes.sh)
#   image       the Dockerfile's build recipe (scripts/check-image-recipe.sh)
#   deploy      the compose file, Kubernetes manifests, Prometheus configs,
#               alert rules (promtool test rules) and dashboard, offline
#               (scripts/check-deploy.sh)
# Name steps to run only those: `scripts/test.sh lint rust`.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"

bash scripts/setup.sh >/dev/null
# shellcheck source=/dev/null
source .venv/redlockd-env

all=(lint docs rust model python chaos history node go java conformance fourway takeover contract quickstart readmes image deploy)
steps=("$@")
[ "${#steps[@]}" -gt 0 ] || steps=("${all[@]}")

# step NAME SECONDS COMMAND...: runs COMMAND, failing the run past SECONDS.
step() {
  local name="$1" limit="$2"
  shift 2
  echo "=== $name (at most ${limit}s)"
  local started=$SECONDS
  if ! timeout --kill-after=30 "$limit" "$@"; then
    echo "=== $name FAILED after $((SECONDS - started))s" >&2
    return 1
  fi
  echo "=== $name passed in $((SECONDS - started))s"
}

for name in "${steps[@]}"; do
  case "$name" in
    lint)
      step lint 1200 bash -c 'cargo fmt --all -- --check && cargo clippy --workspace --all-targets -- -D warnings' ;;
    docs)
      step docs 900 bash scripts/check-docs.sh ;;
    rust)
      # The integration tests run the workspace's binaries as processes.
      step build 1200 cargo build --workspace --bins --examples
      step rust 1800 bash -c 'cargo test --workspace --all-targets --no-fail-fast --exclude redlockd-chaos --exclude redlockd-model && cargo test --workspace --doc && bash scripts/check-fuzz-corpus.sh' ;;
    model)
      step model 600 cargo test -p redlockd-model --all-targets ;;
    python)
      step python 1800 bash scripts/check-python-client.sh ;;
    chaos)
      step chaos 900 cargo test -p redlockd-chaos --all-targets ;;
    history)
      step history 600 bash -c 'bash scripts/check-history.sh --self-test &&
        shopt -s nullglob && files=(target/tmp/chaos-history-*.jsonl) &&
        if [ "${#files[@]}" -eq 0 ]; then
          echo "history: no chaos history under target/tmp: run the chaos step first" >&2; exit 1
        fi && bash scripts/check-history.sh "${files[@]}"' ;;
    node)
      step node 1500 bash scripts/check-node-client.sh ;;
    go)
      step go 1500 bash scripts/check-go-client.sh ;;
    contract)
      step contract 600 bash scripts/check-contract.sh ;;
    java)
      step java 900 bash scripts/check-java-client.sh ;;
    conformance)
      step conformance 600 bash scripts/check-conformance.sh ;;
    fourway)
      step fourway 600 bash scripts/check-fourway.sh ;;
    takeover)
      step takeover 600 bash scripts/check-takeover.sh ;;
    quickstart)
      step quickstart 1500 bash scripts/check-quickstart.sh ;;
    readmes)
      step readmes 900 bash scripts/check-client-readmes.sh ;;
    image)
      step image 1800 bash scripts/check-image-recipe.sh ;;
    deploy)
      step deploy 600 bash scripts/check-deploy.sh ;;
    *)
      echo "scripts/test.sh: unknown step $name (steps: ${all[*]})" >&2
      exit 64 ;;
  esac
done
