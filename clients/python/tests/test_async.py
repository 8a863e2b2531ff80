"""The asyncio twin: the same calls awaited, and `async with
client.hold(...)` with its `lost` signal."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest

from redlockd_client import AsyncClient, InvalidArgument, LockHeld, LockLost, LockNotHeld

LIMIT = 30.0


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 120))


def test_calls(daemon, resource: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(daemon.address, timeout=30) as client:
            before = time.monotonic()
            lock = await client.acquire(resource, ttl=10)
            assert lock.valid_until >= before + lock.validity
            with pytest.raises(LockHeld):
                await client.acquire(resource, ttl=10, wait=0.2)
            assert (await client.validate(lock)).held
            extended = await client.extend(lock, ttl=10)
            assert extended.fence == lock.fence
            assert (await client.release(lock)).was_held
            assert not (await client.release(lock)).was_held
            with pytest.raises(LockNotHeld):
                await client.extend(lock, ttl=10)
            with pytest.raises(InvalidArgument) as bad:
                await client.acquire(resource, ttl=0)
            assert bad.value.details.startswith("ttl")
            assert bad.value.code == grpc.StatusCode.INVALID_ARGUMENT

    run(scenario())


def test_wait_woken_by_release(daemon, resource: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(daemon.address, timeout=30) as client:
            held = await client.acquire(resource, ttl=30)
            waiter = asyncio.ensure_future(client.acquire(resource, ttl=10, wait=25))
            await asyncio.sleep(0.3)
            assert not waiter.done()  # only the release can let it in
            await client.release(held)
            lock = await asyncio.wait_for(waiter, LIMIT)
            assert lock.fence > held.fence
            await client.release(lock)

    run(scenario())


def test_hold_extended_and_released(daemon, resource: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(daemon.address, timeout=30) as client:
            async with client.hold(resource, ttl=1, wait=5) as lease:
                deadline = time.monotonic() + LIMIT
                while lease.extensions < 4:  # outlives its ttl
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.02)
                lease.check()
                with pytest.raises(LockHeld):
                    await client.acquire(resource, ttl=1)
            assert lease.was_held is True
            assert not lease.lost.is_set()
            with pytest.raises(LockLost):
                lease.check()

    async def contention() -> None:
        async with AsyncClient(daemon.address, timeout=30) as client:
            held = await client.acquire(resource, ttl=10)
            with pytest.raises(LockHeld):
                async with client.hold(resource, ttl=1, wait=0.2):
                    pytest.fail("granted a held lock")
            await client.release(held)

    run(scenario())
    run(contention())


def test_hold_lost_when_three_masters_stop(own_cluster, resource: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(own_cluster.daemon.address, timeout=30) as client:
            async with client.hold(resource, ttl=1) as lease:
                lease.check()
                for i in (2, 3, 4):
                    own_cluster.masters.stop(i)
                await asyncio.wait_for(lease.lost.wait(), LIMIT)
                assert "could not extend" in (lease.reason or "")
                with pytest.raises(LockLost):
                    lease.check()

    run(scenario())
