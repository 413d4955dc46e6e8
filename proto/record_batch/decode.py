"""Decoding a batch into its records: the consumer's hot loop, and the broker's check of what
a producer sent.

Varints are Kafka's ByteUtils ones (zig-zag, 7 bits a byte, least significant group first).
"""

from __future__ import annotations

from pykraft.proto import extensions
from pykraft.proto.record_batch.compression import decompress
from pykraft.proto.record_batch.header import (
    BATCH_LENGTH_MIN,
    HEADER_SIZE,
    BatchError,
    Buffer,
    Compression,
    TimestampType,
    verify_batch,
    whole_batch,
)
from pykraft.proto.record_batch.records import Record, RecordHeader


def decode_batch(buf: Buffer, position: int = 0, *, verify: bool = True) -> list[Record]:
    """Verifies the batch at `position` (as verify_batch) and returns its records.

    Offsets and timestamps are absolute. Offset deltas must be strictly increasing within
    [0, LastOffsetDelta]; they need not be contiguous, since the cleaner keeps offsets (a
    broker validating a produce request checks contiguity with record_count == last_offset_delta
    + 1). Raises CorruptBatchError for damaged bytes and BatchError(INVALID_RECORD) for bad
    records, a record count that does not match, or bytes left after the last record.
    `verify=False` skips only the CRC (a consumer's check_crcs=false); the rest is checked.
    """
    header = verify_batch(buf, position) if verify else whole_batch(buf, position)
    if header.record_count < 0:
        raise BatchError(f"negative record count {header.record_count}")
    if header.record_count == 0:
        if header.batch_length != BATCH_LENGTH_MIN:
            raise BatchError("an empty batch carries record bytes")
        return []
    payload = bytes(memoryview(buf)[position + HEADER_SIZE : position + header.size_bytes])
    compression = header.compression
    if compression is not Compression.NONE:
        payload = decompress(compression, payload)
    return decode_records(
        payload,
        header.base_offset,
        header.base_timestamp,
        header.max_timestamp,
        header.timestamp_type is TimestampType.CREATE_TIME,
        header.last_offset_delta,
        header.record_count,
    )


def _read_varint(data: bytes, pos: int, bits: int) -> tuple[int, int]:
    """(value, position after it) of the varint at `pos`; `bits` is 32 for a varint (at most 5
    bytes) and 64 for a varlong (10). Raises IndexError at the end of `data`, BatchError when
    the varint is too long or its value does not fit."""
    raw = 0
    shift = 0
    for index in range(pos, pos + (bits + 6) // 7):
        byte = data[index]
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            if raw >> bits:
                raise BatchError(f"varint at {pos} overflows {bits} bits")
            return (raw >> 1) ^ -(raw & 1), index + 1
        shift += 7
    raise BatchError(f"varint at {pos} is longer than {(bits + 6) // 7} bytes")


def decode_records_python(
    data: bytes,
    base_offset: int,
    base_timestamp: int,
    log_append_ms: int,
    create_time: bool,
    last_delta: int,
    record_count: int,
) -> list[Record]:
    """Parses `record_count` records that must fill `data` exactly; `log_append_ms` is every
    record's timestamp unless `create_time`. The compiled `_codec.decode_records` returns the
    same records and raises the same BatchErrors (its messages may name a different cause for
    a record that runs past the end of `data`).

    This is the consumer's hot loop, written for speed (measured: 2.5 -> 1.35 us per 100-byte
    record): varints of one or two bytes and short keys and values are decoded inline, longer
    ones by the helpers, and records are filled through their slots (`_new_record`). Reads never
    check bounds one by one: slices past the end come back short and indexing past it raises
    IndexError, and both are caught by the check that each record ended where its Length said.
    """
    previous_delta = -1
    records: list[Record] = []
    pos = 0
    try:
        for _ in range(record_count):
            raw = data[pos]  # Length
            if raw < 0x80:
                length, pos = (raw >> 1) ^ -(raw & 1), pos + 1
            elif data[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (data[pos + 1] << 7)
                length, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                length, pos = _read_varint(data, pos, 32)
            record_end = pos + length
            raw = data[pos + 1]  # TimestampDelta, after the unused record attributes
            if raw < 0x80:
                timestamp_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                timestamp_delta, pos = _read_varint(data, pos + 1, 64)
            raw = data[pos]  # OffsetDelta
            if raw < 0x80:
                offset_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 1
            elif data[pos + 1] < 0x80:
                raw = (raw & 0x7F) | (data[pos + 1] << 7)
                offset_delta, pos = (raw >> 1) ^ -(raw & 1), pos + 2
            else:
                offset_delta, pos = _read_varint(data, pos, 32)
            if not previous_delta < offset_delta <= last_delta:
                raise BatchError(f"offset delta {offset_delta} after {previous_delta}")
            previous_delta = offset_delta
            raw = data[pos]  # Key: null, or shorter than 64 bytes, inline
            if raw == 1:
                key, pos = None, pos + 1
            elif raw < 0x80 and not raw & 1:
                key, pos = data[pos + 1 : pos + 1 + (raw >> 1)], pos + 1 + (raw >> 1)
            else:
                key, pos = _read_nullable_bytes(data, pos)
            raw = data[pos]  # Value: null, or shorter than 8 KiB, inline
            if raw == 1:
                value, pos = None, pos + 1
            elif raw < 0x80 and not raw & 1:
                value, pos = data[pos + 1 : pos + 1 + (raw >> 1)], pos + 1 + (raw >> 1)
            elif data[pos + 1] < 0x80 and not raw & 1:
                size = ((raw & 0x7F) | (data[pos + 1] << 7)) >> 1
                value, pos = data[pos + 2 : pos + 2 + size], pos + 2 + size
            else:
                value, pos = _read_nullable_bytes(data, pos)
            if data[pos] == 0:  # HeadersCount: none, the common case
                headers: tuple[RecordHeader, ...] = ()
                pos += 1
            else:
                headers, pos = _read_headers(data, pos)
            if pos != record_end:
                raise BatchError(f"record ends at {pos}, its length says {record_end}")
            record = _new_record(Record)
            _set_offset(record, base_offset + offset_delta)
            _set_timestamp(
                record, base_timestamp + timestamp_delta if create_time else log_append_ms
            )
            _set_key(record, key)
            _set_value(record, value)
            _set_headers(record, headers)
            records.append(record)
    except IndexError:
        raise BatchError(f"records end early: {record_count} declared") from None
    if pos != len(data):
        raise BatchError(f"{len(data) - pos} bytes follow the last of {len(records)} records")
    assert len(records) == record_count, (len(records), record_count)
    return records


# A frozen dataclass's __init__ sets each field through object.__setattr__ (0.55 us a Record);
# the decoder fills the slots through their descriptors instead (0.29 us).
_new_record = object.__new__
_set_offset, _set_timestamp, _set_key, _set_value, _set_headers = (
    Record.__dict__[field].__set__ for field in ("offset", "timestamp", "key", "value", "headers")
)


def _read_nullable_bytes(data: bytes, pos: int) -> tuple[bytes | None, int]:
    byte = data[pos]
    if byte < 0x80:
        size, pos = (byte >> 1) ^ -(byte & 1), pos + 1
    else:
        size, pos = _read_varint(data, pos, 32)
    if size < 0:
        if size != -1:
            raise BatchError(f"negative length {size}")
        return None, pos
    return data[pos : pos + size], pos + size


def _read_headers(data: bytes, pos: int) -> tuple[tuple[RecordHeader, ...], int]:
    count, pos = _read_varint(data, pos, 32)
    if not 0 <= count <= len(data) - pos:
        raise BatchError(f"invalid header count {count}")
    headers = []
    for _ in range(count):
        key_size, pos = _read_varint(data, pos, 32)
        if key_size < 0:
            raise BatchError("a record header key may not be null")
        try:
            key = data[pos : pos + key_size].decode()
        except UnicodeDecodeError:
            raise BatchError("a record header key is not utf-8") from None
        value, pos = _read_nullable_bytes(data, pos + key_size)
        headers.append(RecordHeader(key, value))
    return tuple(headers), pos


# The consumer's and the broker's per-batch decoder: compiled unless disabled or not built.
decode_records = decode_records_python
_compiled = extensions.load("pykraft.proto.record_batch._codec")
if _compiled is not None:
    decode_records = _compiled.decode_records
