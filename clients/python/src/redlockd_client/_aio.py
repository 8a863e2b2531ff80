"""The asyncio twin of :class:`Client`, over ``grpc.aio``: the same calls
as coroutines, Hold sessions and campaigns as ``async with`` blocks, and
``async for`` over an election's leader changes."""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Dict, Optional, Sequence, Type, Union

import grpc
import grpc.aio

from ._client import RELEASE_WAIT
from ._errors import DeadlineExceeded, RedlockdError, from_rpc_error
from ._aio_election import AsyncCampaign, AsyncObservation
from ._election import Leader, LeadershipState, campaign_request, leader_of, split_leadership
from ._generated import election_pb2, election_pb2_grpc, lock_pb2, lock_pb2_grpc
from ._lease import LeaseState
from ._types import (
    RELEASE_TIMEOUT,
    Lock,
    Metadata,
    Released,
    Seconds,
    Validation,
    acquire_request,
    answered_by_daemon,
    auth_metadata,
    channel_credentials,
    duration,
    from_duration,
    lock_of,
    split_lock,
    target_of,
    token_of_request,
)


class AsyncLease(LeaseState):
    """The lock of an ``async with client.hold(...)`` block. ``lost`` is an
    :class:`asyncio.Event` set the moment the lock is gone without a
    release from this side; :meth:`check` raises :class:`LockLost` then."""

    def __init__(self, resource: str) -> None:
        super().__init__(resource)
        #: Set as soon as the lock is gone without being released here.
        self.lost = asyncio.Event()

    def _lost_signalled(self) -> bool:
        return self.lost.is_set()

    def _signal_lost(self) -> None:
        self.lost.set()


class AsyncClient:
    """A connection to one redlockd daemon for asyncio code; arguments and
    errors as :class:`Client`. Create it inside the running event loop, and
    ``await client.close()`` (or use ``async with``)."""

    def __init__(
        self,
        address: str,
        *,
        token: Optional[str] = None,
        root_certificates: Optional[bytes] = None,
        private_key: Optional[bytes] = None,
        certificate_chain: Optional[bytes] = None,
        timeout: Optional[float] = None,
    ) -> None:
        target, tls = target_of(address)
        credentials = channel_credentials(tls, root_certificates, private_key, certificate_chain)
        self._channel = (
            grpc.aio.secure_channel(target, credentials)
            if credentials is not None
            else grpc.aio.insecure_channel(target)
        )
        self._stub = lock_pb2_grpc.LockServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._elections = election_pb2_grpc.ElectionServiceStub(  # type: ignore[no-untyped-call]
            self._channel
        )
        self._metadata = auth_metadata(token)
        self._timeout = timeout
        # Background releases of unanswered acquires, by token.
        self._releases: Dict[str, asyncio.Task[None]] = {}
        self._closed = False
        self._background_releases = 0

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Closes the channel (open sessions end, releasing their locks),
        once the background releases of unanswered acquires are done (each
        takes a second at most)."""
        self._closed = True
        pending = list(self._releases.values())
        if pending:
            await asyncio.wait(pending, timeout=RELEASE_TIMEOUT + 1.0)
        await self._channel.close()

    def _release_in_background(self, resource: str, token: str) -> None:
        """As :meth:`Client._release_in_background`, as a task of the loop."""
        if self._closed:
            return
        request = lock_pb2.ReleaseRequest(resource=resource, token=token)

        async def release() -> None:
            try:
                await self._stub.Release(
                    request, timeout=RELEASE_TIMEOUT, metadata=self._metadata
                )
            except Exception:  # best effort: the lock expires with its ttl otherwise
                pass

        task = asyncio.ensure_future(release())
        self._releases[token] = task
        self._background_releases += 1

        def finished(done: asyncio.Task[None]) -> None:
            if self._releases.get(token) is done:
                del self._releases[token]

        task.add_done_callback(finished)

    async def _await_release(self, token: str) -> None:
        """As :meth:`Client._await_release`."""
        task = self._releases.get(token)
        if task is not None:
            await asyncio.wait([task], timeout=RELEASE_TIMEOUT + 1.0)

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        return self._timeout if timeout is None else timeout

    async def acquire(
        self,
        resource: Union[str, Sequence[str]],
        ttl: Seconds,
        wait: Optional[Seconds] = None,
        owner: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
        request_id: Optional[str] = None,
        limit: int = 0,
        shared: bool = False,
    ) -> Lock:
        """As :meth:`Client.acquire`; cancelling the awaiting task (as
        ``asyncio.wait_for`` or ``asyncio.timeout`` do) also leaves nothing
        locked."""
        request = acquire_request(resource, ttl, wait, owner, request_id, limit, shared)
        token = token_of_request(request)
        if token is not None:
            await self._await_release(token)
        sent_at = time.monotonic()
        try:
            response = await self._stub.Acquire(
                request, timeout=self._deadline(timeout), metadata=self._metadata
            )
        except grpc.RpcError as error:
            if token is not None and not answered_by_daemon(error):
                self._release_in_background(request.resource, token)
            raise from_rpc_error(error) from None
        except BaseException:  # cancelled while the call was out
            if token is not None:
                self._release_in_background(request.resource, token)
            raise
        return lock_of(response.lock, sent_at)

    async def extend(
        self,
        lock: Union[Lock, str],
        token: Optional[str] = None,
        *,
        ttl: Seconds,
        timeout: Optional[float] = None,
    ) -> Lock:
        """As :meth:`Client.extend`."""
        resource, token = split_lock(lock, token)
        request = lock_pb2.ExtendRequest(resource=resource, token=token, ttl=duration(ttl))
        sent_at = time.monotonic()
        try:
            response = await self._stub.Extend(
                request, timeout=self._deadline(timeout), metadata=self._metadata
            )
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        return lock_of(response.lock, sent_at)

    async def release(
        self,
        lock: Union[Lock, str],
        token: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> Released:
        """As :meth:`Client.release`."""
        resource, token = split_lock(lock, token)
        try:
            response = await self._stub.Release(
                lock_pb2.ReleaseRequest(resource=resource, token=token),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            )
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        return Released(was_held=response.was_held)

    async def validate(
        self,
        lock: Union[Lock, str],
        token: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> Validation:
        """As :meth:`Client.validate`."""
        resource, token = split_lock(lock, token)
        sent_at = time.monotonic()
        try:
            response = await self._stub.Validate(
                lock_pb2.ValidateRequest(resource=resource, token=token),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            )
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        validity = from_duration(response.validity) if response.held else 0.0
        return Validation(held=response.held, validity=validity, valid_until=sent_at + validity)

    def hold(
        self,
        resource: str,
        *,
        ttl: Seconds,
        wait: Optional[Seconds] = None,
        owner: Optional[str] = None,
        timeout: Optional[float] = None,
        limit: int = 0,
        shared: bool = False,
    ) -> AsyncHold:
        """As :meth:`Client.hold`, for ``async with``."""
        return AsyncHold(
            self._stub,
            self._metadata,
            acquire_request(resource, ttl, wait, owner, limit=limit, shared=shared),
            self._deadline(timeout),
        )

    def campaign(
        self,
        name: str,
        value: str = "",
        *,
        ttl: Seconds,
        timeout: Optional[float] = None,
    ) -> AsyncCampaign:
        """As :meth:`Client.campaign`, for ``async with``."""
        return AsyncCampaign(
            self._elections,
            self._metadata,
            campaign_request(name, value, ttl),
            timeout,
            self._timeout,
        )

    async def leader(self, name: str, *, timeout: Optional[float] = None) -> Optional[Leader]:
        """As :meth:`Client.leader`."""
        try:
            response = await self._elections.Leader(
                election_pb2.LeaderRequest(name=name),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            )
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        return leader_of(response.has_leader, response.leader)

    def observe(self, name: str) -> AsyncObservation:
        """As :meth:`Client.observe`, for ``async for leader in
        client.observe(name)``."""
        call = self._elections.Observe(
            election_pb2.ObserveRequest(name=name), metadata=self._metadata
        )
        return AsyncObservation(call)

    async def resign(
        self,
        leadership: Union[LeadershipState, str],
        token: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> bool:
        """As :meth:`Client.resign`."""
        name, token = split_leadership(leadership, token)
        try:
            response = await self._elections.Resign(
                election_pb2.ResignRequest(name=name, token=token),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            )
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        return bool(response.was_leader)


class AsyncHold:
    """The async context manager :meth:`AsyncClient.hold` returns."""

    def __init__(
        self,
        stub: lock_pb2_grpc.LockServiceStub,
        metadata: Optional[Metadata],
        acquire: lock_pb2.AcquireRequest,
        timeout: Optional[float],
    ) -> None:
        self._stub = stub
        self._metadata = metadata
        self._acquire = acquire
        self._timeout = timeout
        self._call: Optional[grpc.aio.StreamStreamCall] = None
        self._reader: Optional[asyncio.Task[None]] = None
        self.lease = AsyncLease(acquire.resource)

    async def __aenter__(self) -> AsyncLease:
        call = self._stub.Hold(metadata=self._metadata)
        self._call = call
        sent_at = time.monotonic()
        try:
            await call.write(lock_pb2.HoldRequest(acquire=self._acquire))
            first = await asyncio.wait_for(call.read(), self._timeout)
        except asyncio.TimeoutError:
            call.cancel()
            raise DeadlineExceeded(
                f"no grant within the client's timeout ({self._timeout}s)",
                grpc.StatusCode.DEADLINE_EXCEEDED,
            ) from None
        except grpc.RpcError as error:
            call.cancel()
            raise from_rpc_error(error) from None
        except BaseException:  # cancelled while waiting: end the session too
            call.cancel()
            raise
        if first is grpc.aio.EOF or first.WhichOneof("event") != "acquired":
            call.cancel()
            raise RedlockdError(f"protocol error: the session began with {first}")
        self.lease._on_acquired(first.acquired, sent_at)
        self._reader = asyncio.ensure_future(self._read(call))
        return self.lease

    async def __aexit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await self.release()

    async def release(self) -> Optional[bool]:
        """As :meth:`Hold.release`."""
        lease, call, reader = self.lease, self._call, self._reader
        if call is None or reader is None:
            return None
        if not lease._release_requested:
            lease._release_requested = True
            try:
                await call.write(lock_pb2.HoldRequest(release=lock_pb2.HoldRequest.Release()))
                await call.done_writing()
            except (grpc.RpcError, grpc.aio.UsageError, asyncio.InvalidStateError):
                pass  # the stream is over already; the reader says why
        limit = RELEASE_WAIT if self._timeout is None else max(self._timeout, 1.0)
        try:
            await asyncio.wait_for(asyncio.shield(reader), limit)
        except asyncio.TimeoutError:
            call.cancel()  # the daemon releases on cancellation too
        return lease.was_held if not lease.is_lost() else None

    async def _read(self, call: grpc.aio.StreamStreamCall) -> None:
        lease = self.lease
        error: Optional[Exception] = None
        try:
            while True:
                event = await call.read()
                if event is grpc.aio.EOF:
                    break
                lease._on_event(event)
        except grpc.RpcError as rpc_error:
            error = from_rpc_error(rpc_error)
        except asyncio.CancelledError:
            error = RedlockdError("the session's reader was cancelled")
        except Exception as unexpected:  # a bug: the lock is not known held
            call.cancel()
            error = RedlockdError(f"the session's reader failed: {unexpected!r}")
        lease._on_end(error)
