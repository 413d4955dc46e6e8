"""The value types producers and consumers hand around: partitions, delivery reports, records."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from pykraft.proto.record_batch import TimestampType


@dataclass(frozen=True, order=True, slots=True)
class TopicPartition:
    """One partition of one topic; hashable, so it keys dicts of positions and batches."""

    topic: str
    partition: int
    # Computed once: the dataclass's own __hash__ builds a tuple per call, which showed in the
    # producer's per-record profile (its open batches are keyed by partition).
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.topic, self.partition)))

    def __hash__(self) -> int:
        return self._hash

    def __reduce__(self) -> tuple[type[TopicPartition], tuple[str, int]]:
        """Pickles without the hash: a str's hash differs between processes."""
        return TopicPartition, (self.topic, self.partition)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where an acknowledged record landed. `offset` is -1 with acks=0 (no answer awaited);
    `timestamp` is the broker's append time for LogAppendTime topics, else the record's own."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ConsumerRecord(NamedTuple):
    """One record as a consumer receives it; `headers` keep their order and duplicates.

    A NamedTuple (as kafka-python's): the consumer builds one per record with a single tuple
    allocation, about a third of what filling a frozen dataclass costs."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: TimestampType
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class OffsetAndTimestamp(NamedTuple):
    """`Consumer.offsets_for_times`' answer for one partition: the earliest offset whose record
    timestamp is at least the one asked for, and that record's timestamp."""

    offset: int
    timestamp: int


@dataclass(frozen=True)
class ListOffsetsResult:
    """One partition's answer to ListOffsets, as `AdminClient.list_offsets` returns it (Kafka's
    ListOffsetsResultInfo).

    For "earliest" and "latest" `offset` is the log start offset or the high watermark and
    `timestamp` is -1; for a timestamp it is the first offset whose record timestamp is at
    least that, with that record's timestamp, or -1 and -1 when no such record exists yet.
    `leader_epoch` is the leader's epoch when it answered.
    """

    offset: int
    timestamp: int
    leader_epoch: int


class OffsetAndMetadata(NamedTuple):
    """A group's committed position in one partition (Kafka's OffsetAndMetadata): `offset` is
    the next record to read, `metadata` a free string stored with it (at most
    offset.metadata.max.bytes, 4096 by default), `leader_epoch` the epoch of the last record
    read, or None when unknown."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None
