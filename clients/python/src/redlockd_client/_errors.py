"""One exception class per outcome the daemon reports as a status code
(see proto/redlock/v1/lock.proto), all under :class:`RedlockdError`, so
that callers catch outcomes by meaning rather than by comparing codes."""

from __future__ import annotations

from typing import Optional

import grpc


class RedlockdError(Exception):
    """Base of every error this package raises.

    ``code`` is the gRPC status code (``None`` when the daemon reported no
    status, as for a ``lost`` event), ``details`` the daemon's message.
    """

    #: Whether the same call may simply be tried again: nothing was left
    #: locked by it.
    retryable: bool = False

    def __init__(self, details: str, code: Optional[grpc.StatusCode] = None) -> None:
        super().__init__(details)
        self.code = code
        self.details = details

    def __str__(self) -> str:
        name = self.code.name if self.code is not None else "LOCK_LOST"
        return f"{name}: {self.details}"


class LockHeld(RedlockdError):
    """ABORTED: the resource stayed locked by someone else for the whole
    ``wait``."""


class LockNotHeld(RedlockdError):
    """FAILED_PRECONDITION: the token no longer holds the lock on a majority
    of masters (it expired, or was never held); from ``acquire`` with a
    ``limit``: the resource is held under another limit."""


class Unavailable(RedlockdError):
    """UNAVAILABLE: too few masters answered (or the daemon is unreachable
    or stopping). Nothing is left locked by the call: safe to retry."""

    retryable = True


class DeadlineExceeded(RedlockdError):
    """DEADLINE_EXCEEDED: the call's deadline ran out first; nothing is left
    locked by it (the daemon answered so, or the deadline ran out in the
    client and ``acquire`` released what its request id may have got)."""

    retryable = True


class InvalidArgument(RedlockdError):
    """INVALID_ARGUMENT: a malformed request; ``details`` starts with the
    offending field (``resource``, ``ttl``, ``wait``, ``token``, ...)."""


class ResourceExhausted(RedlockdError):
    """RESOURCE_EXHAUSTED: a configured limit (waiters, sessions, rate,
    calls per connection) was hit."""


class Unauthenticated(RedlockdError):
    """UNAUTHENTICATED: no bearer token (or certificate), or an unknown one."""


class PermissionDenied(RedlockdError):
    """PERMISSION_DENIED: the resource is outside the caller's namespaces."""


class LockLost(RedlockdError):
    """The lock is gone while its holder still expected it: the daemon said
    ``lost``, ended the session with a ``released`` nobody asked for, the
    session's stream ended or broke, or the lock's validity ran out. Work
    done under the lock must stop."""


class LeadershipLost(LockLost):
    """A leadership is gone while its leader still expected it: the daemon
    said ``lost`` (it could not be kept, or was resigned by token from
    elsewhere), the campaign's stream ended or broke, or the leadership's
    validity ran out. Work done as leader must stop. A :class:`LockLost`,
    since a leadership is a lock the daemon keeps."""


_BY_CODE: dict[grpc.StatusCode, type[RedlockdError]] = {
    grpc.StatusCode.ABORTED: LockHeld,
    grpc.StatusCode.FAILED_PRECONDITION: LockNotHeld,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
}


def from_status(code: grpc.StatusCode, details: Optional[str]) -> RedlockdError:
    """The exception for a status; codes without a class of their own
    (INTERNAL, CANCELLED, ...) give a plain :class:`RedlockdError`."""
    return _BY_CODE.get(code, RedlockdError)(details or "", code)


def from_rpc_error(error: grpc.RpcError) -> RedlockdError:
    """The exception for a failed call, sync or asyncio."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    return from_status(code, details)
