import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LockMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LOCK_MODE_EXCLUSIVE: _ClassVar[LockMode]
    LOCK_MODE_SHARED: _ClassVar[LockMode]
LOCK_MODE_EXCLUSIVE: LockMode
LOCK_MODE_SHARED: LockMode

class Lock(_message.Message):
    __slots__ = ("resource", "token", "fence", "validity", "permit", "resources")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    VALIDITY_FIELD_NUMBER: _ClassVar[int]
    PERMIT_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resource: str
    token: str
    fence: int
    validity: _duration_pb2.Duration
    permit: int
    resources: _containers.RepeatedCompositeFieldContainer[LockedResource]
    def __init__(self, resource: _Optional[str] = ..., token: _Optional[str] = ..., fence: _Optional[int] = ..., validity: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., permit: _Optional[int] = ..., resources: _Optional[_Iterable[_Union[LockedResource, _Mapping]]] = ...) -> None: ...

class LockedResource(_message.Message):
    __slots__ = ("resource", "fence")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    resource: str
    fence: int
    def __init__(self, resource: _Optional[str] = ..., fence: _Optional[int] = ...) -> None: ...

class AcquireRequest(_message.Message):
    __slots__ = ("resource", "ttl", "wait", "owner", "request_id", "lock_delay", "hold_at_least", "mode", "limit", "resources")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    WAIT_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    LOCK_DELAY_FIELD_NUMBER: _ClassVar[int]
    HOLD_AT_LEAST_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resource: str
    ttl: _duration_pb2.Duration
    wait: _duration_pb2.Duration
    owner: str
    request_id: str
    lock_delay: _duration_pb2.Duration
    hold_at_least: _duration_pb2.Duration
    mode: LockMode
    limit: int
    resources: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, resource: _Optional[str] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., wait: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., owner: _Optional[str] = ..., request_id: _Optional[str] = ..., lock_delay: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., hold_at_least: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., mode: _Optional[_Union[LockMode, str]] = ..., limit: _Optional[int] = ..., resources: _Optional[_Iterable[str]] = ...) -> None: ...

class AcquireResponse(_message.Message):
    __slots__ = ("lock",)
    LOCK_FIELD_NUMBER: _ClassVar[int]
    lock: Lock
    def __init__(self, lock: _Optional[_Union[Lock, _Mapping]] = ...) -> None: ...

class ExtendRequest(_message.Message):
    __slots__ = ("resource", "token", "ttl")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    resource: str
    token: str
    ttl: _duration_pb2.Duration
    def __init__(self, resource: _Optional[str] = ..., token: _Optional[str] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class ExtendResponse(_message.Message):
    __slots__ = ("lock",)
    LOCK_FIELD_NUMBER: _ClassVar[int]
    lock: Lock
    def __init__(self, lock: _Optional[_Union[Lock, _Mapping]] = ...) -> None: ...

class ReleaseRequest(_message.Message):
    __slots__ = ("resource", "token")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    resource: str
    token: str
    def __init__(self, resource: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class ReleaseResponse(_message.Message):
    __slots__ = ("was_held",)
    WAS_HELD_FIELD_NUMBER: _ClassVar[int]
    was_held: bool
    def __init__(self, was_held: _Optional[bool] = ...) -> None: ...

class ValidateRequest(_message.Message):
    __slots__ = ("resource", "token")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    resource: str
    token: str
    def __init__(self, resource: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class ValidateResponse(_message.Message):
    __slots__ = ("held", "validity")
    HELD_FIELD_NUMBER: _ClassVar[int]
    VALIDITY_FIELD_NUMBER: _ClassVar[int]
    held: bool
    validity: _duration_pb2.Duration
    def __init__(self, held: _Optional[bool] = ..., validity: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...

class HoldRequest(_message.Message):
    __slots__ = ("acquire", "release")
    class Release(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    ACQUIRE_FIELD_NUMBER: _ClassVar[int]
    RELEASE_FIELD_NUMBER: _ClassVar[int]
    acquire: AcquireRequest
    release: HoldRequest.Release
    def __init__(self, acquire: _Optional[_Union[AcquireRequest, _Mapping]] = ..., release: _Optional[_Union[HoldRequest.Release, _Mapping]] = ...) -> None: ...

class HoldEvent(_message.Message):
    __slots__ = ("acquired", "extended", "released", "lost", "draining")
    class Released(_message.Message):
        __slots__ = ("was_held",)
        WAS_HELD_FIELD_NUMBER: _ClassVar[int]
        was_held: bool
        def __init__(self, was_held: _Optional[bool] = ...) -> None: ...
    class Lost(_message.Message):
        __slots__ = ("reason",)
        REASON_FIELD_NUMBER: _ClassVar[int]
        reason: str
        def __init__(self, reason: _Optional[str] = ...) -> None: ...
    class Draining(_message.Message):
        __slots__ = ("release_in",)
        RELEASE_IN_FIELD_NUMBER: _ClassVar[int]
        release_in: _duration_pb2.Duration
        def __init__(self, release_in: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...
    ACQUIRED_FIELD_NUMBER: _ClassVar[int]
    EXTENDED_FIELD_NUMBER: _ClassVar[int]
    RELEASED_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    acquired: Lock
    extended: Lock
    released: HoldEvent.Released
    lost: HoldEvent.Lost
    draining: HoldEvent.Draining
    def __init__(self, acquired: _Optional[_Union[Lock, _Mapping]] = ..., extended: _Optional[_Union[Lock, _Mapping]] = ..., released: _Optional[_Union[HoldEvent.Released, _Mapping]] = ..., lost: _Optional[_Union[HoldEvent.Lost, _Mapping]] = ..., draining: _Optional[_Union[HoldEvent.Draining, _Mapping]] = ...) -> None: ...
