"""redlockd from Python: the three things a client has to get right.

1. Acquire with a wait, do the work, release in `finally`; handle the status
   codes (ABORTED: busy, UNAVAILABLE: retry later).
2. A fenced resource: pass the lock's fence with every write, and let the
   resource refuse a fence smaller than the largest it has seen. A holder
   that paused past its lock's validity is then harmless.
3. A `Hold` session: the daemon keeps the lock while the stream is open; on
   `lost`, stop working at once.

Usage: lock_example.py [ADDR] [--hold-seconds N]
ADDR defaults to $REDLOCK_ADDR, else 127.0.0.1:50051. Exits 0 when all
three went as expected, 3 if the session's lock was lost, 1 on any other
unexpected outcome.
"""

import argparse
import os
import pathlib
import queue
import sys
import threading
import time

import grpc

HERE = pathlib.Path(__file__).resolve().parent
PROTO_ROOT = HERE.parent.parent / "proto"
GENERATED = HERE / "_generated"

EXIT_LOST = 3


def load_stubs():
    """Generates the gRPC stubs from ../../proto into _generated/ (not
    committed) and imports them."""
    import grpc_tools
    from grpc_tools import protoc

    GENERATED.mkdir(exist_ok=True)
    well_known = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    status = protoc.main([
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--python_out={GENERATED}",
        f"--grpc_python_out={GENERATED}",
        str(PROTO_ROOT / "redlock" / "v1" / "lock.proto"),
    ])
    if status != 0:
        raise SystemExit(f"protoc failed on {PROTO_ROOT} ({status})")
    sys.path.insert(0, str(GENERATED))
    from redlock.v1 import lock_pb2, lock_pb2_grpc  # noqa: E402

    return lock_pb2, lock_pb2_grpc


pb, rpc = load_stubs()
from google.protobuf.duration_pb2 import Duration  # noqa: E402  (after the stubs)


def seconds(s):
    return Duration(seconds=int(s), nanos=int((s - int(s)) * 1e9))


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


def acquire_and_release(stub, store):
    """1. Acquire with a wait; work; release in `finally`."""
    try:
        lock = stub.Acquire(
            pb.AcquireRequest(resource="examples/report", ttl=seconds(10), wait=seconds(5), owner="python-example"),
            timeout=15,
        ).lock
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.ABORTED:
            print("busy: someone else held examples/report for the whole wait")
        elif error.code() == grpc.StatusCode.UNAVAILABLE:
            print(f"not enough masters answered; nothing is locked; retry later: {error.details()}")
        raise
    print(f"1. acquired {lock.resource} fence={lock.fence} valid for {lock.validity.ToTimedelta()}")
    try:
        store.write("report", "generated", lock.fence)  # the critical section
    finally:
        was_held = stub.Release(pb.ReleaseRequest(resource=lock.resource, token=lock.token), timeout=5).was_held
        if not was_held:
            # The lock expired before the release: another holder may have overlapped.
            print("warning: the lock had expired before the release", file=sys.stderr)
    print(f"   released (was_held={was_held})")


def stale_holder_is_refused(stub, store):
    """2. A holder that pauses past its validity: its late write is refused."""
    slow = stub.Acquire(pb.AcquireRequest(resource="examples/row", ttl=seconds(0.3)), timeout=5).lock
    # ... and `slow` pauses (GC, swap) for longer than 0.3 s, without knowing.
    # The next client waits; it is granted the lock when `slow`'s expires.
    fast = stub.Acquire(pb.AcquireRequest(resource="examples/row", ttl=seconds(10), wait=seconds(5)), timeout=10).lock
    assert fast.fence > slow.fence, (fast.fence, slow.fence)
    store.write("row", "fast's value", fast.fence)
    try:
        store.write("row", "slow's value", slow.fence)  # `slow` wakes up and writes
    except StaleFence as refused:
        print(f"2. the stale holder's write was refused: {refused}")
    else:
        raise AssertionError("a stale fence was accepted")
    finally:
        stub.Release(pb.ReleaseRequest(resource=fast.resource, token=fast.token), timeout=5)
    assert store.data["row"] == "fast's value"


class Session:
    """A Hold session: requests go through a queue; a thread reads events."""

    def __init__(self, stub, resource, ttl):
        self.requests = queue.Queue()
        self.requests.put(pb.HoldRequest(acquire=pb.AcquireRequest(resource=resource, ttl=seconds(ttl))))
        self.events = stub.Hold(iter(self.requests.get, None))
        first = next(self.events)
        if first.WhichOneof("event") != "acquired":
            raise RuntimeError(f"expected `acquired`, got {first}")
        self.lock = first.acquired
        self.lost = threading.Event()
        self.lost_reason = None
        self.extensions = 0
        self.released = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        try:
            for event in self.events:
                kind = event.WhichOneof("event")
                if kind == "extended":
                    self.extensions += 1
                elif kind == "lost":
                    self.lost_reason = event.lost.reason
                    self.lost.set()  # the worker checks this before every step
                elif kind == "released":
                    self.released = event.released.was_held
        except grpc.RpcError as error:
            # The stream broke: the lock is no longer guaranteed.
            self.lost_reason = f"stream broke: {error.code().name}"
            self.lost.set()
        if self.released is None:
            self.lost_reason = self.lost_reason or "the session ended"
            self.lost.set()

    def release(self):
        self.requests.put(pb.HoldRequest(release=pb.HoldRequest.Release()))
        self.reader.join(timeout=5)
        self.close()
        return self.released

    def close(self):
        self.requests.put(None)  # ends the request stream (a half-close)


def hold_session(stub, store, hold_seconds):
    """3. Work in small steps inside a session; stop the moment it is lost."""
    session = Session(stub, "examples/session", ttl=1)
    print(f"3. holding {session.lock.resource} fence={session.lock.fence}", flush=True)
    deadline = time.monotonic() + hold_seconds
    step = 0
    while time.monotonic() < deadline:
        if session.lost.is_set():
            print(f"   lock lost after {step} steps ({session.lost_reason}): work abandoned", flush=True)
            session.close()
            return EXIT_LOST
        store.write("session", f"step {step}", session.lock.fence)
        step += 1
        time.sleep(0.05)
    was_held = session.release()
    print(f"   {step} steps, {session.extensions} extensions, released (was_held={was_held})")
    if not was_held or session.extensions < 1:
        raise AssertionError("the session should have been extended and still held")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("addr", nargs="?", default=os.environ.get("REDLOCK_ADDR", "127.0.0.1:50051"))
    parser.add_argument("--hold-seconds", type=float, default=1.5)
    args = parser.parse_args()
    addr = args.addr.removeprefix("http://")
    with grpc.insecure_channel(addr) as channel:
        stub = rpc.LockServiceStub(channel)
        store = FencedStore()
        try:
            acquire_and_release(stub, store)
            stale_holder_is_refused(stub, store)
            code = hold_session(stub, store, args.hold_seconds)
        except grpc.RpcError as error:
            print(f"unexpected status {error.code().name}: {error.details()}", file=sys.stderr)
            return 1
        except (AssertionError, RuntimeError) as error:
            print(f"unexpected: {error!r}", file=sys.stderr)
            return 1
    if code == 0:
        print("ok")
    return code


if __name__ == "__main__":
    sys.exit(main())
