"""What the client costs: acquire+release cycles through `Client` beside the
same calls through the raw generated stub, one after the other on one
connection, against a running daemon. Prints figures; asserts nothing.

    python tools/bench.py 127.0.0.1:50051 [--cycles 500]
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, List, Tuple

import grpc

from redlockd_client import Client, RedlockdError
from redlockd_client._generated import lock_pb2, lock_pb2_grpc
from redlockd_client._types import duration


def measure(cycle: Callable[[int], None], cycles: int) -> Tuple[List[float], int]:
    """Seconds each successful cycle took, after a short warm-up, and how
    many cycles failed with a retryable status (UNAVAILABLE: masters slower
    than node_timeout on a loaded machine), which are left out."""
    for i in range(min(50, cycles)):
        try:
            cycle(-1 - i)
        except (grpc.RpcError, RedlockdError):
            pass
    times, failed = [], 0
    for i in range(cycles):
        started = time.perf_counter()
        try:
            cycle(i)
        except grpc.RpcError as error:
            if error.code() != grpc.StatusCode.UNAVAILABLE:
                raise
            failed += 1
            continue
        except RedlockdError as error:
            if not error.retryable:
                raise
            failed += 1
            continue
        times.append(time.perf_counter() - started)
    return times, failed


def report(name: str, measured: Tuple[List[float], int]) -> float:
    times, failed = measured
    p50 = statistics.median(times) * 1e3
    p99 = sorted(times)[max(0, int(len(times) * 0.99) - 1)] * 1e3
    print(
        f"{name:<10} p50 {p50:.3f} ms  p99 {p99:.3f} ms  "
        f"{len(times) / sum(times):.0f} cycles/s  ({failed} retryable failures left out)"
    )
    return p50


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("address")
    parser.add_argument("--cycles", type=int, default=500)
    args = parser.parse_args()

    channel = grpc.insecure_channel(args.address)
    stub = lock_pb2_grpc.LockServiceStub(channel)  # type: ignore[no-untyped-call]
    ttl = duration(10)

    def raw(i: int) -> None:
        lock = stub.Acquire(lock_pb2.AcquireRequest(resource=f"bench/raw/{i}", ttl=ttl)).lock
        stub.Release(lock_pb2.ReleaseRequest(resource=lock.resource, token=lock.token))

    client = Client(args.address)

    def packaged(i: int) -> None:
        client.release(client.acquire(f"bench/client/{i}", ttl=10))

    print(f"acquire+release, one at a time, {args.cycles} cycles each")
    base = report("raw stub", measure(raw, args.cycles))
    ours = report("Client", measure(packaged, args.cycles))
    print(f"Client over raw stub: {100 * (ours - base) / base:+.1f}% at p50")
    client.close()
    channel.close()


if __name__ == "__main__":
    main()
