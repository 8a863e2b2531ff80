"""Leader election through `with client.campaign(...)`, `client.leader`,
`client.observe`, `client.resign` and `proclaim`, blocking and asyncio,
against the real daemon: one leader and a standby, the standby elected
with a higher term once the leader resigns, a leader's proclaimed value
seen under the same term, observers told each change in (term,
value_version) order, and every way a leadership ends without its leader
asking setting `leadership.lost`. Every wait is bounded."""

from __future__ import annotations

import asyncio
import queue
import signal
import threading
import time
from typing import Callable, List, Optional, Tuple, Union

import grpc
import pytest

from redlockd_client import (
    AsyncClient,
    Client,
    DeadlineExceeded,
    InvalidArgument,
    Leader,
    Leadership,
    LeadershipLost,
    LockLost,
    LockNotHeld,
    Observation,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from redlockd_client._generated import election_pb2
from redlockd_client._types import duration

#: Bound on waiting for something the daemon does within a second or two.
LIMIT = 30.0
#: How long a standby must stay quiet while another leads. Only a bound on
#: how hard the test looks: a correct daemon never elects it, so this
#: window cannot fail a correct run, whatever the machine's speed.
QUIET = 0.3


class Changes:
    """An observation read on a thread of its own, so that the test waits
    for each change with a bound."""

    END = object()

    def __init__(self, observation: Observation) -> None:
        self.observation = observation
        self._queue: queue.Queue[object] = queue.Queue()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            for change in self.observation:
                self._queue.put(change)
        except Exception as error:  # handed to the test
            self._queue.put(error)
        self._queue.put(self.END)

    def next(self) -> Optional[Leader]:
        item = self._queue.get(timeout=LIMIT)
        assert item is not self.END, "the observation ended"
        if isinstance(item, Exception):
            raise item
        assert item is None or isinstance(item, Leader)
        return item

    def until(
        self, last: Tuple[int, int], condition: Callable[[Optional[Leader]], bool]
    ) -> Tuple[Optional[Leader], Tuple[int, int]]:
        """Reads changes until one meets `condition`; every change on the
        way goes forward: no leader, or a (term, value_version) above
        `last` (a higher term, or the same term's proclaimed value)."""
        while True:
            change = self.next()
            if change is not None:
                now = (change.term, change.value_version)
                assert now > last, f"an observer went back: {now} after {last}"
                last = now
            if condition(change):
                return change, last

    def close(self) -> None:
        self.observation.close()
        self._thread.join(LIMIT)
        assert not self._thread.is_alive(), "the observation did not stop on close()"
        # Whatever was read before close, then the end: no error.
        while True:
            item = self._queue.get_nowait()
            assert not isinstance(item, Exception), item
            if item is self.END:
                return


class Standby:
    """A candidate campaigning on a thread: `elected` is set once it leads;
    it resigns when `resign` is set."""

    def __init__(self, client: Client, name: str, value: str, ttl: float = 2) -> None:
        self.elected = threading.Event()
        self.resign = threading.Event()
        self.leadership: Optional[Leadership] = None
        self.error: Optional[BaseException] = None
        self._thread = threading.Thread(
            target=self._run, args=(client, name, value, ttl), daemon=True
        )
        self._thread.start()

    def _run(self, client: Client, name: str, value: str, ttl: float) -> None:
        try:
            with client.campaign(name, value=value, ttl=ttl) as leadership:
                self.leadership = leadership
                self.elected.set()
                self.resign.wait(LIMIT * 2)
        except BaseException as error:  # handed to the test
            self.error = error
            self.elected.set()

    def lead(self) -> Leadership:
        assert self.elected.wait(LIMIT), "the standby was not elected"
        assert self.error is None, self.error
        assert self.leadership is not None
        return self.leadership

    def stop(self) -> None:
        self.resign.set()
        self._thread.join(LIMIT)
        assert not self._thread.is_alive()


def test_one_leader_a_standby_and_observers_in_term_order(client: Client, resource: str) -> None:
    changes = Changes(client.observe(resource))
    assert changes.next() is None, "no leader yet"
    assert client.leader(resource) is None
    with client.campaign(resource, value="10.0.0.1:8080", ttl=2) as first:
        assert (first.name, first.value) == (resource, "10.0.0.1:8080")
        assert first.term > 0 and first.fence == first.term
        assert first.token and first.token not in repr(first)
        assert 0 < first.remaining() <= first.validity <= 2
        first.check()
        leader = client.leader(resource)
        assert leader is not None
        assert (leader.name, leader.value, leader.term) == (resource, "10.0.0.1:8080", first.term)
        assert leader.since is not None and leader.since.tzinfo is not None
        assert 0 < leader.remaining <= 2
        seen, last = changes.until((0, 0), lambda c: c is not None)
        assert seen == Leader(resource, "10.0.0.1:8080", first.term, seen.since, seen.remaining)

        standby = Standby(client, resource, "10.0.0.2:8080")
        assert not standby.elected.wait(QUIET), "a standby was elected while another leads"
        current = client.leader(resource)
        assert current is not None and current.term == first.term
        first.check()
        assert not standby.elected.is_set()
    # Left the block: resigned.
    assert first.was_leader is True
    assert not first.lost.is_set()
    with pytest.raises(LeadershipLost):
        first.check()

    second = standby.lead()
    assert second.value == "10.0.0.2:8080"
    assert second.term > first.term, (first.term, second.term)
    second.check()
    seen, last = changes.until(last, lambda c: c is not None and c.term == second.term)
    assert seen is not None and seen.value == "10.0.0.2:8080"
    standby.stop()
    assert second.was_leader is True
    changes.until(last, lambda c: c is None)
    assert client.leader(resource) is None
    changes.close()


def test_proclaim_changes_the_value_under_the_same_term(client: Client, resource: str) -> None:
    changes = Changes(client.observe(resource))
    assert changes.next() is None
    campaign = client.campaign(resource, value="first", ttl=5)
    with campaign as leadership:
        seen, last = changes.until((0, 0), lambda c: c is not None)
        assert seen is not None and (seen.value, seen.value_version) == ("first", 0)
        assert leadership.value_version == 0
        # From the block's leadership, and from the campaign: the same call.
        proclaims = [("moved", leadership.proclaim), ("moved again", campaign.proclaim)]
        for value, proclaim in proclaims:
            version = proclaim(value)
            assert version > last[1], (version, last)
            assert (leadership.value, leadership.value_version) == (value, version)
            leadership.check()  # still the leader
            leader = client.leader(resource)
            assert leader is not None
            assert (leader.value, leader.term, leader.value_version) == (
                value, leadership.term, version,
            )
            # Told at once, as a new leader is: the same term, a higher version.
            seen, last = changes.until(last, lambda c: c is not None)
            assert seen is not None and (seen.value, seen.term, seen.value_version) == (
                value, leadership.term, version,
            )

        # Resigned by token elsewhere: the daemon refuses the old term (this
        # side may not know yet) and changes nothing.
        assert client.resign(leadership) is True
        with pytest.raises(LockNotHeld) as refused:
            leadership.proclaim("too late")
        assert refused.value.code is grpc.StatusCode.FAILED_PRECONDITION
        assert leadership.value == "moved again"
        assert client.leader(resource) is None
        changes.until(last, lambda c: c is None)
    # Over and known so: refused at once, with the same error.
    with pytest.raises(LockNotHeld) as refused:
        campaign.proclaim("later still")
    assert "is over" in refused.value.details, refused.value.details
    assert client.leader(resource) is None
    changes.close()


def test_a_standby_that_waited_past_its_ttl_enters_leading(client: Client, resource: str) -> None:
    with client.campaign(resource, value="a", ttl=1) as first:
        standby = Standby(client, resource, "b", ttl=0.5)
        # The leader is kept three times (a second at least): the standby,
        # with a ttl of half a second, most likely waits past it, and is
        # elected with its `elected` validity run out (what the unit test
        # below checks exactly). Either way it must enter leading.
        extensions = first.extensions
        deadline = time.monotonic() + LIMIT
        while first.extensions < extensions + 3:
            assert time.monotonic() < deadline, "the leader was not kept"
            assert first.lost.wait(0.02) is False, first.reason
        assert not standby.elected.is_set()
    second = standby.lead()
    second.check()  # established: within its validity on entering
    assert second.remaining() > 0 and second.term > first.term
    standby.stop()


def test_resign_by_token_from_outside(client: Client, resource: str) -> None:
    with client.campaign(resource, value="me", ttl=1) as leadership:
        assert client.resign(leadership) is True
        # The campaign learns it at its next extension.
        assert leadership.lost.wait(LIMIT), "no `lost` after a resignation by token"
        assert "could not keep" in (leadership.reason or ""), leadership.reason
        with pytest.raises(LeadershipLost) as gone:
            leadership.check()
        assert isinstance(gone.value, LockLost) and gone.value.code is None
        assert client.resign(resource, leadership.token) is False
    assert client.leader(resource) is None
    with pytest.raises(TypeError):
        client.resign(resource)


def test_campaign_timeout_withdraws_the_candidacy(client: Client, resource: str) -> None:
    with client.campaign(resource, value="leader", ttl=5) as leadership:
        with pytest.raises(DeadlineExceeded):
            with client.campaign(resource, value="impatient", ttl=5, timeout=0.3):
                pytest.fail("elected while another leads")
        leadership.check()
    # The withdrawn candidate does not keep the election: the next one leads.
    with client.campaign(resource, value="next", ttl=5, timeout=LIMIT) as after:
        assert after.term > leadership.term
        leader = client.leader(resource)
        assert leader is not None and leader.value == "next"


def test_an_election_and_a_lock_of_one_name_are_apart(client: Client, resource: str) -> None:
    lock = client.acquire(resource, ttl=10)
    with client.campaign(resource, ttl=5, timeout=LIMIT) as leadership:
        leadership.check()
        assert leadership.token != lock.token
        assert leadership.value == ""  # no value: one is optional
        leader = client.leader(resource)
        assert leader is not None and leader.term == leadership.term and leader.value == ""
    assert client.release(lock).was_held


def test_bad_requests_are_invalid_argument(client: Client, resource: str) -> None:
    with pytest.raises(InvalidArgument) as bad:
        client.leader("")
    assert bad.value.details.startswith("name"), bad.value.details
    with pytest.raises(InvalidArgument) as bad:
        with client.campaign(resource, ttl=0.001):
            pytest.fail("a campaign below session.min_ttl")
    assert bad.value.details.startswith("ttl"), bad.value.details
    with client.observe("a\x1eb") as observation:
        with pytest.raises(InvalidArgument):
            next(observation)


@pytest.mark.parametrize(
    "how, reason",
    [
        (signal.SIGTERM, "shutdown grace"),  # the daemon stops: `lost` at its grace's end
        (signal.SIGKILL, "stream"),  # the daemon dies: the stream breaks
    ],
    ids=["daemon-stops", "daemon-dies"],
)
def test_lost_and_unobserved_when_the_daemon_ends(own_cluster, resource: str, how, reason) -> None:
    with Client(own_cluster.daemon.address, timeout=30) as client:
        changes = Changes(client.observe(resource))
        assert changes.next() is None
        with client.campaign(resource, value="me", ttl=5) as leadership:
            leadership.check()
            changes.until((0, 0), lambda c: c is not None and c.term == leadership.term)
            own_cluster.daemon.send_signal(how)
            assert leadership.lost.wait(LIMIT), f"no lost signal after {how.name}"
            assert reason in (leadership.reason or ""), leadership.reason
            assert leadership.draining == (how == signal.SIGTERM)
            with pytest.raises(LeadershipLost):
                leadership.check()
        assert leadership.was_leader is None
        # The observation ends with the daemon, loudly: observe again.
        with pytest.raises(Unavailable):
            changes.next()


def elected(validity: float, sent_at: float) -> Leadership:
    leadership = Leadership("jobs", "me")
    leadership._on_elected(
        election_pb2.Leadership(
            name="jobs", term=7, token="t" * 32, validity=duration(validity), value="me"
        ),
        sent_at,
    )
    return leadership


def kept(validity: float) -> election_pb2.CampaignResponse:
    return election_pb2.CampaignResponse(
        kept=election_pb2.Leadership(name="jobs", term=7, validity=duration(validity))
    )


def test_a_leadership_elected_past_its_validity_waits_for_its_first_kept() -> None:
    # A candidate that waited longer than its validity: the `elected`
    # validity, counted from the campaign's send, has run out already.
    leadership = elected(1, time.monotonic() - 5)
    assert not leadership._ready()
    assert not leadership.is_lost()  # never guaranteed: not lapsed either
    with pytest.raises(LeadershipLost):
        leadership.check()
    leadership._on_event(kept(10))
    assert leadership._ready()
    leadership.check()
    assert leadership.extensions == 1 and leadership.term == 7


def test_a_leadership_ends_as_a_lease_does() -> None:
    leadership = elected(10, time.monotonic())
    assert leadership._ready()
    leadership.check()
    Response = election_pb2.CampaignResponse
    leadership._on_event(Response(draining=Response.Draining()))
    assert leadership.draining and not leadership.lost.is_set()
    leadership._on_event(Response(resigned=Response.Resigned(was_leader=True)))
    assert leadership.lost.is_set(), "resigned without a request"
    assert "without a request" in (leadership.reason or "")
    other = elected(10, time.monotonic())
    other._on_event(Response(lost=Response.Lost(reason="no quorum")))
    assert other.lost.is_set() and "no quorum" in (other.reason or "")
    assert "t" * 32 not in repr(other)


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 120))


def test_async_leader_standby_and_observe(daemon, resource: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(daemon.address, timeout=30) as client:
            seen: asyncio.Queue[Union[Optional[Leader], BaseException]] = asyncio.Queue()
            observation = client.observe(resource)

            async def observe() -> None:
                try:
                    async for change in observation:
                        await seen.put(change)
                except BaseException as error:  # handed to the test
                    await seen.put(error)
                    raise

            async def next_change() -> Optional[Leader]:
                change = await asyncio.wait_for(seen.get(), LIMIT)
                assert not isinstance(change, BaseException), change
                return change

            observer = asyncio.ensure_future(observe())
            assert await next_change() is None
            assert await client.leader(resource) is None
            terms: List[int] = []
            async with client.campaign(resource, value="a", ttl=2) as first:
                first.check()
                assert first.term > 0 and first.value == "a"
                leader = await client.leader(resource)
                assert leader is not None and leader.term == first.term
                standby_elected = asyncio.Event()
                # The standby leads until the observer was told its term: a
                # leadership that began and ended between two of the
                # observer's reads is one Observe need not show.
                second_seen = asyncio.Event()
                second_terms: List[int] = []

                async def standby() -> int:
                    async with client.campaign(resource, value="b", ttl=2) as second:
                        second_terms.append(second.term)
                        standby_elected.set()
                        second.check()
                        await asyncio.wait_for(second_seen.wait(), LIMIT)
                        return second.term

                waiting = asyncio.ensure_future(standby())
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(asyncio.shield(standby_elected.wait()), QUIET)
                assert not waiting.done()
                first.check()
            assert first.was_leader is True and not first.lost.is_set()
            with pytest.raises(LeadershipLost):
                first.check()
            await asyncio.wait_for(standby_elected.wait(), LIMIT)
            second_term = second_terms[0]
            assert second_term > first.term
            while not terms or terms[-1] != second_term:
                change = await next_change()
                if change is not None:
                    assert not terms or change.term > terms[-1], (terms, change.term)
                    terms.append(change.term)
            assert terms[0] == first.term
            second_seen.set()
            assert await asyncio.wait_for(waiting, LIMIT) == second_term
            observation.close()
            await asyncio.wait_for(observer, LIMIT)  # ends without an error

    run(scenario())


def test_async_resign_by_token_and_timeout(daemon, resource: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(daemon.address, timeout=30) as client:
            async with client.campaign(resource, value="me", ttl=1) as leadership:
                with pytest.raises(DeadlineExceeded):
                    async with client.campaign(resource, ttl=5, timeout=0.3):
                        pytest.fail("elected while another leads")
                assert await client.resign(leadership) is True
                await asyncio.wait_for(leadership.lost.wait(), LIMIT)
                with pytest.raises(LeadershipLost):
                    leadership.check()
            assert await client.resign(resource, leadership.token) is False
            async with client.campaign(resource, value="next", ttl=5, timeout=LIMIT) as after:
                assert after.term > leadership.term

    run(scenario())


def test_async_proclaim(daemon, resource: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(daemon.address, timeout=30) as client:
            observation = client.observe(resource)
            assert await asyncio.wait_for(observation.__anext__(), LIMIT) is None
            campaign = client.campaign(resource, value="first", ttl=5)
            async with campaign as leadership:
                seen = await asyncio.wait_for(observation.__anext__(), LIMIT)
                assert seen is not None and (seen.value, seen.value_version) == ("first", 0)
                last = (seen.term, seen.value_version)
                proclaims = [("moved", leadership.proclaim), ("moved again", campaign.proclaim)]
                for value, proclaim in proclaims:
                    version = await proclaim(value)
                    assert (leadership.value, leadership.value_version) == (value, version)
                    leader = await client.leader(resource)
                    assert leader is not None
                    assert (leader.value, leader.term, leader.value_version) == (
                        value, leadership.term, version,
                    )
                    seen = await asyncio.wait_for(observation.__anext__(), LIMIT)
                    assert seen is not None and seen.value == value
                    assert (seen.term, seen.value_version) > last, (seen, last)
                    last = (seen.term, seen.value_version)
                assert await client.resign(leadership) is True
                with pytest.raises(LockNotHeld) as refused:
                    await leadership.proclaim("too late")
                assert refused.value.code is grpc.StatusCode.FAILED_PRECONDITION
                assert await client.leader(resource) is None
            with pytest.raises(LockNotHeld) as refused:
                await campaign.proclaim("later still")
            assert "is over" in refused.value.details, refused.value.details
            observation.close()

    run(scenario())


def test_errors_are_mapped_with_authentication(auth_daemon) -> None:
    with Client(auth_daemon.address, timeout=30) as anonymous:
        with pytest.raises(Unauthenticated):
            anonymous.leader("orders/leader")
    with Client(auth_daemon.address, token=auth_daemon.token, timeout=30) as client:
        with pytest.raises(PermissionDenied):
            client.leader("elsewhere/leader")
        with pytest.raises(PermissionDenied):
            with client.campaign("elsewhere/leader", ttl=5):
                pytest.fail("a campaign outside the token's namespaces")
        with client.observe("elsewhere/leader") as observation:
            with pytest.raises(PermissionDenied):
                next(observation)
        assert client.leader("orders/leader") is None  # inside: allowed


def test_a_campaign_inside_the_tokens_namespaces(auth_daemon) -> None:
    with Client(auth_daemon.address, token=auth_daemon.token, timeout=30) as client:
        with client.campaign("orders/leader", value="me", ttl=5, timeout=LIMIT) as leadership:
            leadership.check()
            assert client.resign(leadership) is True
