"""Offset arithmetic of the Spark source: checkpoint JSON, read limits, task splitting.

Pure: nothing here imports pyspark or starts a session."""

from __future__ import annotations

import json
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.spark.offsets import OffsetRange, Offsets, from_json, limit, pack, split, to_json

_SETTINGS = settings(max_examples=300, deadline=None)

TopicPartition = tuple[str, int]
topic_partitions = st.tuples(st.sampled_from(("a", "b", "orders")), st.integers(0, 11))
offsets_maps = st.dictionaries(topic_partitions, st.integers(0, 2**62))


@st.composite
def backlogs(draw: st.DrawFn) -> tuple[Offsets, Offsets, int]:
    """(start, latest, records_max) with start <= latest on every partition of latest."""
    sizes = draw(
        st.dictionaries(
            topic_partitions,
            st.one_of(st.integers(0, 20), st.integers(0, 10**6), st.integers(0, 2**40)),
            min_size=1,
        )
    )
    start = {tp: draw(st.integers(0, 2**50)) for tp in sizes}
    latest = {tp: start[tp] + n for tp, n in sizes.items()}
    total = sum(sizes.values())
    records_max = draw(
        st.one_of(st.integers(0, len(sizes) + 3), st.integers(0, total + 5), st.just(total))
    )
    return start, latest, records_max


def moved(start: Offsets, end: Offsets) -> dict[TopicPartition, int]:
    return {tp: stop - start[tp] for tp, stop in end.items()}


# --- JSON ---


@_SETTINGS
@given(offsets_maps)
def test_json_round_trip(offsets: Offsets) -> None:
    data = to_json(offsets)
    assert from_json(data) == offsets
    assert from_json(json.loads(json.dumps(data))) == offsets


@_SETTINGS
@given(
    st.dictionaries(
        st.sampled_from(("a", "b")), st.dictionaries(st.integers(0, 99), st.integers(0))
    )
)
def test_json_from_spark_round_trip(raw: dict[str, dict[int, int]]) -> None:
    data = {t: {str(p): o for p, o in parts.items()} for t, parts in raw.items() if parts}
    assert to_json(from_json(data)) == data


def test_to_json_is_spark_shape_and_ordered() -> None:
    data = to_json({("b", 0): 7, ("a", 10): 3, ("a", 2): 5})
    assert data == {"a": {"2": 5, "10": 3}, "b": {"0": 7}}
    assert json.dumps(data) == '{"a": {"2": 5, "10": 3}, "b": {"0": 7}}'


def test_empty_offsets() -> None:
    assert to_json({}) == {}
    assert from_json({}) == {}


# --- limit ---


@_SETTINGS
@given(backlogs())
def test_limit_stays_within_limit_and_backlog(case: tuple[Offsets, Offsets, int]) -> None:
    start, latest, records_max = case
    end = limit(start, latest, records_max)
    assert set(end) == set(latest)
    for tp, stop in end.items():
        assert start[tp] <= stop <= latest[tp], tp
    total = sum(latest[tp] - start[tp] for tp in latest)
    # Never more than the limit, and the whole limit while there is that much to read.
    assert sum(moved(start, end).values()) == min(records_max, total)
    if total <= records_max:
        assert end == latest


@_SETTINGS
@given(backlogs())
def test_limit_moves_every_partition_with_a_backlog_when_it_can(
    case: tuple[Offsets, Offsets, int],
) -> None:
    start, latest, records_max = case
    waiting = [tp for tp in latest if latest[tp] > start[tp]]
    end = limit(start, latest, records_max)
    if records_max >= len(waiting):
        assert all(end[tp] > start[tp] for tp in waiting)


@_SETTINGS
@given(backlogs())
def test_limit_a_larger_backlog_never_moves_less(case: tuple[Offsets, Offsets, int]) -> None:
    start, latest, records_max = case
    got = moved(start, limit(start, latest, records_max))
    backlog = {tp: latest[tp] - start[tp] for tp in latest}
    for a in latest:
        for b in latest:
            if backlog[a] > backlog[b]:
                assert got[a] >= got[b], (a, b)


@_SETTINGS
@given(backlogs())
def test_limit_is_proportional_from_above(case: tuple[Offsets, Offsets, int]) -> None:
    """No partition moves by more than its exact share (rounded up) plus the one record every
    partition with a backlog is given first."""
    start, latest, records_max = case
    backlog = {tp: latest[tp] - start[tp] for tp in latest}
    total = sum(backlog.values())
    got = moved(start, limit(start, latest, records_max))
    if total > records_max:
        for tp, n in got.items():
            share_ceiling = -(-records_max * backlog[tp] // total)
            assert n <= share_ceiling + 1, tp


@_SETTINGS
@given(backlogs(), st.randoms())
def test_limit_does_not_depend_on_map_order(
    case: tuple[Offsets, Offsets, int], rng: random.Random
) -> None:
    start, latest, records_max = case
    keys = list(latest)
    rng.shuffle(keys)
    shuffled_start = {tp: start[tp] for tp in keys}
    shuffled_latest = {tp: latest[tp] for tp in keys}
    assert limit(shuffled_start, shuffled_latest, records_max) == limit(start, latest, records_max)


def test_limit_gives_a_small_backlog_its_record() -> None:
    # Shares 0.0015, 1.4993, 1.4993: by remainder alone "a" would get nothing.
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    latest = {("t", 0): 1, ("t", 1): 1000, ("t", 2): 1000}
    assert limit(start, latest, 3) == {("t", 0): 1, ("t", 1): 1, ("t", 2): 1}
    assert limit(start, latest, 5) == {("t", 0): 1, ("t", 1): 2, ("t", 2): 2}


def test_limit_spreads_in_proportion() -> None:
    start = {("t", 0): 100, ("t", 1): 0}
    latest = {("t", 0): 400, ("t", 1): 100}
    # Backlogs 300 and 100: three quarters and one quarter.
    assert limit(start, latest, 40) == {("t", 0): 130, ("t", 1): 10}


def test_limit_below_the_partition_count_goes_to_the_largest_backlogs() -> None:
    start = {("t", p): 0 for p in range(4)}
    latest = {("t", 0): 10, ("t", 1): 50, ("t", 2): 30, ("t", 3): 5}
    end = limit(start, latest, 2)
    assert moved(start, end) == {("t", 0): 0, ("t", 1): 1, ("t", 2): 1, ("t", 3): 0}


def test_limit_of_zero_moves_nothing() -> None:
    start = {("t", 0): 3}
    assert limit(start, {("t", 0): 9}, 0) == start


def test_limit_never_moves_back_past_a_start_beyond_latest() -> None:
    # A start past latest (the log was truncated below it) stays where it is, whether or not
    # the rest fits in the limit.
    start = {("t", 0): 50, ("t", 1): 0}
    latest = {("t", 0): 20, ("t", 1): 10}
    assert limit(start, latest, 100) == {("t", 0): 50, ("t", 1): 10}
    assert limit(start, latest, 4) == {("t", 0): 50, ("t", 1): 4}


def test_limit_treats_a_partition_without_start_as_read_to_latest() -> None:
    latest = {("t", 0): 20, ("t", 1): 10}
    assert limit({("t", 1): 0}, latest, 4) == {("t", 0): 20, ("t", 1): 4}


# --- split ---


@st.composite
def ranges_lists(draw: st.DrawFn) -> list[OffsetRange]:
    """Ranges of distinct partitions, some empty or inverted."""
    tps = draw(st.lists(topic_partitions, unique=True, max_size=8))
    out = []
    for topic, partition in tps:
        start = draw(st.one_of(st.integers(0, 50), st.integers(0, 2**62)))
        size = draw(st.one_of(st.integers(-3, 40), st.integers(0, 10**9)))
        out.append(OffsetRange(topic, partition, start, start + size))
    return out


min_partitions_values = st.one_of(st.none(), st.integers(1, 40))


@_SETTINGS
@given(ranges_lists(), min_partitions_values)
def test_split_tiles_every_range_exactly(
    ranges: list[OffsetRange], min_partitions: int | None
) -> None:
    parts = split(ranges, min_partitions)
    assert all(p.end > p.start for p in parts), "empty part"
    position = 0
    for r in ranges:
        if r.end <= r.start:
            continue
        sizes = []
        at = r.start
        while at < r.end:
            part = parts[position]
            assert (part.topic, part.partition, part.start) == (r.topic, r.partition, at)
            sizes.append(part.end - part.start)
            at = part.end
            position += 1
        assert at == r.end
        assert max(sizes) - min(sizes) <= 1, "parts of one range are not equal"
    assert position == len(parts), "parts that belong to no range"


@_SETTINGS
@given(ranges_lists(), min_partitions_values)
def test_split_count(ranges: list[OffsetRange], min_partitions: int | None) -> None:
    """As Spark's Kafka source: about `min_partitions` tasks, off by rounding (at most half a
    task per range) unless there are fewer records than that; never fewer than the non-empty
    ranges given."""
    parts = split(ranges, min_partitions)
    nonempty = [r for r in ranges if r.end > r.start]
    total = sum(r.end - r.start for r in nonempty)
    assert len(parts) >= len(nonempty)
    if min_partitions is None or len(nonempty) >= min_partitions:
        assert parts == nonempty
        return
    if total < min_partitions:
        assert len(parts) == total  # one record a task
    else:
        assert 2 * len(parts) >= 2 * min_partitions - len(nonempty)
    assert len(parts) <= min_partitions + len(nonempty)


def test_split_cuts_in_proportion_to_size() -> None:
    ranges = [OffsetRange("t", 0, 0, 300), OffsetRange("t", 1, 10, 110)]
    assert split(ranges, 4) == [
        OffsetRange("t", 0, 0, 100),
        OffsetRange("t", 0, 100, 200),
        OffsetRange("t", 0, 200, 300),
        OffsetRange("t", 1, 10, 110),
    ]


def test_split_drops_empty_ranges_even_without_min_partitions() -> None:
    ranges = [OffsetRange("t", 0, 5, 5), OffsetRange("t", 1, 0, 3), OffsetRange("t", 2, 9, 4)]
    assert split(ranges, None) == [OffsetRange("t", 1, 0, 3)]
    assert split([OffsetRange("t", 0, 5, 5)], 8) == []


def test_split_never_cuts_below_one_record() -> None:
    parts = split([OffsetRange("t", 0, 7, 10)], 10)
    assert parts == [OffsetRange("t", 0, n, n + 1) for n in (7, 8, 9)]


nonempty_ranges_lists = ranges_lists().map(lambda rs: [r for r in rs if r.end > r.start])


@_SETTINGS
@given(nonempty_ranges_lists, st.integers(1, 10**9), st.integers(1, 12))
def test_pack_puts_every_range_in_one_task(
    ranges: list[OffsetRange], records_min: int, tasks_min: int
) -> None:
    tasks = pack(ranges, records_min, tasks_min)
    assert all(tasks), "an empty task"
    assert sorted(r for task in tasks for r in task) == sorted(ranges)
    for task in tasks:
        assert list(task) == [r for r in ranges if r in task], "ranges out of the given order"
    total = sum(r.end - r.start for r in ranges)
    expected = min(len(ranges), max(tasks_min, 1, total // records_min))
    assert len(tasks) == (expected if ranges else 0)


@_SETTINGS
@given(nonempty_ranges_lists, st.integers(1, 10**9), st.integers(1, 12))
def test_pack_balances_tasks(ranges: list[OffsetRange], records_min: int, tasks_min: int) -> None:
    """Largest first onto the lightest task: the heaviest task holds at most the lightest one
    plus its own smallest range (the last range it was given found it the lightest)."""
    tasks = pack(ranges, records_min, tasks_min)
    held = [sum(r.end - r.start for r in task) for task in tasks]
    for task, records in zip(tasks, held, strict=True):
        if len(task) > 1:
            assert records - min(r.end - r.start for r in task) <= min(held)


def test_pack_groups_small_ranges_and_keeps_large_ones_apart() -> None:
    six = [OffsetRange("t", p, 0, 83_000) for p in range(6)]
    assert pack(six, 200_000, 1) == [tuple(six[0::2]), tuple(six[1::2])]
    assert pack(six, 200_000, 6) == [(r,) for r in six]
    assert pack(six, 10_000, 1) == [(r,) for r in six]
    assert pack(six[:1], 200_000, 1) == [(six[0],)]
    assert pack([], 200_000, 4) == []
