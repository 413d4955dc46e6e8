"""The file side of the cleaner's segment swap (`PartitionLog.replace_segments`), with Kafka's
crash-safe protocol: the cleaned files are verified and fsynced as `<base>.log.cleaned`, renamed
`.swap` (the commit point), the replaced files renamed `.deleted`, the new ones given their plain
names, and only then are the old files deleted. `recovery.load_log` finishes or rolls back a
swap a crash interrupted, by the suffixes left on disk.
"""

from __future__ import annotations

import itertools
from bisect import bisect_left
from collections.abc import Sequence
from pathlib import Path

from pykraft.broker.log.config import LogConfig
from pykraft.broker.log.errors import LogError, storage_error
from pykraft.broker.log.recovery import CLEANED_SUFFIX, DELETED_SUFFIX, SWAP_SUFFIX
from pykraft.broker.log.segment import LogSegment, SegmentInfo
from pykraft.broker.log.segment_names import LOG_SUFFIX, base_offset_of, file_name
from pykraft.broker.log.segment_view import SegmentView
from pykraft.proto import common_pb2
from pykraft.server_common.durable_files import fsync_directory, unlink_durably


def open_cleaned(directory: Path, config: LogConfig, paths: Sequence[Path]) -> list[LogSegment]:
    """The cleaned files as verified, fsynced segments (indexes built, named `.cleaned`).
    ValueError for a path that is not a `<base>.log.cleaned` file of `directory`,
    LogError(CORRUPT_MESSAGE) for a bad batch, KAFKA_STORAGE_ERROR for an OSError; the files
    opened so far are deleted then."""
    if not paths:
        raise ValueError("no cleaned segments")
    opened: list[LogSegment] = []
    try:
        for path in paths:
            base = base_offset_of(path)
            if base is None or path != directory / (file_name(base, LOG_SUFFIX) + CLEANED_SUFFIX):
                raise ValueError(f"{path} is not a <base>.log.cleaned file of this log")
            segment, cut_bytes = LogSegment.recovered(
                directory, base, config, lambda header: None, suffix=CLEANED_SUFFIX
            )
            opened.append(segment)
            if cut_bytes:
                raise LogError(common_pb2.CORRUPT_MESSAGE, f"{path}: bad batch at the end")
            segment.flush()
    except BaseException as error:
        for segment in opened:
            segment.delete()
        if isinstance(error, OSError):
            raise storage_error(f"cleaned segment: {error}") from error
        raise
    return opened


def locate(view: SegmentView, old: Sequence[SegmentInfo]) -> int:
    """The position of `old` among the segments; ValueError unless it is there unchanged and
    does not include the active segment."""
    start = bisect_left(view.bases, old[0].base_offset)
    current = [segment.info() for segment in view.segments[start : start + len(old)]]
    if current != list(old) or start + len(old) >= len(view.segments):
        raise ValueError("the segments changed since the snapshot, or include the active one")
    return start


def check_cleaned_offsets(segments: list[LogSegment], first_offset: int, end_offset: int) -> None:
    """ValueError unless the cleaned segments start at `first_offset`, do not overlap, and end
    at or below `end_offset` (the base offset of the segment after the replaced ones)."""
    if segments[0].base_offset != first_offset:
        raise ValueError(f"cleaned segments start at {segments[0].base_offset}, not {first_offset}")
    for earlier, later in itertools.pairwise(segments):
        if later.base_offset < earlier.next_offset or later.base_offset <= earlier.base_offset:
            raise ValueError(f"cleaned segment {later.base_offset} overlaps the one before")
    if segments[-1].next_offset > end_offset:
        raise ValueError(f"cleaned segments run past offset {end_offset}")


def commit_swap(
    directory: Path, replaced: Sequence[LogSegment], cleaned: Sequence[LogSegment]
) -> None:
    """Renames `.cleaned` -> `.swap` (the commit point), `replaced` -> `.deleted`, the cleaned
    segments to their plain names, fsyncing the directory after each step that must precede
    the next. The caller publishes the new segments, then calls `delete_replaced`. Raises
    OSError; after the first rename the caller must take the log offline on one (the next
    open completes the swap)."""
    for segment in cleaned:
        segment.rename(SWAP_SUFFIX)
    fsync_directory(directory)
    for segment in replaced:
        segment.close_files()
        segment.rename(DELETED_SUFFIX)
    for segment in cleaned:
        segment.rename("")
    fsync_directory(directory)


def delete_replaced(replaced: Sequence[LogSegment]) -> None:
    """Deletes the `.deleted` files of the replaced segments, durably."""
    unlink_durably([path for segment in replaced for path in segment.paths()])
