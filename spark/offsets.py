"""Offset arithmetic of the source, pure: the JSON form Spark checkpoints, read limits spread
over partitions, and offset ranges split into tasks.

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


def limit(start: Offsets, latest: Offsets, max_records: int) -> Offsets:
    """The end offsets of a batch of at most `max_records` from `start`, spread over the
    partitions in proportion to their backlog (Spark's Kafka source does the same); every
    partition with a backlog moves by at least one record while the limit allows."""
    backlog = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(backlog.values())
    if total <= max_records:
        return dict(latest)
    shares = {tp: max_records * n / total for tp, n in backlog.items()}
    taken = {tp: int(share) for tp, share in shares.items()}
    left = max_records - sum(taken.values())
    for tp in sorted(backlog, key=lambda t: (taken[t] - shares[t], t)):
        if left <= 0:
            break
        if backlog[tp] > taken[tp]:
            taken[tp] += 1
            left -= 1
    return {tp: start.get(tp, end) + taken[tp] for tp, end in latest.items()}


def split(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """`ranges`, with the larger ones cut into equal parts so there are about
    `min_partitions` tasks (never fewer than the ranges given, never an empty part)."""
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
