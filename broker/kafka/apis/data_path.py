"""Translation helpers shared by the data-path APIs (Produce, Fetch, ListOffsets,
InitProducerId, OffsetForLeaderEpoch): between kio's entities, which differ from version to
version only in which fields exist, and the broker's protobuf messages and error codes.

Field names are stable across the versions of one API (kio's classes are generated from the
same JSON schema), so a handler builds its response once with every field it knows and
`build` keeps those the request's version has: one code path serves every version.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Iterable
from types import ModuleType
from typing import Any, Final, TypeVar

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from pykraft.broker.kafka.api import RequestContext

_T = TypeVar("_T")

# Kafka's "none" for a timestamp, a leader epoch, an offset or a producer id in a response.
NO_VALUE: Final = -1
# pykraft has no quotas: no response is ever throttled.
NO_THROTTLE: Final = datetime.timedelta(0)
_MS: Final = datetime.timedelta(milliseconds=1)
_EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def response_types(key: int, ctx: RequestContext) -> ModuleType:
    """kio's module of response classes for API `key` at the request's version."""
    return load_payload_module(key, ctx.api_version, EntityType.response)


def build(cls: type[_T], **values: Any) -> _T:
    """`cls(**values)` without the values `cls`'s version has no field for (a field added in
    a later version of the API); fields missing from `values` take kio's defaults."""
    names = {field.name for field in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**{name: value for name, value in values.items() if name in names})


def per_topic(
    topic_type: type[Any],
    name_field: str,
    partitions_field: str,
    topics: Iterable[tuple[str, Iterable[Any]]],
) -> tuple[Any, ...]:
    """One `topic_type` entity per (name, partition entities) of `topics`, in their order: the
    name in `name_field`, the partition entities as a tuple in `partitions_field`."""
    return tuple(
        build(topic_type, **{name_field: name, partitions_field: tuple(partitions)})
        for name, partitions in topics
    )


def field_or(entity: object, name: str, default: _T) -> _T:
    """`entity.name`, or `default` when the request's version predates that field (Kafka's
    default for it, e.g. -1 for a leader epoch the client cannot send)."""
    value: _T = getattr(entity, name, default)
    return value


def error_code(code: int) -> ErrorCode:
    """A broker error code (`common_pb2.ErrorCode`, Kafka's numbers) as kio's ErrorCode."""
    return ErrorCode(code)


def message_or_none(message: str) -> str | None:
    """Kafka's nullable error message: null rather than empty."""
    return message or None


def millis(duration: datetime.timedelta) -> int:
    """A kio duration field (timeout, max wait) in whole milliseconds."""
    return duration // _MS


def timestamp_or_none(timestamp_ms: int) -> datetime.datetime | None:
    """A timestamp in ms as kio's nullable datetime: None for Kafka's -1 (no timestamp)."""
    if timestamp_ms < 0:
        return None
    return _EPOCH + timestamp_ms * _MS  # exact to the millisecond, as kio's TZAware needs
