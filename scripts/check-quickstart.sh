#!/usr/bin/env bash
# Walks the README's quick start the way a new user does, on this checkout,
# with the commands and programs taken from README.md itself:
#   1. the quick start's first command (`scripts/dev.sh`: installs what is
#      missing, builds, runs `redlockd --dev` on 127.0.0.1:50051) until it
#      says it serves;
#   2. "Python: the client package": its commands and program (only
#      /tmp/client is swapped for a scratch directory), which must print the
#      lock's fence;
#   3. "Go: the client module": its commands and program (only /tmp/golock
#      and /path/to/redlockd are swapped for a scratch directory and this
#      checkout; Go's caches under target/go, as the `go` step keeps them),
#      which must print the lock's fence;
#   4. "From the shell: grpcurl": its call, with the real grpcurl
#      (scripts/setup.sh installs it and puts it on PATH), which must answer
#      a lock with a fence;
#   5. Ctrl-C (SIGINT to the process group, as a terminal sends it): the
#      daemon and its five masters must all be gone, their ports closed.
# Needs port 50051 free, as the quick start does.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
scratch="$(mktemp -d)"
log="$scratch/dev.log"
pid=""

cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -KILL -- "-$pid" 2>/dev/null || true
  fi
  rm -rf -- "$scratch"
}
trap cleanup EXIT

fail() {
  echo "quick start: $*" >&2
  echo "--- dev.sh output ---" >&2
  tail -n 40 "$log" >&2 || true
  echo "quick start: 0 passed, 1 failed"
  exit 1
}

python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 50051))' 2>/dev/null ||
  fail "port 50051 is taken; the quick start needs it"

# The README's pieces, by heading: the first command of "## Quick start",
# and the commands and program under each call's heading.
python3 - "$repo/README.md" "$scratch" <<'PY'
import pathlib, re, sys
readme, scratch = pathlib.Path(sys.argv[1]).read_text(), pathlib.Path(sys.argv[2])

def section(heading):
    if heading not in readme:
        sys.exit(f"README.md has no heading {heading!r}")
    return re.split(r"\n##+ ", readme.split(heading, 1)[1])[0]

def block(text, lang):
    found = re.search(rf"```{lang}\n(.*?)```", text, re.S)
    if not found:
        sys.exit(f"no {lang} block where the quick start expects one")
    return found.group(1)

first = [line for line in block(section("## Quick start"), "sh").splitlines() if line.strip()][0]
(scratch / "first.sh").write_text(first.split("#", 1)[0].strip() + "\n")
python = section("### Python: the client package")
(scratch / "python.sh").write_text(block(python, "sh").replace("/tmp/client", str(scratch / "client")))
(scratch / "python.py").write_text(block(python, "python"))
go = section("### Go: the client module")
(scratch / "go.sh").write_text(
    block(go, "sh").replace("/tmp/golock", str(scratch / "golock")).replace("/path/to/redlockd", sys.argv[1].rsplit("/", 1)[0]))
(scratch / "main.go").write_text(block(go, "go"))
(scratch / "grpcurl.sh").write_text(block(section("### From the shell: grpcurl"), "sh"))
PY

# 1. The README's first command, in its own process group (like a terminal job).
echo "first command: $(cat "$scratch/first.sh")"
setsid bash "$scratch/first.sh" >"$log" 2>&1 &
pid=$!
deadline=$((SECONDS + 1200)) # a cold release build on two cores included
until grep -q "is serving on" "$log"; do
  kill -0 "$pid" 2>/dev/null || fail "the first command exited before serving"
  [ "$SECONDS" -lt "$deadline" ] || fail "the first command did not serve within 20 minutes"
  sleep 1
done
masters="$(sed -n 's/^ *masters: //p' "$log" | head -n 1)"
echo "dev.sh serves; masters: $masters"

# The README says: save the program as FILE, then run it. Run the lines
# before that comment, save the program where it says, run the lines after.
# walk NAME SCRIPT PROGRAM TARGET: prints what the commands printed.
walk() {
  local name="$1" commands="$2" program="$3" target="$4" before after
  before="$(sed -n '/^# save the program below/q;p' "$commands")"
  after="$(sed -n '/^# save the program below/,$p' "$commands" | tail -n +2)"
  (
    cd "$repo"
    set -e
    eval "$before" >"$scratch/$name.log" 2>&1 || { cat "$scratch/$name.log"; exit 1; }
    cp "$program" "$target"
    eval "$after"
  )
}

# 2. The README's Python call.
out="$(walk python "$scratch/python.sh" "$scratch/python.py" "$scratch/client/demo.py" 2>&1)" ||
  fail "the README's Python call failed: $out"
echo "python: $out"
case "$out" in
  *"fence "*"valid for"*) ;;
  *) fail "the README's Python call printed no fence: $out" ;;
esac

# 3. The README's Go call.
export GOMODCACHE="${GOMODCACHE:-$repo/target/go/mod}" GOCACHE="${GOCACHE:-$repo/target/go/cache}"
export GOFLAGS="${GOFLAGS:-} -modcacherw"
out="$(walk go "$scratch/go.sh" "$scratch/main.go" "$scratch/golock/main.go" 2>&1)" ||
  fail "the README's Go call failed: $out"
echo "go: $out"
case "$out" in
  *"fence "*) ;;
  *) fail "the README's Go call printed no fence: $out" ;;
esac

# 4. The README's grpcurl call.
if [ -f "$repo/.venv/redlockd-env" ] && ! command -v grpcurl >/dev/null 2>&1; then
  # shellcheck source=/dev/null
  source "$repo/.venv/redlockd-env"
fi
if command -v grpcurl >/dev/null 2>&1; then
  out="$(cd "$repo" && bash "$scratch/grpcurl.sh" 2>&1)" || fail "the README's grpcurl call failed: $out"
  echo "grpcurl: $out"
  case "$out" in
    *'"fence"'*) ;;
    *) fail "the README's grpcurl call answered no fence: $out" ;;
  esac
else
  fail "grpcurl not on PATH (scripts/setup.sh installs it)"
fi

# 5. Ctrl-C: SIGINT to the whole process group; everything must stop.
kill -INT -- "-$pid"
deadline=$((SECONDS + 30))
while kill -0 "$pid" 2>/dev/null; do
  [ "$SECONDS" -lt "$deadline" ] || fail "still running 30 s after Ctrl-C"
  sleep 0.2
done
if pgrep -g "$pid" >/dev/null 2>&1; then
  fail "processes left after Ctrl-C: $(pgrep -a -g "$pid")"
fi
for url in $masters; do
  hostport="${url#redis://}"
  if python3 -c "import socket,sys; socket.create_connection(('${hostport%:*}', ${hostport##*:}), 1)" 2>/dev/null; then
    fail "master $hostport still answers after Ctrl-C"
  fi
done
pid=""
echo "quick start: 1 passed, 0 failed"
