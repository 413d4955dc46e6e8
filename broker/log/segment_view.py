"""The segments of a `PartitionLog` as one immutable value, and what is read through it: whole
batches from an offset, and the producer state rebuilt from snapshot plus batch headers.

`PartitionLog` replaces its `SegmentView` as a whole (never mutates it), so a reader that took
the view once sees a consistent list of segments and their base offsets.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from pathlib import Path
from typing import Final, NamedTuple

from pykraft.broker.log.producer_snapshots import load_newest_snapshot
from pykraft.broker.log.producer_state import ProducerStateManager
from pykraft.broker.log.segment import LogSegment
from pykraft.proto.record_batch import BatchError, iter_batches

# Bytes read at a time when replaying batch headers into the producer state.
PRODUCER_SCAN_BYTES_MAX: Final = 1 << 20


class SegmentView(NamedTuple):
    """The segments and their base offsets, replaced as one value so readers see a pair."""

    segments: tuple[LogSegment, ...]
    bases: tuple[int, ...]

    @classmethod
    def of(cls, segments: Sequence[LogSegment]) -> SegmentView:
        assert segments, "a log always has an active segment"
        return cls(tuple(segments), tuple(s.base_offset for s in segments))


def read_view(
    view: SegmentView, offset: int, bytes_max: int, upper_offset: int
) -> tuple[bytes, int, int] | None:
    """Whole batches from the segment holding `offset` (or the next one that holds any at or
    after it): (data, first offset, next offset), or None if no batch below `upper_offset` is
    left (a gap the leader's cleaner left runs to the end). See `LogSegment.read`."""
    slot = bisect_right(view.bases, offset) - 1
    assert slot >= 0, (offset, view.bases)
    for segment in view.segments[slot:]:
        position = segment.find_position(offset)
        if position is not None:
            return segment.read(position, bytes_max=bytes_max, upper_offset=upper_offset)
    return None


def rebuilt_producer_state(
    directory: Path, view: SegmentView, end_offset: int
) -> ProducerStateManager:
    """The producer state after every batch below `end_offset` (a batch boundary): the newest
    usable snapshot at or below it, then the batch headers after the snapshot read back from
    the segments. The caller keeps the segments from changing meanwhile. Raises OSError, also
    for a batch header that does not parse (damage the caller must treat as a storage
    failure)."""
    state = load_newest_snapshot(directory, low_offset=view.bases[0], high_offset=end_offset)
    offset = state.end_offset
    while offset < end_offset:
        try:
            found = read_view(view, offset, PRODUCER_SCAN_BYTES_MAX, end_offset)
            if found is None:
                break  # the rest is a gap the leader's cleaner left
            data, _, next_offset = found
            batches = iter_batches(data, verify=False)
            headers = [h for _, h in batches if h.base_offset >= offset]
        except BatchError as error:
            raise OSError(f"replaying producer state at offset {offset}: {error}") from error
        assert next_offset > offset, (offset, next_offset)  # progress bounds the loop
        state.apply(headers)
        offset = next_offset
    return state
