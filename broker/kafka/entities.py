"""Building kio entities of any version from one set of values.

A Kafka message gains fields version by version; kio generates one class per version. Handlers
compute every value once and `build` keeps the ones the requested version's class has, so one
translation serves every version. kio's phantom number types are plain ints at run time, so
values may be given as ints.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType


def build(cls: type[Any], **values: Any) -> Any:
    """`cls(...)` with the `values` it has fields for; the others are dropped."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{name: value for name, value in values.items() if name in names})


def response_module(api_key: int, version: int) -> Any:
    """kio's response module of an API version: its response class and nested classes."""
    return load_payload_module(api_key, version, EntityType.response)
