#!/usr/bin/env python3
"""Every production Rust file over 400 lines is named, with its reason, in
CONTRIBUTING.md's "Files over 400 lines, and why".

Usage: check-file-sizes.py [--self-test]

A file is a test, not production, when it lives under a `tests/` folder,
is called `tests.rs` or `*_tests.rs`, or is declared by its parent module
behind `#[cfg(test)]` (as `redlock/fake.rs`). Third-party code under
vendor/ (vendor/README.md) is not ours to split.
"""

import os
import re
import subprocess
import sys

LIMIT = 400
SECTION = "### Files over 400 lines, and why"


def test_only(path, read):
    parts = path.split("/")
    name = parts[-1]
    if "tests" in parts[:-1] or name == "tests.rs" or name.endswith("_tests.rs"):
        return True
    stem = name[: -len(".rs")]
    folder = "/".join(parts[:-1])
    if stem == "mod":
        stem = parts[-2]
        folder = "/".join(parts[:-2])
    parents = [f"{folder}/mod.rs", f"{folder}/lib.rs", f"{folder}/main.rs", f"{folder}.rs"]
    declared = re.compile(
        r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([a-z]+\))?\s+)?mod\s+" + re.escape(stem) + r"\s*;"
    )
    return any(declared.search(read(p) or "") for p in parents)


def over_limit(paths, read):
    big = []
    for path in paths:
        text = read(path)
        if text is None or test_only(path, read):
            continue
        lines = text.count("\n")
        if lines > LIMIT:
            big.append((path, lines))
    return big


def unlisted(big, contributing):
    if SECTION not in contributing:
        return [(path, lines) for path, lines in big]
    section = contributing.split(SECTION, 1)[1].split("\n## ", 1)[0]
    return [(path, lines) for path, lines in big if f"`{path}`" not in section]


def read_file(path):
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return None


def self_test():
    files = {
        "a/src/lib.rs": "mod big;\n#[cfg(test)]\nmod fake;\n",
        "a/src/big.rs": "x\n" * 401,
        "a/src/fake.rs": "x\n" * 900,
        "a/src/small.rs": "x\n" * 400,
        "a/src/k/tests.rs": "x\n" * 900,
        "a/tests/t.rs": "x\n" * 900,
    }
    big = over_limit(sorted(files), files.get)
    assert big == [("a/src/big.rs", 401)], big
    doc = f"{SECTION}\n\n| `a/src/big.rs` | why |\n\n## Next\n"
    assert unlisted(big, doc) == []
    assert unlisted(big, f"{SECTION}\n\n## Next\n`a/src/big.rs`\n") == big
    print("check-file-sizes: self-test passed")


def main(argv):
    if "--self-test" in argv:
        self_test()
        return 0
    paths = [
        path
        for path in subprocess.check_output(["git", "ls-files", "*.rs"], text=True).split()
        if not path.startswith("vendor/")
    ]
    big = over_limit(paths, read_file)
    missing = unlisted(big, read_file("CONTRIBUTING.md") or "")
    for path, lines in missing:
        print(f"check-file-sizes: {path} has {lines} lines; split it or say why in CONTRIBUTING.md", file=sys.stderr)
    print(f"check-file-sizes: {len(big)} production files over {LIMIT} lines, {len(big) - len(missing)} with their reason")
    return 1 if missing else 0


if __name__ == "__main__":
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    sys.exit(main(sys.argv))
