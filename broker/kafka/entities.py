"""kio's entities and Kafka's values in them: every handler builds its answers here, so each
answer is written once for every version it serves.

kio generates one class per API version, each with only the fields its version has; `build`
keeps the values the class has fields for and drops the rest (a v0 answer has no
`error_message`, a v3 one has), fills `throttle_time` with zero (no quotas here), and turns
error codes into kio's `ErrorCode` (`kafka_error`). Callers may rely on: a field the version
lacks is ignored, a field the version has and the caller omits gets kio's default or raises
TypeError (a bug). The other helpers turn pykraft's values (milliseconds, -1 for none, empty
messages) into Kafka's fields and back.
"""

from __future__ import annotations

import dataclasses
import datetime
import sys
from types import ModuleType
from typing import Any, Final, TypeVar

from kio.index import load_payload_module, load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

_T = TypeVar("_T")

# Kafka's "none" for a timestamp, a leader epoch, an offset or a producer id in a response.
NO_VALUE: Final = -1
# pykraft has no quotas: no response is ever throttled.
NO_THROTTLE: Final = datetime.timedelta(0)
_MS: Final = datetime.timedelta(milliseconds=1)
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def response_type(api_key: int, api_version: int) -> type[Any]:
    """kio's top-level response class of `api_key` at `api_version`."""
    return load_response_schema(api_key, api_version)


def response_module(api_key: int, api_version: int) -> ModuleType:
    """kio's response module of an API version: its response class and the nested classes."""
    return load_payload_module(api_key, api_version, EntityType.response)


def nested_type(entity_type: type[Any], name: str) -> type[Any]:
    """The class `name` (a nested entity, e.g. "DescribedGroup") of the same API version as
    `entity_type`: kio defines them in the same module."""
    nested: type[Any] = getattr(sys.modules[entity_type.__module__], name)
    return nested


def build(entity_type: type[Any], **values: Any) -> Any:
    """An entity of `entity_type` from those of `values` it has fields for (see the module)."""
    names = {f.name for f in dataclasses.fields(entity_type)}
    kwargs = {name: value for name, value in values.items() if name in names}
    if "throttle_time" in names:
        kwargs.setdefault("throttle_time", NO_THROTTLE)
    if "error_code" in kwargs:
        kwargs["error_code"] = kafka_error(int(kwargs["error_code"]))
    return entity_type(**kwargs)


def has_field(entity_type: type[Any], name: str) -> bool:
    """Whether this version of the entity has the field `name`."""
    return any(f.name == name for f in dataclasses.fields(entity_type))


def field_or(entity: object, name: str, default: _T) -> _T:
    """`entity.name`, or `default` when the request's version predates that field (Kafka's
    default for it, e.g. -1 for a leader epoch the client cannot send)."""
    value: _T = getattr(entity, name, default)
    return value


def kafka_error(code: int) -> ErrorCode:
    """Kafka's error code of a pykraft `ErrorCode` (same numbers); unknown ones become
    UNKNOWN_SERVER_ERROR rather than a value kio cannot encode."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.unknown_server_error


def kafka_message(message: str) -> str | None:
    """An error message as Kafka sends it: null when there is none."""
    return message or None


def millis(duration: datetime.timedelta) -> int:
    """A kio duration field (timeout, max wait, throttle time) in whole milliseconds."""
    return duration // _MS


def timestamp_or_none(timestamp_ms: int) -> datetime.datetime | None:
    """A timestamp in ms as kio's nullable datetime: None for Kafka's -1 (no timestamp)."""
    if timestamp_ms < 0:
        return None
    return _EPOCH + timestamp_ms * _MS  # exact to the millisecond, as kio's TZAware needs
