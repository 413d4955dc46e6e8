"""Kafka's request and response frames, through kio's codec (generated from Kafka's schemas).

A request frame (its 4-byte size already stripped) is a request header and a body. The header's
version follows the body's: v1 for non-flexible versions, v2 (tagged fields) for flexible ones;
kio's request class names it (`__header_schema__`). A response is a response header (v0 or v1,
again per kio's class, which keeps Kafka's quirk that ApiVersions answers always use v0) and the
body, behind a 4-byte big-endian size. Callers may rely on `FrameError` for every frame that
cannot be read: Kafka's answer to those is closing the connection. What kio refuses and Kafka
reads (unknown tagged fields, strings that are not UTF-8) is read as Kafka reads it, and what kio
reads and Kafka refuses (a null array the schema does not allow) is refused.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from dataclasses import dataclass
from typing import Any, Final

from kio.index import KioIndexError, load_request_schema
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.serial.errors import InvalidUnicode, OutOfBoundValue
from kio.static.primitive import i32

from pykraft.broker.kafka.lenient_read import readable_copy

SIZE: Final = struct.Struct(">i")
_KEY_AND_VERSION: Final = struct.Struct(">hh")
# An error message longer than this is cut when it does not fit its version (encode_response).
ERROR_MESSAGE_BYTES_MAX: Final = 1024
_ELLIPSIS: Final = "..."
_PLANS: dict[type[Any], tuple[tuple[str, bool, bool], ...]] = {}  # _arrays_and_entities


class FrameError(Exception):
    """A frame this listener cannot read (short, unknown API, bad bytes)."""


@dataclass(frozen=True)
class RequestHeader:
    """What every request frame starts with."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_api(frame: bytes | memoryview) -> tuple[int, int]:
    """The frame's API key and version, read before anything else decides how to parse it."""
    if len(frame) < _KEY_AND_VERSION.size:
        raise FrameError(f"a request frame of {len(frame)} bytes has no header")
    key, version = _KEY_AND_VERSION.unpack_from(frame)
    return key, version


def decode_header(frame: bytes | memoryview, *, flexible: bool) -> tuple[RequestHeader, int]:
    """The header alone (v2 if `flexible`, else v1) and where the body starts; for requests
    whose body this listener will not read (an ApiVersions version it does not know)."""
    schema: type[Any] = RequestHeaderV2 if flexible else RequestHeaderV1
    try:
        header, size = _read(schema, frame, 0)
    except Exception as error:  # kio raises several types for truncated or bad bytes
        raise FrameError(f"unreadable request header: {error}") from error
    return (
        RequestHeader(
            header.request_api_key,
            header.request_api_version,
            header.correlation_id,
            header.client_id,
        ),
        size,
    )


def _read(schema: type[Any], frame: bytes | memoryview, offset: int) -> tuple[Any, int]:
    """kio's `schema` entity at `offset` and how many bytes it spans. What kio refuses and
    Kafka reads (a tag the schema does not know, a string that is not UTF-8) is read as Kafka
    reads it: only then is the entity copied in a form kio reads (`lenient_read`)."""
    try:
        return entity_reader(schema)(frame, offset)
    except (KeyError, InvalidUnicode):
        readable, size = readable_copy(schema, frame, offset)
        entity, _ = entity_reader(schema)(readable, 0)
        return entity, size


def decode_request(frame: bytes | memoryview) -> tuple[RequestHeader, Any]:
    """The header and the body entity (kio's request class of the frame's key and version)."""
    key, version = peek_api(frame)
    try:
        schema = load_request_schema(key, version)
    except KioIndexError as error:
        raise FrameError(f"no schema for API key {key} version {version}") from error
    header, offset = decode_header(frame, flexible=schema.__header_schema__ is RequestHeaderV2)
    try:
        body, _ = _read(schema, frame, offset)
    except Exception as error:
        raise FrameError(f"unreadable body of API key {key} v{version}: {error}") from error
    if (path := _null_array(body)) is not None:
        raise FrameError(f"API key {key} v{version}: {path} is null, which its schema forbids")
    return header, body


def _null_array(entity: Any) -> str | None:
    """Where `entity` holds None for an array its schema says is never null (kio reads a null
    length as None for any array; Kafka's readers refuse the request), or None."""
    for name, nullable, nested in _arrays_and_entities(type(entity)):
        value = getattr(entity, name)
        if value is None:
            if not nullable:
                return name
        elif nested:
            for item in value if isinstance(value, tuple) else (value,):
                if (path := _null_array(item)) is not None:
                    return f"{name}.{path}"
    return None


def _arrays_and_entities(entity_type: type[Any]) -> tuple[tuple[str, bool, bool], ...]:
    """(name, may be null, holds entities) of each array or entity field of `entity_type`;
    a tagged field may be null (absent). Kept per class (kio's classes: a bounded set)."""
    plan = _PLANS.get(entity_type)
    if plan is None:
        found = []
        for field in dataclasses.fields(entity_type):
            kind = classify_field(field)
            nested = isinstance(kind, EntityField | EntityTupleField)
            if kind.is_array or nested:
                nullable = is_optional(field) or get_field_tag(field) is not None
                found.append((field.name, nullable, nested))
        plan = _PLANS[entity_type] = tuple(found)
    return plan


def encode_response(correlation_id: int, body: Any) -> bytes:
    """The whole response frame, size prefix included, with the header `body`'s class asks for.

    An error message too long for the version's strings (non-flexible versions hold 32767
    bytes: a sentence quoting a client's huge name) is cut to ERROR_MESSAGE_BYTES_MAX rather
    than failing the answer, which would close the connection. Only then is the answer walked:
    answers that fit cost nothing more."""
    try:
        return _encoded_response(correlation_id, body)
    except OutOfBoundValue:
        return _encoded_response(correlation_id, _messages_cut(body))


def _messages_cut(entity: Any) -> Any:
    """`entity` with every `error_message` in it cut to ERROR_MESSAGE_BYTES_MAX bytes."""
    changed: dict[str, Any] = {}
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        if field.name == "error_message" and value is not None:
            changed[field.name] = _cut(value)
        elif isinstance(value, tuple):
            changed[field.name] = tuple(
                _messages_cut(item) if dataclasses.is_dataclass(item) else item for item in value
            )
        elif dataclasses.is_dataclass(value):
            changed[field.name] = _messages_cut(value)
    return dataclasses.replace(entity, **changed)


def _cut(message: str) -> str:
    encoded = message.encode()
    if len(encoded) <= ERROR_MESSAGE_BYTES_MAX:
        return message
    kept = encoded[: ERROR_MESSAGE_BYTES_MAX - len(_ELLIPSIS)].decode(errors="ignore")
    return kept + _ELLIPSIS


def _encoded_response(correlation_id: int, body: Any) -> bytes:
    buffer = io.BytesIO()
    buffer.write(SIZE.pack(0))
    header_schema = type(body).__header_schema__
    entity_writer(header_schema)(buffer, header_schema(correlation_id=i32(correlation_id)))
    entity_writer(type(body))(buffer, body)
    frame = buffer.getbuffer()
    SIZE.pack_into(frame, 0, len(frame) - SIZE.size)
    del frame
    return buffer.getvalue()


def encode_request(correlation_id: int, body: Any, client_id: str | None = "test") -> bytes:
    """A request frame, size prefix included: what a client sends (for tests and probes)."""
    buffer = io.BytesIO()
    header_schema = type(body).__header_schema__
    header = header_schema(
        request_api_key=body.__api_key__,
        request_api_version=body.__version__,
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    entity_writer(header_schema)(buffer, header)
    entity_writer(type(body))(buffer, body)
    payload = buffer.getvalue()
    return SIZE.pack(len(payload)) + payload


def decode_response(frame: bytes | memoryview, schema: type[Any]) -> tuple[int, Any]:
    """A response frame (size stripped) as a client reads it: correlation id and body."""
    header, offset = entity_reader(schema.__header_schema__)(frame, 0)
    body, _ = entity_reader(schema)(frame, offset)
    return header.correlation_id, body
