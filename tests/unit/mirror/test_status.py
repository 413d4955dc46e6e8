"""`pykraft mirror status`' figures from the offset syncs: the mirrored offset, the lag and the
records mirrored per second over the last minute (issue 15 §2.5)."""

from __future__ import annotations

import pytest

from pykraft.client import TopicPartition as TP
from pykraft.mirror.records import OffsetSync
from pykraft.mirror.status import mirrored_at, partition_statuses, records_per_s
from pykraft.mirror.topic_reader import TimedSync

P0, P1 = TP("orders", 0), TP("orders", 1)


def timed(tp: TP, upstream: int, at_ms: int) -> TimedSync:
    return TimedSync(OffsetSync(tp, upstream, upstream), at_ms)


def test_the_mirrored_offset_follows_the_syncs_in_time() -> None:
    syncs = [timed(P0, 9, 1000), timed(P0, 19, 2000)]
    assert mirrored_at(syncs, 999) is None
    assert mirrored_at(syncs, 1000) == 10
    assert mirrored_at(syncs, 5000) == 20


def test_the_rate_is_the_progress_over_the_window() -> None:
    syncs = [timed(P0, 999, 0), timed(P0, 6999, 30_000), timed(P0, 12_999, 70_000)]
    # At 70 s the window starts at 10 s, when 1000 were mirrored; 13000 are now.
    assert records_per_s(syncs, 70_000, 60_000) == pytest.approx(200.0)
    # Copying began inside the window: from the first record copied, 6999, to 12999.
    assert records_per_s(syncs[1:], 70_000, 60_000) == pytest.approx(6001 / 60)
    assert records_per_s([], 70_000, 60_000) == 0.0


def test_partition_statuses_show_lag_and_partitions_without_syncs() -> None:
    statuses = partition_statuses(
        {P1: "east.orders", P0: "east.orders"},
        {P0: 30, P1: 7},
        [timed(P0, 9, 1000), timed(P0, 19, 2000)],
        now_ms=2000,
    )
    assert [(s.tp, s.source_end, s.mirrored, s.lag) for s in statuses] == [
        (P0, 30, 20, 10),
        (P1, 7, None, None),
    ]
