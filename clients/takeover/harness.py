#!/usr/bin/env python3
"""Leader election, measured: a Python, a Go, a Java and a Node candidate
campaign for one election (``takeover``) through their own client's
election API, two on each of two daemon replicas of five real
valkey-server masters, while one observer per replica records every change
it is told. Each round, the harness SIGKILLs the leader (and the next ones
until the round's language leads), then SIGSTOPs that one past its ttl and
resumes it; one round per language by default. It checks the shared log
(see python/candidate.py for its lines):

- exactly one leader at a time: no act of a term after a higher term was
  elected, act intervals of different terms disjoint, terms strictly
  increasing;
- a take-over within its bound after each kill and each stop (below);
- a frozen leader, resumed, reports its loss and never acts on its old term;
- each observer's terms strictly increase, and it sees every term;
- every language led and acted and, in a run of one round per language,
  was frozen and resumed.

    python3 harness.py --python VENV_PYTHON --go GO_CANDIDATE_BINARY \\
        --java-classpath CP [--node NODE] [--rounds 4]
    python3 harness.py --selftest     # the checks catch bad logs

The bounds, from the daemon's settings this run passes (TTL, the keepalive,
session.extend_at) and a slack for a loaded 2-core machine:

- after a SIGKILL the leader's socket closes, so the daemon releases the
  leadership at once and wakes a waiting candidate, here or on the other
  replica (the masters announce the release); a Python standby that waited
  longer than its ttl enters its block at the first extension,
  TTL * extend_at later: KILL_BOUND = TTL * extend_at + SLACK;
- a SIGSTOPped leader's kernel still answers TCP, and it may resume and
  act on the validity it was last told, so the daemon keeps its leadership
  for that validity: extended only while the leader was heard from within
  keepalive_timeout, so at most TTL + keepalive_timeout after the stop,
  then released (the connection itself is closed after keepalive_interval
  + keepalive_timeout): STOP_BOUND = TTL + keepalive_timeout + TTL *
  extend_at + 2 * SLACK. Its client stops claiming the leadership when the
  last validity it read runs out, before that;
- an observer on the other replica re-reads the election at the latest
  every redlock.wait_fallback: OBSERVE_BOUND = wait_fallback + SLACK after
  the new leader's ``elected``.

Stdlib only. The masters and the two daemons come from the test kit's
launcher (redlockd-cluster, by clients/cluster.py). Prints the figures, one
line per check and ``N passed, M failed`` last; exits 1 on any failure.
Every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # clients/: cluster.py
from cluster import Cluster  # noqa: E402

LANGS = ("python", "go", "java", "node")
#: The replica (daemon index) each candidate campaigns on: two on each.
REPLICA = {"python": 0, "java": 0, "go": 1, "node": 1}
#: The leadership's ttl every candidate asks for, in seconds.
TTL = 2.0
#: The daemon settings the bounds are derived from (passed explicitly).
KEEPALIVE_INTERVAL = 1.0
KEEPALIVE_TIMEOUT = 2.0
EXTEND_AT = 1 / 3
WAIT_FALLBACK = 1.0
#: Scheduling, grant rounds and JVM pauses on a loaded 2-core machine
#: (twice that after a stop: the keepalive's PING timing adds its own).
SLACK = 1.0
KILL_BOUND = TTL * EXTEND_AT + SLACK
STOP_BOUND = TTL + KEEPALIVE_TIMEOUT + TTL * EXTEND_AT + 2 * SLACK
#: Observe streams an observer may see end (UNAVAILABLE when too few
#: masters answered a read in time, as on a loaded machine) and re-open.
OBSERVER_REOPENS = 2
OBSERVE_BOUND = WAIT_FALLBACK + SLACK
#: A resumed leader must report its loss within this of SIGCONT.
RESUMED_LOST_BOUND = 1.0
#: How long a leader acts (and the observers catch up) before each fault.
SETTLE = 1.0
#: Longest wait for a process to start (a JVM compiling its source).
START_LIMIT = 60.0
#: Longest wait for one step of a round.
STEP_LIMIT = 15.0
DAEMON_SETTINGS = (
    "--set", "redlock.node_timeout=250ms",
    "--set", f"server.keepalive_interval={KEEPALIVE_INTERVAL:g}s",
    "--set", f"server.keepalive_timeout={KEEPALIVE_TIMEOUT:g}s",
    "--set", f"redlock.wait_fallback={WAIT_FALLBACK:g}s",
)

Event = Dict[str, object]
Results = List[Tuple[str, Optional[str]]]


def ns(event: Event) -> int:
    return int(event["t"])  # type: ignore[arg-type]


def of(events: Sequence[Event], kind: str) -> List[Event]:
    return sorted((e for e in events if e.get("ev") == kind), key=ns)


def parse(text: str) -> Tuple[List[Event], List[str]]:
    """The log's events, and its malformed lines."""
    events: List[Event] = []
    problems: List[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        try:
            event = json.loads(raw)
            int(event["t"])
            str(event["ev"])
            events.append(event)
        except (ValueError, KeyError, TypeError):
            problems.append(f"line {number}: malformed {raw[:120]!r}")
    return events, problems


# --- the checks (each: the failure, or None) -----------------------------------


def check_terms(events: Sequence[Event]) -> Optional[str]:
    """Terms strictly increase in the order of the elections."""
    elected = of(events, "elected")
    for before, after in zip(elected, elected[1:]):
        if int(after["term"]) <= int(before["term"]):  # type: ignore[arg-type]
            return (f"{after['lang']} {after['pid']} elected with term {after['term']} after "
                    f"{before['lang']} {before['pid']} had term {before['term']}")
    return None


def check_no_stale_act(events: Sequence[Event]) -> Optional[str]:
    """No act of a term at or after the election of a higher term."""
    elected = of(events, "elected")
    for act in of(events, "act"):
        for e in elected:
            if int(e["term"]) > int(act["term"]) and ns(e) <= ns(act):  # type: ignore[arg-type]
                return (f"{act['lang']} {act['pid']} acted with term {act['term']} "
                        f"{(ns(act) - ns(e)) / 1e6:.1f} ms after {e['lang']} {e['pid']} was elected "
                        f"with term {e['term']} (its client said {act.get('rem_ms')} ms of validity left)")
    return None


def intervals(events: Sequence[Event]) -> List[Tuple[int, int, int, str]]:
    """(term, first act, last act, who) per term, by term."""
    spans: Dict[int, List[int]] = {}
    who: Dict[int, str] = {}
    for act in of(events, "act"):
        term = int(act["term"])  # type: ignore[arg-type]
        spans.setdefault(term, []).append(ns(act))
        who[term] = f"{act['lang']} {act['pid']}"
    return [(term, min(ts), max(ts), who[term]) for term, ts in sorted(spans.items())]


def check_one_leader(events: Sequence[Event]) -> Optional[str]:
    """The act intervals of different terms are disjoint, in term order,
    and each term's acts come from the one process elected with it."""
    owners: Dict[int, object] = {}
    for e in of(events, "elected"):
        owners.setdefault(int(e["term"]), e["pid"])  # type: ignore[arg-type]
    for act in of(events, "act"):
        owner = owners.get(int(act["term"]))  # type: ignore[arg-type]
        if owner != act["pid"]:
            return f"{act['lang']} {act['pid']} acted with term {act['term']}, elected to {owner}"
    spans = intervals(events)
    for (t1, _, end1, who1), (t2, start2, _, who2) in zip(spans, spans[1:]):
        if start2 <= end1:
            return (f"term {t2} ({who2}) acted {(end1 - start2) / 1e6:.1f} ms before term {t1} "
                    f"({who1}) stopped acting")
    return None


def next_election(events: Sequence[Event], after: Event) -> Optional[Event]:
    """The first election of a term above the faulted leader's, after the fault."""
    return next((e for e in of(events, "elected")
                 if ns(e) > ns(after) and int(e["term"]) > int(after["term"])), None)  # type: ignore[arg-type]


def takeovers(events: Sequence[Event], fault: str) -> List[Tuple[Event, Optional[float]]]:
    """Each fault of this kind with its take-over time (s), None if none came."""
    out: List[Tuple[Event, Optional[float]]] = []
    for f in of(events, fault):
        e = next_election(events, f)
        out.append((f, None if e is None else (ns(e) - ns(f)) / 1e9))
    return out


def check_takeover(events: Sequence[Event], fault: str, bound: float, rounds: int) -> Optional[str]:
    """Each fault of the kind was followed by a new leader within bound."""
    found = takeovers(events, fault)
    if len(found) < rounds:
        return f"{len(found)} {fault}s in the log, {rounds} expected"
    for f, dt in found:
        if dt is None:
            return f"no new leader after the {fault} of {f['lang']} {f['pid']} (term {f['term']})"
        if dt > bound:
            return f"{dt:.3f} s after the {fault} of {f['lang']} {f['pid']} (term {f['term']}), bound {bound:.2f} s"
    return None


def check_resumed(events: Sequence[Event]) -> Optional[str]:
    """Each SIGSTOPped leader, once resumed, reported the loss of its term
    within RESUMED_LOST_BOUND, before any act (its acts after the new term
    began are check_no_stale_act's)."""
    conts = of(events, "cont")
    if len(conts) < len(of(events, "stop")):
        return "a stopped leader was never resumed"
    for cont in conts:
        mine = [e for e in events if e.get("pid") == cont["pid"] and e.get("term") == cont["term"]
                and e.get("ev") in ("act", "lost") and ns(e) >= ns(cont)]
        mine.sort(key=ns)
        if not mine or mine[0]["ev"] != "lost":
            first = mine[0]["ev"] if mine else "nothing"
            return f"{cont['lang']} {cont['pid']} resumed with term {cont['term']}: first {first}, not lost"
        if ns(mine[0]) - ns(cont) > RESUMED_LOST_BOUND * 1e9:
            return (f"{cont['lang']} {cont['pid']} reported its loss {(ns(mine[0]) - ns(cont)) / 1e9:.3f} s "
                    f"after SIGCONT (bound {RESUMED_LOST_BOUND} s)")
    return None


def observed(events: Sequence[Event], replica: int) -> List[Event]:
    return [e for e in of(events, "observe") if e.get("replica") == replica]


def check_observer_order(events: Sequence[Event], replica: int) -> Optional[str]:
    """An observer's terms strictly increase; a no-leader comes only after a
    leader (or first); its stream broke at most OBSERVER_REOPENS times, and
    a re-opened stream may first repeat the state last told, never go
    back."""
    seen = observed(events, replica)
    if not seen:
        return "told nothing"
    errors = [e for e in events if e.get("ev") == "error" and e.get("replica") == replica]
    if len(errors) > OBSERVER_REOPENS:
        return f"its stream broke {len(errors)} times: {errors[0].get('error')}"
    timeline = sorted(seen + errors, key=lambda e: int(e["t"]))  # type: ignore[arg-type]
    last = 0
    previous_leader = True
    reopened = False
    for e in timeline:
        if e["ev"] == "error":
            reopened = True
            continue
        repeat = reopened and (int(e["term"]) == last if e["has_leader"] else not previous_leader)  # type: ignore[arg-type]
        reopened = False
        if repeat:
            continue
        if e["has_leader"]:
            if int(e["term"]) <= last:  # type: ignore[arg-type]
                return f"told term {e['term']} after term {last}"
            last = int(e["term"])  # type: ignore[arg-type]
            previous_leader = True
        else:
            if not previous_leader:
                return "told no leader twice in a row"
            previous_leader = False
    return None


def first_seen(events: Sequence[Event], replica: int) -> Dict[int, int]:
    out: Dict[int, int] = {}
    for e in observed(events, replica):
        if e["has_leader"]:
            out.setdefault(int(e["term"]), ns(e))  # type: ignore[arg-type]
    return out


def lags(events: Sequence[Event], replica: int) -> List[float]:
    """Per term seen: when the observer heard it less when its leader's
    `elected` came (s; below 0 when the observer heard first)."""
    seen = first_seen(events, replica)
    return [(seen[int(e["term"])] - ns(e)) / 1e9  # type: ignore[arg-type]
            for e in of(events, "elected") if int(e["term"]) in seen]  # type: ignore[arg-type]


def check_observer_complete(events: Sequence[Event], replica: int) -> Optional[str]:
    """The observer was told every term, each within OBSERVE_BOUND of its
    `elected`."""
    seen = first_seen(events, replica)
    missing = [int(e["term"]) for e in of(events, "elected") if int(e["term"]) not in seen]  # type: ignore[arg-type]
    if missing:
        return f"never told terms {missing}"
    late = [lag for lag in lags(events, replica) if lag > OBSERVE_BOUND]
    if late:
        return f"told a term {max(late):.3f} s after its election (bound {OBSERVE_BOUND:.2f} s)"
    return None


def check_every_lang(events: Sequence[Event]) -> Optional[str]:
    """Each language was elected and acted at least once."""
    led = {str(e["lang"]) for e in of(events, "elected")}
    acted = {str(e["lang"]) for e in of(events, "act")}
    missing = [lang for lang in LANGS if lang not in led or lang not in acted]
    return f"never led: {missing} (led: {sorted(led)})" if missing else None


def check_every_lang_frozen(events: Sequence[Event]) -> Optional[str]:
    """Each language's leader was SIGSTOPped and resumed at least once (a
    run of one round per language or more)."""
    frozen = {str(e["lang"]) for e in of(events, "cont")}
    missing = [lang for lang in LANGS if lang not in frozen]
    return f"never frozen: {missing} (frozen: {sorted(frozen)})" if missing else None


def check_no_errors(events: Sequence[Event], problems: Sequence[str]) -> Optional[str]:
    """No malformed line, no candidate reporting a failed campaign."""
    if problems:
        return "; ".join(problems[:3])
    errors = [e for e in events if e.get("ev") == "error" and "lang" in e]
    if errors:
        e = errors[0]
        return f"{len(errors)} errors, first {e['lang']} {e['pid']}: {e.get('error')}"
    return None


def evaluate(events: Sequence[Event], problems: Sequence[str], rounds: int,
             exits: Dict[str, int]) -> Results:
    bad_exits = {name: code for name, code in exits.items() if code is not None}
    results: Results = [
        ("no process died unasked", f"exited: {bad_exits}" if bad_exits else None),
        ("no malformed line, no failed campaign", check_no_errors(events, problems)),
        ("every language led and acted", check_every_lang(events)),
        ("terms strictly increase", check_terms(events)),
        ("one leader at a time: act intervals of different terms disjoint", check_one_leader(events)),
        ("no act of a term after a higher term was elected", check_no_stale_act(events)),
        (f"take-over after SIGKILL within {KILL_BOUND:.2f} s", check_takeover(events, "kill", KILL_BOUND, rounds)),
        (f"take-over after SIGSTOP within {STOP_BOUND:.2f} s", check_takeover(events, "stop", STOP_BOUND, rounds)),
        (f"a resumed leader reports lost within {RESUMED_LOST_BOUND:g} s, before acting", check_resumed(events)),
    ]
    if rounds >= len(LANGS):
        results.append(("every language frozen and resumed", check_every_lang_frozen(events)))
    for replica in (0, 1):
        results.append((f"observer on replica {replica}: terms only increase", check_observer_order(events, replica)))
        results.append((f"observer on replica {replica}: every term, within {OBSERVE_BOUND:.2f} s",
                        check_observer_complete(events, replica)))
    return results


def figures(events: Sequence[Event]) -> List[str]:
    def fmt(values: Sequence[Optional[float]]) -> str:
        return " ".join("none" if v is None else f"{v:.3f}" for v in values)

    lines = [f"takeover: ttl {TTL:g} s; bounds: kill {KILL_BOUND:.2f} s, stop {STOP_BOUND:.2f} s, "
             f"observer {OBSERVE_BOUND:.2f} s"]
    for fault in ("kill", "stop"):
        found = takeovers(events, fault)
        times = [dt for _, dt in found]
        known = [dt for dt in times if dt is not None]
        who = " ".join(f"{f['lang']}->{(next_election(events, f) or {}).get('lang', '?')}" for f, _ in found)
        lines.append(f"takeover after SIG{fault.upper()} (s): {fmt(times)}; max "
                     f"{max(known) if known else float('nan'):.3f} ({who})")
    for replica in (0, 1):
        seen = first_seen(events, replica)
        after_kill = []
        for f in of(events, "kill"):
            e = next_election(events, f)
            if e is not None and int(e["term"]) in seen:  # type: ignore[arg-type]
                after_kill.append((seen[int(e["term"])] - ns(f)) / 1e9)  # type: ignore[arg-type]
        lag = lags(events, replica)
        lines.append(
            f"observer on replica {replica}: kill -> new term seen (s): {fmt(after_kill)}; lag after `elected` "
            f"over {len(lag)} terms: max {max(lag) if lag else float('nan'):.3f} s, "
            f"median {statistics.median(lag) if lag else float('nan'):.3f} s")
    resumed = []
    for cont in of(events, "cont"):
        lost = next((e for e in of(events, "lost") if e.get("pid") == cont["pid"] and ns(e) >= ns(cont)), None)
        resumed.append(None if lost is None else (ns(lost) - ns(cont)) / 1e9)
    lines.append(f"resumed leader: SIGCONT -> lost (s): {fmt(resumed)}")
    return lines


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


# --- the run -------------------------------------------------------------------


class Run:
    """The processes of one run and the shared log they write."""

    def __init__(self, args: argparse.Namespace, work: str, addresses: List[str]) -> None:
        self.args = args
        self.work = work
        self.addresses = addresses
        self.log = os.path.join(work, "events.log")
        self.fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.offset = 0
        self.events: List[Event] = []
        self.problems: List[str] = []
        #: pid -> (name, process); name is a language or observer-N.
        self.children: Dict[int, Tuple[str, subprocess.Popen]] = {}
        #: Processes that ended without the harness ending them.
        self.exits: Dict[str, int] = {}
        self.faulted: set = set()

    def note(self, event: Event) -> None:
        event["t"] = time.monotonic_ns()
        os.write(self.fd, (json.dumps(event) + "\n").encode())

    def read(self) -> List[Event]:
        with open(self.log, "rb") as f:
            f.seek(self.offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        events, problems = parse(data[:end].decode("utf-8", "replace"))
        self.events += events
        self.problems += problems
        for pid, (name, child) in list(self.children.items()):
            code = child.poll()
            if code is not None and pid not in self.faulted:
                self.exits[f"{name} {pid}"] = code
                del self.children[pid]
        return self.events

    def wait(self, what: str, found: Callable[[List[Event]], Optional[Event]], limit: float) -> Event:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            hit = found(self.read())
            if hit is not None:
                return hit
            if self.exits:
                raise RuntimeError(f"waiting for {what}: processes exited: {self.exits}")
            time.sleep(0.01)
        raise RuntimeError(f"no {what} within {limit} s")

    def spawn(self, name: str, command: List[str]) -> int:
        out = open(os.path.join(self.work, f"{name}-{len(self.children)}-{time.monotonic_ns()}.out"), "ab")
        child = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=HERE)
        out.close()
        self.children[child.pid] = (name, child)
        return child.pid

    def candidate(self, lang: str) -> int:
        address = self.addresses[REPLICA[lang]]
        ttl_ms = str(round(TTL * 1000))
        command = {
            "python": [self.args.python, os.path.join(HERE, "python", "candidate.py"), address, self.log, ttl_ms],
            "go": [self.args.go, address, self.log, ttl_ms],
            "java": ["java", "-cp", self.args.java_classpath, os.path.join(HERE, "java", "Candidate.java"),
                     address, self.log, ttl_ms],
            "node": [self.args.node, os.path.join(HERE, "node", "candidate.mjs"), address, self.log, ttl_ms],
        }[lang]
        pid = self.spawn(lang, command)
        self.wait(f"{lang}'s campaign", lambda evs: next(
            (e for e in evs if e.get("pid") == pid and e["ev"] == "campaign"), None), START_LIMIT)
        return pid

    def leader(self) -> Event:
        """The current leader's `elected`: the last one, from a live
        process that has not reported its loss."""
        def found(evs: List[Event]) -> Optional[Event]:
            elected = of(evs, "elected")
            if not elected:
                return None
            e = elected[-1]
            gone = any(x.get("pid") == e["pid"] and x.get("term") == e["term"] and x["ev"] in ("lost", "kill", "stop")
                       for x in evs)
            return None if gone else e
        return self.wait("a leader", found, STEP_LIMIT)

    def settle(self) -> Event:
        """Waits until the leader has acted for SETTLE and both observers
        were told its term."""
        lead = self.leader()
        term = lead["term"]

        def found(evs: List[Event]) -> Optional[Event]:
            acts = [e for e in evs if e["ev"] == "act" and e.get("term") == term]
            told = {e.get("replica") for e in evs if e["ev"] == "observe" and e.get("term") == term}
            if acts and ns(acts[-1]) - ns(acts[0]) >= SETTLE * 1e9 and told >= {0, 1}:
                return acts[-1]
            return None
        self.wait(f"term {term} acting and observed", found, STEP_LIMIT)
        return lead

    def successor(self, fault: Event) -> Event:
        return self.wait(f"a leader after the {fault['ev']} of term {fault['term']}",
                         lambda evs: next_election(evs, fault), STEP_LIMIT)

    def kill(self, restart: bool = True) -> Tuple[str, str]:
        """SIGKILLs the leader, waits for the next and, with `restart`,
        starts the killed candidate's language again (a fresh process, back
        in the queue); the new leader's language and the killed one's."""
        lead = self.settle()
        pid = int(lead["pid"])  # type: ignore[arg-type]
        name, child = self.children[pid]
        self.faulted.add(pid)
        self.note({"ev": "kill", "lang": name, "pid": pid, "term": lead["term"]})
        os.kill(pid, signal.SIGKILL)
        child.wait(10)
        del self.children[pid]
        successor = self.successor(of(self.read(), "kill")[-1])
        if restart:
            self.candidate(name)
        return str(successor["lang"]), name

    def stop(self) -> None:
        """SIGSTOPs the leader until the next is elected (longer than its
        ttl: the daemon keeps a frozen client's leadership for the validity
        it was last told), resumes it, and waits for it to report the loss."""
        lead = self.settle()
        pid = int(lead["pid"])  # type: ignore[arg-type]
        self.faulted.add(pid)
        self.note({"ev": "stop", "lang": lead["lang"], "pid": pid, "term": lead["term"]})
        os.kill(pid, signal.SIGSTOP)
        try:
            self.successor(of(self.read(), "stop")[-1])
            time.sleep(0.3)
        finally:
            self.note({"ev": "cont", "lang": lead["lang"], "pid": pid, "term": lead["term"]})
            os.kill(pid, signal.SIGCONT)
        self.wait(f"{lead['lang']} {pid} to report the loss of term {lead['term']}", lambda evs: next(
            (e for e in evs if e.get("pid") == pid and e["ev"] == "lost" and e.get("term") == lead["term"]), None),
            STEP_LIMIT)
        self.faulted.discard(pid)

    def round(self, target: str) -> None:
        """One kill, more kills until `target`'s candidate leads, then a
        stop of it: every language's client gets frozen and resumed once in
        four rounds. The candidates killed on the way are started again
        only once `target` leads: a replica wakes its own waiting candidate
        first, so kills alone would hand the leadership back and forth
        between the two on one replica. Each such kill takes one other
        language out of the queues: at most three."""
        leading, _ = self.kill()
        down: List[str] = []
        for _ in range(len(LANGS) - 1):
            if leading == target:
                break
            leading, killed = self.kill(restart=False)
            down.append(killed)
        for name in down:
            self.candidate(name)
        self.stop()

    def close(self) -> None:
        for pid, (_, child) in list(self.children.items()):
            if child.poll() is None:
                self.faulted.add(pid)
                child.kill()
            child.wait(10)
        os.close(self.fd)


def run(args: argparse.Namespace) -> int:
    work = tempfile.mkdtemp(prefix="redlockd-takeover-")
    began = time.monotonic()
    cluster = Cluster(*DAEMON_SETTINGS)
    runner: Optional[Run] = None
    failure: Optional[str] = None
    try:
        second = cluster.start_daemon(*DAEMON_SETTINGS)
        runner = Run(args, work, [cluster.daemon.address, second.address])
        for replica in (0, 1):
            pid = runner.spawn(f"observer-{replica}", [
                args.python, os.path.join(HERE, "python", "candidate.py"), "--observe",
                runner.addresses[replica], runner.log, str(replica)])
            runner.wait(f"observer {replica}'s first state", lambda evs, pid=pid: next(
                (e for e in evs if e.get("pid") == pid and e["ev"] == "observe"), None), START_LIMIT)
        for lang in LANGS:
            runner.candidate(lang)
        for i in range(args.rounds):
            runner.round(LANGS[(i + 1) % len(LANGS)])
        runner.settle()
    except (RuntimeError, OSError, KeyError, subprocess.TimeoutExpired) as error:
        failure = str(error)
    finally:
        if runner is not None:
            runner.read()
            runner.close()
        cluster.close()
    assert runner is not None
    events, problems, exits = runner.events, runner.problems, runner.exits
    for line in figures(events):
        print(line)
    results = evaluate(events, problems, args.rounds, exits)
    results.insert(0, ("the run completed", failure))
    print(f"takeover: {time.monotonic() - began:.1f} s in all, {len(of(events, 'act'))} acts, "
          f"{len(of(events, 'elected'))} terms")
    if any(f is not None for _, f in results):
        print(f"(log and outputs kept in {work})")
    status = report(results)
    if status == 0:
        shutil.rmtree(work, ignore_errors=True)
    return status


# --- selftest ------------------------------------------------------------------


def selftest() -> int:
    """Feeds the checks logs that break each rule, and one that keeps them."""
    S = 10**9

    def e(ev: str, t: float, lang: str = "", pid: int = 0, term: int = 0, **more: object) -> Event:
        return {"ev": ev, "t": int(t * S), "lang": lang, "pid": pid, "term": term, **more}

    def obs(replica: int, t: float, term: int) -> Event:
        return {"ev": "observe", "t": int(t * S), "replica": replica, "has_leader": term > 0, "term": term}

    def acts(lang: str, pid: int, term: int, start: float, end: float) -> List[Event]:
        return [e("act", start + i * 0.05, lang, pid, term) for i in range(int((end - start) / 0.05) + 1)]

    # python leads (1), is killed; go (2) is stopped; java (3) leads, is killed;
    # python again (4), stopped; go (5), killed; node (6).
    good: List[Event] = [
        e("elected", 1.0, "python", 11, 1), *acts("python", 11, 1, 1.0, 2.0), e("kill", 2.01, "python", 11, 1),
        e("elected", 2.2, "go", 22, 2), *acts("go", 22, 2, 2.2, 3.5), e("stop", 3.52, "go", 22, 2),
        e("elected", 6.5, "java", 33, 3), *acts("java", 33, 3, 6.5, 8.0), e("cont", 6.9, "go", 22, 2),
        e("lost", 6.95, "go", 22, 2),
        e("elected", 8.2, "python", 44, 4), *acts("python", 44, 4, 8.2, 9.0), e("kill", 8.1, "java", 33, 3),
        e("stop", 9.01, "python", 44, 4), e("elected", 12.0, "go", 55, 5), *acts("go", 55, 5, 12.0, 12.5),
        e("cont", 12.3, "python", 44, 4), e("lost", 12.31, "python", 44, 4), e("kill", 12.6, "go", 55, 5),
        e("elected", 12.7, "node", 66, 6), *acts("node", 66, 6, 12.7, 13.5),
    ]
    good[good.index(e("kill", 8.1, "java", 33, 3))]["t"] = int(8.05 * S)
    for replica in (0, 1):
        good += [obs(replica, 0.5, 0), obs(replica, 1.1 + replica * 0.5, 1), obs(replica, 2.1, 0),
                 obs(replica, 2.3, 2), obs(replica, 6.6, 3), obs(replica, 8.3, 4), obs(replica, 12.4, 5),
                 obs(replica, 12.8, 6)]

    def without(*kinds: str) -> List[Event]:
        return [x for x in good if x["ev"] not in kinds]

    def everything(events: Sequence[Event]) -> Optional[str]:
        return next((f for _, f in evaluate(events, [], 2, {}) if f), None)

    stale = good + [e("act", 6.6, "go", 22, 2)]  # the resumed leader acts on its old term
    overlap = good + [e("act", 2.25, "python", 11, 1)]  # and it was not even stopped
    thief = good + [e("act", 3.0, "java", 33, 2)]
    back = good + [e("elected", 12.9, "java", 66, 4)]
    slow_kill = [x if not (x["ev"] == "elected" and x["term"] == 2) else e("elected", 2.01 + KILL_BOUND + 0.1, "go", 22, 2)
                 for x in good]
    slow_stop = [x if not (x["ev"] == "elected" and x["term"] == 5) else e("elected", 9.01 + STOP_BOUND + 0.1, "go", 55, 5)
                 for x in good if x.get("lang") != "node"]
    unresumed = without("cont")
    acted_first = good + [e("act", 6.91, "go", 22, 2)]
    observer_back = good + [obs(1, 12.45, 3)]
    observer_missed = [x for x in good if not (x["ev"] == "observe" and x["replica"] == 0 and x["term"] == 3)]
    observer_late = good + [obs(1, 2.3 + OBSERVE_BOUND, 2)]
    observer_late = [x for x in observer_late if not (x["ev"] == "observe" and x["replica"] == 1 and x["term"] == 2
                                                    and x["t"] == int(2.3 * S))]
    no_java = [x for x in good if x.get("lang") != "java"]
    cases: List[Tuple[str, List[Event], Callable[[List[Event]], Optional[str]], bool]] = [
        ("a good log passes every check", good, everything, True),
        ("an act after a higher term's election is caught", stale, check_no_stale_act, False),
        ("overlapping act intervals are caught", overlap, check_one_leader, False),
        ("an act by a process not elected with its term is caught", thief, check_one_leader, False),
        ("a term going back is caught", back, check_terms, False),
        ("a slow take-over after a kill is caught", slow_kill, lambda l: check_takeover(l, "kill", KILL_BOUND, 2), False),
        ("a slow take-over after a stop is caught", slow_stop, lambda l: check_takeover(l, "stop", STOP_BOUND, 2), False),
        ("a missing take-over is caught", [x for x in good if x["ev"] != "elected" or x["term"] in (1, 2, 3, 4)],
         lambda l: check_takeover(l, "stop", STOP_BOUND, 2), False),
        ("too few rounds are caught", good, lambda l: check_takeover(l, "stop", STOP_BOUND, 3), False),
        ("a leader never resumed is caught", unresumed, check_resumed, False),
        ("a resumed leader acting before its loss is caught", acted_first, check_resumed, False),
        ("a resumed leader never reporting its loss is caught",
         [x for x in good if not (x["ev"] == "lost" and x["pid"] == 22)], check_resumed, False),
        ("an observer going back is caught", observer_back, lambda l: check_observer_order(l, 1), False),
        ("an observer's stream broken again and again is caught",
         good + [{"ev": "error", "t": t, "replica": 0, "error": "x"} for t in (5, 6, 7)],
         lambda l: check_observer_order(l, 0), False),
        ("an observer's stream re-opened once is tolerated",
         good + [{"ev": "error", "t": 5, "replica": 0, "error": "x"}],
         lambda l: check_observer_order(l, 0), True),
        ("an observer missing a term is caught", observer_missed, lambda l: check_observer_complete(l, 0), False),
        ("an observer told late is caught", observer_late, lambda l: check_observer_complete(l, 1), False),
        ("a language never leading is caught", no_java, check_every_lang, False),
        ("node never leading is caught", [x for x in good if x.get("lang") != "node"], check_every_lang, False),
        ("a language never frozen is caught", good, check_every_lang_frozen, False),
        ("every language frozen passes",
         good + [e(ev, 20 + i, lang, 70 + i, 7) for i, lang in enumerate(LANGS) for ev in ("stop", "cont")],
         check_every_lang_frozen, True),
        ("a failed campaign is caught", good + [e("error", 3.0, "go", 22, error="unavailable")],
         lambda l: check_no_errors(l, []), False),
        ("a malformed line is caught", good, lambda l: check_no_errors(l, parse("{\"ev\": 1}\n")[1]), False),
    ]
    results = []
    for name, events, check, passes in cases:
        failure = check(events)
        ok = (failure is None) == passes
        results.append((f"selftest: {name}", None if ok else f"check said {failure!r}"))
    return report(results)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--selftest", action="store_true", help="check the checks on made-up logs")
    parser.add_argument("--python", help="a Python with redlockd_client installed")
    parser.add_argument("--go", help="the Go candidate, built")
    parser.add_argument("--java-classpath", help="clients/java's classes and dependencies")
    parser.add_argument("--node", default="node",
                        help="the node binary (clients/node/node_modules installed), default `node`")
    parser.add_argument("--rounds", type=int, default=len(LANGS),
                        help="kill and stop rounds (default one per language)")
    args = parser.parse_args()
    if args.selftest:
        return selftest()
    # A `timeout` around this script sends SIGTERM: exit through the
    # `finally` blocks, so no candidate is left SIGSTOPped or running.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    missing = [k for k in ("python", "go", "java_classpath") if not getattr(args, k)]
    if missing:
        parser.error("missing " + ", ".join("--" + k.replace("_", "-") for k in missing))
    # The processes run in HERE: a path given relative to the caller's directory.
    args.python, args.go, args.node = (p if os.sep not in p else os.path.abspath(p)
                                       for p in (args.python, args.go, args.node))
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
