"""Python's row of scripts/bench-clients.sh: what redlockd_client costs beside
the raw generated stub (the package's own _generated modules), against a
running daemon. Prints one JSON line per way; asserts nothing.

    python bench.py ADDRESS SECONDS ROUNDS

The method, shared by the four languages' bench programs: a warm-up; then,
ROUNDS times, alternating raw and client, C=1 (acquire+release one after
another on one resource for SECONDS; the p50 of a cycle); then, ROUNDS times
alternating, C=64 (64 workers, threads here, each cycling on its own
resource for SECONDS; cycles per second). The median over the rounds is
reported. A cycle that fails counts as failed, not as done.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from typing import Callable, Dict, List

import grpc

from redlockd_client import Client
from redlockd_client._generated import lock_pb2, lock_pb2_grpc
from redlockd_client._types import duration

Cycle = Callable[[str], None]


def c1(cycle: Cycle, resource: str, seconds: float) -> float:
    times: List[float] = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        started = time.perf_counter()
        cycle(resource)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


def c64(cycle: Cycle, prefix: str, seconds: float) -> Dict[str, float]:
    done = [0] * 64
    failed = [0] * 64
    end = time.perf_counter() + seconds

    def worker(i: int) -> None:
        while time.perf_counter() < end:
            try:
                cycle(f"{prefix}/{i}")
                done[i] += 1
            except Exception:  # counted, not hidden
                failed[i] += 1

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"rate": sum(done) / (time.perf_counter() - started), "failed": sum(failed)}


def main() -> None:
    address, seconds, rounds = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    channel = grpc.insecure_channel(address)
    stub = lock_pb2_grpc.LockServiceStub(channel)  # type: ignore[no-untyped-call]
    ttl = duration(10)

    def raw(resource: str) -> None:
        lock = stub.Acquire(lock_pb2.AcquireRequest(resource=resource, ttl=ttl), timeout=10).lock
        stub.Release(lock_pb2.ReleaseRequest(resource=resource, token=lock.token), timeout=10)

    client = Client(address, timeout=10)

    def packaged(resource: str) -> None:
        client.release(client.acquire(resource, ttl=10))

    ways: Dict[str, Cycle] = {"raw": raw, "client": packaged}
    for name, cycle in ways.items():
        for _ in range(50):
            cycle(f"bench/python/warm/{name}")
    p50: Dict[str, List[float]] = {name: [] for name in ways}
    rate: Dict[str, List[float]] = {name: [] for name in ways}
    failed = {name: 0.0 for name in ways}
    for _ in range(rounds):
        for name, cycle in ways.items():
            p50[name].append(c1(cycle, f"bench/python/c1/{name}", seconds))
    for _ in range(rounds):
        for name, cycle in ways.items():
            result = c64(cycle, f"bench/python/c64/{name}", seconds)
            rate[name].append(result["rate"])
            failed[name] += result["failed"]
    for name in ways:
        print(json.dumps({
            "lang": "python", "way": name,
            "c1_p50_ms": statistics.median(p50[name]), "c64_cycles_per_s": statistics.median(rate[name]),
            "c64_failed": failed[name],
        }))
    client.close()
    channel.close()


if __name__ == "__main__":
    main()
