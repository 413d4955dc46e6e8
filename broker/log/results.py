"""What `PartitionLog` appends and reads return: `AppendInfo` and `ReadResult`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from pykraft.broker.log.config import LogConfig
from pykraft.broker.log.files import FileRange
from pykraft.broker.log.producer_state import Duplicate
from pykraft.broker.log.validation import Batches
from pykraft.proto.record_batch import NO_TIMESTAMP, TimestampType

_Data = TypeVar("_Data")


@dataclass(frozen=True)
class AppendInfo:
    """What an append wrote: offsets first..last (last = first - 1 when nothing), the largest
    timestamp, the LogAppendTime stamped (-1 with CreateTime), batches and bytes. With
    `duplicate`, the idempotent producer's batches were written before: nothing was written
    now, and the offsets, timestamps and LogAppendTime are the original batches'."""

    first_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time_ms: int
    batch_count: int
    size_bytes: int
    duplicate: bool = False


@dataclass(frozen=True)
class ReadResult:
    """Whole batches as stored. `first_offset` is the first batch's base offset (it may be
    below the offset asked for, as batches are not split), `next_offset` the offset after the
    last returned batch; both equal the offset asked for when `data` is empty."""

    data: bytes
    first_offset: int
    next_offset: int
    high_watermark: int
    log_start_offset: int


@dataclass(frozen=True)
class Read(Generic[_Data]):
    """What a read found: `data` (the batches' bytes, or a FileRange of them; None when no
    batch), with the offsets and log bounds as in ReadResult."""

    data: _Data | None
    first_offset: int
    next_offset: int
    high_watermark: int
    log_start_offset: int


RangeRead = Read[FileRange | bytes]
"""`PartitionLog.read_range`'s answer: the batches as a range of a segment file (their bytes
when the process has no descriptor to spare)."""


def nothing_appended(log_end_offset: int) -> AppendInfo:
    """What an append of no batches answers: an empty range at the log end."""
    return AppendInfo(log_end_offset, log_end_offset - 1, NO_TIMESTAMP, -1, 0, 0)


def duplicate_info(duplicate: Duplicate, config: LogConfig) -> AppendInfo:
    """What a duplicate request answers: the original batches' offsets and largest timestamp,
    which is their LogAppendTime when the topic stamps one."""
    stamped = config.message_timestamp_type is TimestampType.LOG_APPEND_TIME
    return AppendInfo(
        first_offset=duplicate.first_offset,
        last_offset=duplicate.last_offset,
        max_timestamp=duplicate.max_timestamp,
        log_append_time_ms=duplicate.max_timestamp if stamped else -1,
        batch_count=0,
        size_bytes=0,
        duplicate=True,
    )


def append_info(size_bytes: int, batches: Batches, log_append_time_ms: int) -> AppendInfo:
    """What an append of `batches` (`size_bytes` in all) wrote."""
    return AppendInfo(
        first_offset=batches[0][1].base_offset,
        last_offset=batches[-1][1].last_offset,
        max_timestamp=max(header.max_timestamp for _, header in batches),
        log_append_time_ms=log_append_time_ms,
        batch_count=len(batches),
        size_bytes=size_bytes,
    )
