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

    with client.campaign("jobs", value="10.0.0.1:8080", ttl=10) as leadership:
        leadership.check()  # raises LeadershipLost once it is gone
        ...  # lead, passing leadership.term (a fence) with every write

Leader election: ``client.campaign`` (above), ``leadership.proclaim(value)``
(a new value under the same term), ``client.leader(name)`` (a
:class:`Leader` or None), ``client.observe(name)`` (each change).

asyncio: :class:`AsyncClient`, the same calls awaited, ``async with
client.hold(...)``, ``async with client.campaign(...)``, ``async for
leader in client.observe(name)``. Every error is a
:class:`RedlockdError`, one subclass per status code the daemon answers
with.
"""

from ._aio import AsyncClient, AsyncHold, AsyncLease
from ._aio_election import AsyncCampaign, AsyncLeadership, AsyncObservation
from ._client import Client, Hold
from ._election import Campaign, Leader, Leadership, Observation
from ._errors import (
    DeadlineExceeded,
    InvalidArgument,
    LeadershipLost,
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
    "AsyncCampaign",
    "AsyncClient",
    "AsyncHold",
    "AsyncLeadership",
    "AsyncLease",
    "AsyncObservation",
    "Campaign",
    "Client",
    "DeadlineExceeded",
    "Hold",
    "InvalidArgument",
    "Leader",
    "Leadership",
    "LeadershipLost",
    "Lease",
    "Lock",
    "LockedResource",
    "LockHeld",
    "LockLost",
    "LockNotHeld",
    "Observation",
    "PermissionDenied",
    "RedlockdError",
    "Released",
    "ResourceExhausted",
    "Unauthenticated",
    "Unavailable",
    "Validation",
    "from_rpc_error",
]
