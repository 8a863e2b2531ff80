"""Unit tests of the harness's counting (harness.drive), with tiny stand-in
runners written in Python: a scenario without a PASS line fails, a second
result for one scenario fails it, FAULT lines get the harness's answer.
No daemon is started. Run: python3 clients/conformance/test_harness.py
"""

from __future__ import annotations

import io
import sys
import unittest
from contextlib import redirect_stdout
from pathlib import Path
from typing import List

sys.dont_write_bytecode = True  # nothing written into the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


def run(script: str, ids: List[str], faults: List[str]) -> int:
    """drive() on a runner made of `script`; records the faults asked for."""
    def fault(name: str) -> str:
        faults.append(name)
        return "ok" if name == "known" else f"error unknown fault {name}"

    with redirect_stdout(io.StringIO()):
        return harness.drive("test", [sys.executable, "-c", script], ids, fault)


class DriveTest(unittest.TestCase):
    def test_every_pass_counts(self) -> None:
        faults: List[str] = []
        script = "print('PASS a'); print('PASS b')"
        self.assertEqual(run(script, ["a", "b"], faults), 2)

    def test_a_scenario_without_a_result_fails(self) -> None:
        faults: List[str] = []
        self.assertEqual(run("print('PASS a')", ["a", "b"], faults), 1)

    def test_a_crashing_runner_fails_what_it_did_not_report(self) -> None:
        faults: List[str] = []
        script = "print('PASS a', flush=True); raise SystemExit(3)"
        self.assertEqual(run(script, ["a", "b", "c"], faults), 1)

    def test_fail_lines_and_duplicates_fail(self) -> None:
        faults: List[str] = []
        script = "print('FAIL a why'); print('PASS b'); print('FAIL b again'); print('PASS zzz')"
        self.assertEqual(run(script, ["a", "b"], faults), 0)

    def test_faults_are_answered_on_stdin(self) -> None:
        faults: List[str] = []
        script = (
            "import sys\n"
            "print('FAULT known', flush=True)\n"
            "ok = sys.stdin.readline().strip() == 'ok'\n"
            "print('FAULT other', flush=True)\n"
            "refused = sys.stdin.readline().startswith('error')\n"
            "print(('PASS' if ok and refused else 'FAIL') + ' a')\n"
        )
        self.assertEqual(run(script, ["a"], faults), 1)
        self.assertEqual(faults, ["known", "other"])


if __name__ == "__main__":
    unittest.main()
