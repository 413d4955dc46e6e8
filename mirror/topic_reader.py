"""Reading partitions of a cluster from a given offset up to their end as it is when the read
begins: the target's tails after a restart, the offset syncs and checkpoints the mirror loads,
and what `pykraft mirror status` shows."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

from pykraft.client import Consumer, ConsumerRecord, RequestTimedOutError, TopicPartition
from pykraft.client.clock import monotonic_ms
from pykraft.mirror.records import Checkpoint, OffsetSync

log = logging.getLogger(__name__)
_Decodable = TypeVar("_Decodable", OffsetSync, Checkpoint)

_POLL_TIMEOUT_MS: Final = 500


def read_partitions(
    consumer: Consumer, starts: Mapping[TopicPartition, int | None], timeout_ms: int
) -> dict[TopicPartition, list[ConsumerRecord]]:
    """Each partition's records from its start offset (None: its log start; one below the
    log start reads from there) to its end (high watermark) when the call begins, in offset
    order. `consumer` must be assigned nothing and is left so. RequestTimedOutError past
    `timeout_ms`."""
    ends = consumer.end_offsets(starts)
    records: dict[TopicPartition, list[ConsumerRecord]] = {tp: [] for tp in starts}
    unread = {tp: end for tp, end in ends.items() if end > (starts[tp] or 0)}
    if not unread:
        return records
    consumer.assign(unread)
    try:
        for tp in unread:
            start = starts[tp]
            if start is None:
                consumer.seek_to_beginning([tp])
            else:
                consumer.seek(tp, start)
        _poll_until(consumer, unread, records, monotonic_ms() + timeout_ms)
    finally:
        consumer.assign([])
    return records


def _poll_until(
    consumer: Consumer,
    ends: Mapping[TopicPartition, int],
    records: dict[TopicPartition, list[ConsumerRecord]],
    deadline_ms: int,
) -> None:
    while any(consumer.position(tp) < end for tp, end in ends.items()):
        if monotonic_ms() >= deadline_ms:
            raise RequestTimedOutError("reading partitions to their end ran out of time")
        for record in consumer.poll(_POLL_TIMEOUT_MS):
            tp = TopicPartition(record.topic, record.partition)
            if record.offset < ends[tp]:
                records[tp].append(record)


@dataclass(frozen=True)
class TimedSync:
    """An offset sync with the time it was written (its record's timestamp)."""

    sync: OffsetSync
    timestamp_ms: int


def read_offset_syncs(consumer: Consumer, topic: str, timeout_ms: int) -> list[TimedSync]:
    """Every offset sync of the (one-partition) sync topic, in the order written; records
    that are not offset syncs are skipped with a warning."""
    return [
        TimedSync(sync, record.timestamp)
        for record in _one_partition(consumer, topic, timeout_ms)
        if (sync := _decoded(OffsetSync, record)) is not None
    ]


def read_checkpoints(consumer: Consumer, topic: str, timeout_ms: int) -> list[Checkpoint]:
    """Every checkpoint of the (one-partition) checkpoints topic, in the order written."""
    return [
        checkpoint
        for record in _one_partition(consumer, topic, timeout_ms)
        if (checkpoint := _decoded(Checkpoint, record)) is not None
    ]


def _one_partition(consumer: Consumer, topic: str, timeout_ms: int) -> list[ConsumerRecord]:
    tp = TopicPartition(topic, 0)
    return read_partitions(consumer, {tp: None}, timeout_ms)[tp]


def _decoded(kind: type[_Decodable], record: ConsumerRecord) -> _Decodable | None:
    try:
        return kind.decode(record.key or b"", record.value or b"")
    except ValueError as e:
        log.warning(
            "skipping %s-%d@%d: not a %s: %s",
            record.topic,
            record.partition,
            record.offset,
            kind.__name__,
            e,
        )
        return None
