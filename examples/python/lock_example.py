"""redlockd from Python, with the redlockd-client package: the three things
a client has to get right.

1. Acquire with a wait, do the work, release in `finally`; busy is
   `LockHeld`, too few masters is `Unavailable` (safe to retry).
2. A fenced resource: pass the lock's fence with every write, and let the
   resource refuse a fence smaller than the largest it has seen. A holder
   that paused past its lock's validity is then harmless.
3. A `Hold` session: the daemon keeps the lock while the block runs. The
   lease is lost when the daemon says `lost`, ends the session without
   being asked (`released`), or the stream ends: `lease.check()` raises
   `LockLost` then, and the work stops.

Usage: lock_example.py [ADDR] [--hold-seconds N]
ADDR defaults to $REDLOCK_ADDR, else 127.0.0.1:50051. Exits 0 when all
three went as expected, 3 if the session's lock was lost, 1 on any other
unexpected outcome.
"""

import argparse
import os
import sys
import time

from redlockd_client import Client, LockHeld, LockLost, RedlockdError

EXIT_LOST = 3


class StaleFence(Exception):
    """A write carried a fence older than one the store has seen."""


class FencedStore:
    """A toy resource that checks fences, as a database row, a file store or
    a queue consumer should: it keeps the largest fence seen and refuses any
    smaller one (equal is the same holder writing again)."""

    def __init__(self):
        self.max_fence = 0
        self.data = {}

    def write(self, key, value, fence):
        if fence < self.max_fence:
            raise StaleFence(f"fence {fence} < {self.max_fence}")
        self.max_fence = fence
        self.data[key] = value


def acquire_and_release(client, store):
    """1. Acquire with a wait; work; release in `finally`."""
    try:
        lock = client.acquire("examples/report", ttl=10, wait=5, owner="python-example")
    except LockHeld:
        print("busy: someone else held examples/report for the whole wait")
        raise
    print(f"1. acquired {lock.resource} fence={lock.fence} valid for {lock.validity:.3f}s")
    try:
        store.write("report", "generated", lock.fence)  # the critical section
    finally:
        released = client.release(lock)
    if not released.was_held:
        # The lock expired before the release: another holder may have overlapped.
        print("warning: the lock had expired before the release", file=sys.stderr)
    print(f"   released (was_held={released.was_held})")


def stale_holder_is_refused(client, store):
    """2. A holder that pauses past its validity: its late write is refused."""
    slow = client.acquire("examples/row", ttl=0.3)
    # ... and `slow` pauses (GC, swap) for longer than 0.3 s, without knowing.
    # The next client waits; it is granted the lock when `slow`'s expires.
    fast = client.acquire("examples/row", ttl=10, wait=5)
    assert fast.fence > slow.fence, (fast.fence, slow.fence)
    try:
        store.write("row", "fast's value", fast.fence)
        try:
            store.write("row", "slow's value", slow.fence)  # `slow` wakes up and writes
        except StaleFence as refused:
            print(f"2. the stale holder's write was refused: {refused}")
        else:
            raise AssertionError("a stale fence was accepted")
    finally:
        client.release(fast)
    assert store.data["row"] == "fast's value"


def hold_session(client, store, hold_seconds):
    """3. Work in small steps inside a session; stop the moment it is lost."""
    step = 0
    with client.hold("examples/session", ttl=2) as lease:
        print(f"3. holding {lease.resource} fence={lease.fence}", flush=True)
        deadline = time.monotonic() + hold_seconds
        try:
            while time.monotonic() < deadline:
                lease.check()  # raises LockLost once the lock is gone
                store.write("session", f"step {step}", lease.fence)
                step += 1
                lease.lost.wait(0.05)  # the pause between steps ends early on loss
        except LockLost as lost:
            print(f"   lock lost after {step} steps ({lost.details}): work abandoned", flush=True)
            return EXIT_LOST
    print(f"   {step} steps, {lease.extensions} extensions, released (was_held={lease.was_held})")
    if not lease.was_held or lease.extensions < 1:
        raise AssertionError("the session should have been extended and still held")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("addr", nargs="?", default=os.environ.get("REDLOCK_ADDR", "127.0.0.1:50051"))
    parser.add_argument("--hold-seconds", type=float, default=1.5)
    args = parser.parse_args()
    with Client(args.addr, timeout=30) as client:
        store = FencedStore()
        try:
            acquire_and_release(client, store)
            stale_holder_is_refused(client, store)
            code = hold_session(client, store, args.hold_seconds)
        except RedlockdError as error:
            print(f"unexpected: {error}", file=sys.stderr)
            return 1
        except AssertionError as error:
            print(f"unexpected: {error!r}", file=sys.stderr)
            return 1
    if code == 0:
        print("ok")
    return code


if __name__ == "__main__":
    sys.exit(main())
