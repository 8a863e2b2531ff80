#!/usr/bin/env bash
# Walks each client README's "## Install and a first call" the way a new
# user does, on a source tarball of the committed tree (`git archive HEAD`,
# unpacked into a scratch directory), as scripts/check-quickstart.sh walks the
# main README's quick start, and by the same convention: under that heading,
# the first ```sh block holds the commands, run from the tarball's root; a
# line `# save the program below as FILE, then:` splits them where the
# first block of the language's program (```python, ```js, ```go, ```java)
# is saved as FILE (```rust too); the program must print the lock's fence. In the READMEs'
# text only these are swapped: `/path/to/redlockd` for the unpacked tarball,
# a leading `/tmp/` for a scratch directory, and `127.0.0.1:50051` for the
# address of the daemon started here (a free port).
#   python  a fresh virtualenv, `pip install ./clients/python`, the program;
#   node    a fresh directory, `npm install /path/to/redlockd/clients/node`,
#           the program;
#   go      a fresh module: `go mod init`, the `replace` to the tarball's
#           clients/go, the program with its import line, `go mod tidy`,
#           `go run .`;
#   java    the README's `mvn install` in the tarball's clients/java (tests
#           skipped there), then a tiny Maven project of the README's
#           <dependency> snippet and its program (Demo.java), run with
#           exec:java;
#   rust    crates/redlockd-client/README.md: `cargo new`, `cargo add
#           --path` to the tarball's crate, the program, `cargo run` (with
#           CARGO_TARGET_DIR this checkout's target, so that the registry
#           crates the workspace built are reused).
# The daemon is `redlockd --dev` (five local masters), from $REDLOCKD_BIN or
# this checkout's target/debug/redlockd, on 127.0.0.1 free ports. Caches as
# the client steps keep them: Go's under target/go, npm's under
# target/node-client-cache, Maven's repository target/m2 (MAVEN_OPTS
# -Dmaven.repo.local), each overridable by its usual variable. Every wait is
# bounded; the daemon and its masters are stopped on exit. Prints, per client,
# the seconds its install and its first call took.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
scratch="$(mktemp -d)"
pid=""

cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM -- "-$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  # Go's module cache marks files read-only unless -modcacherw; be sure.
  chmod -R u+w -- "$scratch" 2>/dev/null || true
  rm -rf -- "$scratch"
}
trap cleanup EXIT

if [ -z "${REDLOCKD_VALKEY_BIN:-}" ]; then
  bash scripts/setup.sh >/dev/null
  # shellcheck source=/dev/null
  source .venv/redlockd-env
fi
export REDLOCKD_SERVER_BIN="${REDLOCKD_SERVER_BIN:-$REDLOCKD_VALKEY_BIN}"
bin="${REDLOCKD_BIN:-}"
if [ -z "$bin" ]; then
  timeout 1200 cargo build -q -p redlockd --bin redlockd
  bin="$repo/target/debug/redlockd"
fi

log="$scratch/daemon.log"
fail() {
  echo "client readmes: $*" >&2
  if [ -f "$log" ]; then
    echo "--- daemon output ---" >&2
    tail -n 20 "$log" >&2 || true
  fi
  echo "client readmes: FAILED"
  exit 1
}

# 1. The source tarball of the committed tree, unpacked.
src="$scratch/redlockd"
mkdir -p "$src" "$scratch/tmp"
git -C "$repo" archive --format=tar HEAD | tar -x -C "$src"
echo "tarball: git archive $(git -C "$repo" rev-parse --short HEAD), unpacked in $src"

# 2. The daemon: redlockd --dev on free loopback ports.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# The ports are free when chosen, but --dev then starts five masters on free
# ports of its own, and one of them may take a port chosen here: the daemon
# then exits ("Address already in use"). Up to three tries, with new ports;
# serving means the gRPC port answers and the process is still up a second
# after it said so (metrics and the gateway bind beside it).
for try in 1 2 3; do
  address="127.0.0.1:$(free_port)"
  http="127.0.0.1:$(free_port)"
  metrics="127.0.0.1:$(free_port)"
  setsid env REDLOCKD__SERVER__LISTEN="$address" REDLOCKD__HTTP__LISTEN="$http" \
    REDLOCKD__METRICS__LISTEN="$metrics" "$bin" --dev >"$log" 2>&1 &
  pid=$!
  deadline=$((SECONDS + 60))
  until grep -q "is serving on" "$log" || ! kill -0 "$pid" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || fail "redlockd --dev did not serve within 60 s"
    sleep 0.5
  done
  sleep 1
  if kill -0 "$pid" 2>/dev/null; then
    break
  fi
  if [ "$try" -eq 3 ] || ! grep -q "Address already in use" "$log"; then
    fail "redlockd --dev exited (try $try)"
  fi
  echo "daemon: a port was taken (try $try); again with new ports"
done
echo "daemon: $bin --dev on $address"

# 3. Each README's pieces, by heading and block, with the swaps above.
python3 - "$src" "$scratch/tmp" "$address" "$scratch" <<'PY'
import pathlib, re, sys
src, tmp, address, scratch = sys.argv[1], sys.argv[2], sys.argv[3], pathlib.Path(sys.argv[4])
HEADING = "## Install and a first call"

def swap(text):
    text = re.sub(r"(?<![\w.])/tmp/", tmp + "/", text)
    return text.replace("/path/to/redlockd", src).replace("127.0.0.1:50051", address)

def block(readme, text, lang):
    found = re.search(rf"```{lang}\n(.*?)```", text, re.S)
    if not found:
        sys.exit(f"{readme}: no ```{lang} block under {HEADING!r}")
    return swap(found.group(1))

CLIENTS = (("python", "python"), ("node", "js"), ("go", "go"), ("java", "java"), ("rust", "rust"))
for name, lang in CLIENTS:
    readme = "crates/redlockd-client/README.md" if name == "rust" else f"clients/{name}/README.md"
    text = pathlib.Path(src, readme).read_text()
    if HEADING not in text:
        sys.exit(f"{readme} has no heading {HEADING!r}")
    section = re.split(r"\n##+ ", text.split(HEADING, 1)[1])[0]
    (scratch / f"{name}.sh").write_text(block(readme, section, "sh"))
    (scratch / f"{name}.program").write_text(block(readme, section, lang))
    if name == "java":
        (scratch / "java.xml").write_text(block(readme, section, "xml"))
PY

export GOMODCACHE="${GOMODCACHE:-$repo/target/go/mod}" GOCACHE="${GOCACHE:-$repo/target/go/cache}"
export GOFLAGS="${GOFLAGS:-} -modcacherw"
export npm_config_cache="${npm_config_cache:-$repo/target/node-client-cache}"
export MAVEN_OPTS="${MAVEN_OPTS:-} -Dmaven.repo.local=$repo/target/m2"
export PIP_DISABLE_PIP_VERSION_CHECK=1
export CARGO_TARGET_DIR="${README_CARGO_TARGET_DIR:-$repo/target}"

# walk NAME: writes a script of the README's commands (the install: those
# before the save line), the program saved where that line says (or, with no
# save line, the walker's own $scratch/NAME.after), then the rest (the first
# call); runs it from the tarball's root, bounded, and reports.
walk() {
  local name="$1" commands="$scratch/$1.sh" run="$scratch/$1.run.sh" target
  local stamp="$scratch/$1.installed" out="$scratch/$1.out" started=$SECONDS status=0
  target="$(sed -n 's/^# save the program below as \(.*\), then:$/\1/p' "$commands")"
  {
    echo 'set -euo pipefail'
    echo '{'
    sed -n '/^# save the program below/q;p' "$commands"
    echo "} >'$scratch/$name.install.log' 2>&1"
    echo "echo \"\$SECONDS\" >'$stamp'"
    if [ -n "$target" ]; then
      echo "cp -- '$scratch/$name.program' '$target'"
      sed -n '/^# save the program below/,$p' "$commands" | tail -n +2
    else
      cat "$scratch/$name.after"
    fi
  } >"$run"
  # Maven colours its output whatever it is told; the colour codes go.
  (cd "$src" && timeout --kill-after=10 600 bash "$run") 2>&1 |
    sed 's/\x1b\[[0-9;]*m//g' >"$out" || status=$?
  local took=$((SECONDS - started))
  if [ ! -f "$stamp" ]; then
    cat "$scratch/$name.install.log" >&2 2>/dev/null || true
    cat "$out" >&2
    echo "$name: FAILED: the README's install lines failed ($status) after ${took} s" >&2
    return 1
  fi
  local installed
  installed="$(cat "$stamp")"
  if [ "$status" -ne 0 ] || ! grep -q "^fence [0-9]" "$out"; then
    cat "$out" >&2
    echo "$name: FAILED: installed in ${installed} s, but the README's first call failed ($status) or printed no fence" >&2
    return 1
  fi
  echo "$name: installed in ${installed} s; first call answered in $((took - installed)) s: $(grep -m 1 "^fence [0-9]" "$out"); ${took} s in all"
}

# Java's first call: a tiny project depending on the README's snippet.
cat >"$scratch/java.after" <<EOF
mkdir -p '$scratch/javademo/src/main/java'
cp -- '$scratch/java.program' '$scratch/javademo/src/main/java/Demo.java'
cat >'$scratch/javademo/pom.xml' <<'POM'
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>example</groupId>
  <artifactId>demo</artifactId>
  <version>1</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
$(cat "$scratch/java.xml")
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-compiler-plugin</artifactId>
        <version>3.13.0</version>
      </plugin>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-resources-plugin</artifactId>
        <version>3.3.1</version>
      </plugin>
      <plugin>
        <groupId>org.codehaus.mojo</groupId>
        <artifactId>exec-maven-plugin</artifactId>
        <version>3.6.4</version>
        <configuration>
          <mainClass>Demo</mainClass>
        </configuration>
      </plugin>
    </plugins>
  </build>
</project>
POM
cd '$scratch/javademo' && mvn -B -q -Dstyle.color=never compile exec:java
EOF

failed=0
for name in python node go java rust; do
  if ! walk "$name"; then
    failed=$((failed + 1))
  fi
done
[ "$failed" -eq 0 ] || fail "$failed of 5 client READMEs did not walk"
echo "client readmes: 5 passed, 0 failed"
