#!/usr/bin/env bash
# Checks the Java client library (clients/java, Maven `dev.redlockd:redlockd-client`):
# first, that its copy of the contract (clients/java/src/main/proto/redlock/v1/
# *.proto) equals proto/redlock/v1/; then `mvn -B -q verify`, which generates
# the stubs from that copy (protoc and grpc-java's code generator from Maven
# Central; the build reads nothing outside clients/java), compiles with
# -Xlint:all, and runs the JUnit 5 tests against real daemons (the workspace's
# target/debug/redlockd, or $REDLOCKD_BIN; masters from $REDLOCKD_VALKEY_BIN),
# started by the test kit's launcher (target/debug/redlockd-cluster, or
# $REDLOCKD_CLUSTER_BIN).
# The Maven repository lives under target/m2 (kept between runs). Bounded;
# prints Surefire's summary at the end.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
pkg="$repo/clients/java"
cd "$repo"

if [ -z "${REDLOCKD_VALKEY_BIN:-}" ]; then
  bash scripts/setup.sh >/dev/null
  # shellcheck source=/dev/null
  source .venv/redlockd-env
fi
for tool in java mvn openssl; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "check-java-client: $tool not found; installing Debian's openjdk-17-jdk-headless, maven, openssl" >&2
    DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
      openjdk-17-jdk-headless maven openssl >/dev/null
    break
  fi
done
if [ -z "${REDLOCKD_CLUSTER_BIN:-}" ]; then
  # The same build as scripts/test.sh's build step (same feature set), so a
  # no-op after it; `-p redlockd` alone would rebuild the dependencies.
  timeout 1200 cargo build -q --workspace --bins
fi

echo "--- the library's contract is proto/redlock/v1/"
for contract in proto/redlock/v1/*.proto; do
  copy="$pkg/src/main/proto/redlock/v1/${contract##*/}"
  if ! cmp -s "$contract" "$copy"; then
    diff -u "$contract" "$copy" >&2 || true
    echo "check-java-client: clients/java/src/main/proto/redlock/v1/${contract##*/} differs from the contract; copy it:" >&2
    echo "  cp $contract clients/java/src/main/proto/redlock/v1/" >&2
    exit 1
  fi
done
for copy in "$pkg"/src/main/proto/redlock/v1/*.proto; do
  if [ ! -f "proto/redlock/v1/${copy##*/}" ]; then
    echo "check-java-client: clients/java/src/main/proto/redlock/v1/${copy##*/} is not in the contract; remove it" >&2
    exit 1
  fi
done

echo "--- mvn verify (clients/java)"
status=0
(cd "$pkg" && timeout 900 mvn -B -q -Dmaven.repo.local="$repo/target/m2" \
  -Dstyle.color=never verify) || status=$?

# Surefire's own summary, from its reports (mvn -q prints only failures).
reports="$pkg/target/surefire-reports"
if [ -d "$reports" ]; then
  python3 - "$reports" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
tests = failures = errors = skipped = 0
for path in sorted(glob.glob(sys.argv[1] + "/TEST-*.xml")):
    suite = ET.parse(path).getroot()
    t, f, e, s = (int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped"))
    tests, failures, errors, skipped = tests + t, failures + f, errors + e, skipped + s
    print(f"  {suite.get('name')}: {t} tests, {f} failures, {e} errors, {s} skipped ({suite.get('time')} s)")
print(f"Tests run: {tests}, Failures: {failures}, Errors: {errors}, Skipped: {skipped}")
print(f"{tests - failures - errors - skipped} passed, {failures + errors} failed, {skipped} skipped")
PY
fi
if [ "$status" -ne 0 ]; then
  echo "check-java-client: mvn verify failed ($status)" >&2
fi
exit "$status"
