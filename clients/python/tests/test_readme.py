"""The Python snippets the READMEs show (the repository's, and the
client README's leader election) run as written against a real daemon
(only the address is swapped), so that they cannot drift from the
package."""

from __future__ import annotations

import re

import pytest
from cluster import REPO

SNIPPETS = [
    (REPO / "README.md", "### Python: the client package"),
    (REPO / "clients" / "python" / "README.md", "## Leader election"),
]


@pytest.mark.parametrize("path, heading", SNIPPETS, ids=["README", "client-README-elections"])
def test_snippet_runs(daemon, path, heading) -> None:
    section = re.split(r"\n##+ ", path.read_text().split(heading, 1)[1])[0]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code, f"no python snippet under {heading}"
    program = code.group(1)
    assert "127.0.0.1:50051" in program
    exec(compile(program.replace("127.0.0.1:50051", daemon.address), str(path), "exec"), {})
