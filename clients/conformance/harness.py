#!/usr/bin/env python3
"""The conformance harness: one run of clients/conformance/scenarios.json
through every client's runner, against real masters and daemons.

For each client it starts, through the test kit's launcher (redlockd-cluster,
by clients/cluster.py; Python stdlib only):
  * five valkey-server masters shared by three daemons: `plain`, `token`
    ([[auth.clients]] with namespaces ["conf/"]) and `tls` (a server
    certificate from a private CA the launcher makes);
  * five more masters under a `fragile` daemon, three of which the
    `stop_three_masters` fault kills;
  * a `drain` daemon over the first masters, which the `drain_daemon`
    fault sends SIGTERM (shutdown_grace 3 s);
  * `slow`: the launcher's TCP proxy to `plain` that delivers the daemon's
    bytes SLOW_ANSWERS_DELAY after it sent them (the client's at once), so
    that a grant made in time reaches the client after its deadline fired.
Every client gets its own set, so that one client's faults never reach
another's scenarios. The runner gets the scenarios file and an environment
file (the clients it may build: address, token, CA file) and speaks a line
protocol on its stdout/stdin:
  FAULT <name>              the harness injects it, then answers `ok <name>`
                            (or `error <reason>`) on the runner's stdin;
  PASS <scenario id>
  FAIL <scenario id> <why>
  anything else             the runner's own diagnostics, echoed
                            (its stderr is passed through as it is).
A scenario without a PASS line is a failure: a runner that cannot run a
scenario fails it, never skips it. A scenario with a `clients` list is meant
for those clients only: the others' runners never get it (their scenarios
file leaves it out) and it is not counted for them. Prints
`conformance: <client> <n>/<m>` per client (m: the scenarios meant for it)
and exits non-zero unless every client passed every scenario meant for it.

Usage: harness.py [client ...]   (default: python node go java rust)
Environment: REDLOCKD_CLUSTER_BIN (the launcher, default
target/debug/redlockd-cluster), which reads REDLOCKD_VALKEY_BIN (masters)
and REDLOCKD_BIN (the daemon, default the workspace's); CONFORMANCE_PYTHON
(the interpreter with redlockd_client installed, default
target/python-client/venv/bin/python),
CONFORMANCE_JAVA_CP (the Java runner's classpath; runners/java/run.sh
builds it when unset).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # clients/: cluster.py
from cluster import Cluster, options  # noqa: E402

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SCENARIOS = HERE / "scenarios.json"
#: Every client a runner exists for (and a scenario's `clients` may name).
CLIENTS = ["python", "node", "go", "java", "rust"]

#: Longest run of one client's runner, in seconds (every scenario included).
RUNNER_LIMIT = 300.0
#: The bearer token of the `token` client (a test value, not a secret).
TOKEN = "conformance-5d1c7e2a9b4f6e8d0a3c5b7e9f1d2c4a"
#: How late the `slow` client's proxy delivers the daemon's answers, in seconds.
SLOW_ANSWERS_DELAY = 0.3


def runner_command(client: str) -> List[str]:
    """How to start `client`'s runner (its arguments follow)."""
    runners = HERE / "runners"
    if client == "python":
        python = os.environ.get("CONFORMANCE_PYTHON") or str(REPO / "target" / "python-client" / "venv" / "bin" / "python")
        return [python, str(runners / "python" / "runner.py")]
    if client == "node":
        return ["node", str(runners / "node" / "runner.mjs")]
    if client == "go":
        return ["bash", str(runners / "go" / "run.sh")]
    if client == "java":
        return ["bash", str(runners / "java" / "run.sh")]
    if client == "rust":
        # Built with the workspace (`cargo build --workspace --bins`).
        return [os.environ.get("CONFORMANCE_RUST") or str(REPO / "target" / "debug" / "conformance-rust")]
    raise SystemExit(f"harness: unknown client {client} (python, node, go, java, rust)")


def load_scenarios(path: Optional[Path] = None) -> Dict[str, Any]:
    """The scenarios file (SCENARIOS unless `path`), checked: unique ids,
    and `clients` lists (when present) naming known clients."""
    doc = json.loads((path or SCENARIOS).read_text())
    ids = [s["id"] for s in doc["scenarios"]]
    if len(set(ids)) != len(ids):
        raise SystemExit("harness: scenario ids must be unique")
    for scenario in doc["scenarios"]:
        if "clients" in scenario:
            only = scenario["clients"]
            if not isinstance(only, list) or not only or any(c not in CLIENTS for c in only):
                raise SystemExit(f"harness: {scenario['id']}: `clients` must be a non-empty list of {CLIENTS}")
    return doc


def scenarios_for(client: str, doc: Dict[str, Any]) -> Dict[str, Any]:
    """The scenarios file as `client`'s runner gets it: without the
    scenarios whose `clients` list leaves it out."""
    kept = [s for s in doc["scenarios"] if client in s.get("clients", [client])]
    return {**doc, "scenarios": kept}


def run_client(client: str, doc: Dict[str, Any], base: Path) -> int:
    """Starts `client`'s daemons, runs its runner on the scenarios meant
    for it (`doc` filtered by scenarios_for); returns how many passed."""
    ids = [s["id"] for s in doc["scenarios"]]
    dir = Path(tempfile.mkdtemp(prefix=f"{client}-", dir=base))
    clusters: List[Cluster] = []
    try:
        shared = Cluster()
        clusters.append(shared)
        plain = shared.daemon.address
        sha = hashlib.sha256(TOKEN.encode()).hexdigest()
        toml = f'[[auth.clients]]\nname = "conformance"\ntoken_sha256 = "{sha}"\nnamespaces = ["conf/"]\n'
        token = shared.start_daemon(*options(toml=toml)).address
        tls = shared.start_daemon("--tls")
        fragile = Cluster()
        clusters.append(fragile)
        # A drain of 3 s: long enough for the draining event to reach a
        # client on a busy machine, short enough to keep the run quick.
        drain = shared.start_daemon(*options({"server.shutdown_grace": "3s"}))
        slow = shared.daemon.slow_answers(SLOW_ANSWERS_DELAY)

        def fault(name: str) -> str:
            if name == "stop_three_masters":
                for i in range(3):
                    fragile.masters.stop(i)
                return "ok"
            if name == "drain_daemon":
                drain.send_signal("TERM")
                return "ok"
            return f"error unknown fault {name}"

        env = {
            "prefix": f"{client}/",
            "clients": {
                "plain": {"address": plain},
                "no_token": {"address": token},
                "token": {"address": token, "token": TOKEN},
                "wrong_token": {"address": token, "token": TOKEN[::-1]},
                "tls": {"address": tls.address, "ca_file": tls.ca},
                "tls_untrusted": {"address": tls.address, "tls": True},
                "fragile": {"address": fragile.daemon.address},
                "drain": {"address": drain.address},
                "slow": {"address": slow},
            },
        }
        env_file = dir / "env.json"
        env_file.write_text(json.dumps(env, indent=2))
        scenarios_file = dir / "scenarios.json"
        scenarios_file.write_text(json.dumps(doc, indent=2))
        return drive(client, runner_command(client) + [str(scenarios_file), str(env_file)], ids, fault)
    finally:
        for cluster in clusters:
            cluster.close()
        shutil.rmtree(dir, ignore_errors=True)


def drive(client: str, command: List[str], ids: List[str], fault) -> int:
    """Runs a runner, answering its FAULT lines; counts its PASS lines."""
    passed: Dict[str, bool] = {}
    # The runner's stderr (build tools, gRPC's own logs) goes straight to ours:
    # only its stdout speaks the protocol.
    proc = subprocess.Popen(command, cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=None, text=True, bufsize=1)
    timer = threading.Timer(RUNNER_LIMIT, proc.kill)
    timer.start()
    try:
        assert proc.stdout is not None and proc.stdin is not None
        for line in proc.stdout:
            line = line.rstrip("\n")
            word, _, rest = line.partition(" ")
            if word == "FAULT":
                answer = fault(rest.strip())
                print(f"  [{client}] fault {rest.strip()}: {answer}", flush=True)
                proc.stdin.write(f"{answer}\n")
                proc.stdin.flush()
            elif word in ("PASS", "FAIL"):
                id, _, why = rest.partition(" ")
                if id not in ids:
                    print(f"  [{client}] result for an unknown scenario: {line}", flush=True)
                    continue
                if id in passed:
                    print(f"  [{client}] second result for {id}: {line}", flush=True)
                    passed[id] = False
                    continue
                passed[id] = word == "PASS"
                print(f"  [{client}] {line}", flush=True)
            else:
                print(f"  [{client}] | {line}", flush=True)
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    for id in ids:
        if id not in passed:
            print(f"  [{client}] FAIL {id} (the runner reported nothing)", flush=True)
    if proc.returncode != 0:
        print(f"  [{client}] runner exited with {proc.returncode}", flush=True)
    return sum(1 for id in ids if passed.get(id))


def main(argv: List[str]) -> int:
    # `timeout` (CI's step bound) sends SIGTERM: unwind, so that every
    # master, daemon and runner started here is killed on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    clients = argv or CLIENTS
    doc = load_scenarios()
    meant = {client: scenarios_for(client, doc) for client in clients}
    counts = {client: len(meant[client]["scenarios"]) for client in clients}
    results = {}
    with tempfile.TemporaryDirectory(prefix="redlockd-conformance-") as base:
        for client in clients:
            started = time.monotonic()
            print(f"--- {client}", flush=True)
            try:
                results[client] = run_client(client, meant[client], Path(base))
            except Exception as error:  # a daemon that did not start: every scenario failed
                print(f"  [{client}] harness error: {error}", flush=True)
                results[client] = 0
            print(f"  [{client}] {time.monotonic() - started:.1f}s", flush=True)
    for client in clients:
        print(f"conformance: {client} {results[client]}/{counts[client]}")
    return 0 if all(results[c] == counts[c] for c in clients) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
