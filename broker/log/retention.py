"""Kafka's retention rules: which of a log's oldest segments may go.

`PartitionLog.delete_old_segments` (the broker's periodic pass) and
`PartitionLog.delete_records_before` (DeleteRecords) ask `deletable_prefix` and delete what it
names. A segment is deletable while it lies wholly below the log start offset, or, under
cleanup.policy delete, is older than retention.ms by its largest timestamp or needed to bring
the log within retention.bytes. The active segment and data at or above the high watermark are
never deletable.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence

from pykraft.broker.log.config import LogConfig
from pykraft.broker.log.segment import LogSegment
from pykraft.proto.record_batch import NO_TIMESTAMP


def deletable_prefix(
    segments: Sequence[LogSegment],
    *,
    config: LogConfig,
    log_start_offset: int,
    high_watermark: int,
    now_ms: int | None,
) -> int:
    """How many of the oldest `segments` retention may delete (only by log start offset when
    `now_ms` is None). Always fewer than `len(segments)`: the active segment stays."""
    by_retention = now_ms is not None and config.deletes_old_segments
    excess_bytes = None
    if by_retention and config.retention_bytes >= 0:
        excess_bytes = sum(segment.size for segment in segments) - config.retention_bytes
    count = 0
    for segment, following in itertools.pairwise(segments):
        if following.base_offset > high_watermark:
            break
        below_start = following.base_offset <= log_start_offset
        too_big = excess_bytes is not None and excess_bytes >= segment.size
        too_old = (
            by_retention
            and now_ms is not None
            and config.retention_ms >= 0
            and now_ms - largest_timestamp(segment) > config.retention_ms
        )
        if not (below_start or too_big or too_old):
            break
        if excess_bytes is not None:
            excess_bytes -= segment.size
        count += 1
    return count


def largest_timestamp(segment: LogSegment) -> int:
    """The segment's largest record timestamp; its file's modification time when no batch has
    a timestamp (Kafka's fallback)."""
    if segment.max_timestamp != NO_TIMESTAMP:
        return segment.max_timestamp
    return os.stat(segment.log_path).st_mtime_ns // 1_000_000
