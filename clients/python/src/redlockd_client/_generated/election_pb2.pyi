import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Leadership(_message.Message):
    __slots__ = ("name", "term", "token", "validity", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    VALIDITY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    term: int
    token: str
    validity: _duration_pb2.Duration
    value: str
    def __init__(self, name: _Optional[str] = ..., term: _Optional[int] = ..., token: _Optional[str] = ..., validity: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., value: _Optional[str] = ...) -> None: ...

class Leader(_message.Message):
    __slots__ = ("name", "value", "term", "since", "remaining", "value_version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    SINCE_FIELD_NUMBER: _ClassVar[int]
    REMAINING_FIELD_NUMBER: _ClassVar[int]
    VALUE_VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    term: int
    since: _timestamp_pb2.Timestamp
    remaining: _duration_pb2.Duration
    value_version: int
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., term: _Optional[int] = ..., since: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., remaining: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., value_version: _Optional[int] = ...) -> None: ...

class CampaignRequest(_message.Message):
    __slots__ = ("campaign", "resign")
    class Start(_message.Message):
        __slots__ = ("name", "value", "ttl")
        NAME_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        TTL_FIELD_NUMBER: _ClassVar[int]
        name: str
        value: str
        ttl: _duration_pb2.Duration
        def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ...) -> None: ...
    class Resign(_message.Message):
        __slots__ = ()
        def __init__(self) -> None: ...
    CAMPAIGN_FIELD_NUMBER: _ClassVar[int]
    RESIGN_FIELD_NUMBER: _ClassVar[int]
    campaign: CampaignRequest.Start
    resign: CampaignRequest.Resign
    def __init__(self, campaign: _Optional[_Union[CampaignRequest.Start, _Mapping]] = ..., resign: _Optional[_Union[CampaignRequest.Resign, _Mapping]] = ...) -> None: ...

class CampaignResponse(_message.Message):
    __slots__ = ("elected", "kept", "resigned", "lost", "draining")
    class Resigned(_message.Message):
        __slots__ = ("was_leader",)
        WAS_LEADER_FIELD_NUMBER: _ClassVar[int]
        was_leader: bool
        def __init__(self, was_leader: _Optional[bool] = ...) -> None: ...
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
    ELECTED_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    RESIGNED_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    elected: Leadership
    kept: Leadership
    resigned: CampaignResponse.Resigned
    lost: CampaignResponse.Lost
    draining: CampaignResponse.Draining
    def __init__(self, elected: _Optional[_Union[Leadership, _Mapping]] = ..., kept: _Optional[_Union[Leadership, _Mapping]] = ..., resigned: _Optional[_Union[CampaignResponse.Resigned, _Mapping]] = ..., lost: _Optional[_Union[CampaignResponse.Lost, _Mapping]] = ..., draining: _Optional[_Union[CampaignResponse.Draining, _Mapping]] = ...) -> None: ...

class LeaderRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class LeaderResponse(_message.Message):
    __slots__ = ("has_leader", "leader")
    HAS_LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    has_leader: bool
    leader: Leader
    def __init__(self, has_leader: _Optional[bool] = ..., leader: _Optional[_Union[Leader, _Mapping]] = ...) -> None: ...

class ObserveRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ObserveResponse(_message.Message):
    __slots__ = ("has_leader", "leader")
    HAS_LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    has_leader: bool
    leader: Leader
    def __init__(self, has_leader: _Optional[bool] = ..., leader: _Optional[_Union[Leader, _Mapping]] = ...) -> None: ...

class ResignRequest(_message.Message):
    __slots__ = ("name", "token")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    name: str
    token: str
    def __init__(self, name: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class ResignResponse(_message.Message):
    __slots__ = ("was_leader",)
    WAS_LEADER_FIELD_NUMBER: _ClassVar[int]
    was_leader: bool
    def __init__(self, was_leader: _Optional[bool] = ...) -> None: ...

class ProclaimRequest(_message.Message):
    __slots__ = ("name", "token", "term", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    token: str
    term: int
    value: str
    def __init__(self, name: _Optional[str] = ..., token: _Optional[str] = ..., term: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...

class ProclaimResponse(_message.Message):
    __slots__ = ("value_version",)
    VALUE_VERSION_FIELD_NUMBER: _ClassVar[int]
    value_version: int
    def __init__(self, value_version: _Optional[int] = ...) -> None: ...
