"""The decoded record and record header, the values `decode_batch` returns and `BatchBuilder`
accepts.

Record (zig-zag varints, as in protobuf; -1 as a length means null)::

    Length varint (bytes after itself) | Attributes int8 (unused, 0) | TimestampDelta varlong |
    OffsetDelta varint | KeyLength varint | Key | ValueLength varint | Value |
    HeadersCount varint | HeadersCount x (KeyLength varint | Key utf-8 | ValueLength varint | Value)

A header key may not be null. Deltas are relative to BaseOffset and BaseTimestamp. In a
LogAppendTime batch every record's timestamp reads as MaxTimestamp.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RecordHeader:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record; `offset` and `timestamp` are absolute."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[RecordHeader, ...] = ()
