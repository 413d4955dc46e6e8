"""Hypothesis strategies that build any protobuf request from its descriptor, with values chosen
to hurt: boundary numbers, bad names, wrong sizes, and corrupt record batches.

`message_of(descriptor, overrides)` fills every field; `overrides` maps a field name (or
"Message.field") to the strategy of one scalar value, so a `topic` field gets topic names and a
`records` field gets record batches wherever they occur.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

import crc32c
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import strategies as st

from pykraft.proto.record_batch import Compression, build_batch

Overrides = Mapping[str, st.SearchStrategy[Any]]
# Message descriptors: the stubs type them as two classes (pure Python and upb).
Descriptor = Any

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_EDGES = (0, 1, -1, -2, 2, 3, 42, 2**15 - 1, 2**15, 2**16, INT32_MAX, INT32_MIN)
INT64_EDGES = (*INT32_EDGES, 2**31, 2**32, INT64_MAX, INT64_MIN, INT64_MAX - 1)

int32s = st.one_of(st.sampled_from(INT32_EDGES), st.integers(INT32_MIN, INT32_MAX))
int64s = st.one_of(st.sampled_from(INT64_EDGES), st.integers(INT64_MIN, INT64_MAX))

# Names no server may accept as a topic or group: empty, dots, separators, control and
# non-ASCII characters, Kafka's 249-character limit, and past the 32767 bytes of a Kafka string.
INVALID_TOPIC_NAMES = (
    "", ".", "..", "a/b", "a b", "tab\there", "nul\x00", "é", "😀", "x" * 250, "y" * 40_000,
    "-" * 250, "../etc", "a" * 249 + "é",
)  # fmt: skip
NASTY_TEXT = (*INVALID_TOPIC_NAMES, "\n", "%s%n", "{}", "null", "-1", "*", "(", "[a-", "(a+)+$")

texts = st.text(max_size=24)
nasty_texts = st.one_of(st.sampled_from(NASTY_TEXT), texts)


def names(*real: str) -> st.SearchStrategy[str]:
    """Bad and random names, and the real ones given (existing topics, groups)."""
    pool = st.one_of(nasty_texts, st.sampled_from(real)) if real else nasty_texts
    return pool


# A request's repeated top-level list stays below this many bytes, well under the transport's
# 64 MiB message limit, so a request is judged by the server and not cut off by gRPC.
REPEATED_BYTES_MAX = 1024 * 1024


def _byte_size(item: Any) -> int:
    if isinstance(item, Message):
        return item.ByteSize()
    if isinstance(item, str | bytes):
        return len(item)
    return 8


def repeated(items: list[Any], times: int) -> list[Any]:
    """`items` repeated `times` times, or fewer times (at least once) if that would pass
    REPEATED_BYTES_MAX."""
    size = sum(_byte_size(item) for item in items)
    if size:
        times = max(1, min(times, REPEATED_BYTES_MAX // size))
    return items * times


def sizes(element: st.SearchStrategy[Any], depth: int = 0) -> st.SearchStrategy[list[Any]]:
    """A list of 0-3 items, sometimes repeated (400 times at the top of a request only, within
    REPEATED_BYTES_MAX): wrong sizes and duplicates."""
    times = (1, 1, 1, 1, 2, 400) if depth == 0 else (1, 1, 1, 2)
    return st.tuples(st.lists(element, max_size=3), st.sampled_from(times)).map(
        lambda drawn: repeated(drawn[0], drawn[1])
    )


# ---- record batches ----------------------------------------------------------------------

MAGIC_OFFSET = 16
CRC_OFFSET = 17
CRC_START = 21
ATTRIBUTES_OFFSET = 21


@st.composite
def valid_batches(draw: st.DrawFn) -> bytes:
    """A valid RecordBatch v2 of 1-3 records, any codec."""
    count = draw(st.integers(1, 3))
    records = [
        (
            draw(st.integers(0, 2**40)),
            draw(st.none() | st.binary(max_size=8)),
            draw(st.none() | st.binary(max_size=32)),
        )
        for _ in range(count)
    ]
    return build_batch(records, compression=draw(st.sampled_from(list(Compression))))


def _fix_crc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, CRC_OFFSET, crc32c.crc32c(bytes(batch[CRC_START:])))
    return bytes(batch)


@st.composite
def corrupt_batches(draw: st.DrawFn) -> bytes:
    """A valid batch damaged so that no log may take it. Bytes 0-7 (BaseOffset) and 12-15
    (PartitionLeaderEpoch) are stamped by the leader and outside the CRC, so flips avoid them."""
    batch = bytearray(draw(valid_batches()))
    how = draw(st.sampled_from(("flip", "length", "truncate", "extend", "header")))
    if how == "flip":  # magic, CRC or anything the CRC covers
        position = draw(st.integers(MAGIC_OFFSET, len(batch) - 1))
        batch[position] ^= draw(st.integers(1, 255))
        return bytes(batch)
    if how == "length":  # BatchLength says more or less than there is
        position = draw(st.integers(8, 11))
        batch[position] ^= draw(st.integers(1, 255))
        return bytes(batch)
    if how == "truncate":
        return bytes(batch[: draw(st.integers(1, len(batch) - 1))])
    if how == "extend":  # a whole batch, then a torn or garbage one
        return bytes(batch) + draw(st.binary(min_size=1, max_size=80))
    # a header field the CRC covers set to nonsense, CRC recomputed: codec 5-7, control or
    # transactional bits, LastOffsetDelta and RecordCount that disagree with the records
    field = draw(st.sampled_from(("attributes", "last_offset_delta", "record_count")))
    if field == "attributes":
        struct.pack_into(">h", batch, ATTRIBUTES_OFFSET, draw(st.sampled_from((5, 6, 7, 0x20))))
    elif field == "last_offset_delta":
        struct.pack_into(">i", batch, 23, draw(st.sampled_from((-1, 7, INT32_MAX, INT32_MIN))))
    else:
        struct.pack_into(">i", batch, 57, draw(st.sampled_from((-1, 0, 99, INT32_MAX))))
    return _fix_crc(batch)


corrupt_records = st.one_of(
    corrupt_batches(),
    st.binary(min_size=1, max_size=200),  # (no bytes at all is answered NONE, see the report)
    st.tuples(valid_batches(), corrupt_batches()).map(lambda pair: pair[0] + pair[1]),
)
any_records = st.one_of(valid_batches(), corrupt_records)


# ---- whole messages ----------------------------------------------------------------------


def field_of(message: Message, name: str) -> Any:
    """A field of a message known only as Message (the generated classes carry no types)."""
    return getattr(message, name)


def _scalar(field: Any, overrides: Overrides) -> st.SearchStrategy[Any]:
    owner = field.containing_type.name
    for key in (f"{owner}.{field.name}", field.name):
        if key in overrides:
            return overrides[key]
    kind = field.type
    if kind in (FieldDescriptor.TYPE_INT32, FieldDescriptor.TYPE_SINT32):
        return int32s
    if kind in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_SINT64):
        return int64s
    if kind == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if kind == FieldDescriptor.TYPE_STRING:
        return nasty_texts
    if kind == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if kind == FieldDescriptor.TYPE_ENUM:  # open enums: unknown numbers are allowed
        known = [value.number for value in field.enum_type.values]
        return st.one_of(st.sampled_from(known), int32s)
    raise AssertionError(f"no strategy for {field.full_name} of type {kind}")


def _value(field: Any, overrides: Overrides, depth: int) -> st.SearchStrategy[Any]:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return message_of(field.message_type, overrides, depth + 1)
    return _scalar(field, overrides)


def message_of(
    descriptor: Descriptor, overrides: Overrides | None = None, depth: int = 0
) -> st.SearchStrategy[Message]:
    """Any message of `descriptor`'s type, every field drawn (or left unset)."""
    overrides = overrides or {}
    cls = GetMessageClass(descriptor)
    parts: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        entry = field.message_type
        if entry is not None and entry.GetOptions().map_entry:
            key = _scalar(entry.fields_by_name["key"], overrides)
            value = _value(entry.fields_by_name["value"], overrides, depth)
            parts[field.name] = st.dictionaries(key, value, max_size=3)
        elif field.is_repeated:
            if depth < 4:
                parts[field.name] = sizes(_value(field, overrides, depth), depth)
        elif depth < 4 or field.type != FieldDescriptor.TYPE_MESSAGE:
            parts[field.name] = _value(field, overrides, depth)
    build: Callable[[dict[str, Any]], Message] = lambda fields: cls(**fields)  # noqa: E731
    return st.fixed_dictionaries({}, optional=parts).map(build)
