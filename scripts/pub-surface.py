#!/usr/bin/env python3
"""How much of the daemon library's `pub` surface is really its API.

Usage: pub-surface.py [--list] [--min PERCENT] [--named-min PERCENT]

Counts the `pub` items of crates/redlockd/src (fn, struct, enum, trait, type,
const, static, mod; not fields, not `pub(crate)`, not re-exports) and, for
each, whether its name is written anywhere outside the library: the daemon's
binary (main.rs, dev.rs), tests/, tools/, fuzz/ and the other crates. A name
match is generous (a method called `new` is "named" by any `new`), so the
share is an upper bound.

An item never named outside can still have to be `pub`: the compiler refuses
a `pub(crate)` type in the interface of an item used outside (a field type of
`Config`, the payload of a `LockError` variant, the vote a `Master` method
returns). Such items are counted apart, as *required by an interface*: the
types written in the signature, `pub` fields or variants of an item that is
named outside or itself required, transitively. What is left is neither:
`pub` for no reason, to be made `pub(crate)`.

`--list` prints the items never named outside, each with why it is `pub`;
`--min` exits 1 when the share of items named outside or required by an
interface is below PERCENT; `--named-min` exits 1 when the share named
outside is (an interface that drags many types in makes the library wider
than what its users write).
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
    named_minimum = float(argv[argv.index("--named-min") + 1]) if "--named-min" in argv else None
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
    required = required_by_interfaces(items, words)
    neither = [item for item in unnamed if item[3] not in required]
    api = len(items) - len(neither)
    share = 100.0 * named / max(len(items), 1)
    api_share = 100.0 * api / max(len(items), 1)
    print(
        f"pub items in {LIB}: {len(items)}; named outside the library: {named} ({share:.0f}%); "
        f"required by the interface of one that is: {len(unnamed) - len(neither)}; "
        f"neither: {len(neither)} (API share {api_share:.0f}%)"
    )
    if listing:
        for path, number, kind, name in unnamed:
            why = f"in the interface of {required[name]}" if name in required else "NEITHER"
            print(f"  {path}:{number}: {kind} {name}: {why}")
    if minimum is not None and api_share < minimum:
        print(f"pub-surface: {api_share:.0f}% is below {minimum:.0f}%", file=sys.stderr)
        return 1
    if named_minimum is not None and share < named_minimum:
        print(
            f"pub-surface: {share:.1f}% named outside is below {named_minimum:.0f}%; "
            "--list shows the types an interface drags in",
            file=sys.stderr,
        )
        return 1
    return 0


def interface(path, number, kind):
    """The text of an item's interface: a fn's signature; a struct's `pub`
    fields (or tuple fields); an enum's variants; a trait's items; the
    line of a type, const or static."""
    with open(path, encoding="utf-8") as fh:
        lines = fh.read().split("\n")[number - 1 :]
    first = lines[0]
    if kind == "fn":
        text = []
        for line in lines:
            text.append(line.split("{")[0])
            if "{" in line or line.rstrip().endswith(";"):
                break
        return "\n".join(text)
    if kind in ("struct", "enum", "trait") and first.rstrip().endswith("{"):
        indent = first[: len(first) - len(first.lstrip())]
        body = []
        for line in lines[1:]:
            if line.rstrip() == indent + "}":
                break
            body.append(line)
        if kind == "struct":
            body = [line for line in body if line.lstrip().startswith("pub ")]
        return first + "\n" + "\n".join(body)
    return first


def required_by_interfaces(items, words):
    """Names of the unnamed items the interfaces of named (or required)
    items mention, each with the first item found to require it."""
    by_name = {}
    for path, number, kind, name in items:
        by_name.setdefault(name, []).append((path, number, kind))
    required = {}
    todo = [item for item in items if item[3] in words]
    seen = set()
    while todo:
        path, number, kind, name = todo.pop()
        if (path, number) in seen:
            continue
        seen.add((path, number))
        for word in set(re.findall(r"\b[A-Z][A-Za-z0-9_]*\b", interface(path, number, kind))):
            if word == name or word in words or word in required or word not in by_name:
                continue
            required[word] = name
            todo.extend((p, n, k, word) for p, n, k in by_name[word])
    return required


if __name__ == "__main__":
    sys.exit(main(sys.argv))
