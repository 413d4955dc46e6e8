"""Building kio response entities of any version from one set of values, so a handler writes
each answer once for every version it serves.

kio generates one class per API version, each with only the fields its version has; `build`
keeps the values the class has fields for and drops the rest (a v0 answer has no
`error_message`, a v3 one has), fills `throttle_time` with zero (no quotas here), and turns
error codes into kio's `ErrorCode`. Callers may rely on: a field the version lacks is ignored,
a field the version has and the caller omits gets kio's default or raises TypeError (a bug).
"""

from __future__ import annotations

import dataclasses
import datetime
import sys
from types import ModuleType
from typing import Any

from kio.index import load_payload_module, load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

_NO_THROTTLE = datetime.timedelta(0)


def response_type(api_key: int, api_version: int) -> type[Any]:
    """kio's top-level response class of `api_key` at `api_version`."""
    return load_response_schema(api_key, api_version)


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
        kwargs.setdefault("throttle_time", _NO_THROTTLE)
    if "error_code" in kwargs:
        kwargs["error_code"] = ErrorCode(int(kwargs["error_code"]))
    return entity_type(**kwargs)


def has_field(entity_type: type[Any], name: str) -> bool:
    """Whether this version of the entity has the field `name`."""
    return any(f.name == name for f in dataclasses.fields(entity_type))


def response_module(api_key: int, api_version: int) -> ModuleType:
    """kio's response module of an API version: its response class and the nested classes."""
    return load_payload_module(api_key, api_version, EntityType.response)
