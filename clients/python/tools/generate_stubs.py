"""Regenerates the gRPC stubs checked into redlockd_client/_generated from
the repository's proto/redlock/v1/lock.proto, admin.proto and election.proto,
so that users of the package need no protoc.

    python tools/generate_stubs.py          # rewrite the checked-in stubs
    python tools/generate_stubs.py --check  # exit 1 if they differ from a
                                            # fresh generation

Needs grpcio-tools at the version pinned in requirements-dev.txt (another
version writes different code). The one edit made to protoc's output: the
service module imports its message module relatively, since the stubs live
inside this package and not at the top-level `redlock.v1`.
"""

from __future__ import annotations

import argparse
import difflib
import pathlib
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = HERE.parent / "src" / "redlockd_client" / "_generated"
PROTO_ROOT = HERE.parent.parent.parent / "proto"
PROTOS = ("redlock/v1/lock.proto", "redlock/v1/admin.proto", "redlock/v1/election.proto")
MODULES = ("lock", "admin", "election")
FILES = tuple(f"{m}_pb2{ext}" for m in MODULES for ext in (".py", ".pyi", "_grpc.py"))


def generate() -> dict[str, str]:
    """The stubs protoc writes today, keyed by file name."""
    import grpc_tools
    from grpc_tools import protoc

    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    with tempfile.TemporaryDirectory() as out:
        status = protoc.main(
            [
                "grpc_tools.protoc",
                f"-I{PROTO_ROOT}",
                f"-I{well_known}",
                f"--python_out={out}",
                f"--pyi_out={out}",
                f"--grpc_python_out={out}",
                *(str(PROTO_ROOT / proto) for proto in PROTOS),
            ]
        )
        if status != 0:
            raise SystemExit(f"protoc failed on {PROTOS} ({status})")
        generated = pathlib.Path(out) / "redlock" / "v1"
        stubs = {name: (generated / name).read_text() for name in FILES}
    for module in MODULES:
        absolute = f"from redlock.v1 import {module}_pb2 as"
        grpc_module = stubs[f"{module}_pb2_grpc.py"]
        if absolute not in grpc_module:
            raise SystemExit(f"protoc's service module no longer imports `redlock.v1.{module}_pb2`")
        stubs[f"{module}_pb2_grpc.py"] = grpc_module.replace(
            absolute, f"from . import {module}_pb2 as"
        )
    return stubs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a difference")
    args = parser.parse_args()
    stubs = generate()
    stale = []
    for name, fresh in stubs.items():
        path = PACKAGE / name
        current = path.read_text() if path.exists() else ""
        if current == fresh:
            continue
        stale.append(name)
        if args.check:
            sys.stdout.writelines(
                difflib.unified_diff(
                    current.splitlines(keepends=True),
                    fresh.splitlines(keepends=True),
                    f"checked-in/{name}",
                    f"fresh/{name}",
                )
            )
        else:
            path.write_text(fresh)
    if args.check and stale:
        print(
            f"stale stubs: {', '.join(stale)}; run: python clients/python/tools/generate_stubs.py",
            file=sys.stderr,
        )
        return 1
    print("stubs are up to date" if args.check else f"rewrote: {', '.join(stale) or 'nothing'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
