"""What a session (a Hold, an election's Campaign) knows about its lock,
for both clients: the events the daemon sends become the lease's state,
and every way a session can end without the holder asking counts as the
lock being lost."""

from __future__ import annotations

import threading
import time
from typing import Optional, Type

from ._errors import LockLost
from ._generated import lock_pb2
from ._types import from_duration


#: Why a lease whose validity ran out with no extension counts as lost.
EXPIRED = "the lock's validity ran out before the daemon extended it"


class SessionState:
    """What a session (a Hold's lease, a Campaign's leadership) knows of the
    lock the daemon keeps for it, shared by the blocking and asyncio
    clients: subclasses provide the ``lost`` event of their concurrency
    model, the words of their messages and the exception ``check`` raises,
    and read their rpc's events into the ``_granted``, ``_extended``,
    ``_on_draining``, ``_on_lost`` and ``_on_released`` steps below."""

    #: What ``check`` raises once the lock is gone.
    _LOST: Type[LockLost] = LockLost
    #: Why the lock is gone when its validity ran out unextended.
    _EXPIRED = EXPIRED
    #: ``check``'s reason once the holder itself ended the session.
    _ENDED_HERE = "the lease was released"
    #: Why the lock is gone when the daemon ended the session unasked.
    _ENDED_UNASKED = "the daemon ended the session (released without a request)"
    #: The prefix of the daemon's ``lost`` reason.
    _NOT_KEPT = "the daemon could not extend the lock"

    def __init__(self) -> None:
        #: The daemon's last stated validity, in seconds.
        self.validity: float = 0.0
        #: :func:`time.monotonic` instant past which the lock is no longer
        #: guaranteed unless an extension arrives first (see ``_extended``).
        self.valid_until: float = 0.0
        #: Extensions the daemon reported.
        self.extensions: int = 0
        #: True once the daemon said it is stopping: the lock is still held
        #: and extended until the drain ends, then lost (no longer extended, it
        #: expires with its ttl; ``lost`` is set).
        self.draining: bool = False
        #: Why the lock is gone, once it is.
        self.reason: Optional[str] = None
        #: ``was_held`` of the daemon's ``released``, once it came.
        self.was_held: Optional[bool] = None
        self._token: str = ""
        self._release_requested = False
        self._last_event_at = 0.0
        # Whether the lease was ever within its validity when an event came
        # (a grant that waited longer than its ttl arrives already lapsed,
        # and its first extension establishes the guarantee).
        self._guaranteed = False

    @property
    def token(self) -> str:
        """The lock token (never log it)."""
        return self._token

    def is_lost(self) -> bool:
        """Whether the lock is gone without a release from this side: the
        ``lost`` signal fired, or the lock's established validity ran out on
        this process's monotonic clock with no extension (which fires
        ``lost`` now: a process resumed after a pause, SIGSTOP or a
        suspended VM, learns it here before it acts, whatever the daemon
        says later)."""
        if not self._lost_signalled() and self._expired(time.monotonic()):
            self._lose(self._EXPIRED)
        return self._lost_signalled()

    def _lost_signalled(self) -> bool:
        raise NotImplementedError

    def _signal_lost(self) -> None:
        raise NotImplementedError

    def _expired(self, now: float) -> bool:
        """Granted, once within its validity, not released, and now past
        ``valid_until``: the guarantee lapsed, for good."""
        return (
            self._guaranteed
            and not self._release_requested
            and now >= self.valid_until
        )

    def check(self) -> None:
        """Raises :class:`LockLost` once the lock is gone: the daemon said
        ``lost`` or ended the session unasked, the stream ended or broke,
        the lease was released, or its validity ran out with no extension.
        Call it before every step of the work done under the lock."""
        if self.is_lost():
            raise self._LOST(self.reason or "the lock was lost")
        if self._release_requested:
            raise self._LOST(self._ENDED_HERE)
        if time.monotonic() >= self.valid_until:
            raise self._LOST(self._EXPIRED)

    def _lose(self, reason: str) -> None:
        """The lock is gone without the holder asking."""
        if self.reason is None:
            self.reason = reason
        self._signal_lost()

    def _granted(self, token: str, validity: float, sent_at: float) -> None:
        """The first event: counted from when the request was sent."""
        self._token = token
        self.validity = validity
        self.valid_until = sent_at + self.validity
        self._last_event_at = time.monotonic()
        self._guaranteed = self._last_event_at < self.valid_until

    def _extended(self, validity: float, now: float) -> None:
        """An extension, read at ``now``.

        An extension is pushed, not asked for: there is no request of ours
        to count its validity from. The daemon sent it after the event
        before it, so it is counted from when that earlier event reached us
        (this trusts one event not to be delayed by more than the time
        between two extensions, a third of the ttl by default).
        """
        if self._expired(now):
            # The guarantee lapsed before this extension was read: events
            # that waited in the socket while the process was paused would
            # otherwise each count as fresh (from the previous one's late
            # reading) and revive a lock that may have passed on. A lapse
            # is final.
            self._lose(self._EXPIRED)
            return
        self.extensions += 1
        self.validity = validity
        self.valid_until = max(self.valid_until, self._last_event_at + self.validity)
        self._guaranteed = self._guaranteed or now < self.valid_until

    def _on_draining(self) -> None:
        # Not an end: the daemon keeps the lock until the drain ends.
        self.draining = True

    def _on_lost(self, reason: str) -> None:
        self._lose(f"{self._NOT_KEPT}: {reason}")

    def _on_released(self, was_held: bool) -> None:
        self.was_held = was_held
        if not self._release_requested:
            self._lose(self._ENDED_UNASKED)

    def _on_end(self, error: Optional[Exception]) -> None:
        """The stream is over; without a requested release that answered,
        the lock is gone."""
        if error is not None:
            self._lose(f"the session's stream broke: {error}")
        elif self.was_held is None or not self._release_requested:
            self._lose("the session's stream ended")


class LeaseState(SessionState):
    """The state shared by :class:`Lease` and the asyncio ``AsyncLease``:
    a Hold session's events read into :class:`SessionState`."""

    def __init__(self, resource: str) -> None:
        super().__init__()
        self.resource: str = resource
        #: The fencing token: pass it with every write to the resource.
        self.fence: int = 0

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(resource={self.resource!r}, fence={self.fence}, "
            f"lost={self.is_lost()}, reason={self.reason!r})"
        )

    def _on_acquired(self, lock: lock_pb2.Lock, sent_at: float) -> None:
        """The first event: counted from when the acquire was sent."""
        self.fence = lock.fence
        self._granted(lock.token, from_duration(lock.validity), sent_at)

    def _on_event(self, event: lock_pb2.HoldEvent) -> None:
        """Any event after ``acquired``."""
        now = time.monotonic()
        kind = event.WhichOneof("event")
        if kind == "extended":
            self._extended(from_duration(event.extended.validity), now)
        elif kind == "draining":
            self._on_draining()
        elif kind == "lost":
            self._on_lost(event.lost.reason)
        elif kind == "released":
            self._on_released(event.released.was_held)
        elif kind == "acquired":
            self._lose("protocol error: a second `acquired` event")
        self._last_event_at = now


class Lease(LeaseState):
    """The lock of a ``with client.hold(...)`` block, kept alive by the
    daemon while the block runs. ``lost`` is a :class:`threading.Event` set
    the moment the lock is gone without a release from this side: test it,
    wait on it, or call :meth:`check` before each step of the work."""

    def __init__(self, resource: str) -> None:
        super().__init__(resource)
        #: Set as soon as the lock is gone without being released here.
        self.lost = threading.Event()

    def _lost_signalled(self) -> bool:
        return self.lost.is_set()

    def _signal_lost(self) -> None:
        self.lost.set()
