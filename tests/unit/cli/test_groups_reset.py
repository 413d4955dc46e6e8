"""The offset arithmetic of `pykraft groups reset-offsets` (Kafka's GroupOffsetsResetter) and
the meaning of its --topic and --to-datetime arguments: pure code, table-tested."""

from __future__ import annotations

import time
from datetime import UTC, timedelta, timezone

import pytest

from pykraft.cli.groups_reset import (
    LogBounds,
    ResetSpec,
    ResetTo,
    new_offset,
    parse_datetime_ms,
    parse_topic_scope,
    plan_reset,
    wanted_partitions,
)
from pykraft.client.types import OffsetAndMetadata, TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
BOUNDS = LogBounds(start=2, end=10)


@pytest.mark.parametrize(
    ("spec", "committed", "by_time", "expected"),
    [
        (ResetSpec(ResetTo.EARLIEST), 5, None, 2),
        (ResetSpec(ResetTo.LATEST), 5, None, 10),
        (ResetSpec(ResetTo.OFFSET, 7), None, None, 7),
        (ResetSpec(ResetTo.OFFSET, 11), None, None, 10),  # above the end: the end
        (ResetSpec(ResetTo.OFFSET, 0), None, None, 2),  # below the start: the start
        (ResetSpec(ResetTo.SHIFT_BY, -2), 5, None, 3),
        (ResetSpec(ResetTo.SHIFT_BY, -9), 5, None, 2),
        (ResetSpec(ResetTo.SHIFT_BY, 9), 5, None, 10),
        (ResetSpec(ResetTo.DATETIME, 1234), 5, 6, 6),
        (ResetSpec(ResetTo.DATETIME, 1234), 5, -1, 10),  # no later record: the end
        (ResetSpec(ResetTo.DATETIME, 1234), None, None, 10),
    ],
)
def test_new_offset(
    spec: ResetSpec, committed: int | None, by_time: int | None, expected: int
) -> None:
    assert new_offset(spec, BOUNDS, committed, by_time) == expected


def test_plan_reset_names_the_partition_it_cannot_shift() -> None:
    bounds = {T1: BOUNDS, T0: BOUNDS}
    committed = {T0: OffsetAndMetadata(4)}
    assert plan_reset(ResetSpec(ResetTo.OFFSET, 3), bounds, committed, {}) == {T0: 3, T1: 3}
    assert list(plan_reset(ResetSpec(ResetTo.LATEST), bounds, {}, {})) == [T0, T1]
    with pytest.raises(ValueError, match="Cannot shift offset for partition t-1 since"):
        plan_reset(ResetSpec(ResetTo.SHIFT_BY, 1), bounds, committed, {})


def test_parse_datetime_ms_reads_kafkas_format_and_zones() -> None:
    assert parse_datetime_ms("2024-01-02T03:04:05.678Z") == 1704164645678
    assert parse_datetime_ms("2024-01-02T04:04:05.678+01:00") == 1704164645678
    assert parse_datetime_ms("2024-01-02T02:04:05.678-0100") == 1704164645678
    plus_two = timezone(timedelta(hours=2))
    assert parse_datetime_ms("2024-01-02T05:04:05.678", plus_two) == 1704164645678
    assert parse_datetime_ms("2024-01-02T03:04:05.678", UTC) == 1704164645678
    assert parse_datetime_ms("1970-01-01T00:00:00.001Z") == 1
    for bad in ["2024-13-01T00:00:00", "yesterday", ""]:
        with pytest.raises(ValueError, match="Error parsing timestamp"):
            parse_datetime_ms(bad)


def test_a_datetime_without_zone_is_local_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "Etc/GMT-3")  # POSIX sign: three hours ahead of UTC
    time.tzset()
    try:
        assert parse_datetime_ms("2024-01-02T06:04:05.678") == 1704164645678
    finally:
        monkeypatch.undo()
        time.tzset()


def test_parse_topic_scope() -> None:
    assert parse_topic_scope("orders") == ("orders", None)
    assert parse_topic_scope("orders:2,0,2") == ("orders", [0, 2])
    for bad in ["orders:", ":1", "orders:1:2", "orders:-1"]:
        with pytest.raises(ValueError, match="Invalid topic arg"):
            parse_topic_scope(bad)


def test_wanted_partitions_unite_the_topic_options_or_take_the_committed_ones() -> None:
    scopes = [("t", [1]), ("t", [0]), ("u", None), ("u", [3])]
    assert wanted_partitions(scopes, [], all_topics=False) == {"t": {0, 1}, "u": None}
    committed = [T0, T1, TopicPartition("u", 2)]
    assert wanted_partitions([], committed, all_topics=True) == {"t": {0, 1}, "u": {2}}
