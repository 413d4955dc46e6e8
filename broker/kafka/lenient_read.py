"""Reading the requests kio refuses and Kafka reads.

Two things kio's reader refuses that Kafka's generated readers accept:

- tagged fields the schema does not know (KeyError): flexible versions end every entity with
  tagged fields, and Kafka skips a tag it does not know (KIP-482: that is how a newer client
  adds a field an older broker ignores);
- strings that are not UTF-8 (InvalidUnicode): Kafka decodes them as Java does, each malformed
  sequence becoming U+FFFD, and answers the request (a client id, or a name no topic has).

`readable_copy` copies an entity's bytes, walking its kio class: it leaves out every tag the
class does not have, in the entity and in the entities it nests, and writes every string again
with its malformed sequences replaced; kio then reads the copy. The codec calls it only after
kio refused a frame, so frames kio reads cost nothing more. A known tag's bytes are copied as
they are.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from typing import Any, Final

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.serial.writers import write_unsigned_varint
from kio.static.primitive import uvarint

_FIXED_BYTES: Final = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_INT8: Final = struct.Struct(">b")
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_VARINT_BYTES_MAX: Final = 5  # an unsigned varint of Kafka's int32 range
_NULL_MARKER: Final = -1  # a nullable entity's int8 marker for null (KIP-893)
_LEGACY_STRING_BYTES_MAX: Final = 32_767  # an int16 length


def readable_copy(
    entity_type: type[Any], frame: bytes | memoryview, offset: int
) -> tuple[bytes, int]:
    """The bytes of the `entity_type` entity at `offset` in `frame` as kio reads them (the
    module docstring), and how many bytes of `frame` it spans. ValueError when they do not
    parse."""
    copy = _Copy(memoryview(frame), offset)
    copy.entity(entity_type)
    return copy.out.getvalue(), copy.position - offset


class _Copy:
    """A cursor over the frame's bytes (`position`), and the copy written so far (`out`)."""

    def __init__(self, data: memoryview, position: int) -> None:
        self.data = data
        self.position = position
        self.out = io.BytesIO()

    def entity(self, entity_type: type[Any]) -> None:
        header = entity_type.__name__ == "RequestHeader"
        known: set[int] = set()
        for field in dataclasses.fields(entity_type):
            tag = get_field_tag(field)
            if tag is not None:
                known.add(int(tag))
                continue
            compact = entity_type.__flexible__ and not (header and field.name == "client_id")
            self.field(field, compact=compact)
        if entity_type.__flexible__:
            self.tags(known)

    def field(self, field: dataclasses.Field[Any], *, compact: bool) -> None:
        kind = classify_field(field)
        if not kind.is_array:
            self.value(field, kind, compact=compact)
            return
        count = self.uvarint() - 1 if compact else self.fixed(_INT32)
        if count > len(self.data) - self.position:
            raise ValueError(f"an array of {count} items in {len(self.data)} bytes")
        for _ in range(count):
            self.value(field, kind, compact=compact)

    def value(self, field: dataclasses.Field[Any], kind: Any, *, compact: bool) -> None:
        if isinstance(kind, EntityTupleField):
            self.entity(kind.type_)
        elif isinstance(kind, EntityField):
            if not is_optional(field) or self.fixed(_INT8) != _NULL_MARKER:
                self.entity(kind.type_)
        else:
            self.primitive(field.metadata["kafka_type"], compact=compact)

    def primitive(self, kafka_type: str, *, compact: bool) -> None:
        if kafka_type in _FIXED_BYTES:
            self.take(_FIXED_BYTES[kafka_type])
        elif kafka_type == "string":
            self.string(compact=compact)
        else:  # bytes, records
            length = self.uvarint() - 1 if compact else self.fixed(_INT32)
            if length > 0:
                self.take(length)

    def string(self, *, compact: bool) -> None:
        """Copies a string, its malformed UTF-8 sequences replaced (and its length with them)."""
        if compact:
            length = self.read_uvarint()[0] - 1
        else:
            (length,) = _INT16.unpack(self.read(_INT16.size))
        if length < 0:  # null
            if compact:
                write_unsigned_varint(self.out, uvarint(0))
            else:
                self.out.write(_INT16.pack(length))
            return
        data = self.read(length).decode(errors="replace").encode()
        if compact:
            write_unsigned_varint(self.out, uvarint(len(data) + 1))
        elif len(data) > _LEGACY_STRING_BYTES_MAX:
            raise ValueError(f"a string of {length} bytes grew to {len(data)} once made UTF-8")
        else:
            self.out.write(_INT16.pack(len(data)))
        self.out.write(data)

    def tags(self, known: set[int]) -> None:
        """Reads a tagged-field section; writes it again with the known tags only."""
        count = self.read_uvarint()[0]
        kept = []
        for _ in range(count):
            tag, tag_bytes = self.read_uvarint()
            size, size_bytes = self.read_uvarint()
            data = self.read(size)
            if tag in known:
                kept.append(tag_bytes + size_bytes + data)
        write_unsigned_varint(self.out, uvarint(len(kept)))
        for item in kept:
            self.out.write(item)

    def fixed(self, layout: struct.Struct) -> int:
        raw = self.read(layout.size)
        self.out.write(raw)
        value: int = layout.unpack(raw)[0]
        return value

    def uvarint(self) -> int:
        value, raw = self.read_uvarint()
        self.out.write(raw)
        return value

    def read_uvarint(self) -> tuple[int, bytes]:
        value = 0
        for index in range(_VARINT_BYTES_MAX):
            byte = self.read(1)[0]
            value |= (byte & 0x7F) << (7 * index)
            if not byte & 0x80:
                return value, bytes(self.data[self.position - index - 1 : self.position])
        raise ValueError(f"a varint longer than {_VARINT_BYTES_MAX} bytes")

    def take(self, count: int) -> None:
        self.out.write(self.read(count))

    def read(self, count: int) -> bytes:
        end = self.position + count
        if count < 0 or end > len(self.data):
            raise ValueError(f"{count} bytes wanted at {self.position} of {len(self.data)}")
        raw = bytes(self.data[self.position : end])
        self.position = end
        return raw
