"""Leader election for the asyncio client: ``async with
client.campaign(...)`` and ``async for leader in client.observe(...)``,
over the state the blocking client shares (``_election``)."""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Optional, Type

import grpc
import grpc.aio

from ._election import (
    ESTABLISH_SLACK,
    NEVER_ESTABLISHED,
    RESIGN,
    RESIGN_WAIT,
    Leader,
    LeadershipState,
    leader_of,
    not_elected,
    observation_ended,
)
from ._errors import LockNotHeld, RedlockdError, from_rpc_error
from ._generated import election_pb2, election_pb2_grpc
from ._types import Metadata, from_duration


class AsyncLeadership(LeadershipState):
    """The leadership of an ``async with client.campaign(...)`` block.
    ``lost`` is an :class:`asyncio.Event` set the moment the leadership is
    gone without a resignation from this side; :meth:`check` raises
    :class:`LeadershipLost` then."""

    def __init__(self, name: str, value: str, campaign: Optional[AsyncCampaign] = None) -> None:
        super().__init__(name, value)
        #: Set as soon as the leadership is gone without being resigned here.
        self.lost = asyncio.Event()
        self._campaign = campaign

    async def proclaim(self, value: str, *, timeout: Optional[float] = None) -> int:
        """:meth:`AsyncCampaign.proclaim`, from inside the ``async with``
        block."""
        if self._campaign is None:
            raise LockNotHeld(
                f"the leadership of {self.name} has no campaign to proclaim through",
                grpc.StatusCode.FAILED_PRECONDITION,
            )
        return await self._campaign.proclaim(value, timeout=timeout)

    def _lost_signalled(self) -> bool:
        return self.lost.is_set()

    def _signal_lost(self) -> None:
        self.lost.set()


class AsyncCampaign:
    """The async context manager :meth:`AsyncClient.campaign` returns; as
    :class:`Campaign`. Cancelling the task waiting in ``async with``
    withdraws the candidacy."""

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
        self._call: Optional[grpc.aio.StreamStreamCall] = None
        self._reader: Optional[asyncio.Task[None]] = None
        self._ready = asyncio.Event()
        self.leadership = AsyncLeadership(start.campaign.name, start.campaign.value, self)

    async def __aenter__(self) -> AsyncLeadership:
        call = self._stub.Campaign(metadata=self._metadata)
        self._call = call
        sent_at = time.monotonic()
        try:
            await call.write(self._start)
            first = await asyncio.wait_for(call.read(), self._timeout)
        except asyncio.TimeoutError:
            call.cancel()
            raise not_elected(self._timeout) from None
        except grpc.RpcError as error:
            call.cancel()
            raise from_rpc_error(error) from None
        except BaseException:  # cancelled while waiting: stand down
            call.cancel()
            raise
        if first is grpc.aio.EOF:
            call.cancel()
            raise RedlockdError("the campaign ended before this candidate was elected")
        if first.WhichOneof("event") != "elected":
            call.cancel()
            raise RedlockdError(f"protocol error: the campaign began with {first}")
        leadership = self.leadership
        leadership._on_elected(first.elected, sent_at)
        self._reader = asyncio.ensure_future(self._read(call))
        if not leadership._ready():
            # Elected after waiting past its validity: its first `kept`
            # establishes it (or it is gone).
            try:
                await asyncio.wait_for(self._ready.wait(), self._establish_wait)
            except asyncio.TimeoutError:
                leadership._lose(NEVER_ESTABLISHED)
            except BaseException:
                call.cancel()
                raise
        return leadership

    async def __aexit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await self.resign()

    async def resign(self) -> Optional[bool]:
        """As :meth:`Campaign.resign`."""
        leadership, call, reader = self.leadership, self._call, self._reader
        if call is None or reader is None:
            return None
        if not leadership._release_requested:
            leadership._release_requested = True
            try:
                await call.write(RESIGN)
                await call.done_writing()
            except (grpc.RpcError, grpc.aio.UsageError, asyncio.InvalidStateError):
                pass  # the stream is over already; the reader says why
        try:
            await asyncio.wait_for(asyncio.shield(reader), self._resign_wait)
        except asyncio.TimeoutError:
            call.cancel()  # the daemon ends the leadership on cancellation too
        return leadership.was_leader if not leadership.is_lost() else None

    async def proclaim(self, value: str, *, timeout: Optional[float] = None) -> int:
        """As :meth:`Campaign.proclaim`."""
        request = self.leadership._proclaim_request(value)
        try:
            response = await self._stub.Proclaim(
                request,
                timeout=self._call_timeout if timeout is None else timeout,
                metadata=self._metadata,
            )
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        self.leadership._proclaimed(value, response.value_version)
        return int(response.value_version)

    async def _read(self, call: grpc.aio.StreamStreamCall) -> None:
        leadership = self.leadership
        error: Optional[Exception] = None
        try:
            while True:
                event = await call.read()
                if event is grpc.aio.EOF:
                    break
                leadership._on_event(event)
                if leadership._ready():
                    self._ready.set()
        except grpc.RpcError as rpc_error:
            error = from_rpc_error(rpc_error)
        except asyncio.CancelledError:
            error = RedlockdError("the campaign's reader was cancelled")
        except Exception as unexpected:  # a bug: not known leader
            call.cancel()
            error = RedlockdError(f"the campaign's reader failed: {unexpected!r}")
        leadership._on_end(error)
        self._ready.set()


class AsyncObservation:
    """The leader changes :meth:`AsyncClient.observe` streams, for ``async
    for leader in ...``; as :class:`Observation`. ``close()`` (or leaving
    its ``async with`` block) ends it, and the iteration stops."""

    def __init__(self, call: grpc.aio.UnaryStreamCall) -> None:
        self._call = call
        self._closed = False

    def __aiter__(self) -> AsyncObservation:
        return self

    async def __anext__(self) -> Optional[Leader]:
        if self._closed:
            raise StopAsyncIteration
        try:
            response = await self._call.read()
        except asyncio.CancelledError:
            if self._closed:  # grpc.aio reads a cancelled call's end so
                raise StopAsyncIteration from None
            raise
        except grpc.RpcError as error:
            if self._closed:
                raise StopAsyncIteration from None
            raise from_rpc_error(error) from None
        if response is grpc.aio.EOF:
            if self._closed:
                raise StopAsyncIteration
            raise observation_ended()
        return leader_of(response.has_leader, response.leader)

    def close(self) -> None:
        """Ends the stream; an iteration under way stops."""
        self._closed = True
        self._call.cancel()

    async def __aenter__(self) -> AsyncObservation:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
