"""Unit tests of the harness's counting (harness.drive), with tiny stand-in
runners written in Python: a scenario without a PASS line fails, a second
result for one scenario fails it, FAULT lines get the harness's answer;
and of a scenario's `clients` list (harness.scenarios_for,
harness.load_scenarios): a scenario not meant for a client is neither sent
to its runner nor counted for it. No daemon is started. Run: python3 clients/conformance/test_harness.py
"""

from __future__ import annotations

import io
import json
import sys
import tempfile
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


class ClientsTest(unittest.TestCase):
    DOC = {
        "about": "test",
        "scenarios": [
            {"id": "everyone", "steps": []},
            {"id": "some", "clients": ["python", "go"], "steps": []},
            {"id": "java_only", "clients": ["java"], "steps": []},
        ],
    }

    def ids(self, client: str) -> List[str]:
        return [s["id"] for s in harness.scenarios_for(client, self.DOC)["scenarios"]]

    def test_a_scenario_without_clients_is_meant_for_every_client(self) -> None:
        for client in harness.CLIENTS:
            self.assertIn("everyone", self.ids(client))

    def test_a_scenario_is_sent_only_to_the_clients_it_names(self) -> None:
        self.assertEqual(self.ids("python"), ["everyone", "some"])
        self.assertEqual(self.ids("go"), ["everyone", "some"])
        self.assertEqual(self.ids("java"), ["everyone", "java_only"])
        self.assertEqual(self.ids("node"), ["everyone"])
        self.assertEqual(self.ids("rust"), ["everyone"])
        # The rest of the file goes along unchanged.
        self.assertEqual(harness.scenarios_for("node", self.DOC)["about"], "test")

    def test_a_scenario_not_meant_for_a_client_is_not_counted(self) -> None:
        # node's runner gets, and reports, only what is meant for it: all passed.
        ids = self.ids("node")
        script = "".join(f"print('PASS {id}')\n" for id in ids)
        self.assertEqual(run(script, ids, []), len(ids))
        # A result for a scenario not meant for it counts for nothing.
        self.assertEqual(run("print('PASS some'); print('PASS everyone')", ids, []), 1)

    def load(self, doc: object) -> object:
        with tempfile.TemporaryDirectory() as dir:
            path = Path(dir) / "scenarios.json"
            path.write_text(json.dumps(doc))
            return harness.load_scenarios(path)

    def test_clients_must_name_known_clients(self) -> None:
        self.assertEqual(self.load(self.DOC), self.DOC)
        for bad in (["pyhton"], [], "python"):
            doc = {"scenarios": [{"id": "x", "clients": bad, "steps": []}]}
            with self.assertRaises(SystemExit):
                self.load(doc)

    def test_ids_must_be_unique(self) -> None:
        with self.assertRaises(SystemExit):
            self.load({"scenarios": [{"id": "x", "steps": []}, {"id": "x", "steps": []}]})

    def test_the_election_scenarios_are_for_the_clients_that_have_elections(self) -> None:
        doc = harness.load_scenarios()
        elections = [s for s in doc["scenarios"] if any(st["op"] == "campaign" for st in s["steps"])]
        self.assertTrue(elections)
        for scenario in elections:
            self.assertEqual(sorted(scenario.get("clients", [])), ["go", "java", "node", "python"], scenario["id"])


if __name__ == "__main__":
    unittest.main()
