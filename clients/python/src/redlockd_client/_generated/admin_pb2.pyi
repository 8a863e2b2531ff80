import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SessionKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_KIND_UNSPECIFIED: _ClassVar[SessionKind]
    SESSION_KIND_UNARY: _ClassVar[SessionKind]
    SESSION_KIND_HOLD: _ClassVar[SessionKind]
SESSION_KIND_UNSPECIFIED: SessionKind
SESSION_KIND_UNARY: SessionKind
SESSION_KIND_HOLD: SessionKind

class LockInfo(_message.Message):
    __slots__ = ("resource", "owner", "fence", "acquired_at", "remaining", "session_kind", "replica", "election")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    FENCE_FIELD_NUMBER: _ClassVar[int]
    ACQUIRED_AT_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    SESSION_KIND_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    resource: str
    owner: str
    fence: int
    acquired_at: _timestamp_pb2.Timestamp
    remaining: _duration_pb2.Duration
    session_kind: SessionKind
    replica: str
    election: str
    def __init__(self, resource: _Optional[str] = ..., owner: _Optional[str] = ..., fence: _Optional[int] = ..., acquired_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., remaining: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., session_kind: _Optional[_Union[SessionKind, str]] = ..., replica: _Optional[str] = ..., election: _Optional[str] = ...) -> None: ...

class InspectRequest(_message.Message):
    __slots__ = ("resource", "election")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    resource: str
    election: str
    def __init__(self, resource: _Optional[str] = ..., election: _Optional[str] = ...) -> None: ...

class InspectResponse(_message.Message):
    __slots__ = ("held", "lock")
    HELD_FIELD_NUMBER: _ClassVar[int]
    LOCK_FIELD_NUMBER: _ClassVar[int]
    held: bool
    lock: LockInfo
    def __init__(self, held: _Optional[bool] = ..., lock: _Optional[_Union[LockInfo, _Mapping]] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("prefix", "page_size", "page_token")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    page_size: int
    page_token: str
    def __init__(self, prefix: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("locks", "next_page_token")
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    locks: _containers.RepeatedCompositeFieldContainer[LockInfo]
    next_page_token: str
    def __init__(self, locks: _Optional[_Iterable[_Union[LockInfo, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ForceReleaseRequest(_message.Message):
    __slots__ = ("resource", "election")
    RESOURCE_FIELD_NUMBER: _ClassVar[int]
    ELECTION_FIELD_NUMBER: _ClassVar[int]
    resource: str
    election: str
    def __init__(self, resource: _Optional[str] = ..., election: _Optional[str] = ...) -> None: ...

class ForceReleaseResponse(_message.Message):
    __slots__ = ("was_held", "lock")
    WAS_HELD_FIELD_NUMBER: _ClassVar[int]
    LOCK_FIELD_NUMBER: _ClassVar[int]
    was_held: bool
    lock: LockInfo
    def __init__(self, was_held: _Optional[bool] = ..., lock: _Optional[_Union[LockInfo, _Mapping]] = ...) -> None: ...
