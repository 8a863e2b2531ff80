#!/usr/bin/env python3
"""Checks the relative links of the repository's Markdown (stdlib only).

Every relative link in README.md, CONTRIBUTING.md, SECURITY.md,
docs/**/*.md, clients/*/README.md and crates/*/README.md (or in the files named on the command
line) must name a file or directory that exists, and a `#anchor` must name a
heading of the Markdown file it points to (GitHub's slugs: lower case,
punctuation dropped, spaces to hyphens, `-1`, `-2` for repeated headings) or
an `id`/`name` attribute in it. Links to other sites (`https:`, `mailto:`,
...) are not followed. Links inside code blocks and code spans are not links.

    python3 scripts/check-links.py              # the repository's documents
    python3 scripts/check-links.py FILE.md ...  # only these
    python3 scripts/check-links.py --self-test  # shows each check failing

Prints each broken link as `file:line: target: why`, then
`links: N passed, N failed`; exits 1 if any failed.
"""

from __future__ import annotations

import pathlib
import re
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_GLOBS = [
    "README.md",
    "CONTRIBUTING.md",
    "SECURITY.md",
    "docs/**/*.md",
    "clients/*/README.md",
    "crates/*/README.md",
]

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)[ \t]*#*[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target) or ![alt](target), with an optional "title"; <target> too.
INLINE = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_LINK = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*["']([^"']+)["']""", re.I)
HTML_ANCHOR = re.compile(r"""<[a-z][^>]*?\b(?:id|name)\s*=\s*["']([^"']+)["']""", re.I)
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text only
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def prose_lines(text: str, keep_code_spans: bool = False):
    """Yields (line number, line) outside fenced code blocks, code spans
    blanked unless `keep_code_spans`."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence is not None:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) \
                    and not line.strip()[len(opened.group(1)):].strip():
                fence = None
            continue
        if opened:
            fence = opened.group(1)
            continue
        yield number, line if keep_code_spans else CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


_anchor_cache: dict[pathlib.Path, set[str]] = {}


def anchors(path: pathlib.Path) -> set[str]:
    """Every anchor a Markdown file offers."""
    if path not in _anchor_cache:
        found: set[str] = set()
        seen: dict[str, int] = {}
        for _, line in prose_lines(path.read_text(encoding="utf-8"), keep_code_spans=True):
            match = HEADING.match(line)
            if match:
                base = slug(match.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else f"{base}-{count}")
            for name in HTML_ANCHOR.findall(line):
                found.add(name)
        _anchor_cache[path] = found
    return _anchor_cache[path]


def targets(line: str):
    for match in INLINE.finditer(line):
        yield match.group(1).strip("<>")
    match = REFERENCE.match(line)
    if match:
        yield match.group(1).strip("<>")
    yield from HTML_LINK.findall(line)


def check_file(path: pathlib.Path, root: pathlib.Path) -> tuple[int, list[str]]:
    """Returns (links checked, failures) for one Markdown file."""
    checked, failures = 0, []
    shown = path.relative_to(root) if path.is_relative_to(root) else path
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        for target in targets(line):
            if not target or SCHEME.match(target) or target.startswith("//"):
                continue
            checked += 1
            file_part, _, anchor = target.partition("#")
            if file_part.startswith("/"):
                dest = (root / file_part.lstrip("/")).resolve()
            elif file_part:
                dest = (path.parent / file_part).resolve()
            else:
                dest = path.resolve()
            why = None
            if not dest.exists():
                why = "no such file or directory"
            elif not dest.resolve().is_relative_to(root.resolve()):
                why = "outside the repository"
            elif anchor:
                if dest.is_dir() or dest.suffix.lower() not in (".md", ".markdown"):
                    why = f"an anchor into {'a directory' if dest.is_dir() else 'a file that is not Markdown'}"
                elif anchor not in anchors(dest):
                    why = f"no heading with the anchor #{anchor} in {dest.relative_to(root.resolve())}"
            if why:
                failures.append(f"{shown}:{number}: {target}: {why}")
    return checked, failures


def run(files: list[pathlib.Path], root: pathlib.Path) -> int:
    passed = failed = 0
    for path in files:
        checked, failures = check_file(path, root)
        for failure in failures:
            print(failure)
        failed += len(failures)
        passed += checked - len(failures)
    print(f"links: {passed} passed, {failed} failed ({len(files)} files)")
    return 1 if failed else 0


def default_files(root: pathlib.Path) -> list[pathlib.Path]:
    files: list[pathlib.Path] = []
    for pattern in DEFAULT_GLOBS:
        for path in sorted(root.glob(pattern)):
            if path.is_file() and path not in files:
                files.append(path)
    return files


def self_test() -> int:
    """Each kind of broken link is reported, and good ones are not."""
    with tempfile.TemporaryDirectory() as scratch:
        root = pathlib.Path(scratch)
        (root / "docs").mkdir()
        (root / "docs" / "a.md").write_text(
            "# Title\n\n## The API (`v1`)\n\n## Repeated\n\n## Repeated\n\n<a id=\"custom\"></a>\n",
            encoding="utf-8")
        (root / "README.md").write_text(
            "# Top\n\n"
            "[ok](docs/a.md) [ok](docs/a.md#the-api-v1) [ok](docs/a.md#repeated-1) [ok](docs/) "
            "[ok](#top) [ok](docs/a.md#custom) [site](https://example.com/x#y) `[code](missing.md)`\n"
            "```\n[in a block](missing.md)\n```\n"
            "[bad file](missing.md)\n"
            "[bad anchor](docs/a.md#nothing)\n"
            "[bad local anchor](#nowhere)\n"
            "[ref]: docs/gone.md\n",
            encoding="utf-8")
        checked, failures = check_file(root / "README.md", root)
        expected = ["missing.md", "docs/a.md#nothing", "#nowhere", "docs/gone.md"]
        got = [failure.split(": ")[1] for failure in failures]
        if got != expected or checked != 10:
            print(f"check-links self-test FAILED: {checked} checked, reported {got}, expected {expected}")
            return 1
    print("check-links self-test: 1 passed, 0 failed")
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--self-test"]:
        return self_test()
    files = [pathlib.Path(arg).resolve() for arg in argv] or default_files(REPO)
    missing = [str(path) for path in files if not path.is_file()]
    if missing:
        print(f"check-links: no such file: {', '.join(missing)}", file=sys.stderr)
        return 64
    return run(files, REPO)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
