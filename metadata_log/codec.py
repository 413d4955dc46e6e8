"""Compact binary encoding of metadata records, driven by the record dataclasses' fields.

One record is `type id` and `version` (unsigned varints) followed by its fields in declaration
order: ints as zig-zag varints (64-bit range), bools as one byte, str as a length-prefixed UTF-8
string, UUID as 16 bytes, `X | None` as a presence byte then X, `tuple[X, ...]` as a count then
the items, enums as their int, nested dataclasses (Endpoint) as their fields.

A record class's fields added after its version 0 go last, with defaults, and are named in its
`FIELDS_SINCE` ({field: version}); bytes written at an older version decode with those fields
at their defaults, so a node reads the logs and snapshots its predecessors wrote.

A batch (`encode_records`) is a count followed by each record prefixed by its length, so a
reader can skip or re-frame records without knowing their types. Snapshots and MetadataFetch
answers travel as chunks (`encode_chunks`, `split_batch`): each chunk is itself a batch that
decodes alone, of at most a given size, so a large image is never one bytes object.

What callers may rely on:
- `decode_record(encode_record(r)) == r` for every record whose ints fit in 64 bits.
- The encoding is canonical: the decoder refuses every byte string the encoder would not write
  (over-long varints, bool bytes other than 0/1, ...), so equal records have equal bytes.
- Decoding never raises anything but `CorruptRecordError` on bad bytes, and never allocates more
  than the input's size.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterable, Iterator, Sequence
from enum import IntEnum
from typing import Any, Final
from uuid import UUID

from pykraft.metadata_log.decoder_source import (
    optional_item,
    shared_uuid,
    struct_decoder,
    tuple_item,
)
from pykraft.metadata_log.errors import CorruptRecordError
from pykraft.metadata_log.records import RECORD_CLASSES, PartitionRecord, Record
from pykraft.proto.extensions import load as load_extension

INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1
_UINT64_MAX: Final = (1 << 64) - 1
# A 64-bit value spreads over at most ten 7-bit groups.
_VARINT_BYTES_MAX: Final = 10
_UUID_BYTES: Final = 16

# An encoder appends one value to the buffer; a decoder reads one value at `pos` and returns it
# with the position just after it.
_Encoder = Callable[[bytearray, Any], None]
_Decoder = Callable[[bytes, int], tuple[Any, int]]


def _end_of(data: bytes, pos: int, size: int) -> int:
    """The end of `size` bytes starting at `pos`, or CorruptRecordError if the data stops short."""
    end = pos + size
    if end > len(data):
        raise CorruptRecordError(
            f"truncated: {size} bytes needed at offset {pos} but only {len(data) - pos} left"
        )
    return end


def _write_uvarint(buf: bytearray, value: int) -> None:
    while value >= 0x80:
        buf.append((value & 0x7F) | 0x80)
        value >>= 7
    buf.append(value)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    if pos < len(data) and data[pos] < 0x80:  # the common case: one byte
        return data[pos], pos + 1
    return _read_multibyte_uvarint(data, pos)


def _read_multibyte_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    result = 0
    shift = 0
    stop = min(len(data), pos + _VARINT_BYTES_MAX)
    for index in range(pos, stop):
        byte = data[index]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            if byte == 0 and index > pos:
                raise CorruptRecordError(f"non-canonical varint at offset {pos}")
            if result > _UINT64_MAX:
                raise CorruptRecordError(f"varint at offset {pos} exceeds 64 bits")
            return result, index + 1
        shift += 7
    if stop - pos == _VARINT_BYTES_MAX:
        raise CorruptRecordError(f"varint at offset {pos} is longer than {_VARINT_BYTES_MAX} bytes")
    raise CorruptRecordError(f"truncated: varint at offset {pos} runs past the end")


def _encode_int(buf: bytearray, value: int) -> None:
    if not INT64_MIN <= value <= INT64_MAX:
        raise ValueError(f"integer {value} does not fit in 64 bits")
    _write_uvarint(buf, (value << 1) ^ (value >> 63))


def _decode_int(data: bytes, pos: int) -> tuple[int, int]:
    raw, pos = _read_uvarint(data, pos)
    return (raw >> 1) ^ -(raw & 1), pos


def _encode_bool(buf: bytearray, value: bool) -> None:
    buf.append(1 if value else 0)


def _decode_bool(data: bytes, pos: int) -> tuple[bool, int]:
    end = _end_of(data, pos, 1)
    byte = data[pos]
    if byte > 1:
        raise CorruptRecordError(f"bool byte {byte} at offset {pos} is neither 0 nor 1")
    return byte == 1, end


def _encode_str(buf: bytearray, value: str) -> None:
    raw = value.encode("utf-8")
    _write_uvarint(buf, len(raw))
    buf += raw


def _decode_str(data: bytes, pos: int) -> tuple[str, int]:
    size, pos = _read_uvarint(data, pos)
    end = _end_of(data, pos, size)
    try:
        return str(data[pos:end], "utf-8"), end
    except UnicodeDecodeError as err:
        raise CorruptRecordError(f"string at offset {pos} is not valid UTF-8: {err}") from None


def _encode_uuid(buf: bytearray, value: UUID) -> None:
    buf += value.bytes


def _decode_uuid(data: bytes, pos: int) -> tuple[UUID, int]:
    end = _end_of(data, pos, _UUID_BYTES)
    return shared_uuid(bytes(data[pos:end])), end


def _enum_codec(enum_cls: type[IntEnum]) -> tuple[_Encoder, _Decoder]:
    def decode(data: bytes, pos: int) -> tuple[IntEnum, int]:
        raw, end = _decode_int(data, pos)
        try:
            return enum_cls(raw), end
        except ValueError:
            raise CorruptRecordError(
                f"{raw} at offset {pos} is not a {enum_cls.__name__}"
            ) from None

    return _encode_int, decode


def _optional_codec(inner: tuple[_Encoder, _Decoder]) -> tuple[_Encoder, _Decoder]:
    encode_inner, decode_inner = inner

    def encode(buf: bytearray, value: object) -> None:
        if value is None:
            buf.append(0)
        else:
            buf.append(1)
            encode_inner(buf, value)

    def decode(data: bytes, pos: int) -> tuple[object, int]:
        present, pos = _decode_bool(data, pos)
        return decode_inner(data, pos) if present else (None, pos)

    return encode, decode


def _tuple_codec(item: tuple[_Encoder, _Decoder]) -> tuple[_Encoder, _Decoder]:
    encode_item, decode_item = item

    def encode(buf: bytearray, value: tuple[object, ...]) -> None:
        _write_uvarint(buf, len(value))
        for element in value:
            encode_item(buf, element)

    def decode(data: bytes, pos: int) -> tuple[tuple[object, ...], int]:
        count, pos = _read_uvarint(data, pos)
        # Every item takes at least one byte: a larger count is corrupt, and checking it first
        # keeps a hostile count from costing time.
        if count > len(data) - pos:
            raise CorruptRecordError(
                f"tuple of {count} items at offset {pos} but only {len(data) - pos} bytes left"
            )
        items = []
        for _ in range(count):
            element, pos = decode_item(data, pos)
            items.append(element)
        return tuple(items), pos

    return encode, decode


def _struct_codec(cls: type[Any]) -> tuple[_Encoder, _Decoder]:
    """Encodes a dataclass as its fields in declaration order; decodes through its __init__."""
    names, hints = _struct_fields(cls)
    encoders = tuple((name, _field_codec(hint)[0]) for name, hint in zip(names, hints, strict=True))

    def encode(buf: bytearray, value: object) -> None:
        for name, encode_field in encoders:
            encode_field(buf, getattr(value, name))

    return encode, _fields_decoder(cls, hints)


def _struct_fields(cls: type[Any]) -> tuple[tuple[str, ...], list[object]]:
    """The names and types of `cls`'s fields, in declaration order."""
    hints = typing.get_type_hints(cls)
    names = tuple(field.name for field in dataclasses.fields(cls))
    return names, [hints[name] for name in names]


def _fields_decoder(cls: type[Any], hints: list[object]) -> _Decoder:
    """Decodes the first `len(hints)` fields; the fields after them take their defaults."""
    helpers: dict[str, Callable[..., Any]] = {
        "read_multibyte_uvarint": _read_multibyte_uvarint,
        "end_of": _end_of,
    }
    return struct_decoder(cls, hints, lambda hint: _field_codec(hint)[1], helpers)


_SCALAR_CODECS: Final[dict[object, tuple[_Encoder, _Decoder]]] = {
    bool: (_encode_bool, _decode_bool),
    int: (_encode_int, _decode_int),
    str: (_encode_str, _decode_str),
    UUID: (_encode_uuid, _decode_uuid),
}


def _field_codec(hint: object) -> tuple[_Encoder, _Decoder]:
    """The codec of one field type; runs once per field when this module is imported."""
    if hint in _SCALAR_CODECS:
        return _SCALAR_CODECS[hint]
    if isinstance(hint, type) and issubclass(hint, IntEnum):
        return _enum_codec(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _struct_codec(hint)
    if (inner := optional_item(hint)) is not None:
        return _optional_codec(_field_codec(inner))
    if (item := tuple_item(hint)) is not None:
        return _tuple_codec(_field_codec(item))
    raise TypeError(f"the metadata codec cannot encode fields of type {hint!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class _RecordCodec:
    record_class: type[Record]
    header: bytes
    encode_body: _Encoder
    decode_body_by_version: tuple[_Decoder, ...]  # index: the version the bytes were written at


def _record_codec(record_class: type[Record]) -> _RecordCodec:
    header = bytearray()
    _write_uvarint(header, record_class.TYPE_ID)
    _write_uvarint(header, record_class.VERSION)
    encode_body, _ = _struct_codec(record_class)
    if record_class is PartitionRecord:
        encode_body = encode_partition_body
    names, hints = _struct_fields(record_class)
    fields_since: dict[str, int] = getattr(record_class, "FIELDS_SINCE", {})
    since = [fields_since.get(name, 0) for name in names]
    assert since == sorted(since), f"{record_class.__name__}: a newer field before an older one"
    by_version = tuple(
        _fields_decoder(record_class, hints[: sum(1 for v in since if v <= version)])
        for version in range(record_class.VERSION + 1)
    )
    return _RecordCodec(record_class, bytes(header), encode_body, by_version)


# A PartitionRecord's fields: the codec's own encoder, or its compiled twin
# (`_partition_records.pyx`), which writes the same bytes; a million-partition image's snapshot,
# stored image and whole-image MetadataFetch are nearly all PartitionRecords.
encode_partition_body_python: Final = _struct_codec(PartitionRecord)[0]
_compiled = load_extension("pykraft.metadata_log._partition_records")
encode_partition_body: _Encoder = (
    encode_partition_body_python if _compiled is None else _compiled.encode_partition_body
)
_CODEC_BY_CLASS: Final[dict[type[Record], _RecordCodec]] = {
    cls: _record_codec(cls) for cls in RECORD_CLASSES
}
_CODEC_BY_TYPE_ID: Final[dict[int, _RecordCodec]] = {
    int(cls.TYPE_ID): codec for cls, codec in _CODEC_BY_CLASS.items()
}
assert len(_CODEC_BY_TYPE_ID) == len(RECORD_CLASSES), "two record classes share a TYPE_ID"


def encode_record(record: Record) -> bytes:
    """The bytes of one record. Raises TypeError for a non-record, ValueError for an int that
    does not fit in 64 bits or a str that is not encodable as UTF-8."""
    codec = _CODEC_BY_CLASS.get(type(record))
    if codec is None:
        raise TypeError(f"not a metadata record: {type(record).__name__}")
    buf = bytearray(codec.header)
    codec.encode_body(buf, record)
    return bytes(buf)


def decode_record(data: bytes) -> Record:
    """The record `data` holds, all of `data`; CorruptRecordError if it is not exactly one."""
    data = bytes(data)  # a copy only when not bytes already: decoders slice it for UUIDs
    type_id, pos = _read_uvarint(data, 0)
    version, pos = _read_uvarint(data, pos)
    codec = _CODEC_BY_TYPE_ID.get(type_id)
    if codec is None:
        raise CorruptRecordError(f"unknown metadata record type id {type_id}")
    name = codec.record_class.__name__
    if version > codec.record_class.VERSION:
        raise CorruptRecordError(
            f"unsupported version {version} of {name} (type id {type_id}); "
            f"this node reads versions up to {codec.record_class.VERSION}"
        )
    try:
        record, pos = codec.decode_body_by_version[version](data, pos)
    except CorruptRecordError as err:
        raise CorruptRecordError(f"{name}: {err}") from None
    if pos != len(data):
        raise CorruptRecordError(f"{name}: {len(data) - pos} bytes of trailing garbage")
    assert isinstance(record, codec.record_class)
    return record


def encode_records(records: Sequence[Record]) -> bytes:
    """A batch: the record count, then each record prefixed by its length."""
    return batch_of_frames(len(records), encode_record_frames(records))


def encode_record_frames(records: Sequence[Record]) -> bytes:
    """Each record prefixed by its length, without the count: frames of several calls, joined
    in order, make the body of one batch (`batch_of_frames`), so a writer that gathers records
    from several sources encodes each record once and knows the batch's size as it goes."""
    buf = bytearray()
    for record in records:
        body = encode_record(record)
        _write_uvarint(buf, len(body))
        buf += body
    return bytes(buf)


def batch_of_frames(record_count: int, frames: bytes) -> bytes:
    """The batch `encode_records` writes for the `record_count` records whose joined
    `encode_record_frames` are `frames`."""
    buf = bytearray()
    _write_uvarint(buf, record_count)
    buf += frames
    return bytes(buf)


def decode_records(data: bytes) -> list[Record]:
    """The records of a batch written by `encode_records`, in order; CorruptRecordError if the
    bytes are anything else (including extra bytes after the last record)."""
    count, pos = batch_record_count(data)
    records: list[Record] = []
    for index in range(count):
        record, pos = decode_frame(data, pos, index)
        records.append(record)
    check_batch_end(data, pos)
    return records


def batch_record_count(data: bytes) -> tuple[int, int]:
    """The record count of the batch `data` and the position of its first frame; a reader then
    takes `decode_frame` (or a faster reader of the same frames) that many times and ends with
    `check_batch_end`, as `decode_records` does."""
    count, pos = _read_uvarint(data, 0)
    # Every record takes at least one byte (its length): a larger count is corrupt, and checking
    # it first keeps a hostile count from costing time.
    if count > len(data) - pos:
        raise CorruptRecordError(
            f"batch claims {count} records but only {len(data) - pos} bytes follow"
        )
    return count, pos


def decode_frame(data: bytes, pos: int, index: int) -> tuple[Record, int]:
    """The record framed at `pos` of a batch (its `index`th, for the error message) and the
    position after it."""
    size, pos = _read_uvarint(data, pos)
    end = _end_of(data, pos, size)
    try:
        return decode_record(data[pos:end]), end
    except CorruptRecordError as err:
        raise CorruptRecordError(f"record {index} of the batch: {err}") from None


def check_batch_end(data: bytes, pos: int) -> None:
    """CorruptRecordError unless the batch's last frame ended at `pos`, the end of `data`."""
    if pos != len(data):
        raise CorruptRecordError(f"{len(data) - pos} bytes of trailing garbage after the batch")


def _uvarint_bytes(value: int) -> int:
    """How many bytes `_write_uvarint` writes for `value`."""
    return max(1, (value.bit_length() + 6) // 7)


def _chunk(count: int, frames: list[bytes]) -> bytes:
    """The batch of `count` records whose frames (each a length prefix and its record, or the
    two apart) are `frames`, joined in order."""
    buf = bytearray()
    _write_uvarint(buf, count)
    return bytes(buf) + b"".join(frames)


# The length prefix of every record shorter than a one-byte varint's limit: the common case,
# looked up instead of written once per record of a snapshot.
_SHORT_LENGTH_PREFIXES: Final = tuple(bytes((length,)) for length in range(0x80))


def encode_chunks(records: Iterable[Record], bytes_max: int) -> Iterator[bytes]:
    """`records` encoded as consecutive batches of at most `bytes_max` bytes each, encoded as
    they are drawn from `records` (one chunk's bytes in memory at a time). Every chunk holds at
    least one record: a record whose own frame is larger than `bytes_max` travels alone, over
    the limit. No records give one empty batch, so a reader always gets a chunk."""
    parts: list[bytes] = []  # each record's length prefix and body
    count = size = 0  # records in `parts`, and their bytes
    for record in records:
        body = encode_record(record)
        length = len(body)
        if length < 0x80:
            prefix = _SHORT_LENGTH_PREFIXES[length]
        else:
            prefix_buf = bytearray()
            _write_uvarint(prefix_buf, length)
            prefix = bytes(prefix_buf)
        frame_size = len(prefix) + length
        if count and _uvarint_bytes(count + 1) + size + frame_size > bytes_max:
            yield _chunk(count, parts)
            parts, count, size = [], 0, 0
        parts += (prefix, body)
        count += 1
        size += frame_size
    yield _chunk(count, parts)


def split_batch(data: bytes, bytes_max: int) -> Iterator[tuple[int, bytes]]:
    """The batch `data` cut at record boundaries into batches of at most `bytes_max` bytes, as
    (index in `data` of the chunk's first record, chunk), without decoding the records; a
    record larger than `bytes_max` travels alone, as in `encode_chunks`. CorruptRecordError if
    `data` is not framed as `encode_records` frames a batch."""
    if len(data) <= bytes_max:
        yield 0, data
        return
    count, pos = _read_uvarint(data, 0)
    first = 0
    frames: list[bytes] = []
    size = 0
    for index in range(count):
        start = pos
        length, pos = _read_uvarint(data, pos)
        pos = _end_of(data, pos, length)
        frame = data[start:pos]
        if frames and _uvarint_bytes(len(frames) + 1) + size + len(frame) > bytes_max:
            yield first, _chunk(len(frames), frames)
            first, frames, size = index, [], 0
        frames.append(frame)
        size += len(frame)
    if pos != len(data):
        raise CorruptRecordError(f"{len(data) - pos} bytes of trailing garbage after the batch")
    yield first, _chunk(len(frames), frames)
