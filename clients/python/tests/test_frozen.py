"""A real client process frozen with SIGSTOP while it holds a Hold session,
past its lock's validity (a stop-the-world pause, a suspended VM): the lock
passes on while it is frozen, and once resumed with SIGCONT the client is
told its lock is lost before it does anything more under it."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Optional

from redlockd_client import Client

#: Bound on every wait for the child or the daemon.
LIMIT = 30.0

#: The holder: grants, then acts under its lock only after `check()`, and
#: says each time it acts and when it learns the lock is gone (monotonic
#: seconds, the clock this process shares with the test's).
CHILD = textwrap.dedent(
    """
    import sys, time
    from redlockd_client import Client, LockLost

    address, resource = sys.argv[1], sys.argv[2]
    with Client(address, timeout=30) as client:
        with client.hold(resource, ttl=1, wait=10) as lease:
            print("held", lease.fence, flush=True)
            while True:
                try:
                    lease.check()
                except LockLost as lost:
                    print("lost", time.monotonic(), lost, flush=True)
                    break
                print("act", time.monotonic(), flush=True)
                time.sleep(0.02)
    """
)


def lines_of(process: subprocess.Popen) -> "queue.Queue[Optional[str]]":
    """The child's stdout lines, read by a thread (None at the end)."""
    lines: "queue.Queue[Optional[str]]" = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.strip())
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def next_line(lines: "queue.Queue[Optional[str]]") -> str:
    line = lines.get(timeout=LIMIT)
    assert line is not None, "the child ended early"
    return line


def test_resumed_client_is_told_lost_before_acting(
    client: Client, daemon, resource: str, tmp_path
) -> None:
    script = tmp_path / "holder.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), daemon.address, resource],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        lines = lines_of(child)
        assert next_line(lines).startswith("held ")
        assert next_line(lines).startswith("act ")
        os.kill(child.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        # The daemon notices the frozen client (keepalive) and releases:
        # a waiter gets the lock while the holder is still frozen.
        taken = client.acquire(resource, ttl=5, wait=LIMIT)
        passed_on = time.monotonic() - stopped
        # Everything the child printed before the freeze.
        while True:
            try:
                line = lines.get_nowait()
            except queue.Empty:
                break
            assert line is not None and line.startswith("act ")
            assert float(line.split()[1]) < stopped + 0.5
        resumed = time.monotonic()
        os.kill(child.pid, signal.SIGCONT)
        first = next_line(lines)
        kind, at = first.split()[:2]
        assert kind == "lost", f"acted under a lock that passed on: {first}"
        assert float(at) >= resumed
        assert "validity ran out" in first or "stream" in first, first
        assert child.wait(LIMIT) == 0
        print(f"lock passed on {passed_on:.2f}s after SIGSTOP; resumed holder told: {first}")
        client.release(taken)
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGCONT)
            child.kill()
            child.wait(LIMIT)
