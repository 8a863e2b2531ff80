"""The blocking client: one gRPC channel, the four unary calls, Hold
sessions as ``with`` blocks, and leader election (campaigns as ``with``
blocks, Leader, Observe, Resign)."""

from __future__ import annotations

import queue
import threading
import time
from types import TracebackType
from typing import Dict, Iterator, Optional, Sequence, Type, Union

import grpc

from ._errors import DeadlineExceeded, RedlockdError, from_rpc_error
from ._election import (
    Campaign,
    Leader,
    LeadershipState,
    Observation,
    campaign_request,
    leader_of,
    split_leadership,
)
from ._generated import election_pb2, election_pb2_grpc, lock_pb2, lock_pb2_grpc
from ._lease import Lease
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
    to_seconds,
    token_of_request,
)

#: How long leaving a ``hold`` block waits for the daemon's ``released``
#: when the client has no timeout of its own.
RELEASE_WAIT = 10.0


class Client:
    """A connection to one redlockd daemon.

    ``address`` is ``host:port`` (plaintext), or with ``http://`` or
    ``https://``. TLS is used for ``https://`` or when
    ``root_certificates`` (PEM bytes of the CA to trust; default: the
    system's roots) or ``private_key`` + ``certificate_chain`` (PEM bytes,
    for mutual TLS) are given. ``token`` is sent as ``authorization: Bearer
    <token>`` on every call. ``timeout`` (seconds) is the default deadline
    of every call; for ``acquire`` and ``hold`` it must cover ``wait``.
    Errors are raised as the classes of :mod:`redlockd_client`.
    """

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
            grpc.secure_channel(target, credentials)
            if credentials is not None
            else grpc.insecure_channel(target)
        )
        self._stub = lock_pb2_grpc.LockServiceStub(self._channel)  # type: ignore[no-untyped-call]
        self._elections = election_pb2_grpc.ElectionServiceStub(  # type: ignore[no-untyped-call]
            self._channel
        )
        self._metadata = auth_metadata(token)
        self._timeout = timeout
        # Background releases of unanswered acquires, by token.
        self._releases: Dict[str, threading.Event] = {}
        self._releases_lock = threading.Lock()
        self._closed = False
        self._background_releases = 0

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the channel (open sessions end, releasing their locks),
        once the background releases of unanswered acquires are done (each
        takes a second at most)."""
        with self._releases_lock:
            self._closed = True
            pending = list(self._releases.values())
        for done in pending:
            done.wait(RELEASE_TIMEOUT + 1.0)
        self._channel.close()

    def _release_in_background(self, resource: str, token: str) -> None:
        """Releases what an unanswered acquire may have got, without waiting:
        bounded by RELEASE_TIMEOUT, its outcome ignored (and never logged:
        the token is a secret)."""
        done = threading.Event()
        with self._releases_lock:
            if self._closed:
                return
            self._releases[token] = done
            self._background_releases += 1

        def finished(_: object) -> None:
            with self._releases_lock:
                if self._releases.get(token) is done:
                    del self._releases[token]
            done.set()

        try:
            future = self._stub.Release.future(
                lock_pb2.ReleaseRequest(resource=resource, token=token),
                timeout=RELEASE_TIMEOUT,
                metadata=self._metadata,
            )
            future.add_done_callback(finished)
        except Exception:  # the channel is closed: nothing can be sent
            finished(None)

    def _await_release(self, token: str) -> None:
        """Waits for a background release of ``token`` still under way: a
        retry with the same request id gets the same token, and must not be
        released by the call before it."""
        with self._releases_lock:
            done = self._releases.get(token)
        if done is not None:
            done.wait(RELEASE_TIMEOUT + 1.0)

    def _deadline(self, timeout: Optional[float]) -> Optional[float]:
        return self._timeout if timeout is None else timeout

    def acquire(
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
        """Takes the lock on ``resource`` for ``ttl``, waiting up to
        ``wait`` for the current holder to release it (none: try once).
        Raises :class:`LockHeld` if it stayed held for the whole wait.

        ``request_id`` (default: a fresh random one) makes the call
        idempotent: retried with the same value, it returns the lock that
        value already holds instead of :class:`LockHeld`. Keep it secret,
        like a token.

        After a deadline or cancellation, nothing is left locked: when the
        call ends without the daemon's answer (``timeout`` ran out first,
        the connection broke), the client releases what its request id may
        have got (the token is derived from it), in the background within a
        second. When the daemon answered, DEADLINE_EXCEEDED included, it
        has released any late grant itself. A retry with the same
        ``request_id`` through this client waits for that release, then
        acquires anew. Semaphore permits (``limit`` above 1) and locks on
        several resources carry no request id, so none of this applies.

        ``resource`` may be a list of names: one lock on all of them at
        once, all or none (``Lock.resources``; no ``request_id``).

        ``shared=True`` takes a read lock: it coexists with other shared
        holders of ``resource``, never with an exclusive one (the default);
        a waiting exclusive caller stops new shared grants."""
        request = acquire_request(resource, ttl, wait, owner, request_id, limit, shared)
        token = token_of_request(request)
        if token is not None:
            self._await_release(token)
        sent_at = time.monotonic()
        try:
            response = self._stub.Acquire(
                request, timeout=self._deadline(timeout), metadata=self._metadata
            )
        except grpc.RpcError as error:
            if token is not None and not answered_by_daemon(error):
                self._release_in_background(request.resource, token)
            raise from_rpc_error(error) from None
        except BaseException:  # interrupted (KeyboardInterrupt) while the call was out
            if token is not None:
                self._release_in_background(request.resource, token)
            raise
        return lock_of(response.lock, sent_at)

    def extend(
        self,
        lock: Union[Lock, str],
        token: Optional[str] = None,
        *,
        ttl: Seconds,
        timeout: Optional[float] = None,
    ) -> Lock:
        """Resets the lock's time to live to ``ttl``: ``extend(lock,
        ttl=...)`` or ``extend(resource, token, ttl=...)``. Raises
        :class:`LockNotHeld` if it is no longer held."""
        resource, token = split_lock(lock, token)
        request = lock_pb2.ExtendRequest(resource=resource, token=token, ttl=duration(ttl))
        sent_at = time.monotonic()
        try:
            response = self._stub.Extend(
                request, timeout=self._deadline(timeout), metadata=self._metadata
            )
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        return lock_of(response.lock, sent_at)

    def release(
        self,
        lock: Union[Lock, str],
        token: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> Released:
        """Gives the lock up; idempotent. ``was_held`` False: it had expired
        or been taken over first."""
        resource, token = split_lock(lock, token)
        try:
            response = self._stub.Release(
                lock_pb2.ReleaseRequest(resource=resource, token=token),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            )
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        return Released(was_held=response.was_held)

    def validate(
        self,
        lock: Union[Lock, str],
        token: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> Validation:
        """Whether the token is still the holder on a majority (what a
        resource server asks before trusting a caller)."""
        resource, token = split_lock(lock, token)
        sent_at = time.monotonic()
        try:
            response = self._stub.Validate(
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
    ) -> Hold:
        """A lock session, for ``with client.hold(...) as lease:``. The
        daemon extends the lock while the block runs; leaving the block
        releases it. ``timeout`` bounds only the wait for the grant."""
        return Hold(
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
    ) -> Campaign:
        """Stands as a candidate in the election ``name``, for ``with
        client.campaign(name, value=..., ttl=...) as leadership:``. Entering
        waits until elected (candidates are served first come, first
        served), as long as it takes: the client's default ``timeout`` does
        not apply, ``timeout`` here bounds the wait (then
        :class:`DeadlineExceeded`, and the candidacy is withdrawn). The
        daemon keeps the leadership while the block runs (``ttl``: how long
        a frozen or killed leader keeps it); leaving resigns. ``value`` is
        what the leader publishes to :meth:`leader` and :meth:`observe`
        (an address, a pod name); ``leadership.proclaim(value)`` publishes
        another under the same term."""
        return Campaign(
            self._elections,
            self._metadata,
            campaign_request(name, value, ttl),
            timeout,
            self._timeout,
        )

    def leader(self, name: str, *, timeout: Optional[float] = None) -> Optional[Leader]:
        """The election's current leader, read from a majority of masters,
        or None when it has none."""
        try:
            response = self._elections.Leader(
                election_pb2.LeaderRequest(name=name),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            )
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        return leader_of(response.has_leader, response.leader)

    def observe(self, name: str) -> Observation:
        """The election's leader changes, as an iterator of
        ``Optional[Leader]``: the current state first, then each change (a
        higher term, the same term's proclaimed value with a higher
        ``value_version``, or None: no leader), never going back in
        ``(term, value_version)``. It runs until closed (``close()``, or
        ``with client.observe(name) as changes:``); the client's default
        ``timeout`` does not apply. A stream the daemon ends raises
        (:class:`Unavailable` when it stops): observe again, ignoring any
        leader not after the last one seen."""
        call = self._elections.Observe(
            election_pb2.ObserveRequest(name=name), metadata=self._metadata
        )
        return Observation(call)

    def resign(
        self,
        leadership: Union[LeadershipState, str],
        token: Optional[str] = None,
        *,
        timeout: Optional[float] = None,
    ) -> bool:
        """Ends a leadership from outside its campaign: ``resign(leadership)``
        or ``resign(name, token)``. The next candidate may be elected at
        once; the campaign learns it at its next extension (its ``lost`` is
        set). False: the leadership was over already."""
        name, token = split_leadership(leadership, token)
        try:
            response = self._elections.Resign(
                election_pb2.ResignRequest(name=name, token=token),
                timeout=self._deadline(timeout),
                metadata=self._metadata,
            )
        except grpc.RpcError as error:
            raise from_rpc_error(error) from None
        return bool(response.was_leader)


class Hold:
    """The context manager :meth:`Client.hold` returns: entering opens the
    session and waits for the grant (raising the daemon's error if it is
    refused); leaving sends ``release`` and waits for ``released``."""

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
        self._requests: queue.Queue[Optional[lock_pb2.HoldRequest]] = queue.Queue()
        self._granted = threading.Event()
        self._done = threading.Event()
        self._error: Optional[RedlockdError] = None
        self._call: Optional[grpc.Future] = None
        self.lease = Lease(acquire.resource)

    def __enter__(self) -> Lease:
        self._requests.put(lock_pb2.HoldRequest(acquire=self._acquire))
        sent_at = time.monotonic()
        call = self._stub.Hold(iter(self._requests.get, None), metadata=self._metadata)
        self._call = call
        reader = threading.Thread(
            target=self._read, args=(call, sent_at), name="redlockd-hold", daemon=True
        )
        reader.start()
        if not self._granted.wait(self._timeout):
            self._abandon()
            raise DeadlineExceeded(
                f"no grant within the client's timeout ({self._timeout}s)",
                grpc.StatusCode.DEADLINE_EXCEEDED,
            )
        if self._error is not None:
            self._requests.put(None)
            raise self._error
        return self.lease

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.release()

    def release(self) -> Optional[bool]:
        """Ends the session: ``was_held`` of the daemon's ``released``, or
        None if the lock was gone already (or no answer came in time)."""
        lease = self.lease
        if not lease._release_requested:
            lease._release_requested = True
            self._requests.put(lock_pb2.HoldRequest(release=lock_pb2.HoldRequest.Release()))
            self._requests.put(None)
        limit = RELEASE_WAIT if self._timeout is None else max(self._timeout, 1.0)
        if not self._done.wait(limit):
            # Cancelling releases on the daemon's side as well.
            self._abandon()
        return lease.was_held if not lease.is_lost() else None

    def _abandon(self) -> None:
        """Cancels the stream (the daemon releases whatever it holds)."""
        if self._call is not None:
            self._call.cancel()
        self._requests.put(None)

    def _read(self, call: Iterator[lock_pb2.HoldEvent], sent_at: float) -> None:
        lease = self.lease
        error: Optional[RedlockdError] = None
        try:
            for event in call:
                if not self._granted.is_set():
                    if event.WhichOneof("event") != "acquired":
                        raise RedlockdError(f"protocol error: first event {event}")
                    lease._on_acquired(event.acquired, sent_at)
                    self._granted.set()
                else:
                    lease._on_event(event)
            if not self._granted.is_set():
                raise RedlockdError("the session ended before the lock was granted")
        except grpc.RpcError as rpc_error:
            error = from_rpc_error(rpc_error)
        except Exception as unexpected:  # a protocol error, or a bug: the lock is not known held
            call.cancel()  # type: ignore[attr-defined]  # a grpc.Call as well
            error = (
                unexpected
                if isinstance(unexpected, RedlockdError)
                else RedlockdError(f"the session's reader failed: {unexpected!r}")
            )
        finally:
            if self._granted.is_set():
                lease._on_end(error)
            else:
                self._error = error
                self._granted.set()
            self._done.set()
