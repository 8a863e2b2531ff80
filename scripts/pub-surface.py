#!/usr/bin/env python3
"""How much of the daemon library's `pub` surface is really its API.

Usage: pub-surface.py [--list] [--min PERCENT]

Counts the `pub` items of crates/redlockd/src (fn, struct, enum, trait, type,
const, static, mod; not fields, not `pub(crate)`, not re-exports) and, for
each, whether its name is written anywhere outside the library: the daemon's
binary (main.rs, dev.rs), tests/, tools/, fuzz/ and the other crates. A name
match is generous (a method called `new` is "named" by any `new`), so the
share is an upper bound. `--list` prints the items never named outside (each
should be `pub(crate)`); `--min` exits 1 when the share is below PERCENT.
"""

import os
import re
import subprocess
import sys

LIB = "crates/redlockd/src"
BINARY_FILES = {"main.rs", "dev.rs"}
ITEM = re.compile(
    r"^\s*pub\s+(?:async\s+|unsafe\s+|const\s+(?=fn))*(fn|struct|enum|trait|type|const|static|mod)\s+([A-Za-z_][A-Za-z0-9_]*)"
)


def tracked(*patterns):
    out = subprocess.check_output(["git", "ls-files", *patterns], text=True)
    return [p for p in out.split() if os.path.exists(p)]


def main(argv):
    listing = "--list" in argv
    minimum = float(argv[argv.index("--min") + 1]) if "--min" in argv else None
    items = []
    for path in tracked(f"{LIB}/*.rs", f"{LIB}/**/*.rs"):
        if os.path.relpath(path, LIB) in BINARY_FILES:
            continue
        with open(path, encoding="utf-8") as fh:
            for number, line in enumerate(fh, 1):
                m = ITEM.match(line)
                if m:
                    items.append((path, number, m.group(1), m.group(2)))
    outside = []
    for path in tracked("*.rs"):
        inside = path.startswith(LIB + "/") and os.path.relpath(path, LIB) not in BINARY_FILES
        if not inside:
            with open(path, encoding="utf-8") as fh:
                outside.append(fh.read())
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", "\n".join(outside)))
    unnamed = [item for item in items if item[3] not in words]
    named = len(items) - len(unnamed)
    share = 100.0 * named / max(len(items), 1)
    print(f"pub items in {LIB}: {len(items)}; named outside the library: {named} ({share:.0f}%)")
    if listing:
        for path, number, kind, name in unnamed:
            print(f"  {path}:{number}: {kind} {name}")
    if minimum is not None and share < minimum:
        print(f"pub-surface: {share:.0f}% is below {minimum:.0f}%", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
