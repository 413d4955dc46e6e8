"""Checking the batches of an append and assigning their offsets (Kafka's LogValidator, in part).

A produce request (leader) or a fetch response (follower) carries one or more RecordBatch v2
batches back to back. Everything here works on the batch headers: an uncompressed batch is
never decoded (its CRC vouches for the bytes the producer built), a compressed one is decoded
once so its records are checked against the header. Nothing here touches the disk; a refused
batch raises LogError with Kafka's code and the caller has written nothing.

Leader rules (Kafka's): size <= max.message.bytes (MESSAGE_TOO_LARGE); a record count above 0
with last_offset_delta == record_count - 1, no control batch from a client, max timestamp not
below the first (INVALID_RECORD); CreateTime timestamps within message.timestamp.before/after.max.ms
of `now_ms` (INVALID_TIMESTAMP; checked on the first and max timestamps of an uncompressed batch,
on every record of a compressed one). Offsets are then assigned in place and the leader epoch
stamped: both lie outside the CRC. LogAppendTime rewrites the timestamp type and max timestamp,
which lie inside it, so the CRC is computed again (as Kafka does). All of that is in the 61-byte
header, so only headers are copied: the records are written from the request's own bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Final, NamedTuple

import crc32c

from pykraft.broker.log.config import LogConfig
from pykraft.broker.log.errors import LogError
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import (
    HEADER_SIZE,
    NO_TIMESTAMP,
    BatchError,
    BatchHeader,
    Buffer,
    Compression,
    Record,
    TimestampType,
    decode_batch,
    iter_batches,
    rewrite_offsets,
)

# Where the fields that LogAppendTime changes sit in a batch (see pykraft.proto.record_batch).
_CRC_AT: Final = 17
_ATTRIBUTES_AT: Final = 21
_MAX_TIMESTAMP_AT: Final = 35
_TIMESTAMP_TYPE_FLAG: Final = 0x08
_UINT32 = struct.Struct(">I")
_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")

Batches = list[tuple[int, BatchHeader]]  # (position in the request's bytes, header)


def split_batches(data: bytes | bytearray) -> Batches:
    """The batches of a request, each checked for magic, length and CRC; CORRUPT_MESSAGE if
    any fails or bytes are left over after the last whole batch."""
    try:
        batches = list(iter_batches(data, verify=True))
    except BatchError as error:
        raise LogError(error.error_code, str(error)) from None
    end = batches[-1][0] + batches[-1][1].size_bytes if batches else 0
    if end != len(data):
        raise LogError(common_pb2.CORRUPT_MESSAGE, f"{len(data) - end} bytes after the last batch")
    return batches


def check_leader_batches(
    data: bytes | bytearray, batches: Batches, config: LogConfig, *, now_ms: int
) -> None:
    """Applies the leader's rules (module docstring) to every batch of a request."""
    for position, header in batches:
        if header.size_bytes > config.max_message_bytes:
            raise LogError(
                common_pb2.MESSAGE_TOO_LARGE,
                f"batch of {header.size_bytes} bytes, max.message.bytes is "
                f"{config.max_message_bytes}",
            )
        _check_shape(header)
        compacted = "compact" in config.cleanup_policy
        if header.compression is Compression.NONE and not compacted:
            timestamps = [header.base_timestamp, header.max_timestamp]
        else:
            records = _decoded(data, position)
            timestamps = _record_timestamps(records, header)
            if compacted and any(record.key is None for record in records):
                # Kafka's rule: the cleaner keeps the latest record of each key, so a keyless
                # record on a compacted topic could never be kept; refuse it up front.
                raise _invalid("compacted topic cannot accept a record without a key")
        if config.message_timestamp_type is TimestampType.CREATE_TIME:
            _check_timestamps(timestamps, config, now_ms)


def _invalid(message: str) -> LogError:
    return LogError(common_pb2.INVALID_RECORD, message)


def _check_shape(header: BatchHeader) -> None:
    if header.record_count <= 0:
        raise _invalid(f"batch at offset {header.base_offset} has {header.record_count} records")
    if header.last_offset_delta != header.record_count - 1:
        raise _invalid(
            f"last offset delta {header.last_offset_delta} does not match "
            f"{header.record_count} records"
        )
    if header.is_control:
        raise _invalid("clients may not write control batches")
    if header.max_timestamp < header.base_timestamp:
        raise _invalid(f"max timestamp {header.max_timestamp} < first {header.base_timestamp}")
    try:
        header.compression  # noqa: B018 - raises BatchError(INVALID_RECORD) for codecs 5-7
    except BatchError as error:
        raise LogError(error.error_code, str(error)) from None


def _decoded(data: bytes | bytearray, position: int) -> list[Record]:
    """The batch's records; its bytes must decode (count, deltas, varints: decode_batch)."""
    try:
        return decode_batch(data, position)
    except BatchError as error:
        raise LogError(error.error_code, str(error)) from None


def _record_timestamps(records: Sequence[Record], header: BatchHeader) -> list[int]:
    """The records' timestamps, which must match the header's max."""
    timestamps = [record.timestamp for record in records]
    if header.timestamp_type is TimestampType.CREATE_TIME and max(timestamps) != (
        header.max_timestamp
    ):
        raise _invalid(f"max timestamp {header.max_timestamp} is not the records' largest")
    return timestamps


def _check_timestamps(timestamps: Sequence[int], config: LogConfig, now_ms: int) -> None:
    for timestamp in timestamps:
        if timestamp == NO_TIMESTAMP:
            continue
        too_old = timestamp < now_ms - config.message_timestamp_before_max_ms
        too_new = timestamp > now_ms + config.message_timestamp_after_max_ms
        if too_old or too_new:
            raise LogError(
                common_pb2.INVALID_TIMESTAMP,
                f"timestamp {timestamp} is outside the window the topic allows around {now_ms}",
            )


class Stamped(NamedTuple):
    """A leader's batches with their offsets assigned: the rewritten headers (by position in
    the request's bytes) and the bytes to write, in order (`pieces`)."""

    batches: Batches
    pieces: list[Buffer]
    size_bytes: int


def assign_offsets(
    data: Buffer,
    batches: Batches,
    *,
    base_offset: int,
    leader_epoch: int,
    config: LogConfig,
    now_ms: int,
) -> Stamped:
    """Gives the batches consecutive offsets from `base_offset`, stamps `leader_epoch` and
    applies the topic's timestamp type, leaving `data` as it is: each batch's 61-byte header is
    copied and rewritten, and its records are a view of `data` (not copied: the segment writes
    header and records with one writev)."""
    assigned: Batches = []
    pieces: list[Buffer] = []
    view = memoryview(data)
    next_offset = base_offset
    for position, header in batches:
        head = bytearray(view[position : position + HEADER_SIZE])
        records = view[position + HEADER_SIZE : position + header.size_bytes]
        rewrite_offsets(head, 0, base_offset=next_offset, partition_leader_epoch=leader_epoch)
        if config.message_timestamp_type is TimestampType.LOG_APPEND_TIME:
            _set_timestamp(head, records, header, TimestampType.LOG_APPEND_TIME, now_ms)
        elif header.timestamp_type is TimestampType.LOG_APPEND_TIME:
            _set_timestamp(head, records, header, TimestampType.CREATE_TIME, header.max_timestamp)
        rewritten = BatchHeader.parse(head, 0)
        assigned.append((position, rewritten))
        pieces += (head, records)
        next_offset = rewritten.next_offset
    return Stamped(assigned, pieces, len(view))


def _set_timestamp(
    head: bytearray,
    records: memoryview,
    header: BatchHeader,
    timestamp_type: TimestampType,
    max_timestamp: int,
) -> None:
    """Sets the timestamp type bit and MaxTimestamp in the batch's header `head`, then the CRC
    over [21, end): the rest of the header, then its `records`."""
    attributes = header.attributes & ~_TIMESTAMP_TYPE_FLAG
    if timestamp_type is TimestampType.LOG_APPEND_TIME:
        attributes |= _TIMESTAMP_TYPE_FLAG
    _INT16.pack_into(head, _ATTRIBUTES_AT, attributes)
    _INT64.pack_into(head, _MAX_TIMESTAMP_AT, max_timestamp)
    crc = crc32c.crc32c(records, crc32c.crc32c(memoryview(head)[_ATTRIBUTES_AT:]))
    _UINT32.pack_into(head, _CRC_AT, crc)


def check_follower_batches(batches: Batches, *, log_end_offset: int) -> None:
    """A follower appends the leader's offsets as they are: the first batch must start at or
    after the log end offset (above it only where the leader's cleaner removed batches) and
    offsets must increase; UNKNOWN_SERVER_ERROR otherwise, as the caller broke the contract."""
    next_offset = log_end_offset
    for _, header in batches:
        if header.base_offset < next_offset or header.last_offset_delta < 0:
            raise LogError(
                common_pb2.UNKNOWN_SERVER_ERROR,
                f"follower batch at offsets {header.base_offset}..{header.last_offset} "
                f"does not follow offset {next_offset - 1}",
            )
        next_offset = header.next_offset
