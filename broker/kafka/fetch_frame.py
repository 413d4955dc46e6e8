"""The Fetch response frame (v4-12) written by hand, so that record bytes need not pass through
Python: the frame is a sequence of parts, framing bytes and file ranges (`FileRange`), that the
listener sends with sendfile (issue 14 §3).

The input is the kio response entity the Fetch handler builds, except that a partition's
`records` may be a FileRange instead of bytes (kio's own encoder cannot write that entity; this
one writes both). The output is byte for byte what kio writes for the same response with the
ranges' bytes in place (the unit tests check every version 4-12): the 4-byte size, the response
header (v0; v1 with its empty tagged fields from the flexible v12), every field of the version,
each partition's records behind their length (int32, or in v12 an unsigned varint of length + 1,
0 for null) and, in v12, the partitions' tagged fields (diverging epoch, current leader,
snapshot id, each written only when it differs from its default, as Kafka and kio do).

Which fields a version has is read from the entity (kio's class of that version has exactly
those), so one path writes every version, as `entities.build` builds them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from pykraft.broker.kafka.entities import millis
from pykraft.broker.log import FileRange

_FLEXIBLE_VERSION_MIN: Final = 12
_INT16: Final = struct.Struct(">h")
_INT32: Final = struct.Struct(">i")
_INT64: Final = struct.Struct(">q")
_NULL: Final = -1
_TAGS: Final = ("diverging_epoch", "current_leader", "snapshot_id")  # tags 0, 1, 2

Part = bytes | FileRange


@dataclass(frozen=True)
class FetchFrame:
    """A whole response frame as parts; `size_bytes` counts every byte, the size prefix and
    the ranges' lengths included. The frame owns its ranges: `close` them once sent."""

    parts: tuple[Part, ...]
    size_bytes: int

    def ranges(self) -> Iterator[FileRange]:
        return (part for part in self.parts if isinstance(part, FileRange))

    def to_bytes(self) -> bytes:
        """The frame read into memory (when it cannot be sent from the files)."""
        return b"".join(part if isinstance(part, bytes) else part.read() for part in self.parts)

    def close(self) -> None:
        for file_range in self.ranges():
            file_range.close()


class _Writer:
    """Framing bytes collected between the file ranges."""

    def __init__(self, flexible: bool) -> None:
        self.flexible = flexible
        self._parts: list[Part] = []
        self.buffer = bytearray()  # written since the last range

    def int16(self, value: int) -> None:
        self.buffer += _INT16.pack(value)

    def int32(self, value: int) -> None:
        self.buffer += _INT32.pack(value)

    def int64(self, value: int) -> None:
        self.buffer += _INT64.pack(value)

    def uvarint(self, value: int) -> None:
        while value >= 0x80:
            self.buffer.append(value & 0x7F | 0x80)
            value >>= 7
        self.buffer.append(value)

    def length(self, length: int) -> None:
        """A string's length, or an array's or records' (-1: null)."""
        if self.flexible:
            self.uvarint(length + 1)
        else:
            self.int32(length)

    def string(self, value: str) -> None:
        data = value.encode()
        if self.flexible:
            self.uvarint(len(data) + 1)
        else:
            self.int16(len(data))
        self.buffer += data

    def records(self, records: bytes | FileRange | None) -> None:
        if records is None:
            self.length(_NULL)
        elif isinstance(records, FileRange):
            self.length(records.length)
            self._parts += (bytes(self.buffer), records)
            self.buffer.clear()
        else:
            self.length(len(records))
            self.buffer += records

    def no_tags(self) -> None:
        if self.flexible:
            self.uvarint(0)

    def frame(self) -> FetchFrame:
        parts = [part for part in (*self._parts, bytes(self.buffer)) if _size(part)]
        size_bytes = sum(map(_size, parts))
        return FetchFrame((_INT32.pack(size_bytes), *parts), _INT32.size + size_bytes)


def encode_fetch_response(version: int, correlation_id: int, response: Any) -> FetchFrame:
    """The frame answering request `correlation_id` with `response`, kio's FetchResponse of
    `version` (4-12), whose partitions' records are bytes, None or FileRanges."""
    assert 4 <= version <= _FLEXIBLE_VERSION_MIN, version
    out = _Writer(flexible=version >= _FLEXIBLE_VERSION_MIN)
    out.int32(correlation_id)
    out.no_tags()  # response header v1 in flexible versions
    out.int32(millis(response.throttle_time))
    if hasattr(response, "session_id"):  # v7+
        out.int16(response.error_code)
        out.int32(response.session_id)
    out.length(len(response.responses))
    for topic in response.responses:
        out.string(topic.topic)
        out.length(len(topic.partitions))
        for partition in topic.partitions:
            _partition(out, partition)
        out.no_tags()
    out.no_tags()
    return out.frame()


def _partition(out: _Writer, partition: Any) -> None:
    out.int32(partition.partition_index)
    out.int16(partition.error_code)
    out.int64(partition.high_watermark)
    out.int64(partition.last_stable_offset)
    if hasattr(partition, "log_start_offset"):  # v5+
        out.int64(partition.log_start_offset)
    aborted = partition.aborted_transactions
    out.length(_NULL if aborted is None else len(aborted))
    for transaction in aborted or ():
        out.int64(transaction.producer_id)
        out.int64(transaction.first_offset)
        out.no_tags()
    if hasattr(partition, "preferred_read_replica"):  # v11+
        out.int32(partition.preferred_read_replica)
    out.records(partition.records)
    if out.flexible:
        _tagged_fields(out, partition)


def _tagged_fields(out: _Writer, partition: Any) -> None:
    """v12's tagged fields of a partition, those that differ from their defaults."""
    present = [
        (tag, value)
        for tag, name in enumerate(_TAGS)
        if (value := getattr(partition, name)) != type(value)()
    ]
    out.uvarint(len(present))
    for tag, value in present:
        body = _Writer(flexible=True)
        if tag == 0:
            body.int32(value.epoch)
            body.int64(value.end_offset)
        elif tag == 1:
            body.int32(value.leader_id)
            body.int32(value.leader_epoch)
        else:
            body.int64(value.end_offset)
            body.int32(value.epoch)
        body.no_tags()
        out.uvarint(tag)
        out.uvarint(len(body.buffer))
        out.buffer += body.buffer


def _size(part: Part) -> int:
    return len(part) if isinstance(part, bytes) else part.length
