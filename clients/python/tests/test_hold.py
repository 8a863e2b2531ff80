"""Hold sessions through `with client.hold(...)`: the grant, the daemon's
extensions, the release on leaving, and every way the lock can end without
the holder asking (lost, a stopping daemon's grace running out, a broken stream), each of
which must set `lease.lost` and make `check()` raise."""

from __future__ import annotations

import signal
import time

import pytest

from redlockd_client import Client, LockHeld, LockLost

#: Bound on waiting for something the daemon does within a second or two.
LIMIT = 30.0


def poll(condition, limit: float = LIMIT) -> None:
    """Waits (bounded) until `condition()` holds."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.02)


def test_hold_is_extended_and_released_on_leaving(client: Client, resource: str) -> None:
    with client.hold(resource, ttl=1, wait=5) as lease:
        assert lease.fence > 0 and len(lease.token) == 32
        assert lease.token not in repr(lease)
        # Outlives its ttl (four extensions, a third of the ttl apart).
        poll(lambda: lease.extensions >= 4)
        lease.check()
        assert not lease.lost.is_set()
        assert client.validate(resource, lease.token).held
        with pytest.raises(LockHeld):
            client.acquire(resource, ttl=1)
    assert lease.was_held is True
    assert not lease.lost.is_set()
    with pytest.raises(LockLost):
        lease.check()  # released: no longer to be relied on
    after = client.acquire(resource, ttl=5)
    assert after.fence > lease.fence
    client.release(after)


def test_hold_refused_while_held_elsewhere(client: Client, resource: str) -> None:
    held = client.acquire(resource, ttl=10)
    with pytest.raises(LockHeld):
        with client.hold(resource, ttl=5, wait=0.2):
            pytest.fail("granted a held lock")
    client.release(held)


def test_hold_waits_for_the_holder(client: Client, resource: str) -> None:
    held = client.acquire(resource, ttl=0.5)
    with client.hold(resource, ttl=5, wait=10) as lease:
        assert lease.fence > held.fence
        lease.check()


def test_lost_when_three_masters_stop(own_cluster, resource: str) -> None:
    with Client(own_cluster.daemon.address, timeout=30) as client:
        with client.hold(resource, ttl=1) as lease:
            lease.check()
            for i in (2, 3, 4):
                own_cluster.masters.stop(i)
            assert lease.lost.wait(LIMIT), "no `lost` after three of five masters stopped"
            assert "could not extend" in (lease.reason or ""), lease.reason
            with pytest.raises(LockLost) as gone:
                lease.check()
            assert gone.value.code is None
    assert lease.was_held is None


@pytest.mark.parametrize(
    "how, reason",
    [
        (signal.SIGTERM, "shutdown grace"),  # the daemon stops: `lost` at its grace's end
        (signal.SIGKILL, "stream"),  # the daemon dies: the stream breaks
    ],
    ids=["daemon-stops", "daemon-dies"],
)
def test_lost_when_the_daemon_ends_the_session(own_cluster, resource: str, how, reason) -> None:
    with Client(own_cluster.daemon.address, timeout=30) as client:
        with client.hold(resource, ttl=5) as lease:
            lease.check()
            own_cluster.daemon.send_signal(how)
            assert lease.lost.wait(LIMIT), f"no lost signal after {how.name}"
            assert reason in (lease.reason or ""), lease.reason
            with pytest.raises(LockLost):
                lease.check()


def test_hold_timeout_shorter_than_wait(client: Client, resource: str) -> None:
    from redlockd_client import DeadlineExceeded

    held = client.acquire(resource, ttl=30)
    # The client's bound, not the daemon's wait (which would end in LockHeld).
    with pytest.raises(DeadlineExceeded):
        with client.hold(resource, ttl=5, wait=20, timeout=0.5):
            pytest.fail("granted a held lock")
    client.release(held)


def test_hold_without_a_daemon_is_unavailable() -> None:
    from cluster import free_port

    from redlockd_client import Unavailable

    with Client(f"127.0.0.1:{free_port()}", timeout=10) as nobody:
        with pytest.raises(Unavailable):
            with nobody.hold("x", ttl=1):
                pytest.fail("a session without a daemon")


def test_session_limit_is_resource_exhausted(daemons, resource: str) -> None:
    from redlockd_client import ResourceExhausted

    with Client(daemons.limited.address, timeout=30) as client:
        with client.hold(resource, ttl=5) as lease:
            with pytest.raises(ResourceExhausted) as refused:
                with client.hold(f"{resource}/other", ttl=5):
                    pytest.fail("a second session past limits.max_sessions = 1")
            assert "max_sessions" in refused.value.details
            lease.check()
