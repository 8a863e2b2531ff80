"""The package's pure logic, without a daemon: status codes to exception
classes, durations, addresses, credentials, and how a lease's state
follows the session's events (every unasked end is a loss)."""

from __future__ import annotations

import datetime
import time

import grpc
import pytest

from redlockd_client import (
    DeadlineExceeded,
    InvalidArgument,
    Lease,
    Lock,
    LockedResource,
    LockHeld,
    LockLost,
    LockNotHeld,
    PermissionDenied,
    RedlockdError,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)
from redlockd_client._errors import from_status
from redlockd_client._generated import lock_pb2
from redlockd_client._types import (
    acquire_request,
    auth_metadata,
    channel_credentials,
    duration,
    from_duration,
    lock_of,
    split_lock,
    target_of,
)


@pytest.mark.parametrize(
    "code, kind, retryable",
    [
        (grpc.StatusCode.ABORTED, LockHeld, False),
        (grpc.StatusCode.FAILED_PRECONDITION, LockNotHeld, False),
        (grpc.StatusCode.UNAVAILABLE, Unavailable, True),
        (grpc.StatusCode.DEADLINE_EXCEEDED, DeadlineExceeded, True),
        (grpc.StatusCode.INVALID_ARGUMENT, InvalidArgument, False),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, ResourceExhausted, False),
        (grpc.StatusCode.UNAUTHENTICATED, Unauthenticated, False),
        (grpc.StatusCode.PERMISSION_DENIED, PermissionDenied, False),
        (grpc.StatusCode.INTERNAL, RedlockdError, False),
    ],
)
def test_status_codes_map_to_classes(code, kind, retryable) -> None:
    error = from_status(code, "ttl: out of range")
    assert type(error) is kind
    assert isinstance(error, RedlockdError)
    assert error.code == code and error.details == "ttl: out of range"
    assert error.retryable is retryable
    assert code.name in str(error)


def test_durations() -> None:
    assert from_duration(duration(1.5)) == 1.5
    assert duration(datetime.timedelta(milliseconds=250)).nanos == 250_000_000
    assert duration(0.001).ToNanoseconds() == 1_000_000
    assert duration(-1).ToNanoseconds() == -1_000_000_000  # the daemon refuses it


def test_lock_counts_validity_from_the_send() -> None:
    message = lock_pb2.Lock(resource="r", token="t" * 32, fence=7, validity=duration(9.5))
    lock = lock_of(message, sent_at=100.0)
    assert (lock.fence, lock.validity, lock.valid_until) == (7, 9.5, 109.5)
    assert "t" * 32 not in repr(lock)


def test_addresses() -> None:
    assert target_of("10.0.0.5:50051") == ("10.0.0.5:50051", False)
    assert target_of("http://h:1") == ("h:1", False)
    assert target_of("https://h:1/") == ("h:1", True)


def test_credentials() -> None:
    assert channel_credentials(False, None, None, None) is None
    assert channel_credentials(True, None, None, None) is not None
    assert channel_credentials(False, b"ca", None, None) is not None
    with pytest.raises(ValueError):
        channel_credentials(False, b"ca", b"key", None)
    assert auth_metadata(None) is None
    assert auth_metadata("abc") == (("authorization", "Bearer abc"),)
    with pytest.raises(ValueError):
        auth_metadata("a b")


def test_split_lock() -> None:
    lock = Lock("r", "t", 1, 1.0, 1.0)
    assert split_lock(lock, None) == ("r", "t")
    assert split_lock("r", "t") == ("r", "t")
    with pytest.raises(TypeError):
        split_lock("r", None)
    with pytest.raises(TypeError):
        split_lock(lock, "t")


def test_several_resources_request_and_lock() -> None:
    request = acquire_request(["a", "b"], 5, None, None)
    assert list(request.resources) == ["a", "b"]
    assert request.resource == "" and request.request_id == ""
    single = acquire_request("a", 5, None, None)
    assert list(single.resources) == [] and single.request_id
    message = lock_pb2.Lock(
        resource="a",
        token="t",
        fence=4,
        validity=duration(1),
        resources=[
            lock_pb2.LockedResource(resource="a", fence=4),
            lock_pb2.LockedResource(resource="b", fence=9),
        ],
    )
    lock = lock_of(message, time.monotonic())
    assert lock.resources == (LockedResource("a", 4), LockedResource("b", 9))


def granted(ttl: float = 10.0) -> Lease:
    lease = Lease("r")
    lease._on_acquired(
        lock_pb2.Lock(resource="r", token="t" * 32, fence=3, validity=duration(ttl)),
        time.monotonic(),
    )
    return lease


def event(**kind) -> lock_pb2.HoldEvent:
    return lock_pb2.HoldEvent(**kind)


def test_lease_extension_moves_valid_until() -> None:
    lease = granted(ttl=10.0)
    before = lease.valid_until
    lease._on_event(event(extended=lock_pb2.Lock(validity=duration(60))))
    lease.check()
    assert lease.extensions == 1 and lease.validity == 60
    assert lease.valid_until >= before + 49
    assert not lease.lost.is_set()


def test_a_grant_that_arrives_lapsed_is_established_by_its_first_extension() -> None:
    """A grant that waited longer than its ttl arrives with its validity
    (counted from the send) already over: not usable, not lost either; the
    daemon's first extension makes it a guarantee."""
    lease = granted(ttl=0.0)
    with pytest.raises(LockLost, match="validity ran out"):
        lease.check()
    assert not lease.is_lost()
    lease._on_event(event(extended=lock_pb2.Lock(validity=duration(60))))
    lease.check()
    assert lease.extensions == 1 and not lease.lost.is_set()


def test_lapsed_validity_is_lost_and_no_extension_revives_it(monkeypatch) -> None:
    lease = granted(ttl=1.0)
    assert not lease.is_lost()
    later = time.monotonic() + 2.0
    monkeypatch.setattr(time, "monotonic", lambda: later)
    assert lease.is_lost() and lease.lost.is_set()
    with pytest.raises(LockLost, match="validity ran out"):
        lease.check()
    lease._on_event(event(extended=lock_pb2.Lock(validity=duration(60))))
    assert lease.extensions == 0
    with pytest.raises(LockLost, match="validity ran out"):
        lease.check()


def test_extensions_read_after_a_pause_do_not_revive_the_lease(monkeypatch) -> None:
    """A process paused (SIGSTOP) past its validity reads, on resuming, the
    extensions that waited in its socket: each would count from the
    previous one's late reading and look fresh. The lapse comes first."""
    lease = granted(ttl=1.0)
    lease._on_event(event(extended=lock_pb2.Lock(validity=duration(1))))
    assert not lease.is_lost()
    resumed = time.monotonic() + 5.0
    monkeypatch.setattr(time, "monotonic", lambda: resumed)
    for _ in range(3):
        lease._on_event(event(extended=lock_pb2.Lock(validity=duration(1))))
    assert lease.lost.is_set() and lease.extensions == 1
    assert lease.valid_until < resumed
    with pytest.raises(LockLost, match="validity ran out"):
        lease.check()


def test_lease_lost_event() -> None:
    lease = granted()
    lease._on_event(event(lost=lock_pb2.HoldEvent.Lost(reason="no quorum")))
    assert lease.lost.is_set()
    with pytest.raises(LockLost, match="no quorum") as gone:
        lease.check()
    assert gone.value.code is None


def test_unrequested_release_is_a_loss() -> None:
    lease = granted()
    lease._on_event(event(released=lock_pb2.HoldEvent.Released(was_held=True)))
    assert lease.lost.is_set() and lease.was_held is True
    assert "without a request" in (lease.reason or "")


def test_requested_release_is_not_a_loss() -> None:
    lease = granted()
    lease._release_requested = True
    lease._on_event(event(released=lock_pb2.HoldEvent.Released(was_held=True)))
    lease._on_end(None)
    assert not lease.lost.is_set() and lease.was_held is True
    with pytest.raises(LockLost, match="released"):
        lease.check()


@pytest.mark.parametrize("error", [None, RedlockdError("broken", grpc.StatusCode.INTERNAL)])
def test_stream_end_without_release_is_a_loss(error) -> None:
    lease = granted()
    lease._on_end(error)
    assert lease.lost.is_set()
    with pytest.raises(LockLost, match="stream"):
        lease.check()


def test_requested_release_without_answer_is_a_loss() -> None:
    lease = granted()
    lease._release_requested = True
    lease._on_end(None)
    assert lease.lost.is_set() and lease.was_held is None
