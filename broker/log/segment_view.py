"""The segments of a `PartitionLog` as one immutable value, and what is read through it: whole
batches from an offset (for fetches, and for the producer state's replay in
`partition_producers`), and the first record at or after a timestamp. `find_span` says where
a read's batches lie without reading them (for the Kafka listener's sendfile).

`PartitionLog` replaces its `SegmentView` as a whole (never mutates it), so a reader that took
the view once sees a consistent list of segments and their base offsets.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import NamedTuple

from pykraft.broker.log.segment import LogSegment


class SegmentView(NamedTuple):
    """The segments and their base offsets, replaced as one value so readers see a pair."""

    segments: tuple[LogSegment, ...]
    bases: tuple[int, ...]

    @classmethod
    def of(cls, segments: Sequence[LogSegment]) -> SegmentView:
        assert segments, "a log always has an active segment"
        return cls(tuple(segments), tuple(s.base_offset for s in segments))


class Span(NamedTuple):
    """Whole batches of one segment: where they lie and the offsets they cover."""

    segment: LogSegment
    position: int
    length: int
    first_offset: int
    next_offset: int


def find_span(view: SegmentView, offset: int, bytes_max: int, upper_offset: int) -> Span | None:
    """The batches a read from `offset` returns, from the segment holding `offset` (or the
    next one that holds any at or after it), or None if no batch below `upper_offset` is left
    (a gap the leader's cleaner left runs to the end). See `LogSegment.batch_span`."""
    slot = bisect_right(view.bases, offset) - 1
    assert slot >= 0, (offset, view.bases)
    for segment in view.segments[slot:]:
        position = segment.find_position(offset)
        if position is not None:
            found = segment.batch_span(position, bytes_max=bytes_max, upper_offset=upper_offset)
            return None if found is None else Span(segment, position, *found)
    return None


def read_view(
    view: SegmentView, offset: int, bytes_max: int, upper_offset: int
) -> tuple[bytes, int, int] | None:
    """The bytes of `find_span`'s batches: (data, first offset, next offset), or None."""
    span = find_span(view, offset, bytes_max, upper_offset)
    if span is None:
        return None
    data = span.segment.read_bytes(span.position, span.length)
    return data, span.first_offset, span.next_offset


def find_offset_by_timestamp(
    view: SegmentView, timestamp_ms: int, start_offset: int
) -> tuple[int, int] | None:
    """(offset, timestamp) of the earliest record at or after `start_offset` whose timestamp is
    >= `timestamp_ms`, or None, skipping segments that cannot hold it. Raises BatchError as
    `LogSegment.find_offset_by_timestamp`."""
    for segment in view.segments:
        if segment.max_timestamp < timestamp_ms or segment.next_offset <= start_offset:
            continue
        found = segment.find_offset_by_timestamp(timestamp_ms, start_offset)
        if found is not None:
            return found
    return None
