"""The values calls return, and the conversions both clients share:
durations, the channel's credentials, the bearer token's metadata."""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import secrets
from typing import Optional, Sequence, Tuple, Union

import grpc
from google.protobuf.duration_pb2 import Duration

from ._generated import lock_pb2

#: A duration: seconds as a number, or a :class:`datetime.timedelta`.
Seconds = Union[float, int, datetime.timedelta]

#: gRPC call metadata.
Metadata = Sequence[Tuple[str, str]]


@dataclasses.dataclass(frozen=True)
class LockedResource:
    """One resource of a lock on several resources, with its own fence."""

    resource: str
    fence: int


@dataclasses.dataclass(frozen=True)
class Lock:
    """A granted lock.

    ``validity`` is the daemon's guarantee in seconds, measured from when it
    answered; ``valid_until`` is a :func:`time.monotonic` instant counted
    from when the request was *sent* (earlier than the answer), so that it
    never overstates the guarantee by the network's delay. Pass ``fence``
    with every write to the protected resource. The token is left out of
    ``repr`` so that it does not end up in logs.

    A lock on several resources at once (``acquire([...])``) lists them in
    ``resources``, each with its fence, in the order asked; ``resource``
    and ``fence`` are the first one's. Extend, release or validate it
    through any of them. Empty for a lock on one resource.
    """

    resource: str
    token: str = dataclasses.field(repr=False)
    fence: int
    validity: float
    valid_until: float
    #: A semaphore's permit (``limit`` above 1): which of its permits this
    #: grant holds; fences are ordered per permit. 0 for a plain lock.
    permit: int = 0
    resources: Tuple[LockedResource, ...] = ()


@dataclasses.dataclass(frozen=True)
class Released:
    """The outcome of a release. ``was_held`` False means the lock had
    expired or been taken over before: the work done under it may have
    overlapped with another holder's."""

    was_held: bool


@dataclasses.dataclass(frozen=True)
class Validation:
    """Whether (resource, token) still holds the lock on a majority;
    ``validity`` and ``valid_until`` (monotonic, from when the request was
    sent) are 0 and the send time when not held."""

    held: bool
    validity: float
    valid_until: float


def to_seconds(value: Seconds) -> float:
    """``value`` in seconds."""
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    return float(value)


def duration(value: Seconds) -> Duration:
    """``value`` as a protobuf Duration (negative values are passed on: the
    daemon refuses them naming the field)."""
    result = Duration()
    result.FromNanoseconds(round(to_seconds(value) * 1e9))
    return result


def from_duration(value: Duration) -> float:
    """A protobuf Duration in seconds."""
    return float(value.seconds + value.nanos / 1e9)


def lock_of(message: lock_pb2.Lock, sent_at: float) -> Lock:
    """A :class:`Lock` from its message, counted from ``sent_at``."""
    validity = from_duration(message.validity)
    return Lock(
        resource=message.resource,
        token=message.token,
        fence=message.fence,
        validity=validity,
        valid_until=sent_at + validity,
        permit=message.permit,
        resources=tuple(LockedResource(r.resource, r.fence) for r in message.resources),
    )


def target_of(address: str) -> Tuple[str, bool]:
    """The gRPC target for ``address`` (``host:port``, ``http://host:port``
    or ``https://host:port``) and whether its scheme asks for TLS."""
    for scheme, tls in (("https://", True), ("http://", False)):
        if address.startswith(scheme):
            return address[len(scheme) :].rstrip("/"), tls
    return address, False


def channel_credentials(
    tls: bool,
    root_certificates: Optional[bytes],
    private_key: Optional[bytes],
    certificate_chain: Optional[bytes],
) -> Optional[grpc.ChannelCredentials]:
    """TLS credentials when any TLS setting is given (or ``https://``), else
    ``None`` for a plaintext channel. ``root_certificates`` None means the
    system's roots; ``private_key`` and ``certificate_chain`` together make
    it mutual TLS."""
    if (private_key is None) != (certificate_chain is None):
        raise ValueError("private_key and certificate_chain go together (mutual TLS)")
    if not (tls or root_certificates or certificate_chain):
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=root_certificates,
        private_key=private_key,
        certificate_chain=certificate_chain,
    )


def auth_metadata(token: Optional[str]) -> Optional[Metadata]:
    """``authorization: Bearer <token>``, as the daemon reads it."""
    if token is None:
        return None
    if not token or any(c.isspace() for c in token):
        raise ValueError("token must be non-empty and without whitespace")
    return (("authorization", f"Bearer {token}"),)


def new_request_id() -> str:
    """A fresh ``request_id``: 128 random bits, URL-safe base64 (22 chars)."""
    return secrets.token_urlsafe(16)


def acquire_request(
    resource: Union[str, Sequence[str]],
    ttl: Seconds,
    wait: Optional[Seconds],
    owner: Optional[str],
    request_id: Optional[str] = None,
    limit: int = 0,
    shared: bool = False,
) -> lock_pb2.AcquireRequest:
    """An AcquireRequest; ``wait`` None means try once. ``request_id`` None
    draws a fresh one: every acquisition is idempotent, and a caller that
    retries passes the same one again. ``limit`` above 1 asks for a permit
    of a semaphore, which the daemon does not make idempotent: no request
    id is sent then (passing one is a ``ValueError``). ``shared``: a read
    lock (``LOCK_MODE_SHARED``), else exclusive.

    A list of names asks for all of them at once (``resources``): all or
    none. The daemon offers no ``request_id`` for those, so none is drawn
    (one given explicitly is passed on, and refused)."""
    if limit < 0:
        raise ValueError("limit must not be negative")
    if limit > 1 and request_id is not None:
        raise ValueError("request_id is not supported with a limit above 1")
    mode = lock_pb2.LOCK_MODE_SHARED if shared else lock_pb2.LOCK_MODE_EXCLUSIVE
    if isinstance(resource, str):
        request = lock_pb2.AcquireRequest(
            resource=resource,
            ttl=duration(ttl),
            owner=owner or "",
            request_id="" if limit > 1 else (request_id or new_request_id()),
            limit=limit,
            mode=mode,
        )
    else:
        request = lock_pb2.AcquireRequest(
            resources=list(resource),
            ttl=duration(ttl),
            owner=owner or "",
            request_id=request_id or "",
            limit=limit,
            mode=mode,
        )
    if wait is not None:
        request.wait.CopyFrom(duration(wait))
    return request


#: How long the background release of an unanswered acquire may take.
RELEASE_TIMEOUT = 1.0


def derived_token(resource: str, request_id: str, shared: bool = False) -> str:
    """The token the daemon gives the lock of ``request_id`` on ``resource``:
    the first 128 bits, in lowercase hex, of SHA-256("redlockd/v1/token" 0x00
    resource 0x00 request_id); a shared (read) lock's starts with ``s``."""
    digest = hashlib.sha256(
        b"redlockd/v1/token\0" + resource.encode() + b"\0" + request_id.encode()
    ).hexdigest()[:32]
    return "s" + digest if shared else digest


def token_of_request(request: lock_pb2.AcquireRequest) -> Optional[str]:
    """The token an acquisition will have, known before any answer: derived
    from its request id. None without one (a semaphore's permit, a lock on
    several resources)."""
    if not request.request_id or not request.resource or len(request.resources) > 0:
        return None
    return derived_token(
        request.resource, request.request_id, request.mode == lock_pb2.LOCK_MODE_SHARED
    )


def answered_by_daemon(error: grpc.RpcError) -> bool:
    """Whether a failed call's status is the daemon's own answer rather than
    one grpcio made itself (the call's deadline or cancellation fired first,
    or the connection failed). The daemon's status comes in trailers, which
    its answers fill (they carry at least a ``date``); a status grpcio makes
    comes with no trailing metadata at all. When unsure, False: the caller
    then releases a token that may hold nothing, which is harmless."""
    try:
        trailing = error.trailing_metadata()
    except Exception:  # not a call's error: no answer came
        return False
    return trailing is not None and len(trailing) > 0


def split_lock(lock_or_resource: Union[Lock, str], token: Optional[str]) -> Tuple[str, str]:
    """(resource, token) from a :class:`Lock`, or from a resource and its
    token given apart."""
    if isinstance(lock_or_resource, Lock):
        if token is not None:
            raise TypeError("give a Lock, or a resource and a token, not both")
        return lock_or_resource.resource, lock_or_resource.token
    if token is None:
        raise TypeError("a resource needs its token")
    return lock_or_resource, token
