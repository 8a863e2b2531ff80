#!/usr/bin/env python3
"""Finds import circles among the files of a Rust crate.

Usage: check-import-cycles.py SRC_DIR [SRC_DIR ...]   (e.g. crates/redlockd/src)

Each .rs file is a box; an arrow runs from a file to every other file whose
items it names, through `use` trees (braces expanded) or paths written in
the code (`crate::a::b::Item`, `super::x::f`, `self::y::Z`). A path is
resolved to the deepest module that is a file of the crate. Two kinds of
arrow are left out because they cannot make a layering circle a reader
notices: a module naming its own ancestors (a child using its parent
`mod.rs`'s items; the parent is the folder), and anything in test code
(files named `tests.rs`, `*_tests.rs` or under a `tests/` folder, and
`#[cfg(test)]` modules written inline). Prints every circle (a strongly
connected set of two or more files) and exits 1 if there is one.
"""

import os
import re
import sys

IDENT = r"(?:r#)?[A-Za-z_][A-Za-z0-9_]*"
PATH_IN_CODE = re.compile(r"\b(?:crate|super|self)(?:\s*::\s*(?:super|" + IDENT + r"))+")


def strip(source: str) -> str:
    """Removes comments, string and char literals (keeps line structure)."""
    out, i, n = [], 0, len(source)
    while i < n:
        c = source[i]
        if source.startswith("//", i):
            j = source.find("\n", i)
            i = n if j < 0 else j
        elif source.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if source.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif source.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif re.match(r'b?r#*"', source[i:i + 8]) and (i == 0 or not (source[i - 1].isalnum() or source[i - 1] == "_")):
            m = re.match(r'b?r(#*)"', source[i:])
            end = '"' + m.group(1)
            j = source.find(end, i + m.end())
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and source[i] != '"':
                i += 2 if source[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", source[i:i + 4] + "   "):
            m = re.match(r"'(\\.[^']*|[^\\'])'", source[i:])
            i += m.end() if m else 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_inline_test_modules(code: str) -> str:
    """Blanks `#[cfg(test)] mod name { ... }` bodies."""
    result, pos = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{", code):
        if m.start() < pos:
            continue
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        result.append(code[pos:m.start()])
        pos = j
    result.append(code[pos:])
    return "".join(result)


def expand_use(tree: str):
    """`a::{b, c::{d, e}}` -> [[a, b], [a, c, d], [a, c, e]] (aliases dropped)."""
    tree = re.sub(r"\s+", "", tree)
    tree = re.sub(r"as" + IDENT, "", tree) if False else re.sub(r"\bas\b", " as ", tree)

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
            else:
                cur += ch
        if cur:
            parts.append(cur)
        return parts

    def walk(s):
        s = s.split(" as ")[0].strip()
        if not s:
            return []
        brace = s.find("{")
        if brace < 0:
            return [[seg for seg in s.split("::") if seg]]
        prefix = [seg for seg in s[:brace].split("::") if seg]
        inner = s[brace + 1:s.rfind("}")]
        paths = []
        for part in split_top(inner):
            for tail in walk(part):
                paths.append(prefix + tail)
        return paths or [prefix]

    return walk(tree)


def module_of(src: str, path: str):
    rel = os.path.relpath(path, src)[:-3].split(os.sep)
    if rel in (["lib"], ["main"]):
        return ()
    if rel[-1] == "mod":
        rel = rel[:-1]
    return tuple(rel)


def is_test_file(rel: str) -> bool:
    parts = rel.split(os.sep)
    name = parts[-1]
    return name == "tests.rs" or name.endswith("_tests.rs") or "tests" in parts[:-1]


def crate_graph(src: str):
    modules = {}
    for root, _dirs, files in os.walk(src):
        for f in files:
            if f.endswith(".rs"):
                path = os.path.join(root, f)
                rel = os.path.relpath(path, src)
                if is_test_file(rel):
                    continue
                modules.setdefault(module_of(src, path), rel)
    edges = {rel: set() for rel in modules.values()}
    for module, rel in modules.items():
        with open(os.path.join(src, rel), encoding="utf-8") as fh:
            code = drop_inline_test_modules(strip(fh.read()))
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", code):
            paths.extend(expand_use(m.group(1)))
        for m in PATH_IN_CODE.finditer(code):
            paths.append([seg for seg in re.sub(r"\s+", "", m.group(0)).split("::") if seg])
        for segs in paths:
            if not segs or segs[0] not in ("crate", "super", "self"):
                continue
            here = list(module)
            if segs[0] == "crate":
                here, segs = [], segs[1:]
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super" and here:
                    here.pop()
                segs = segs[1:]
            target = tuple(here)
            for seg in segs:
                if target + (seg.removeprefix("r#"),) in modules:
                    target = target + (seg.removeprefix("r#"),)
                else:
                    break
            if target not in modules or target == module:
                continue
            if module[:len(target)] == target:  # an ancestor: the folder itself
                continue
            edges[rel].add(modules[target])
    return edges


def circles(edges):
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                found.append(sorted(scc))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def self_test() -> None:
    """The checker must see a circle written three ways, and none in a tree."""
    import tempfile

    with tempfile.TemporaryDirectory() as src:
        files = {
            "lib.rs": "mod a; mod b; mod c; mod d;",
            "a.rs": "use crate::b::{x::Y, Z};",
            "b/mod.rs": "pub mod x; pub fn z() { super::c::f() }",
            "b/x.rs": "use super::Z; // the parent: not an arrow",
            "c.rs": "pub fn f() { let _ = \"crate::d::g\"; crate::a::h(); }",
            "d.rs": "use crate::b::x; #[cfg(test)] mod tests { use crate::a; }",
        }
        for name, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(src, name)), exist_ok=True)
            with open(os.path.join(src, name), "w", encoding="utf-8") as fh:
                fh.write(text)
        found = circles(crate_graph(src))
        assert found == [["a.rs", "b/mod.rs", "c.rs"]], found
        with open(os.path.join(src, "c.rs"), "w", encoding="utf-8") as fh:
            fh.write("pub fn f() {}")
        assert circles(crate_graph(src)) == [], "a tree reported as a circle"
    print("self-test: a circle through a use tree, a super:: path and a crate:: path found; none in a tree")


def main(argv):
    if argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    status = 0
    for src in argv[1:]:
        edges = crate_graph(src)
        found = circles(edges)
        arrows = sum(len(v) for v in edges.values())
        print(f"{src}: {len(edges)} files, {arrows} arrows, {len(found)} circles")
        for scc in found:
            status = 1
            members = set(scc)
            print("  circle: " + ", ".join(scc))
            for v in scc:
                for w in sorted(edges[v] & members):
                    print(f"    {v} -> {w}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
