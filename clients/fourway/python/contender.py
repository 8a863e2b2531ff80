"""The Python contender of the four-runtime test (clients/fourway/harness.py).

    python contender.py ADDRESS LOG ROUNDS

Holds ``fourway/shared`` ROUNDS times through ``Client.hold``. In each
critical section it appends ``python <fence> start <ns>`` to LOG, sleeps a
few random milliseconds, checks the lease, and appends ``python <fence>
end <ns>`` (or ``lost``); after the release it appends ``unheld`` if the
daemon said the lock was no longer held. Each line is one O_APPEND write.
A retryable failure (UNAVAILABLE: masters slower than node_timeout on a
starved machine) is retried, up to ATTEMPTS times per section, if it comes
before the section; a release that fails after it is reported on stderr and
left to the ttl (the section itself was done under the lock).
Times are CLOCK_MONOTONIC nanoseconds (``time.monotonic_ns``), the clock
the other three contenders read too. Exits 1 if the lock was ever lost.
"""

from __future__ import annotations

import os
import random
import sys
import time

from redlockd_client import Client, LockLost, RedlockdError

RUNTIME = "python"
RESOURCE = "fourway/shared"
#: Tries per section on retryable failures.
ATTEMPTS = 20


def main() -> int:
    address, log, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def line(fence: int, what: str) -> None:
        os.write(fd, f"{RUNTIME} {fence} {what} {time.monotonic_ns()}\n".encode())

    line(0, "clock")
    status = 0
    with Client(address, timeout=90) as client:
        for _ in range(rounds):
            for attempt in range(ATTEMPTS):
                lease = None
                try:
                    with client.hold(RESOURCE, ttl=5, wait=60) as lease:
                        line(lease.fence, "start")
                        time.sleep(random.uniform(0.005, 0.025))
                        try:
                            lease.check()
                            line(lease.fence, "end")
                        except LockLost:
                            line(lease.fence, "lost")
                            status = 1
                except RedlockdError as error:
                    if lease is None and error.retryable and attempt + 1 < ATTEMPTS:
                        continue
                    if lease is None:
                        raise
                    print(f"python contender: release: {error}", file=sys.stderr)
                if lease is not None and lease.was_held is False:
                    line(lease.fence, "unheld")
                    status = 1
                break
            # Outside the lock: a pause that lets the other runtimes in.
            time.sleep(random.uniform(0.01, 0.03))
    os.close(fd)
    return status


if __name__ == "__main__":
    sys.exit(main())
