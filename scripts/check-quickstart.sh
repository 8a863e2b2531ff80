#!/usr/bin/env bash
# Walks the README's quick start the way a new user does, on this checkout:
#   1. `scripts/dev.sh` (installs what is missing, builds, runs
#      `redlockd --dev` on 127.0.0.1:50051) until it says it serves;
#   2. the README's "A call from Python" commands and program, taken from
#      README.md itself (only /tmp/client is swapped for a scratch
#      directory), which must print the lock's fence;
#   3. Ctrl-C (SIGINT to the process group, as a terminal sends it): the
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

# 1. The README's first command, in its own process group (like a terminal job).
setsid bash scripts/dev.sh >"$log" 2>&1 &
pid=$!
deadline=$((SECONDS + 1200)) # a cold release build on two cores included
until grep -q "is serving on" "$log"; do
  kill -0 "$pid" 2>/dev/null || fail "scripts/dev.sh exited before serving"
  [ "$SECONDS" -lt "$deadline" ] || fail "scripts/dev.sh did not serve within 20 minutes"
  sleep 1
done
masters="$(sed -n 's/^ *masters: //p' "$log" | head -n 1)"
echo "dev.sh serves; masters: $masters"

# 2. The README's Python call, extracted from README.md.
python3 - "$repo/README.md" "$scratch" <<'PY'
import pathlib, re, sys
readme, scratch = pathlib.Path(sys.argv[1]).read_text(), pathlib.Path(sys.argv[2])
section = readme.split("### A call from Python", 1)[1].split("\n## ", 1)[0]
shell = re.search(r"```sh\n(.*?)```", section, re.S).group(1)
program = re.search(r"```python\n(.*?)```", section, re.S).group(1)
client = str(scratch / "client")
(scratch / "commands.sh").write_text(shell.replace("/tmp/client", client))
(scratch / "program.py").write_text(program)
PY
mkdir -p "$scratch/client"
out="$(
  cd "$repo"
  # The README says: save the program as /tmp/client/demo.py. Copy it there
  # once the venv exists (the first command creates the directory).
  set -e
  head -n 1 "$scratch/commands.sh" | bash >"$scratch/pip.log" 2>&1 || { cat "$scratch/pip.log"; exit 1; }
  cp "$scratch/program.py" "$scratch/client/demo.py"
  tail -n +2 "$scratch/commands.sh" | bash
)" || fail "the README's Python call failed: $out"
echo "$out"
case "$out" in
  *"fence "*"valid for"*) ;;
  *) fail "the README's Python call printed no fence: $out" ;;
esac

# 3. Ctrl-C: SIGINT to the whole process group; everything must stop.
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
