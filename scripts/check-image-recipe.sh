#!/usr/bin/env bash
# Runs the container image's build recipe without a container engine: every
# instruction of the Dockerfile's build stages (FROM ... AS, WORKDIR, COPY,
# COPY --from, RUN), in order, each stage in its own directory under
# target/image-recipe/ (kept, so a rerun is incremental), with the build
# context the Dockerfile would get (the repository's files minus
# .dockerignore). Then checks the final stage: every file it copies exists,
# the binaries run, are stripped, and have no --dev mode.
#
# What it cannot check here: the base images themselves (rust:*-slim,
# debian:*-slim) and the runtime stage's apt-get; the host's Rust toolchain
# stands in for the rust image's.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
work="$repo/target/image-recipe"
mkdir -p "$work"

python3 - "$repo" "$work" <<'PY'
import fnmatch, os, pathlib, shlex, shutil, subprocess, sys

repo, work = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])

def instructions(path):
    """The Dockerfile's instructions: continuation lines joined, comments dropped."""
    out, buf = [], ""
    for line in path.read_text().splitlines():
        stripped = line.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            buf += stripped[:-1] + " "
            continue
        buf += stripped
        out.append(buf)
        buf = ""
    return out

def context_files():
    """What `docker build .` sends: the files git knows (tracked, or new and
    not ignored) minus the .dockerignore patterns."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=repo, check=True, capture_output=True).stdout.decode().split("\0")
    patterns = [p.strip() for p in (repo / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    def ignored(f):
        parts = f.split("/")
        for p in patterns:
            p = p.lstrip("/")
            for i in range(1, len(parts) + 1):
                if fnmatch.fnmatch("/".join(parts[:i]), p) or fnmatch.fnmatch("/".join(parts[:i]), p.replace("**/", "")):
                    return True
        return False
    return [f for f in listed if f and not ignored(f) and (repo / f).is_file()]

def copy_into(src_root, names, dest):
    for name in names:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src_root / name, target)

stages, workdirs, root, cwd, final_copies = {}, {}, None, None, []
context = context_files()
final = False
for ins in instructions(repo / "Dockerfile"):
    op, _, rest = ins.partition(" ")
    op = op.upper()
    if op == "FROM":
        words = rest.split()
        base, name = words[0], (words[2] if len(words) > 2 and words[1].upper() == "AS" else None)
        if name is None:
            final, root = True, None
            print(f"== final stage FROM {base}: checked, not run")
            continue
        # A stage's directory is kept between runs (its target/ makes a
        # rerun incremental); files are refreshed by the COPYs below.
        root = work / name
        root.mkdir(parents=True, exist_ok=True)
        cwd = root
        if base in stages:
            shutil.copytree(stages[base], root, dirs_exist_ok=True)
            cwd = root / workdirs[base].relative_to(stages[base])
        stages[name] = root
        workdirs[name] = cwd
        print(f"== stage {name} (FROM {base})")
    elif final:
        if op == "COPY":
            final_copies.append(rest)
    elif op == "WORKDIR":
        cwd = root / rest.lstrip("/")
        cwd.mkdir(parents=True, exist_ok=True)
        workdirs[name] = cwd
    elif op == "COPY":
        words = shlex.split(rest)
        src_stage = None
        if words[0].startswith("--from="):
            src_stage, words = words[0].split("=", 1)[1], words[1:]
        *sources, dest = words
        dest_dir = (root / dest.lstrip("/")) if dest.startswith("/") else (cwd / dest)
        for src in sources:
            if src_stage:
                source = stages[src_stage] / src.lstrip("/")
                target = dest_dir if not dest.endswith("/") and dest_dir.suffix else dest_dir
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
            elif src == ".":
                copy_into(repo, context, dest_dir)
            else:
                names = [f for f in context if f == src or f.startswith(src.rstrip("/") + "/")]
                if not names:
                    sys.exit(f"COPY {src}: not in the build context")
                prefix = src.rstrip("/") + "/"
                for f in names:
                    rel = f[len(prefix):] if f.startswith(prefix) else pathlib.Path(f).name
                    target = dest_dir / rel
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(repo / f, target)
        print(f"   COPY {rest}")
    elif op == "RUN":
        print(f"   RUN {rest}", flush=True)
        subprocess.run(["bash", "-euo", "pipefail", "-c", rest], cwd=cwd, check=True)
    elif op in ("ENV", "ARG", "LABEL", "EXPOSE", "USER", "ENTRYPOINT", "CMD", "HEALTHCHECK"):
        pass
    else:
        sys.exit(f"unsupported instruction in a build stage: {ins}")

def section_names(data):
    """The section names of a 64-bit little-endian ELF file."""
    import struct
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    def header(i):
        return struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
    strtab = header(shstrndx)
    names = data[strtab[4]:strtab[4] + strtab[5]]
    return [names[header(i)[0]:names.index(b"\0", header(i)[0])].decode() for i in range(shnum)]

binaries = []
for rest in final_copies:
    words = shlex.split(rest)
    if words[0].startswith("--from="):
        stage, src = words[0].split("=", 1)[1], words[1]
        path = stages[stage] / src.lstrip("/")
        if not path.is_file():
            sys.exit(f"final stage COPY {rest}: {path} was not built")
        binaries.append(path)
    elif not (repo / words[0]).exists():
        sys.exit(f"final stage COPY {rest}: not in the build context")
    print(f"   final COPY {rest}: present")

for binary in binaries:
    data = binary.read_bytes()
    kept = [n for n in section_names(data) if n.startswith(".debug") or n == ".symtab"]
    if kept:
        sys.exit(f"{binary.name} is not stripped: {kept}")
    version = subprocess.run([binary, "--version"], check=True, capture_output=True, text=True).stdout.strip()
    print(f"   {binary.name}: {len(data) / 1e6:.1f} MB, stripped, {version}")
daemon = next(b for b in binaries if b.name == "redlockd")
dev = subprocess.run([daemon, "--dev"], capture_output=True, text=True,
                     env={**os.environ, "REDLOCKD__METRICS__ENABLED": "false"}, timeout=30)
if dev.returncode == 0 or "--dev" not in dev.stderr + dev.stdout:
    sys.exit(f"the image's redlockd should have no --dev mode: {dev.returncode} {dev.stderr}")
ctl = next(b for b in binaries if b.name == "redlockctl")
subprocess.run([ctl, "health", "--help"], check=True, capture_output=True)
print("image recipe: 1 passed, 0 failed")
PY
