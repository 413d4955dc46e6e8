"""The read side of a `PartitionLog` (mixed into it): records, offsets by timestamp and by leader
epoch, and the segment list. Reads take only the segments' shared lock (module `local_log`), so
they run alongside appends and see every batch of an append or none of it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pykraft.broker.log.errors import LogError
from pykraft.broker.log.files import FileRange
from pykraft.broker.log.partition_log_base import PartitionLogBase
from pykraft.broker.log.results import RangeRead, Read, ReadResult
from pykraft.broker.log.segment import SegmentInfo
from pykraft.broker.log.segment_view import Span, find_offset_by_timestamp, find_span
from pykraft.proto import common_pb2


class PartitionLogReads(PartitionLogBase):
    """Reading of `PartitionLog`."""

    def read(self, offset: int, *, bytes_max: int, upper_offset: int | None = None) -> ReadResult:
        """Whole batches from the one holding `offset`: at least one batch if there is any
        below the bound, then more while they fit `bytes_max`, from one segment (as Kafka).
        No batch whose last offset is >= `upper_offset` (default: the log end; consumers pass
        the high watermark). LogError(OFFSET_OUT_OF_RANGE) below the log start offset or above
        the log end offset."""
        found = self._read(offset, bytes_max, upper_offset, _read_bytes)
        return ReadResult(
            found.data or b"",
            found.first_offset,
            found.next_offset,
            found.high_watermark,
            found.log_start_offset,
        )

    def read_range(
        self, offset: int, *, bytes_max: int, upper_offset: int | None = None
    ) -> RangeRead:
        """The batches `read` returns, as a range of their segment's file on a duplicated
        descriptor (FileRange says why) instead of bytes: no record byte is read. Out of
        descriptors (EMFILE, ENFILE), the bytes instead: a fetch must not fail for that. The
        caller closes the range; same errors as `read`."""
        return self._read(offset, bytes_max, upper_offset, _open_range)

    def _read(
        self,
        offset: int,
        bytes_max: int,
        upper_offset: int | None,
        take: Callable[[Span], _Taken],
    ) -> Read[_Taken]:
        """`take` of the span a read finds, under the shared lock (the segment stays open)."""
        assert bytes_max >= 0, bytes_max
        if offset == self._log_end_offset:  # a caught-up follower: nothing to read, no lock
            log_start_offset, high_watermark = self._start.offset, self._high_watermark
            if log_start_offset <= offset:
                return Read(None, offset, offset, high_watermark, log_start_offset)
        with self._local.reading():
            # The end before the view: an append publishes its segments before its end.
            log_end_offset = self._log_end_offset
            view = self._local.view
            log_start_offset, high_watermark = self._start.offset, self._high_watermark
            if not log_start_offset <= offset <= log_end_offset:
                raise LogError(
                    common_pb2.OFFSET_OUT_OF_RANGE,
                    f"offset {offset} is outside [{log_start_offset}, {log_end_offset}]",
                )
            upper = log_end_offset if upper_offset is None else min(upper_offset, log_end_offset)
            span = find_span(view, offset, bytes_max, upper) if offset < upper else None
            if span is None:
                return Read(None, offset, offset, high_watermark, log_start_offset)
            taken = take(span)
        return Read(taken, span.first_offset, span.next_offset, high_watermark, log_start_offset)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record at or after the log start whose timestamp
        is >= `timestamp_ms`, or None (Kafka's ListOffsets by time; the broker hides answers at
        or above the high watermark from consumers)."""
        with self._local.reading():
            return find_offset_by_timestamp(self._local.view, timestamp_ms, self._start.offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """Kafka's OffsetForLeaderEpoch: (largest epoch <= `epoch`, its end offset), or
        (-1, -1) when the log knows no such epoch (see LeaderEpochCache.end_offset_for)."""
        with self._lock:
            return self._epochs.end_offset_for(epoch, self._log_end_offset)

    def segments(self) -> tuple[SegmentInfo, ...]:
        """A snapshot of the segments, oldest first; the last one is the active segment."""
        return self._local.infos()


_Taken = TypeVar("_Taken")


def _read_bytes(span: Span) -> bytes:
    return span.segment.read_bytes(span.position, span.length)


def _open_range(span: Span) -> FileRange | bytes:
    return span.segment.open_range(span.position, span.length)
