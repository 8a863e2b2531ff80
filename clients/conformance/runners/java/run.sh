#!/usr/bin/env bash
# Runs the Java conformance runner (Runner.java, launched as a single source
# file) against this checkout's clients/java. Unless $CONFORMANCE_JAVA_CP
# gives a classpath, `mvn package -DskipTests` (Maven repository in
# target/m2) builds the library and writes its runtime classpath; it is
# skipped while nothing in clients/java/src, its pom.xml or the contract is
# newer than the last such build (a stamp in target/conformance), since
# Maven alone takes ~40 s on a busy machine. Maven's output goes to stderr.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../../../.." && pwd)"
cp="${CONFORMANCE_JAVA_CP:-}"
if [ -z "$cp" ]; then
  out="$repo/target/conformance"
  stamp="$out/java-built"
  mkdir -p "$out"
  if [ ! -f "$stamp" ] || [ ! -d "$repo/clients/java/target/classes" ] ||
    [ -n "$(find "$repo/clients/java/src" "$repo/clients/java/pom.xml" "$repo/proto" -newer "$stamp" -print -quit)" ]; then
    (cd "$repo/clients/java" && mvn -B -q -Dmaven.repo.local="$repo/target/m2" -Dstyle.color=never \
      -DskipTests package dependency:build-classpath -DincludeScope=runtime \
      -Dmdep.outputFile="$out/java-cp.txt") >&2
    touch "$stamp"
  fi
  cp="$repo/clients/java/target/classes:$(cat "$out/java-cp.txt")"
fi
exec java -cp "$cp" "$here/Runner.java" "$@"
