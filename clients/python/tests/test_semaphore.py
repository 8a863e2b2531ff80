"""Semaphores (``limit``) against a real daemon and real masters."""

from __future__ import annotations

import grpc
import pytest

from redlockd_client import Client, LockHeld, LockNotHeld


def test_limit_two_admits_two_permits(client: Client, resource: str) -> None:
    first = client.acquire(resource, ttl=10, limit=2)
    second = client.acquire(resource, ttl=10, limit=2)
    assert {first.permit, second.permit} == {0, 1}
    assert first.token.endswith(f".{first.permit}")
    with pytest.raises(LockHeld):
        client.acquire(resource, ttl=10, limit=2)
    # The limit is part of the identity: a plain lock is refused.
    with pytest.raises(LockNotHeld) as refused:
        client.acquire(resource, ttl=10)
    assert refused.value.code == grpc.StatusCode.FAILED_PRECONDITION
    assert client.validate(first).held
    assert client.extend(first, ttl=20).fence == first.fence
    assert client.release(first).was_held
    again = client.acquire(resource, ttl=10, limit=2, wait=5)
    assert again.permit == first.permit and again.fence > first.fence
    client.release(again)
    client.release(second)


def test_hold_takes_a_permit(client: Client, resource: str) -> None:
    with client.hold(resource, ttl=3, limit=2) as lease:
        other = client.acquire(resource, ttl=10, limit=2)
        assert other.token.endswith(f".{other.permit}")
        assert not lease.token.endswith(f".{other.permit}")
        client.release(other)


def test_request_id_with_a_limit_is_refused_locally() -> None:
    with Client("127.0.0.1:1") as client:
        with pytest.raises(ValueError):
            client.acquire("r", ttl=1, limit=2, request_id="A" * 22)
