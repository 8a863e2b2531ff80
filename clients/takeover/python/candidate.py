"""The Python candidate (and the observer) of the take-over run
(clients/takeover/harness.py).

    python candidate.py ADDRESS LOG TTL_MS            # campaign, forever
    python candidate.py --observe ADDRESS LOG REPLICA  # record every change

A candidate campaigns for the election ``takeover`` with the value
``python-<pid>`` through ``client.campaign``; elected, it acts every
ACT_EVERY seconds while ``leadership.check()`` passes, then, once it
raises, records the loss and campaigns again. An observer records each
state ``client.observe`` yields. Every event is one JSON line, one
O_APPEND write to LOG:

    {"ev": "campaign", "lang": "python", "pid": P, "t": NS}
    {"ev": "elected",  "lang": ..., "pid": ..., "term": T, "t": NS, "wall": S}
    {"ev": "act",      "lang": ..., "pid": ..., "term": T, "t": NS, "rem_ms": R}
    {"ev": "lost",     "lang": ..., "pid": ..., "term": T, "t": NS, "reason": "..."}
    {"ev": "observe",  "replica": I, "pid": P, "has_leader": B, "term": T, "value": V, "t": NS}

``t`` is CLOCK_MONOTONIC nanoseconds (``time.monotonic_ns``), the clock
the Go, Java and Node candidates and the harness read too. An act's ``t`` is
read before the check that lets it happen: the check is the gate a
resumed leader must not pass with a stale term. ``rem_ms`` is the
validity the client says is left at that act.
"""

from __future__ import annotations

import json
import os
import sys
import time

from redlockd_client import Client, LeadershipLost, RedlockdError

LANG = "python"
ELECTION = "takeover"
#: Seconds between two acts of a leader.
ACT_EVERY = 0.05


def writer(path: str):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(event: dict) -> None:
        event.setdefault("t", time.monotonic_ns())
        os.write(fd, (json.dumps(event) + "\n").encode())

    return write


def campaign(address: str, log: str, ttl_ms: int) -> int:
    write = writer(log)
    me = {"lang": LANG, "pid": os.getpid()}
    with Client(address, timeout=30) as client:
        while True:
            write({"ev": "campaign", **me})
            try:
                with client.campaign(ELECTION, value=f"{LANG}-{os.getpid()}", ttl=ttl_ms / 1000) as leadership:
                    term = leadership.term
                    write({"ev": "elected", **me, "term": term, "wall": time.time()})
                    while True:
                        t = time.monotonic_ns()
                        try:
                            leadership.check()
                        except LeadershipLost as lost:
                            write({"ev": "lost", **me, "term": term, "reason": str(lost)})
                            break
                        write({"ev": "act", **me, "term": term, "t": t,
                               "rem_ms": round(leadership.remaining() * 1000)})
                        time.sleep(ACT_EVERY)
            except RedlockdError as error:
                # Not elected (the daemon refused, or the stream broke while
                # waiting): say so and stand again.
                write({"ev": "error", **me, "error": str(error)})
                time.sleep(0.1)


def observe(address: str, log: str, replica: int) -> int:
    write = writer(log)
    with Client(address, timeout=30) as client:
        while True:
            try:
                with client.observe(ELECTION) as changes:
                    for leader in changes:
                        write({"ev": "observe", "replica": replica, "pid": os.getpid(),
                               "has_leader": leader is not None,
                               "term": leader.term if leader else 0,
                               "value": leader.value if leader else ""})
            except RedlockdError as error:
                write({"ev": "error", "replica": replica, "pid": os.getpid(), "error": str(error)})
                time.sleep(0.1)


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--observe":
        return observe(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    if len(sys.argv) == 4:
        return campaign(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
