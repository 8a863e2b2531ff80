"""Leader election (``redlock.v1.ElectionService``) for the blocking client,
and what the asyncio client shares with it: the :class:`Leader` anyone may
read, a leadership's state (a Campaign is a Hold session that waits until
elected, so its leadership is a lease under other names), and the
``with client.campaign(...)`` and ``client.observe(...)`` objects."""

from __future__ import annotations

import dataclasses
import datetime
import queue
import threading
import time
from types import TracebackType
from typing import Iterator, Optional, Type, Union

import grpc

from ._errors import (
    DeadlineExceeded,
    LeadershipLost,
    LockLost,
    LockNotHeld,
    RedlockdError,
    Unavailable,
    from_rpc_error,
)
from ._generated import election_pb2, election_pb2_grpc
from ._lease import SessionState
from ._types import Metadata, Seconds, duration, from_duration

#: How long leaving a ``campaign`` block waits for the daemon's
#: ``resigned`` when the client has no timeout of its own.
RESIGN_WAIT = 10.0

#: Beyond the ttl, how long entering a ``campaign`` block waits for the
#: first extension of a leadership that arrived already lapsed.
ESTABLISH_SLACK = 10.0


@dataclasses.dataclass(frozen=True)
class Leader:
    """An election's current leader, as anyone may see it (no token).

    ``term`` is the leadership's fence: strictly greater than every earlier
    leader's. ``since`` is when the leadership began by the masters' clocks
    (UTC; None if the daemon did not say), ``remaining`` how long, in
    seconds, a majority keeps it at least from when the daemon answered.
    ``value_version`` is 0 for the value the leader campaigned with, and
    higher after each ``proclaim`` of the same term (not a count: a retried
    one may skip numbers): a leader's value can change while its term
    stays, so ``(term, value_version)`` orders what observers see, not the
    term alone.
    """

    name: str
    value: str
    term: int
    since: Optional[datetime.datetime]
    remaining: float
    value_version: int = 0


def leader_of(has_leader: bool, message: election_pb2.Leader) -> Optional[Leader]:
    """The :class:`Leader` of a LeaderResponse or ObserveResponse, or None
    when the election has none."""
    if not has_leader:
        return None
    since = (
        message.since.ToDatetime(tzinfo=datetime.timezone.utc)
        if message.HasField("since")
        else None
    )
    return Leader(
        name=message.name,
        value=message.value,
        term=message.term,
        since=since,
        remaining=from_duration(message.remaining),
        value_version=message.value_version,
    )


def campaign_request(name: str, value: str, ttl: Seconds) -> election_pb2.CampaignRequest:
    """A Campaign's first message."""
    return election_pb2.CampaignRequest(
        campaign=election_pb2.CampaignRequest.Start(name=name, value=value, ttl=duration(ttl))
    )


#: The message that ends a Campaign at the leader's request.
RESIGN = election_pb2.CampaignRequest(resign=election_pb2.CampaignRequest.Resign())


def split_leadership(
    leadership: Union[LeadershipState, str], token: Optional[str]
) -> tuple[str, str]:
    """(name, token) from a leadership, or from a name and its token given
    apart."""
    if isinstance(leadership, LeadershipState):
        if token is not None:
            raise TypeError("give a leadership, or a name and a token, not both")
        return leadership.name, leadership.token
    if token is None:
        raise TypeError("an election's name needs the leadership's token")
    return leadership, token


class LeadershipState(SessionState):
    """The state shared by :class:`Leadership` and the asyncio
    ``AsyncLeadership``: a Campaign's events read into a session's state."""

    _LOST: Type[LockLost] = LeadershipLost
    _EXPIRED = "the leadership's validity ran out before the daemon kept it"
    _ENDED_HERE = "the leadership was resigned"
    _ENDED_UNASKED = "the daemon ended the campaign (resigned without a request)"
    _NOT_KEPT = "the daemon could not keep the leadership"

    def __init__(self, name: str, value: str) -> None:
        super().__init__()
        #: The election's name.
        self.name: str = name
        #: The value this leader publishes: the one it campaigned with, or
        #: the last one ``proclaim`` set.
        self.value: str = value
        #: ``value``'s :attr:`Leader.value_version` (0: the campaign's).
        self.value_version: int = 0
        #: The leadership's fence: pass it with every write made as leader;
        #: strictly greater than every earlier leader's.
        self.term: int = 0
        # Two proclaims answered out of order (threads): the later stays.
        self._proclaimed_lock = threading.Lock()

    @property
    def fence(self) -> int:
        """The term: a leadership's fence."""
        return self.term

    @property
    def was_leader(self) -> Optional[bool]:
        """``was_leader`` of the daemon's ``resigned``, once it came: False
        means the leadership had ended before the resignation."""
        return self.was_held

    def remaining(self) -> float:
        """Seconds left of the last validity received (0 once it ran out):
        act as leader only within it."""
        return max(0.0, self.valid_until - time.monotonic())

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, value={self.value!r}, "
            f"term={self.term}, lost={self.is_lost()}, reason={self.reason!r})"
        )

    def _proclaim_request(self, value: str) -> election_pb2.ProclaimRequest:
        """Proclaim's request, by this leadership's name, token and term.
        Raises :class:`LockNotHeld`, as the daemon would, when this side
        knows the leadership is over already (never elected, lost, or
        resigned): a leader told it no longer leads must not publish as
        one."""
        if not self._token:
            reason = "not elected"
        elif self.is_lost():
            reason = self.reason or "lost"
        elif self._release_requested:
            reason = self._ENDED_HERE
        else:
            return election_pb2.ProclaimRequest(
                name=self.name, token=self._token, term=self.term, value=value
            )
        raise LockNotHeld(
            f"the leadership of {self.name} is over: {reason}",
            grpc.StatusCode.FAILED_PRECONDITION,
        )

    def _proclaimed(self, value: str, value_version: int) -> None:
        """The daemon took ``value`` as ``value_version``."""
        with self._proclaimed_lock:
            if value_version >= self.value_version:
                self.value, self.value_version = value, value_version

    def _ready(self) -> bool:
        """Whether entering the block may return: the leadership is
        guaranteed, or already gone."""
        return self._guaranteed or self._lost_signalled()

    def _on_elected(self, leadership: election_pb2.Leadership, sent_at: float) -> None:
        """The first event: counted from when the campaign was sent, so that
        a candidate that waited longer than its validity is elected with
        its guarantee not yet established (its first ``kept`` does)."""
        self.term = leadership.term
        self.value = leadership.value
        self._granted(leadership.token, from_duration(leadership.validity), sent_at)

    def _on_event(self, event: election_pb2.CampaignResponse) -> None:
        """Any event after ``elected``."""
        now = time.monotonic()
        kind = event.WhichOneof("event")
        if kind == "kept":
            self._extended(from_duration(event.kept.validity), now)
        elif kind == "draining":
            self._on_draining()
        elif kind == "lost":
            self._on_lost(event.lost.reason)
        elif kind == "resigned":
            self._on_released(event.resigned.was_leader)
        elif kind == "elected":
            self._lose("protocol error: a second `elected` event")
        self._last_event_at = now


class Leadership(LeadershipState):
    """The leadership of a ``with client.campaign(...)`` block, kept alive
    by the daemon while the block runs. ``lost`` is a
    :class:`threading.Event` set the moment the leadership is gone without
    a resignation from this side: test it, wait on it, or call
    :meth:`check` (raises :class:`LeadershipLost`) before each step of the
    work done as leader."""

    def __init__(self, name: str, value: str, campaign: Optional[Campaign] = None) -> None:
        super().__init__(name, value)
        #: Set as soon as the leadership is gone without being resigned here.
        self.lost = threading.Event()
        self._campaign = campaign

    def proclaim(self, value: str, *, timeout: Optional[float] = None) -> int:
        """:meth:`Campaign.proclaim`, from inside the ``with`` block."""
        if self._campaign is None:
            raise LockNotHeld(
                f"the leadership of {self.name} has no campaign to proclaim through",
                grpc.StatusCode.FAILED_PRECONDITION,
            )
        return self._campaign.proclaim(value, timeout=timeout)

    def _lost_signalled(self) -> bool:
        return self.lost.is_set()

    def _signal_lost(self) -> None:
        self.lost.set()


def not_elected(timeout: Optional[float]) -> DeadlineExceeded:
    return DeadlineExceeded(
        f"not elected within the client's timeout ({timeout}s)",
        grpc.StatusCode.DEADLINE_EXCEEDED,
    )


#: Why a leadership that arrived lapsed counts as lost when no extension
#: established it in time.
NEVER_ESTABLISHED = "elected past its validity, and no extension established the leadership"


class Campaign:
    """The context manager :meth:`Client.campaign` returns: entering stands
    as a candidate and waits, as long as it takes (or ``timeout``), until
    elected (raising the daemon's error if it refuses the campaign);
    leaving sends ``resign`` and waits for ``resigned``."""

    def __init__(
        self,
        stub: election_pb2_grpc.ElectionServiceStub,
        metadata: Optional[Metadata],
        start: election_pb2.CampaignRequest,
        timeout: Optional[float],
        resign_wait: Optional[float],
    ) -> None:
        self._stub = stub
        self._metadata = metadata
        self._start = start
        self._timeout = timeout
        # The client's default timeout (None: none), which bounds proclaim.
        self._call_timeout = resign_wait
        self._resign_wait = RESIGN_WAIT if resign_wait is None else max(resign_wait, 1.0)
        self._establish_wait = from_duration(start.campaign.ttl) + ESTABLISH_SLACK
        self._requests: queue.Queue[Optional[election_pb2.CampaignRequest]] = queue.Queue()
        self._elected = threading.Event()
        self._ready = threading.Event()
        self._done = threading.Event()
        self._error: Optional[RedlockdError] = None
        self._call: Optional[grpc.Future] = None
        self.leadership = Leadership(start.campaign.name, start.campaign.value, self)

    def __enter__(self) -> Leadership:
        self._requests.put(self._start)
        sent_at = time.monotonic()
        call = self._stub.Campaign(iter(self._requests.get, None), metadata=self._metadata)
        self._call = call
        reader = threading.Thread(
            target=self._read, args=(call, sent_at), name="redlockd-campaign", daemon=True
        )
        reader.start()
        try:
            elected = self._elected.wait(self._timeout)
            if elected and self._error is None and not self._ready.wait(self._establish_wait):
                self.leadership._lose(NEVER_ESTABLISHED)
        except BaseException:  # interrupted while waiting: stand down
            self._abandon()
            raise
        if not elected:
            self._abandon()
            raise not_elected(self._timeout)
        if self._error is not None:
            self._requests.put(None)
            raise self._error
        return self.leadership

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.resign()

    def resign(self) -> Optional[bool]:
        """Ends the leadership: ``was_leader`` of the daemon's
        ``resigned``, or None if it was gone already (or no answer came in
        time)."""
        leadership = self.leadership
        if not leadership._release_requested:
            leadership._release_requested = True
            self._requests.put(RESIGN)
            self._requests.put(None)
        if not self._done.wait(self._resign_wait):
            # Cancelling ends the leadership on the daemon's side as well.
            self._abandon()
        return leadership.was_leader if not leadership.is_lost() else None

    def proclaim(self, value: str, *, timeout: Optional[float] = None) -> int:
        """Publishes ``value`` (an address the leader moved to, what it
        serves) without giving up the leadership: the term stays, and
        :meth:`Client.leader` and observers see the new value with a higher
        ``value_version``, which this returns (``leadership.value`` is then
        ``value``). It sends the leadership's name, token and term, on a
        majority of masters. ``timeout`` defaults to the client's.

        :class:`LockNotHeld` (FAILED_PRECONDITION) when that term no longer
        leads (lost or resigned, maybe before this side knew it): the value
        is not changed where another term leads; raised at once, without a
        call, once this side knows the leadership is over.
        :class:`Unavailable` when too few masters answered: some reads may
        then show the new value and others not until a proclaim succeeds;
        proclaiming again is safe."""
        request = self.leadership._proclaim_request(value)
        try:
            response = self._stub.Proclaim(
                request,
                timeout=self._call_timeout if timeout is None else timeout,
                metadata=self._metadata,
            )
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        self.leadership._proclaimed(value, response.value_version)
        return int(response.value_version)

    def _abandon(self) -> None:
        """Cancels the stream (the daemon drops the candidacy, or releases
        the leadership)."""
        if self._call is not None:
            self._call.cancel()
        self._requests.put(None)

    def _read(self, call: Iterator[election_pb2.CampaignResponse], sent_at: float) -> None:
        leadership = self.leadership
        error: Optional[RedlockdError] = None
        try:
            for event in call:
                if not self._elected.is_set():
                    if event.WhichOneof("event") != "elected":
                        raise RedlockdError(f"protocol error: first event {event}")
                    leadership._on_elected(event.elected, sent_at)
                    self._elected.set()
                else:
                    leadership._on_event(event)
                if leadership._ready():
                    self._ready.set()
            if not self._elected.is_set():
                raise RedlockdError("the campaign ended before this candidate was elected")
        except grpc.RpcError as rpc_error:
            error = from_rpc_error(rpc_error)
        except Exception as unexpected:  # a protocol error, or a bug: not known leader
            call.cancel()  # type: ignore[attr-defined]  # a grpc.Call as well
            error = (
                unexpected
                if isinstance(unexpected, RedlockdError)
                else RedlockdError(f"the campaign's reader failed: {unexpected!r}")
            )
        finally:
            if self._elected.is_set():
                leadership._on_end(error)
            else:
                self._error = error
                self._elected.set()
            self._ready.set()
            self._done.set()


def observation_ended() -> Unavailable:
    """What an observation the daemon ended without an error raises: it
    does so when it stops (drains)."""
    return Unavailable(
        "the daemon ended the observation (it is stopping): observe again",
        grpc.StatusCode.UNAVAILABLE,
    )


class Observation:
    """The leader changes :meth:`Client.observe` streams: iterate it for
    the current state first, then each change, in ``(term,
    value_version)`` order (a :class:`Leader` of a higher term, the same
    leader's proclaimed value with a higher ``value_version``, or None: no
    leader). ``close()`` (or leaving its ``with`` block) ends it; the
    iteration then stops. A stream the daemon ends raises: the mapped error
    (too few masters), or :class:`Unavailable` when it ended it without one
    (it is stopping). Observe again then, ignoring any leader not after the
    last one seen (a lower term, or the same term and a ``value_version``
    not above)."""

    def __init__(self, call: Iterator[election_pb2.ObserveResponse]) -> None:
        self._call = call
        self._closed = False

    def __iter__(self) -> Observation:
        return self

    def __next__(self) -> Optional[Leader]:
        try:
            response = next(self._call)
        except grpc.RpcError as error:
            if self._closed:
                raise StopIteration from None
            raise from_rpc_error(error) from None
        except StopIteration:
            if self._closed:
                raise
            raise observation_ended() from None
        return leader_of(response.has_leader, response.leader)

    def close(self) -> None:
        """Ends the stream; an iteration under way stops."""
        self._closed = True
        self._call.cancel()  # type: ignore[attr-defined]  # a grpc.Call as well

    def __enter__(self) -> Observation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
