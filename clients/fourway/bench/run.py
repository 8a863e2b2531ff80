#!/usr/bin/env python3
"""Each client's own cost, run by
scripts/bench-clients.sh: starts five valkey-server masters and one redlockd
(the binary given, a release build for figures worth quoting) through the
test kit's launcher (clients/cluster.py), runs the
Python, Node, Go, Java and Rust bench programs (the first four beside this
file, Rust's in clients/fourway/rust/src/bench.rs) one after another
against that same daemon, and prints a table: C=1 acquire+release p50 and
C=64 cycles/s, through each client and through the raw generated stub in
the same language, with the client's cost over its stub. Figures, not a
test: it asserts nothing and is not in CI.

    python3 run.py --daemon BIN --python PY --go GO_BENCH_BINARY \\
        --java-classpath CP --rust RUST_BENCH_BINARY [--seconds 2] [--rounds 3]

node_timeout is 1 s here (the other settings are the defaults): on a loaded
2-core machine a 50 ms budget fails cycles for reasons that are not the
clients' cost.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import List

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))  # clients/: cluster.py
sys.path.insert(0, os.path.dirname(HERE))  # clients/fourway: harness.py
from cluster import Cluster  # noqa: E402
from harness import wait_granting  # noqa: E402

#: Longest run of one language's bench program.
RUN_LIMIT = 600


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--daemon", required=True)
    parser.add_argument("--python", required=True)
    parser.add_argument("--go", required=True)
    parser.add_argument("--java-classpath", required=True)
    parser.add_argument("--rust", required=True)
    parser.add_argument("--seconds", default="2")
    parser.add_argument("--rounds", default="3")
    args = parser.parse_args()
    # The test kit's launcher (clients/cluster.py) starts the masters and
    # this daemon binary ($REDLOCKD_BIN).
    os.environ["REDLOCKD_BIN"] = args.daemon
    rows: List[dict] = []
    with Cluster("--set", "redlock.node_timeout=1s", "--set", "metrics.enabled=false", "--http") as cluster:
        wait_granting(f"http://{cluster.daemon.http}")
        address = cluster.daemon.address
        tail = [address, args.seconds, args.rounds]
        commands = {
            "python": [args.python, os.path.join(HERE, "bench.py"), *tail],
            "node": ["node", os.path.join(HERE, "bench.mjs"), *tail],
            "go": [args.go, *tail],
            "java": ["java", "-cp", args.java_classpath, os.path.join(HERE, "Bench.java"), *tail],
            "rust": [args.rust, *tail],
        }
        print(f"daemon {args.daemon} at {address}; {args.rounds} rounds of {args.seconds} s per figure, medians",
              flush=True)
        for name, command in commands.items():
            done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_LIMIT)
            if done.returncode != 0:
                print(f"{name}: exit {done.returncode}\n{done.stdout}{done.stderr}", file=sys.stderr)
                return 1
            rows += [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
            print(f"  {name} done", flush=True)

    print()
    print("| client | C=1 p50 ms (stub) | client over stub | C=64 cycles/s (stub) | client under stub | C=64 failed |")
    print("| --- | --- | --- | --- | --- | --- |")
    for lang in ("python", "node", "go", "java", "rust"):
        by = {row["way"]: row for row in rows if row["lang"] == lang}
        raw, ours = by["raw"], by["client"]
        latency = 100 * (ours["c1_p50_ms"] - raw["c1_p50_ms"]) / raw["c1_p50_ms"]
        rate = 100 * (raw["c64_cycles_per_s"] - ours["c64_cycles_per_s"]) / raw["c64_cycles_per_s"]
        print(f"| {lang} | {ours['c1_p50_ms']:.3f} ({raw['c1_p50_ms']:.3f}) | {latency:+.1f}% "
              f"| {ours['c64_cycles_per_s']:.0f} ({raw['c64_cycles_per_s']:.0f}) | {rate:+.1f}% "
              f"| {int(ours['c64_failed'])} ({int(raw['c64_failed'])}) |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
