"""Immutable images of the cluster metadata: what the log says after replaying it up to an offset.

Every class here is a frozen dataclass and every mapping is an `immutables.Map` (a persistent
hash array mapped trie, as Kafka's `TopicsImage` keeps persistent maps), so an image can be shared
between threads and kept as history without copying. Images compare by value (`==`). A new image
comes from `MetadataDelta.apply`, which shares, by reference, every part that did not change:
a changed map is derived from the old one in time proportional to the change (logarithmic in its
size), never by copying it, so a delta costs the same on a cluster of a million partitions as on
one of a hundred.

`MetadataImage.write()` turns an image into records (a snapshot) and `delta.replay_all` turns
them back: `replay_all(MetadataImage.EMPTY, image.write()).apply(offset=o, epoch=e) == image`
when `o` and `e` are the image's own.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import ClassVar, Final, TypeVar
from uuid import UUID

from immutables import Map

from pykraft.metadata_log.partition_index import (
    EMPTY_TOPICS,
    BrokerIndex,
    BrokerPartitions,
    IndexBuilder,
)
from pykraft.metadata_log.records import (
    METADATA_VERSION_FEATURE,
    NO_LEADER,
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)
from pykraft.proto.extensions import load as load_extension

_K = TypeVar("_K")
_V = TypeVar("_V")

# Kafka writes the snapshot's ProducerIdsRecord on behalf of no broker.
_NO_BROKER = -1


def frozen_mapping(mapping: Mapping[_K, _V]) -> Map[_K, _V]:
    """`mapping` as a persistent map: a `Map` is kept as it is (it cannot change), anything else
    is copied into one, so later changes to it cannot leak in."""
    if isinstance(mapping, Map):
        return mapping
    return Map(mapping)


def _freeze_field(instance: object, name: str) -> None:
    object.__setattr__(instance, name, frozen_mapping(getattr(instance, name)))


EMPTY_CONFIG: Final[Mapping[str, str]] = MappingProxyType({})


def frozen_entries(entries: Mapping[str, str]) -> Mapping[str, str]:
    """One resource's config entries, read-only: a few keys each, so a change copies them whole
    (a plain read-only dict, which compares equal to a dict of the same entries)."""
    if isinstance(entries, MappingProxyType):
        return entries
    return MappingProxyType(dict(entries))


@dataclasses.dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A registered broker, as its last RegisterBrokerRecord and changes left it."""

    broker_id: int
    incarnation_id: UUID
    broker_epoch: int
    endpoints: tuple[Endpoint, ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool

    @classmethod
    def from_record(cls, record: RegisterBrokerRecord) -> BrokerRegistration:
        return cls(
            record.broker_id,
            record.incarnation_id,
            record.broker_epoch,
            record.endpoints,
            record.rack,
            record.fenced,
            record.in_controlled_shutdown,
        )

    def to_record(self) -> RegisterBrokerRecord:
        return RegisterBrokerRecord(
            self.broker_id,
            self.incarnation_id,
            self.broker_epoch,
            self.endpoints,
            self.rack,
            self.fenced,
            self.in_controlled_shutdown,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class PartitionRegistration:
    """The replicas, in-sync replicas and leader of one partition, with their epochs, and the
    replicas a reassignment is adding and removing (see `PartitionRecord`)."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the reassignment in progress (if any) completes."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """The replicas before the reassignment in progress (if any) began."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)

    @classmethod
    def from_record(cls, record: PartitionRecord) -> PartitionRegistration:
        return cls(
            record.replicas,
            record.isr,
            record.leader,
            record.leader_epoch,
            record.partition_epoch,
            record.adding_replicas,
            record.removing_replicas,
        )

    def to_record(self, topic_id: UUID, partition_id: int) -> PartitionRecord:
        return PartitionRecord(
            topic_id,
            partition_id,
            self.replicas,
            self.isr,
            self.leader,
            self.leader_epoch,
            self.partition_epoch,
            self.adding_replicas,
            self.removing_replicas,
        )

    def merge(self, change: PartitionChangeRecord) -> PartitionRegistration:
        """This partition after `change`, by Kafka's rule: the partition epoch always goes up by
        one; the leader epoch goes up by one whenever the record names a leader (the controller
        names one only to start a new leader epoch, even if it is the same broker)."""
        leader, leader_epoch = self.leader, self.leader_epoch
        if change.leader is not None:
            leader, leader_epoch = change.leader, leader_epoch + 1
        return PartitionRegistration(
            replicas=self.replicas if change.replicas is None else change.replicas,
            isr=self.isr if change.isr is None else change.isr,
            leader=leader,
            leader_epoch=leader_epoch,
            partition_epoch=self.partition_epoch + 1,
            adding_replicas=(
                self.adding_replicas if change.adding_replicas is None else change.adding_replicas
            ),
            removing_replicas=(
                self.removing_replicas
                if change.removing_replicas is None
                else change.removing_replicas
            ),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class FeaturesImage:
    """Finalized feature levels, such as `metadata.version`; a feature at level 0 is absent."""

    EMPTY: ClassVar[FeaturesImage]

    levels: Mapping[str, int]

    def __post_init__(self) -> None:
        _freeze_field(self, "levels")

    def write(self) -> list[Record]:
        # metadata.version first: a reader must know it before it reads anything else.
        names = sorted(self.levels, key=lambda name: (name != METADATA_VERSION_FEATURE, name))
        return [FeatureLevelRecord(name, self.levels[name]) for name in names]


@dataclasses.dataclass(frozen=True, slots=True)
class ClusterImage:
    """The registered brokers by id."""

    EMPTY: ClassVar[ClusterImage]

    brokers: Mapping[int, BrokerRegistration]

    def __post_init__(self) -> None:
        _freeze_field(self, "brokers")

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        return self.brokers.get(broker_id)

    def unfenced_broker_ids(self) -> list[int]:
        """Sorted ids of the brokers that may lead partitions: neither fenced nor shutting down."""
        return sorted(
            broker_id
            for broker_id, broker in self.brokers.items()
            if not broker.fenced and not broker.in_controlled_shutdown
        )

    def write(self) -> list[Record]:
        return [self.brokers[broker_id].to_record() for broker_id in sorted(self.brokers)]


@dataclasses.dataclass(frozen=True, slots=True)
class TopicImage:
    """One topic and its partitions by partition id."""

    name: str
    topic_id: UUID
    partitions: Mapping[int, PartitionRegistration]

    def __post_init__(self) -> None:
        _freeze_field(self, "partitions")

    def write(self) -> list[Record]:
        records: list[Record] = [TopicRecord(self.name, self.topic_id)]
        for partition_id in sorted(self.partitions):
            records.append(
                partition_record(self.topic_id, partition_id, self.partitions[partition_id])
            )
        return records


def partition_record_python(
    topic_id: UUID, partition_id: int, registration: PartitionRegistration
) -> PartitionRecord:
    """`registration`'s record, as an image writes it; compiled in `_partition_records.pyx`
    (the same record, made without the frozen dataclass's __init__: a million-partition image
    is written for every snapshot, stored image and whole-image MetadataFetch)."""
    return registration.to_record(topic_id, partition_id)


_compiled = load_extension("pykraft.metadata_log._partition_records")
partition_record = partition_record_python if _compiled is None else _compiled.partition_record


def count_load(
    partition: PartitionRegistration, replicas: Counter[int], leaders: Counter[int], sign: int
) -> None:
    """Adds (`sign` 1) or takes away (-1) `partition`'s replicas and leader in the counts."""
    for broker_id in partition.replicas:
        replicas[broker_id] += sign
    if partition.leader != NO_LEADER:
        leaders[partition.leader] += sign


def count_topic_load(
    partitions: Iterable[PartitionRegistration], replicas: Counter[int], leaders: Counter[int]
) -> None:
    """Adds every one of `partitions` to the counts, as `count_load` with `sign` 1 does for
    each, in bulk (Counter.update counts in C: a whole topic of a snapshot at once)."""
    partitions = tuple(partitions)
    replicas.update(itertools.chain.from_iterable(p.replicas for p in partitions))
    leaders.update(p.leader for p in partitions if p.leader != NO_LEADER)


@dataclasses.dataclass(frozen=True, slots=True)
class TopicsImage:
    """The topics by id, with an index from name to id, how many partitions each broker
    holds a replica of and leads (what replica placement balances; brokers with none absent),
    and per broker the partitions it must leave when fenced, may lead when unfenced and should
    lead as their preferred replica but does not (`partition_index.py`).

    `MetadataDelta.apply` keeps the counts and indexes in step with each change; an image built
    directly (counts or indexes left None) builds them once here."""

    EMPTY: ClassVar[TopicsImage]

    by_id: Mapping[UUID, TopicImage]
    by_name: Mapping[str, UUID]
    replica_counts: Mapping[int, int] | None = None
    leader_counts: Mapping[int, int] | None = None
    isr_index: BrokerIndex | None = None
    leaderless_index: BrokerIndex | None = None
    imbalanced_index: BrokerIndex | None = None

    def __post_init__(self) -> None:
        _freeze_field(self, "by_id")
        _freeze_field(self, "by_name")
        assert len(self.by_id) == len(self.by_name), "topic name index out of step with topics"
        if self.replica_counts is None or self.leader_counts is None:
            replicas: Counter[int] = Counter()
            leaders: Counter[int] = Counter()
            for topic in self.by_id.values():
                count_topic_load(topic.partitions.values(), replicas, leaders)
            object.__setattr__(self, "replica_counts", replicas)
            object.__setattr__(self, "leader_counts", leaders)
        _freeze_field(self, "replica_counts")
        _freeze_field(self, "leader_counts")
        if None in (self.isr_index, self.leaderless_index, self.imbalanced_index):
            self._index_partitions()

    def _index_partitions(self) -> None:
        builder = IndexBuilder()
        for topic in self.by_id.values():
            builder.add_topic(topic.topic_id, topic.partitions)
        isr, leaderless, imbalanced = builder.indexes()
        object.__setattr__(self, "isr_index", isr)
        object.__setattr__(self, "leaderless_index", leaderless)
        object.__setattr__(self, "imbalanced_index", imbalanced)

    def partitions_in_isr(self, broker_id: int) -> BrokerPartitions:
        """The partitions with a leader whose ISR holds `broker_id`."""
        assert self.isr_index is not None
        return BrokerPartitions(self.isr_index.get(broker_id, EMPTY_TOPICS))

    def leaderless_partitions(self, broker_id: int) -> BrokerPartitions:
        """The partitions without a leader that `broker_id` is a replica of."""
        assert self.leaderless_index is not None
        return BrokerPartitions(self.leaderless_index.get(broker_id, EMPTY_TOPICS))

    def imbalanced_partitions(self, broker_id: int) -> BrokerPartitions:
        """The partitions whose preferred replica (first) is `broker_id` and does not lead."""
        assert self.imbalanced_index is not None
        return BrokerPartitions(self.imbalanced_index.get(broker_id, EMPTY_TOPICS))

    def imbalanced_brokers(self) -> list[int]:
        """The brokers preferred by some partition they do not lead, in id order."""
        assert self.imbalanced_index is not None
        return sorted(self.imbalanced_index)

    def get(self, topic_id: UUID) -> TopicImage | None:
        return self.by_id.get(topic_id)

    def get_by_name(self, name: str) -> TopicImage | None:
        topic_id = self.by_name.get(name)
        return None if topic_id is None else self.by_id[topic_id]

    def write(self) -> Iterator[Record]:
        """The topics' records, topic by topic (one topic's list in memory at a time)."""
        for name in sorted(self.by_name):
            yield from self.by_id[self.by_name[name]].write()


ConfigResource = tuple[ConfigResourceType, str]


@dataclasses.dataclass(frozen=True, slots=True)
class ConfigsImage:
    """Config overrides by resource; a resource without overrides is absent."""

    EMPTY: ClassVar[ConfigsImage]

    resources: Mapping[ConfigResource, Mapping[str, str]]

    def __post_init__(self) -> None:
        # A Map comes from `MetadataDelta.apply`, whose entries are frozen already; checking them
        # here would cost a pass over every resource on every change.
        resources = self.resources
        if not isinstance(resources, Map):
            resources = Map({key: frozen_entries(entries) for key, entries in resources.items()})
        object.__setattr__(self, "resources", resources)

    def get(self, resource_type: ConfigResourceType, resource_name: str) -> Mapping[str, str]:
        """The overrides of one resource; an empty mapping when it has none."""
        return self.resources.get((resource_type, resource_name), EMPTY_CONFIG)

    def write(self) -> list[Record]:
        records: list[Record] = []
        for resource_type, resource_name in sorted(self.resources):
            entries = self.resources[(resource_type, resource_name)]
            records += (
                ConfigRecord(resource_type, resource_name, name, entries[name])
                for name in sorted(entries)
            )
        return records


@dataclasses.dataclass(frozen=True, slots=True)
class ProducerIdsImage:
    """The first producer id of the next block the controller will hand out."""

    EMPTY: ClassVar[ProducerIdsImage]

    next_producer_id: int = 0

    def write(self) -> list[Record]:
        if self.next_producer_id == 0:
            return []
        return [ProducerIdsRecord(_NO_BROKER, _NO_BROKER, self.next_producer_id)]


@dataclasses.dataclass(frozen=True, slots=True)
class MetadataImage:
    """The whole metadata state after the record at `offset` (written in leader `epoch`)."""

    EMPTY: ClassVar[MetadataImage]

    offset: int
    epoch: int
    features: FeaturesImage
    cluster: ClusterImage
    topics: TopicsImage
    configs: ConfigsImage
    producer_ids: ProducerIdsImage

    def write(self) -> list[Record]:
        """The image as records (a snapshot): features first, then brokers, topics each followed
        by its partitions, configs and producer ids; the order within each is sorted, so equal
        images write equal snapshots."""
        return list(self.records())

    def records(self) -> Iterator[Record]:
        """`write()`'s records drawn one at a time, for snapshots encoded chunk by chunk: the
        image is immutable, so any thread may draw them while others go on with newer images."""
        yield from self.features.write()
        yield from self.cluster.write()
        yield from self.topics.write()
        yield from self.configs.write()
        yield from self.producer_ids.write()


FeaturesImage.EMPTY = FeaturesImage(Map())
ClusterImage.EMPTY = ClusterImage(Map())
TopicsImage.EMPTY = TopicsImage(Map(), Map())
ConfigsImage.EMPTY = ConfigsImage(Map())
ProducerIdsImage.EMPTY = ProducerIdsImage(0)
MetadataImage.EMPTY = MetadataImage(
    offset=-1,
    epoch=-1,
    features=FeaturesImage.EMPTY,
    cluster=ClusterImage.EMPTY,
    topics=TopicsImage.EMPTY,
    configs=ConfigsImage.EMPTY,
    producer_ids=ProducerIdsImage.EMPTY,
)
