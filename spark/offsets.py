"""Offset arithmetic of the source, pure: the JSON form Spark checkpoints, read limits spread
over partitions, and offset ranges split into parts and packed into tasks.

Spark checkpoints offsets as `{"topic": {"0": 23, "1": 40}}` (JSON object keys are strings);
`Offsets` is the same with int partitions, keyed by (topic, partition).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

Offsets = dict[tuple[str, int], int]


class OffsetRange(NamedTuple):
    """Records [start, end) of one partition: what one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int


def to_json(offsets: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    by_topic: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        by_topic.setdefault(topic, {})[str(partition)] = offset
    return by_topic


def from_json(data: Mapping[str, Mapping[str, int]]) -> Offsets:
    return {
        (topic, int(partition)): int(offset)
        for topic, partitions in data.items()
        for partition, offset in partitions.items()
    }


def limit(start: Offsets, latest: Offsets, records_max: int) -> Offsets:
    """The end offsets of a batch of at most `records_max` from `start`, spread over the
    partitions in proportion to their backlog (Spark's Kafka source does the same).

    Callers may rely on: the keys are those of `latest`; no end is below its start (a partition
    missing from `start` starts at latest) nor past max(start, latest); the whole limit is used
    while the backlog exceeds it; every partition with a backlog moves by at least one record
    when `records_max` is at least the number of such partitions; and a partition with a larger
    backlog never moves by fewer records than one with a smaller backlog."""
    backlog = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    taken = _share(backlog, records_max)
    return {tp: start.get(tp, end) + taken[tp] for tp, end in latest.items()}


def _share(backlog: Mapping[tuple[str, int], int], amount: int) -> dict[tuple[str, int], int]:
    """`amount` records spread over `backlog`: one first to each partition waiting (if there
    are enough to go round), then the rest in proportion to what each still has."""
    if sum(backlog.values()) <= amount:
        return dict(backlog)
    waiting = [tp for tp, n in backlog.items() if n > 0]
    if amount < len(waiting):
        return _apportion(backlog, amount)
    rest = _apportion({tp: max(0, n - 1) for tp, n in backlog.items()}, amount - len(waiting))
    return {tp: rest[tp] + (1 if n > 0 else 0) for tp, n in backlog.items()}


def _apportion(weights: Mapping[tuple[str, int], int], amount: int) -> dict[tuple[str, int], int]:
    """`amount` (less than the sum of `weights`) split by largest remainder, in exact integers:
    each gets the floor of its share, and the records left over go one each to the largest
    remainders (ties by topic-partition, so the result is deterministic). A share is below its
    weight, so nobody gets more than its weight, and a larger weight never gets less."""
    total = sum(weights.values())
    floors = {tp: amount * w // total for tp, w in weights.items()}
    left = amount - sum(floors.values())
    by_remainder = sorted(weights, key=lambda tp: (-(amount * weights[tp] % total), tp))
    for tp in by_remainder[:left]:
        floors[tp] += 1
    return floors


def split(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """`ranges`, with the larger ones cut into equal parts so there are about
    `min_partitions` tasks (never fewer than the non-empty ranges given, never an empty part;
    empty ranges are dropped)."""
    ranges = [r for r in ranges if r.end > r.start]
    total = sum(r.end - r.start for r in ranges)
    if not min_partitions or len(ranges) >= min_partitions or total == 0:
        return ranges
    parts: list[OffsetRange] = []
    for r in ranges:
        size = r.end - r.start
        pieces = max(1, min(size, round(size * min_partitions / total)))
        for i in range(pieces):
            low = r.start + size * i // pieces
            high = r.start + size * (i + 1) // pieces
            parts.append(OffsetRange(r.topic, r.partition, low, high))
    return parts


def pack(
    ranges: list[OffsetRange], records_min: int, tasks_min: int
) -> list[tuple[OffsetRange, ...]]:
    """Non-empty `ranges` (as `split` returns them) grouped into tasks, one Spark task reading
    its ranges one after another: a task
    for every `records_min` records in all, but never fewer tasks than `tasks_min` (nor than
    one) and never more than there are ranges. The largest range goes first to the task
    holding the fewest records, so tasks come out about equal. Callers may rely on: every range
    in exactly one task, no empty task, each task's ranges in the order given."""
    if not ranges:
        return []
    total = sum(r.end - r.start for r in ranges)
    count = min(len(ranges), max(tasks_min, 1, total // records_min))
    tasks: list[list[int]] = [[] for _ in range(count)]
    held = [0] * count
    for index in sorted(range(len(ranges)), key=lambda i: ranges[i].start - ranges[i].end):
        lightest = held.index(min(held))
        tasks[lightest].append(index)
        held[lightest] += ranges[index].end - ranges[index].start
    return [tuple(ranges[i] for i in sorted(task)) for task in tasks]
