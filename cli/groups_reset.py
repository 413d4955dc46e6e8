"""Where `pykraft groups reset-offsets` moves a group's offsets, as Kafka's
GroupOffsetsResetter decides it: pure code, given each partition's log bounds, the group's
committed offsets and (for --to-datetime) the first offset at or after the time.

--to-offset and --shift-by are clamped into [log start, log end]; --to-datetime with no record
at or after the time falls back to the log end; --shift-by needs a committed offset. Also here:
what the command's --topic and --to-datetime arguments mean, and which partitions a run covers.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, tzinfo
from enum import StrEnum

from pykraft.client.types import OffsetAndMetadata, TopicPartition

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ResetTo(StrEnum):
    """Where --reset-offsets moves each partition (Kafka's reset scenarios)."""

    EARLIEST = "earliest"
    LATEST = "latest"
    OFFSET = "offset"
    DATETIME = "datetime"
    SHIFT_BY = "shift-by"


@dataclass(frozen=True)
class ResetSpec:
    """A scenario and its number: the offset (OFFSET), the shift (SHIFT_BY, may be negative)
    or the time in ms since the epoch (DATETIME); unused by EARLIEST and LATEST."""

    to: ResetTo
    value: int = 0


@dataclass(frozen=True)
class LogBounds:
    """A partition's log start offset and log end offset (high watermark)."""

    start: int
    end: int

    def clamp(self, offset: int) -> int:
        """Kafka's checkOffsetsRange: above the end -> the end, below the start -> the start."""
        return max(self.start, min(offset, self.end))


def new_offset(
    spec: ResetSpec, bounds: LogBounds, committed: int | None, offset_for_time: int | None
) -> int:
    """One partition's new offset. `committed` is the group's offset there (None: none);
    `offset_for_time` the first offset at or after spec.value's time (None or -1: no such
    record, so the log end, as Kafka falls back to). ValueError for --shift-by without a
    committed offset."""
    if spec.to is ResetTo.EARLIEST:
        return bounds.start
    if spec.to is ResetTo.LATEST:
        return bounds.end
    if spec.to is ResetTo.OFFSET:
        return bounds.clamp(spec.value)
    if spec.to is ResetTo.SHIFT_BY:
        if committed is None:
            raise ValueError("there is no current committed offset to shift")
        return bounds.clamp(committed + spec.value)
    if offset_for_time is None or offset_for_time < 0:
        return bounds.end
    return offset_for_time


def plan_reset(
    spec: ResetSpec,
    bounds: Mapping[TopicPartition, LogBounds],
    committed: Mapping[TopicPartition, OffsetAndMetadata],
    offsets_for_time: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """The new offset of every partition in `bounds`, in partition order; ValueError naming the
    first partition --shift-by cannot shift (Kafka's message)."""
    plan: dict[TopicPartition, int] = {}
    for tp, partition_bounds in sorted(bounds.items()):
        current = committed.get(tp)
        try:
            plan[tp] = new_offset(
                spec,
                partition_bounds,
                None if current is None else current.offset,
                offsets_for_time.get(tp),
            )
        except ValueError:
            raise ValueError(
                f"Cannot shift offset for partition {tp} since there is no current committed offset"
            ) from None
    return plan


def parse_datetime_ms(text: str, default_zone: tzinfo | None = None) -> int:
    """Kafka's --to-datetime, YYYY-MM-DDTHH:mm:SS.sss with an optional zone (Z, +hh:mm,
    -hhmm), as ms since the epoch. Without a zone the time is in `default_zone` (None: this
    machine's local time, as Kafka reads it). ValueError if malformed."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"Error parsing timestamp '{text}': expected YYYY-MM-DDTHH:mm:SS.sss, optionally "
            "followed by a zone (Z, +hh:mm or -hh:mm)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=default_zone) if default_zone else moment.astimezone()
    return (moment - _EPOCH) // timedelta(milliseconds=1)


def parse_topic_scope(text: str) -> tuple[str, list[int] | None]:
    """One --topic: "T" (every partition) or "T:P,P..." (those); ValueError if malformed."""
    topic, separator, partitions = text.partition(":")
    if not topic.strip():
        raise ValueError(f"Invalid topic arg '{text}', expected a topic name")
    if not separator:
        return topic.strip(), None
    ids = [p.strip() for p in partitions.split(",")]
    if not ids or not all(p.isdigit() for p in ids):
        raise ValueError(f"Invalid topic arg '{text}', expected topic name and partitions (T:0,1)")
    return topic.strip(), sorted({int(p) for p in ids})


def wanted_partitions(
    scopes: Sequence[tuple[str, list[int] | None]],
    committed: Collection[TopicPartition],
    all_topics: bool,
) -> dict[str, set[int] | None]:
    """Topic -> the partitions to reset (None: every partition of it): those with a committed
    offset for --all-topics, else the union of the --topic options."""
    wanted: dict[str, set[int] | None] = {}
    if all_topics:
        for tp in committed:
            wanted[tp.topic] = {*(wanted.get(tp.topic) or ()), tp.partition}
        return wanted
    for topic, ids in scopes:
        previous = wanted.get(topic, set())
        wanted[topic] = None if ids is None or previous is None else previous | set(ids)
    return wanted
