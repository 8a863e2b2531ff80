"""After a deadline or cancellation nothing is left locked: an acquire
that ends without the daemon's answer releases the token its request id
derives, in the background; one the daemon answered releases nothing."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Callable, List

import pytest

from redlockd_client import AsyncClient, Client, DeadlineExceeded, LockHeld
from redlockd_client._types import derived_token

# ``daemon.slow_answers(0.3)``: the address of the launcher's proxy to the
# daemon that passes the client's bytes at once and delivers the daemon's
# 0.3 s after it sent them, so the daemon grants in time and its answer
# arrives after the client's deadline fired.

#: A leak stays for the ttl: 30 s, far beyond the polls below.
TTL = 30
CALLS = 50


def acquirable_within(client: Client, resource: str, limit: float = 2.0) -> None:
    """``resource`` can be acquired at once (no wait) within ``limit``: a
    lock left behind for its ttl fails it."""
    until = time.monotonic() + limit
    while True:
        try:
            client.release(client.acquire(resource, ttl=5, timeout=2))
            return
        except LockHeld:
            if time.monotonic() > until:
                pytest.fail(f"{resource} still locked {limit} s later")
            time.sleep(0.02)


def tally(outcomes: List[str]) -> str:
    return ", ".join(f"{outcomes.count(o)} {o}" for o in sorted(set(outcomes)))


def test_derived_token_is_the_daemons(client: Client, resource: str) -> None:
    # lock.proto's recipe, and the daemon's own test vector.
    assert derived_token("orders/42", "A" * 22) == "df346cfde84a8078cf125d1c05366bf4"
    request_id = "B" * 22
    lock = client.acquire(resource, ttl=5, request_id=request_id)
    assert lock.token == derived_token(resource, request_id)
    client.release(lock)
    shared = client.acquire(resource, ttl=5, request_id=request_id, shared=True)
    assert shared.token == derived_token(resource, request_id, shared=True)
    client.release(shared)


def acquire_all(call: Callable[[str], Any], resource: str) -> List[str]:
    outcomes = []
    for i in range(CALLS):
        try:
            call(f"{resource}/{i}")
            outcomes.append("granted")
        except DeadlineExceeded:
            outcomes.append("deadline")
    return outcomes


def test_a_tiny_deadline_leaves_nothing_locked(daemon, client: Client, resource: str) -> None:
    """The reviewer's case: a 1 ms deadline, 50 times."""

    def call(name: str) -> None:
        client.release(client.acquire(name, ttl=TTL, timeout=0.001))

    outcomes = acquire_all(call, resource)
    print(tally(outcomes), client._background_releases, "released in the background")
    with Client(daemon.address) as other:
        for i in range(CALLS):
            acquirable_within(other, f"{resource}/{i}")


def test_a_grant_answered_after_the_deadline_leaves_nothing_locked(
    daemon, client: Client, resource: str
) -> None:
    """The same made certain: every answer arrives 300 ms after the daemon
    sent it, so each grant (well within the daemon's cut-off of a 100 ms
    deadline) reaches the client after its deadline. Without the release,
    every one of these resources stays locked for 30 s."""
    with Client(daemon.slow_answers(0.3)) as slow:
        slow.validate(resource, "0" * 32, timeout=10)  # connected first

        def call(name: str) -> None:
            slow.release(slow.acquire(name, ttl=TTL, timeout=0.1))

        outcomes = acquire_all(call, resource)
        print(tally(outcomes), slow._background_releases, "released in the background")
        for i in range(CALLS):
            acquirable_within(client, f"{resource}/{i}")


def test_async_deadlines_and_cancellations_leave_nothing_locked(
    daemon, client: Client, resource: str
) -> None:
    """asyncio: the call's own timeout (even calls) and the caller's
    cancellation (odd calls, asyncio.wait_for) alike, answers 300 ms late."""
    proxy = daemon.slow_answers(0.3)

    async def scenario() -> List[str]:
        outcomes = []
        async with AsyncClient(proxy) as slow:
            await slow.validate(resource, "0" * 32, timeout=10)
            for i in range(CALLS):
                name = f"{resource}/{i}"
                try:
                    if i % 2 == 0:
                        lock = await slow.acquire(name, ttl=TTL, timeout=0.1)
                    else:
                        lock = await asyncio.wait_for(slow.acquire(name, ttl=TTL, timeout=10), 0.1)
                    await slow.release(lock)
                    outcomes.append("granted")
                except DeadlineExceeded:
                    outcomes.append("deadline")
                except asyncio.TimeoutError:
                    outcomes.append("cancelled")
            print(tally(outcomes), slow._background_releases, "released in the background")
        return outcomes

    asyncio.run(asyncio.wait_for(scenario(), 120))
    for i in range(CALLS):
        acquirable_within(client, f"{resource}/{i}")


def test_the_daemons_answer_starts_no_release(daemon, client: Client, resource: str) -> None:
    holder = client.acquire(resource, ttl=TTL)
    proxy = daemon.slow_answers(0.3)
    try:
        # ABORTED, then DEADLINE_EXCEEDED answered at the daemon's cut-off,
        # 20 ms before the client's deadline (on a loaded machine the answer
        # may come later than the deadline, and then cannot be told from a
        # local expiry: a few tries).
        with pytest.raises(LockHeld):
            client.acquire(resource, ttl=1)
        assert client._background_releases == 0
        for _ in range(3):
            before = client._background_releases
            with pytest.raises(DeadlineExceeded):
                client.acquire(resource, ttl=1, wait=20, timeout=0.3)
            if client._background_releases == before:
                break
        else:
            pytest.fail("every DEADLINE_EXCEEDED the daemon answered started a release")
        # A deadline that ran out in the client (the answer 300 ms late) does.
        with Client(proxy) as slow:
            slow.validate(resource, "0" * 32, timeout=10)
            with pytest.raises(DeadlineExceeded):
                slow.acquire(resource, ttl=1, timeout=0.1)
            assert slow._background_releases == 1
    finally:
        client.release(holder)


def test_the_daemons_answer_starts_no_release_async(daemon, resource: str) -> None:
    proxy = daemon.slow_answers(0.3)

    async def scenario() -> None:
        async with AsyncClient(daemon.address, timeout=30) as client:
            holder = await client.acquire(resource, ttl=TTL)
            with pytest.raises(LockHeld):
                await client.acquire(resource, ttl=1)
            assert client._background_releases == 0
            for _ in range(3):  # as in the blocking test
                before = client._background_releases
                with pytest.raises(DeadlineExceeded):
                    await client.acquire(resource, ttl=1, wait=20, timeout=0.3)
                if client._background_releases == before:
                    break
            else:
                pytest.fail("every DEADLINE_EXCEEDED the daemon answered started a release")
            async with AsyncClient(proxy) as slow:
                await slow.validate(resource, "0" * 32, timeout=10)
                with pytest.raises(DeadlineExceeded):
                    await slow.acquire(resource, ttl=1, timeout=0.1)
                assert slow._background_releases == 1
            await client.release(holder)

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_retry_with_the_same_request_id_keeps_its_lock(daemon, client: Client, resource: str) -> None:
    """The retry gets the same token; the client waits for its background
    release of the unanswered call first, so it does not release the retry."""
    with Client(daemon.slow_answers(0.3)) as slow:
        slow.validate(resource, "0" * 32, timeout=10)
        request_id = "C" * 22
        with pytest.raises(DeadlineExceeded):
            slow.acquire(resource, ttl=TTL, timeout=0.1, request_id=request_id)
        retried = slow.acquire(resource, ttl=TTL, wait=5, timeout=10, request_id=request_id)
        time.sleep(0.5)
        assert client.validate(retried).held
        slow.release(retried)
