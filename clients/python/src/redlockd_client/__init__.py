"""Client for redlockd, the Redlock lock service.

Blocking::

    from redlockd_client import Client, LockHeld

    client = Client("127.0.0.1:50051")
    lock = client.acquire("orders/42", ttl=10, wait=5)
    try:
        ...  # pass lock.fence with every write
    finally:
        client.release(lock)

    with client.hold("orders/42", ttl=10, wait=5) as lease:
        for step in work:
            lease.check()  # raises LockLost once the lock is gone
            step(lease.fence)

asyncio: :class:`AsyncClient`, the same calls awaited, ``async with
client.hold(...)``. Every error is a :class:`RedlockdError`, one subclass
per status code the daemon answers with.
"""

from ._aio import AsyncClient, AsyncHold, AsyncLease
from ._client import Client, Hold
from ._errors import (
    DeadlineExceeded,
    InvalidArgument,
    LockHeld,
    LockLost,
    LockNotHeld,
    PermissionDenied,
    RedlockdError,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
    from_rpc_error,
)
from ._lease import Lease
from ._types import Lock, LockedResource, Released, Validation

__all__ = [
    "AsyncClient",
    "AsyncHold",
    "AsyncLease",
    "Client",
    "DeadlineExceeded",
    "Hold",
    "InvalidArgument",
    "Lease",
    "Lock",
    "LockedResource",
    "LockHeld",
    "LockLost",
    "LockNotHeld",
    "PermissionDenied",
    "RedlockdError",
    "Released",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
    "Validation",
    "from_rpc_error",
]
