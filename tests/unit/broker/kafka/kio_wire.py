"""kio's codec on both sides of a Kafka API handler, as the listener uses it, for the unit tests
of every Kafka API: a request entity is encoded and decoded before the handler sees it, and the
answer is encoded and decoded before the test does, so every test also proves its entities
survive the wire. `answer_bytes` takes and returns encoded bodies, for clients' own codecs."""

from __future__ import annotations

import io
from types import ModuleType
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from pykraft.broker.kafka.api import Api, RequestContext


def request_types(key: int, version: int) -> ModuleType:
    """kio's module of request classes for API `key` at `version`."""
    return load_payload_module(key, version, EntityType.request)


def encode(entity_type: type[Any], entity: Any) -> bytes:
    """`entity`'s bytes; it must be of exactly `entity_type` (the version's class)."""
    assert type(entity) is entity_type, (type(entity), entity_type)
    buffer = io.BytesIO()
    entity_writer(entity_type)(buffer, entity)
    return buffer.getvalue()


def decode(entity_type: type[Any], encoded: bytes) -> Any:
    """The `entity_type` entity that is the whole of `encoded`."""
    decoded, size = entity_reader(entity_type)(encoded, 0)
    assert size == len(encoded), (size, len(encoded))
    return decoded


def answer_bytes(api: Api, ctx: RequestContext, body: bytes) -> bytes | None:
    """The handler's encoded answer to an encoded request body, as the listener answers it (None:
    no response, Produce with acks=0)."""
    version = ctx.api_version
    assert api.version_min <= version <= api.version_max, (api, version)
    response = api.handle(ctx, decode(load_request_schema(api.key, version), body))
    if response is None:
        return None
    return encode(load_response_schema(api.key, version), response)


def through_the_wire(api: Api, ctx: RequestContext, request: Any) -> Any:
    """The handler's answer to `request` (a kio entity of the context's version), both having
    crossed kio's codec; None when the handler sends no response."""
    version = ctx.api_version
    answer = answer_bytes(api, ctx, encode(load_request_schema(api.key, version), request))
    if answer is None:
        return None
    return decode(load_response_schema(api.key, version), answer)
