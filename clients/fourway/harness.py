#!/usr/bin/env python3
"""One lock, every runtime: a Python, a Node, a Go, a Java and a Rust process
contend for the same resource (``fourway/shared``) through their own client's
Hold API, against five real valkey-server masters and one redlockd, and each
records its critical sections in one shared log (see the contenders in
python/, node/, go/, java/, rust/). The log must show every section closed, no two
sections overlapping in time, and fences strictly increasing in the order of
the sections.

    python3 harness.py --python VENV_PYTHON --go GO_CONTENDER_BINARY \\
        --java-classpath CP --rust RUST_CONTENDER_BINARY [--rounds 15]
    python3 harness.py --selftest     # the checks catch bad logs

Stdlib only. The masters and the daemon, with its HTTP gateway, come from
the test kit's launcher (redlockd-cluster, by clients/cluster.py: it reads
$REDLOCKD_VALKEY_BIN and $REDLOCKD_BIN); the gateway must grant and release
one lock before the contenders start. Prints one line per check and
``N passed, M failed`` last; exits 1 on any failure. Every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # clients/: cluster.py
from cluster import Cluster  # noqa: E402

RUNTIMES = ("python", "node", "go", "java", "rust")
#: Longest wait for the gateway's first grant.
START_LIMIT = 60.0
#: Longest wait for the four contenders together.
RUN_LIMIT = 240.0


@dataclass
class Section:
    """One critical section as the log tells it."""

    runtime: str
    fence: int
    start: int
    end: int


@dataclass
class Log:
    """The parsed shared log: each runtime's clock line and sections, and
    every malformed or unmatched line found on the way."""

    clocks: Dict[str, int]
    sections: List[Section]
    problems: List[str]
    times: List[int]


def parse(text: str) -> Log:
    """Reads `<runtime> <fence> <what> <ns>` lines; pairs each runtime's
    `start` with its next line, which must be the `end` of the same fence."""
    clocks: Dict[str, int] = {}
    sections: List[Section] = []
    problems: List[str] = []
    times: List[int] = []
    open_: Dict[str, Tuple[int, int]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        parts = raw.split()
        if len(parts) != 4 or not parts[1].isdigit() or not parts[3].isdigit():
            problems.append(f"line {number}: malformed {raw!r}")
            continue
        runtime, fence, what, ns = parts[0], int(parts[1]), parts[2], int(parts[3])
        times.append(ns)
        if what == "clock":
            clocks[runtime] = ns
        elif what == "start":
            if runtime in open_:
                problems.append(f"line {number}: {runtime} starts fence {fence} inside fence {open_[runtime][0]}")
            open_[runtime] = (fence, ns)
        elif what == "end":
            began = open_.pop(runtime, None)
            if began is None or began[0] != fence:
                problems.append(f"line {number}: {runtime} ends fence {fence}, which it had not started")
            else:
                sections.append(Section(runtime, fence, began[1], ns))
        else:
            problems.append(f"line {number}: {runtime} fence {fence}: {what}")
            open_.pop(runtime, None)
    for runtime, (fence, _) in open_.items():
        problems.append(f"{runtime}: fence {fence} started and never ended")
    return Log(clocks, sections, problems, times)


def check_matched(log: Log) -> Optional[str]:
    """Every start has its end; nothing was lost or unheld."""
    return "; ".join(log.problems[:5]) if log.problems else None


def check_no_overlap(log: Log) -> Optional[str]:
    """No section starts before the previous one (by start time) ended."""
    ordered = sorted(log.sections, key=lambda s: s.start)
    for before, after in zip(ordered, ordered[1:]):
        if after.start <= before.end:
            return (
                f"{after.runtime} fence {after.fence} started {(before.end - after.start) / 1e6:.3f} ms "
                f"before {before.runtime} fence {before.fence} ended"
            )
    return None


def check_fences(log: Log) -> Optional[str]:
    """Fences strictly increase in the order of the sections."""
    ordered = sorted(log.sections, key=lambda s: s.start)
    for before, after in zip(ordered, ordered[1:]):
        if after.fence <= before.fence:
            return f"{after.runtime} fence {after.fence} came after {before.runtime} fence {before.fence}"
    return None


def check_counts(log: Log, rounds: int) -> Optional[str]:
    """Each of the four runtimes logged its clock and all its sections."""
    counts = {runtime: 0 for runtime in RUNTIMES}
    for section in log.sections:
        counts[section.runtime] = counts.get(section.runtime, 0) + 1
    missing = [r for r in RUNTIMES if r not in log.clocks or counts[r] != rounds]
    if missing:
        return f"sections per runtime {counts} (expected {rounds} each), clock lines from {sorted(log.clocks)}"
    return None


def check_clock(log: Log, window: Tuple[int, int]) -> Optional[str]:
    """Every timestamp lies within the harness's own CLOCK_MONOTONIC window
    around the run: the four runtimes read one clock, so comparing their
    times means something."""
    low, high = window
    strays = [ns for ns in log.times if not low <= ns <= high]
    if strays:
        return f"{len(strays)} timestamps outside the run's window [{low}, {high}], e.g. {strays[0]}"
    return None


def handovers(log: Log) -> int:
    """How many sections followed one of another runtime."""
    ordered = sorted(log.sections, key=lambda s: s.start)
    return sum(1 for a, b in zip(ordered, ordered[1:]) if a.runtime != b.runtime)


def check_turns(log: Log) -> Optional[str]:
    """The runtimes took turns: more handovers than the three that four
    runtimes running one after another would show, so that the run did
    test contention."""
    count = handovers(log)
    return None if count > len(RUNTIMES) - 1 else f"only {count} handovers between runtimes"


def summary(log: Log) -> str:
    fences = sorted(s.fence for s in log.sections)
    span = f"fences {fences[0]}..{fences[-1]}" if fences else "no fences"
    runtimes = len({s.runtime for s in log.sections})
    return (
        f"fourway: {runtimes} runtimes, {len(log.sections)} sections, {span} increasing, no overlap "
        f"({handovers(log)} handovers between runtimes)"
    )


def evaluate(log: Log, rounds: int, window: Tuple[int, int], exits: Dict[str, int]) -> List[Tuple[str, Optional[str]]]:
    """Every check with its failure (None: passed)."""
    bad_exits = {name: code for name, code in exits.items() if code != 0}
    return [
        ("contenders exited 0", f"exit codes {bad_exits}" if bad_exits else None),
        ("each runtime logged all its sections", check_counts(log, rounds)),
        ("every start has its end, nothing lost", check_matched(log)),
        ("timestamps on one clock", check_clock(log, window)),
        ("no two sections overlap", check_no_overlap(log)),
        ("fences strictly increase", check_fences(log)),
        ("the runtimes took turns", check_turns(log)),
    ]


def report(results: Sequence[Tuple[str, Optional[str]]]) -> int:
    failed = 0
    for name, failure in results:
        if failure is None:
            print(f"ok    {name}")
        else:
            failed += 1
            print(f"FAIL  {name}: {failure}")
    print(f"{len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


# --- processes ---------------------------------------------------------------


def post(url: str, body: dict) -> dict:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"content-type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        return json.loads(answer.read() or b"{}")


def wait_granting(http: str) -> None:
    """Polls until the daemon grants (and releases) a probe lock through
    its HTTP gateway."""
    limit = time.monotonic() + START_LIMIT
    last = "no answer"
    while time.monotonic() < limit:
        try:
            lock = post(f"{http}/v1/locks:acquire", {"resource": "fourway/probe", "ttl": "5s"})["lock"]
            post(f"{http}/v1/locks:release", {"resource": "fourway/probe", "token": lock["token"]})
            return
        except (OSError, urllib.error.URLError, KeyError, ValueError) as error:
            last = str(error)
            time.sleep(0.1)
    raise RuntimeError(f"redlockd granted no lock within {START_LIMIT} s (last: {last})")


def run(args: argparse.Namespace) -> int:
    repo = os.path.dirname(os.path.dirname(HERE))
    work = tempfile.mkdtemp(prefix="redlockd-fourway-")
    children: List[subprocess.Popen] = []

    def start(command: List[str], name: str) -> subprocess.Popen:
        out = open(os.path.join(work, f"{name}.log"), "ab")
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=repo)
        out.close()
        children.append(child)
        return child

    # What is checked is exclusion, not latency: a generous budget per
    # master keeps a starved CI machine from failing quorums.
    cluster = Cluster("--set", "redlock.node_timeout=1s", "--http")
    try:
        wait_granting(f"http://{cluster.daemon.http}")

        address = cluster.daemon.address
        shared = os.path.join(work, "sections.log")
        rounds = str(args.rounds)
        commands = {
            "python": [args.python, os.path.join(HERE, "python", "contender.py"), address, shared, rounds],
            "node": ["node", os.path.join(HERE, "node", "contender.mjs"), address, shared, rounds],
            "go": [args.go, address, shared, rounds],
            "java": ["java", "-cp", args.java_classpath, os.path.join(HERE, "java", "Contender.java"),
                     address, shared, rounds],
            "rust": [args.rust, address, shared, rounds],
        }
        low = time.monotonic_ns()
        contenders = {name: start(command, name) for name, command in commands.items()}
        limit = time.monotonic() + RUN_LIMIT
        exits: Dict[str, int] = {}
        for name, child in contenders.items():
            try:
                exits[name] = child.wait(timeout=max(0.1, limit - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
                exits[name] = -9
        high = time.monotonic_ns()
        with open(shared, encoding="utf-8") as f:
            log = parse(f.read())
        results = evaluate(log, args.rounds, (low, high), exits)
        if all(failure is None for _, failure in results):
            print(summary(log))
            print(f"fourway: {(high - low) / 1e9:.1f} s for {len(log.sections)} sections")
        else:
            for name in commands:
                path = os.path.join(work, f"{name}.log")
                with open(path, encoding="utf-8", errors="replace") as f:
                    tail = f.read()[-2000:]
                if tail.strip():
                    print(f"--- {name} output (tail)\n{tail}")
            print(f"(logs kept in {work})")
        status = report(results)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
        cluster.close()
    if status == 0:
        shutil.rmtree(work, ignore_errors=True)
    return status


# --- selftest ------------------------------------------------------------------


def selftest() -> int:
    """Feeds the checks logs that break each rule, and one that keeps them."""

    def log_of(*sections: Tuple[str, int, int, int], extra: str = "") -> str:
        lines = [f"{r} 0 clock 1" for r in RUNTIMES]
        for runtime, fence, start, end in sections:
            lines += [f"{runtime} {fence} start {start}", f"{runtime} {fence} end {end}"]
        return "\n".join(lines) + "\n" + extra

    good = [("python", 1, 10, 20), ("node", 2, 21, 30), ("go", 3, 31, 40), ("java", 4, 41, 50),
            ("rust", 5, 51, 60), ("python", 6, 61, 70), ("node", 7, 71, 80), ("go", 8, 81, 90),
            ("java", 9, 91, 95), ("rust", 10, 96, 99)]
    serial = [(r, 2 * i + k + 1, 20 * i + 10 * k, 20 * i + 10 * k + 5) for i, r in enumerate(RUNTIMES) for k in (0, 1)]
    cases: List[Tuple[str, str, Callable[[Log], Optional[str]], bool]] = [
        ("a good log passes every check", log_of(*good), lambda l: next(
            (f for _, f in evaluate(l, 2, (0, 100), {}) if f), None), True),
        ("runtimes one after another are caught", log_of(*serial), check_turns, False),
        ("an overlap is caught", log_of(*good[:3], ("java", 4, 39, 50)), check_no_overlap, False),
        ("touching sections count as overlap", log_of(*good[:3], ("java", 4, 40, 50)), check_no_overlap, False),
        ("a smaller later fence is caught", log_of(*good[:3], ("java", 2, 41, 50)), check_fences, False),
        ("a repeated fence is caught", log_of(*good[:3], ("java", 3, 41, 50)), check_fences, False),
        ("a lost lock is caught", log_of(*good, extra="go 5 start 51\ngo 5 lost 52\n"), check_matched, False),
        ("an unclosed section is caught", log_of(*good, extra="go 5 start 51\n"), check_matched, False),
        ("a missing runtime is caught", log_of(*good[:3]), lambda l: check_counts(l, 1), False),
        ("a foreign clock is caught", log_of(*good[:3], ("java", 4, 10**12, 10**12 + 1)),
         lambda l: check_clock(l, (0, 100)), False),
    ]
    results = []
    for name, text, check, passes in cases:
        failure = check(parse(text))
        ok = (failure is None) == passes
        results.append((f"selftest: {name}", None if ok else f"check said {failure!r}"))
    return report(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--selftest", action="store_true", help="check the checks on made-up logs")
    parser.add_argument("--python", help="a Python with redlockd_client installed")
    parser.add_argument("--go", help="the Go contender, built")
    parser.add_argument("--java-classpath", help="clients/java's classes and dependencies")
    parser.add_argument("--rust", help="the Rust contender, built (target/debug/contender-rust)")
    parser.add_argument("--rounds", type=int, default=15, help="sections per runtime")
    args = parser.parse_args()
    if args.selftest:
        return selftest()
    missing = [k for k in ("python", "go", "java_classpath", "rust") if not getattr(args, k)]
    if missing:
        parser.error("missing " + ", ".join("--" + k.replace("_", "-") for k in missing))
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
