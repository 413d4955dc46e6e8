"""Per-broker indexes of partitions, kept in the image so that fencing, controlled shutdown and
unfencing a broker look only at its own partitions (Kafka's BrokersToIsrs), never at all of them.

Two indexes, each a persistent map from broker id to a persistent set of partitions (a `Map`
whose values are all True), keyed by (topic id, partition id):
- `isr`: the partitions *with a leader* whose ISR holds the broker. Taking a broker out of these
  (fence, controlled shutdown) changes each one: its ISR shrinks, or it loses its leader; so a
  partition leaves the index as soon as its change replays, and work done is never looked at again.
- `leaderless`: the partitions without a leader that the broker is a replica of: those it may lead
  again once unfenced.

A delta gathers `IndexChanges` as partitions change and lays them over the base index in time
proportional to the change (the rest of the image's rule); a broker left with no partition leaves
the map, so an image built from scratch and one replayed compare equal.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Protocol, TypeVar
from uuid import UUID

from immutables import Map

from pykraft.metadata_log.records import NO_LEADER

_K = TypeVar("_K")
_V = TypeVar("_V")

PartitionKey = tuple[UUID, int]  # (topic id, partition id)
PartitionSet = Map[PartitionKey, bool]
BrokerIndex = Map[int, PartitionSet]

EMPTY_PARTITIONS: Final[PartitionSet] = Map()
EMPTY_INDEX: Final[BrokerIndex] = Map()


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


class IndexChanges:
    """What a run of partition changes does to one index: per broker, keys added (True) or
    removed (None), the last change of a key winning."""

    def __init__(self) -> None:
        self._by_broker: dict[int, dict[PartitionKey, bool | None]] = {}

    def move(self, key: PartitionKey, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        """Partition `key` was indexed under the brokers `before` and now is under `after`."""
        for broker_id in before:
            if broker_id not in after:
                self._by_broker.setdefault(broker_id, {})[key] = None
        for broker_id in after:
            if broker_id not in before:
                self._by_broker.setdefault(broker_id, {})[key] = True

    def applied_to(self, base: BrokerIndex) -> BrokerIndex:
        """`base` with these changes; a broker whose set empties leaves the index."""
        if not self._by_broker:
            return base
        brokers: dict[int, PartitionSet | None] = {}
        for broker_id, keys in self._by_broker.items():
            partitions = overlaid(base.get(broker_id, EMPTY_PARTITIONS), keys)
            brokers[broker_id] = partitions if partitions else None
        return overlaid(base, brokers)
