"""Per-broker indexes of partitions, kept in the image so that fencing, controlled shutdown and
unfencing a broker look only at its own partitions (Kafka's BrokersToIsrs), never at all of them.

Three indexes, each a persistent map from broker id to topic id to a persistent set of partition
ids (a `Map` whose values are all True), as Kafka's broker -> topic -> partitions; per
partition an index costs a slot of a small set, and a step over a broker's partitions takes
them topic by topic:
- `isr`: the partitions *with a leader* whose ISR holds the broker. Taking a broker out of these
  (fence, controlled shutdown) changes each one: its ISR shrinks, or it loses its leader; so a
  partition leaves the index as soon as its change replays, and work done is never looked at again.
- `leaderless`: the partitions without a leader that the broker is a replica of: those it may lead
  again once unfenced.
- `imbalanced`: the partitions whose preferred replica (the first) is the broker but does not lead
  them: what the automatic leader rebalance looks at (Kafka's imbalancedPartitions).

A delta gathers `IndexChanges` as partitions change and lays them over the base index in time
proportional to the change (the rest of the image's rule); a broker left with no partition leaves
the map, so an image built from scratch and one replayed compare equal.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from typing import Final, Protocol, TypeVar
from uuid import UUID

from immutables import Map

from pykraft.metadata_log.records import NO_LEADER

_K = TypeVar("_K")
_V = TypeVar("_V")

PartitionKey = tuple[UUID, int]  # (topic id, partition id)
PartitionIds = Map[int, bool]
TopicPartitions = Map[UUID, PartitionIds]
BrokerIndex = Map[int, TopicPartitions]

EMPTY_IDS: Final[PartitionIds] = Map()
EMPTY_TOPICS: Final[TopicPartitions] = Map()
EMPTY_INDEX: Final[BrokerIndex] = Map()


class BrokerPartitions:
    """One broker's partitions in an index, as (topic id, partition id) keys: iterating goes
    topic by topic; `in` and truth take constant time, `count` time in its topics."""

    __slots__ = ("by_topic",)

    def __init__(self, by_topic: TopicPartitions) -> None:
        self.by_topic = by_topic

    def __iter__(self) -> Iterator[PartitionKey]:
        for topic_id, partition_ids in self.by_topic.items():
            for partition_id in partition_ids:
                yield topic_id, partition_id

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        partition_ids = self.by_topic.get(key[0])
        return partition_ids is not None and key[1] in partition_ids

    def __bool__(self) -> bool:
        return bool(self.by_topic)

    def count(self) -> int:
        return sum(len(partition_ids) for partition_ids in self.by_topic.values())


class IndexedPartition(Protocol):
    @property
    def replicas(self) -> tuple[int, ...]: ...
    @property
    def isr(self) -> tuple[int, ...]: ...
    @property
    def leader(self) -> int: ...


def overlaid(base: Mapping[_K, _V], changes: Mapping[_K, _V | None]) -> Map[_K, _V]:
    """`base` with `changes` laid over it, where a `None` change removes the key; `base` is left
    as it was and shares all it can with the result (time in proportion to `changes`)."""
    start = base if isinstance(base, Map) else Map(base)
    with start.mutate() as merged:
        for key, value in changes.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        result = merged.finish()
    return result


def isr_members(partition: IndexedPartition | None) -> tuple[int, ...]:
    """The brokers whose `isr` index holds `partition` (None: a partition that does not exist)."""
    if partition is None or partition.leader == NO_LEADER:
        return ()
    return partition.isr


def leaderless_members(partition: IndexedPartition | None) -> tuple[int, ...]:
    """The brokers whose `leaderless` index holds `partition`."""
    if partition is None or partition.leader != NO_LEADER:
        return ()
    return partition.replicas


def imbalanced_members(partition: IndexedPartition | None) -> tuple[int, ...]:
    """The broker whose `imbalanced` index holds `partition`: its preferred replica, if that
    one does not lead it."""
    if partition is None or partition.leader in partition.replicas[:1]:
        return ()
    return partition.replicas[:1]  # () for a partition with no replicas


class IndexChanges:
    """What a run of partition changes does to one index: per broker and topic, partition ids
    added (True) or removed (None), the last change of a partition winning."""

    def __init__(self) -> None:
        self._by_broker: dict[int, dict[UUID, dict[int, bool | None]]] = {}

    def move(self, key: PartitionKey, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        """Partition `key` was indexed under the brokers `before` and now is under `after`."""
        topic_id, partition_id = key
        for broker_id in before:
            if broker_id not in after:
                self._topic(broker_id, topic_id)[partition_id] = None
        for broker_id in after:
            if broker_id not in before:
                self._topic(broker_id, topic_id)[partition_id] = True

    def _topic(self, broker_id: int, topic_id: UUID) -> dict[int, bool | None]:
        return self._by_broker.setdefault(broker_id, {}).setdefault(topic_id, {})

    def applied_to(self, base: BrokerIndex) -> BrokerIndex:
        """`base` with these changes; an emptied topic leaves its broker's map, and a broker
        with no partition left leaves the index."""
        if not self._by_broker:
            return base
        brokers: dict[int, TopicPartitions | None] = {}
        for broker_id, topics in self._by_broker.items():
            base_topics = base.get(broker_id, EMPTY_TOPICS)
            changed: dict[UUID, PartitionIds | None] = {}
            for topic_id, partition_ids in topics.items():
                merged = overlaid(base_topics.get(topic_id, EMPTY_IDS), partition_ids)
                changed[topic_id] = merged if merged else None
            merged_topics = overlaid(base_topics, changed)
            brokers[broker_id] = merged_topics if merged_topics else None
        return overlaid(base, brokers)


# Who each index files a partition under, in the order of `IndexBuilder.indexes`.
_MEMBERS: Final = (isr_members, leaderless_members, imbalanced_members)


class IndexBuilder:
    """The three indexes built from scratch, a whole topic at a time (a snapshot's restore, an
    image built directly): each topic's partition ids go straight into one persistent set per
    broker, with none of `IndexChanges`' per-partition bookkeeping."""

    def __init__(self) -> None:
        self._indexes: tuple[dict[int, dict[UUID, PartitionIds]], ...] = ({}, {}, {})

    def add_topic(self, topic_id: UUID, partitions: Mapping[int, IndexedPartition]) -> None:
        for index, members in zip(self._indexes, _MEMBERS, strict=True):
            by_broker: dict[int, list[int]] = {}
            for partition_id, partition in partitions.items():
                for broker_id in members(partition):
                    by_broker.setdefault(broker_id, []).append(partition_id)
            for broker_id, partition_ids in by_broker.items():
                # From pairs, with no dict built first: a million-partition image makes 300,000.
                ids = Map(zip(partition_ids, itertools.repeat(True)))
                index.setdefault(broker_id, {})[topic_id] = ids

    def indexes(self) -> tuple[BrokerIndex, BrokerIndex, BrokerIndex]:
        """(isr, leaderless, imbalanced), of the topics added so far."""
        isr, leaderless, imbalanced = (
            Map({broker_id: Map(topics) for broker_id, topics in index.items()})
            for index in self._indexes
        )
        return isr, leaderless, imbalanced
