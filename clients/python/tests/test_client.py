"""The blocking client against a real daemon and real masters."""

from __future__ import annotations

import datetime
import secrets
import threading
import time

import grpc
import pytest

from redlockd_client import (
    Client,
    InvalidArgument,
    LockHeld,
    LockNotHeld,
    RedlockdError,
    Unavailable,
)


def test_grant_carries_a_fence_and_validity_from_the_send(client: Client, resource: str) -> None:
    before = time.monotonic()
    first = client.acquire(resource, ttl=10)
    after = time.monotonic()
    assert first.resource == resource
    assert len(first.token) == 32
    assert first.token not in repr(first)
    assert 0 < first.validity <= 10
    # Counted from the send: no later than the answer plus the validity.
    assert before + first.validity <= first.valid_until <= after + first.validity
    assert client.release(first).was_held
    second = client.acquire(resource, ttl=datetime.timedelta(seconds=10))
    assert second.fence > first.fence
    assert client.release(second.resource, second.token).was_held


def test_retry_with_the_same_request_id_gets_the_same_lock(client: Client, resource: str) -> None:
    request_id = secrets.token_urlsafe(16)
    first = client.acquire(resource, ttl=10, request_id=request_id)
    again = client.acquire(resource, ttl=10, request_id=request_id)
    assert (again.token, again.fence) == (first.token, first.fence)
    # Without it (a fresh request id each call), the resource is held.
    with pytest.raises(LockHeld):
        client.acquire(resource, ttl=10)
    client.release(again)


def test_contention_raises_lock_held(client: Client, resource: str) -> None:
    held = client.acquire(resource, ttl=10)
    with pytest.raises(LockHeld) as refused:
        client.acquire(resource, ttl=10, wait=0.2)
    assert refused.value.code == grpc.StatusCode.ABORTED
    assert isinstance(refused.value, RedlockdError)
    assert not refused.value.retryable
    client.release(held)


def test_shared_locks_coexist_and_exclude_a_writer(client: Client, resource: str) -> None:
    first = client.acquire(resource, ttl=10, shared=True)
    second = client.acquire(resource, ttl=10, shared=True)
    assert first.token != second.token
    assert first.token.startswith("s") and second.token.startswith("s")
    with pytest.raises(LockHeld):
        client.acquire(resource, ttl=10)
    assert client.validate(first).held
    assert client.release(first).was_held
    assert client.release(second).was_held
    writer = client.acquire(resource, ttl=10, wait=5)
    assert writer.fence > max(first.fence, second.fence)
    with pytest.raises(LockHeld):
        client.acquire(resource, ttl=10, shared=True)
    client.release(writer)
    with client.hold(resource, ttl=5, shared=True) as lease:
        assert lease.token.startswith("s")


def test_wait_is_woken_by_release(client: Client, resource: str) -> None:
    held = client.acquire(resource, ttl=30)
    outcome: dict = {}

    def waiter() -> None:
        outcome["lock"] = client.acquire(resource, ttl=10, wait=25)
        outcome["at"] = time.monotonic()

    thread = threading.Thread(target=waiter)
    thread.start()
    # The waiter must still be waiting while the lock is held: the 30 s
    # lock outlives the 25 s wait, so only the release can let it in.
    thread.join(0.5)
    assert thread.is_alive()
    released_at = time.monotonic()
    assert client.release(held).was_held
    thread.join(30)
    assert not thread.is_alive()
    assert outcome["lock"].fence > held.fence
    assert outcome["at"] >= released_at
    client.release(outcome["lock"])


def test_extend_after_expiry_raises_lock_not_held(client: Client, resource: str) -> None:
    lock = client.acquire(resource, ttl=0.2)
    extended = client.extend(lock, ttl=0.3)
    assert extended.fence == lock.fence
    deadline = time.monotonic() + 10
    while client.validate(lock).held:  # expiry, polled for
        assert time.monotonic() < deadline, "the lock never expired"
        time.sleep(0.05)
    # Validate says not held once no validity is left (the drift allowance
    # and its own round counted), a few ms before the keys expire on the
    # masters; an Extend in that gap still finds them on a majority and
    # rightly succeeds. A new holder proves the keys are gone; once it has
    # released, Extend finds nothing.
    nxt = client.acquire(resource, ttl=10, wait=5)
    assert client.release(nxt).was_held is True
    with pytest.raises(LockNotHeld) as refused:
        client.extend(lock, ttl=10)
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION


def test_release_twice(client: Client, resource: str) -> None:
    lock = client.acquire(resource, ttl=10)
    assert client.release(lock).was_held is True
    assert client.release(lock).was_held is False


def test_validate(client: Client, resource: str) -> None:
    lock = client.acquire(resource, ttl=10)
    before = time.monotonic()
    answer = client.validate(lock)
    assert answer.held
    assert 0 < answer.validity <= 10
    assert answer.valid_until <= time.monotonic() + answer.validity
    assert answer.valid_until >= before + answer.validity
    client.release(lock)
    assert not client.validate(lock).held
    assert not client.validate(resource, "0" * 32).held


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda c, r: c.acquire("", ttl=1), "resource"),
        (lambda c, r: c.acquire(r, ttl=0), "ttl"),
        (lambda c, r: c.acquire(r, ttl=1, wait=-1), "wait"),
        (lambda c, r: c.extend(r, "not-a-token", ttl=1), "token"),
        (lambda c, r: c.release(r, ""), "token"),
    ],
)
def test_bad_input_names_the_field(client: Client, resource: str, call, field: str) -> None:
    with pytest.raises(InvalidArgument) as refused:
        call(client, resource)
    assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details.startswith(field), refused.value.details


def test_no_daemon_is_unavailable_and_retryable() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nobody listens here once closed
    with Client(f"127.0.0.1:{port}", timeout=5) as nobody:
        with pytest.raises(Unavailable) as refused:
            nobody.acquire("x", ttl=1)
    assert refused.value.retryable


def test_deadline_shorter_than_wait(client: Client, resource: str) -> None:
    from redlockd_client import DeadlineExceeded

    held = client.acquire(resource, ttl=30)
    with pytest.raises(DeadlineExceeded) as refused:
        client.acquire(resource, ttl=10, wait=20, timeout=0.5)
    assert refused.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
    client.release(held)


def test_several_resources_at_once(client: Client, resource: str) -> None:
    names = [f"{resource}/a", f"{resource}/b", f"{resource}/c"]
    held = client.acquire(names[1], ttl=10)
    with pytest.raises(LockHeld):
        client.acquire(names, ttl=10)
    # All or none: the others were left free.
    client.release(client.acquire(names[0], ttl=10))
    client.release(held)
    lock = client.acquire(names, ttl=10)
    assert [r.resource for r in lock.resources] == names
    assert (lock.resource, lock.fence) == (names[0], lock.resources[0].fence)
    assert lock.resources[1].fence > held.fence
    # Validate and release through any of its names.
    assert client.validate(names[2], lock.token).held
    assert client.release(names[1], lock.token).was_held
    assert not client.validate(names[0], lock.token).held
