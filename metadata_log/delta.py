"""`MetadataDelta`: the changes of a run of records on top of an image, the only mutable piece.

Replay records one by one with `replay`, then `apply` to get the next immutable image. `apply`
does not consume the delta and shares, by reference, every sub-image and every TopicImage the
records did not touch, and derives each changed persistent map from the old one, so both the time
of `apply` and the memory of keeping old images around grow with what changed, not with the size
of the image.

The controller decides the log, so a record that cannot apply (a partition of an unknown topic,
a duplicate topic, an unknown broker, producer ids or offsets going back) is a bug somewhere:
`MetadataReplayError` is raised and the node must stop rather than skip the record.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TypeVar, assert_never
from uuid import UUID

from immutables import Map

from pykraft.metadata_log.errors import MetadataReplayError
from pykraft.metadata_log.image import (
    BrokerRegistration,
    ClusterImage,
    ConfigResource,
    ConfigsImage,
    FeaturesImage,
    MetadataImage,
    PartitionRegistration,
    ProducerIdsImage,
    TopicImage,
    TopicsImage,
    count_load,
    frozen_entries,
)
from pykraft.metadata_log.partition_index import (
    BrokerIndex,
    IndexChanges,
    imbalanced_members,
    isr_members,
    leaderless_members,
    overlaid,
)
from pykraft.metadata_log.records import (
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)

_K = TypeVar("_K")
_V = TypeVar("_V")


def _added(base: Mapping[int, int] | None, loads: Counter[int]) -> Map[int, int]:
    """`base`'s counts plus `loads`; a count that reaches zero leaves the map."""
    assert base is not None, "an image's counts are set once it is built"
    changes: dict[int, int | None] = {}
    for broker_id, load in loads.items():
        count = base.get(broker_id, 0) + load
        assert count >= 0, f"broker {broker_id}'s count would go below zero"
        changes[broker_id] = count or None
    return overlaid(base, changes)


class _TopicChange:
    """A topic created or changed in this delta: its base image (if any) and changed partitions."""

    def __init__(self, name: str, topic_id: UUID, base: TopicImage | None) -> None:
        self.name = name
        self.topic_id = topic_id
        self.base = base
        self.partitions: dict[int, PartitionRegistration] = {}

    def current_partitions(self) -> Iterable[tuple[int, PartitionRegistration]]:
        """Every partition of the topic as this delta leaves it, with its id."""
        if self.base is not None:
            for partition_id, partition in self.base.partitions.items():
                if partition_id not in self.partitions:
                    yield partition_id, partition
        yield from self.partitions.items()

    def partition(self, partition_id: int) -> PartitionRegistration | None:
        changed = self.partitions.get(partition_id)
        if changed is not None or self.base is None:
            return changed
        return self.base.partitions.get(partition_id)

    def to_image(self) -> TopicImage:
        if self.base is None:
            return TopicImage(self.name, self.topic_id, Map(self.partitions))
        return TopicImage(self.name, self.topic_id, overlaid(self.base.partitions, self.partitions))


class _TopicsDelta:
    """Topic changes. A topic removed from the base is in `removed`; one created or changed is in
    `changed` (both, if a removed id comes back); `names` overlays the base's name index."""

    def __init__(self, base: TopicsImage) -> None:
        self.base = base
        self.changed: dict[UUID, _TopicChange] = {}
        self.removed: set[UUID] = set()
        self.names: dict[str, UUID | None] = {}
        # What the changes add to (or take from) each broker's replica and leader counts.
        self.replica_loads: Counter[int] = Counter()
        self.leader_loads: Counter[int] = Counter()
        self.isr_changes = IndexChanges()
        self.leaderless_changes = IndexChanges()
        self.imbalanced_changes = IndexChanges()

    def _index(
        self,
        key: tuple[UUID, int],
        old: PartitionRegistration | None,
        new: PartitionRegistration | None,
    ) -> None:
        self.isr_changes.move(key, isr_members(old), isr_members(new))
        self.leaderless_changes.move(key, leaderless_members(old), leaderless_members(new))
        self.imbalanced_changes.move(key, imbalanced_members(old), imbalanced_members(new))

    def _set(self, change: _TopicChange, partition_id: int, new: PartitionRegistration) -> None:
        old = change.partition(partition_id)
        if old is not None:
            count_load(old, self.replica_loads, self.leader_loads, -1)
        count_load(new, self.replica_loads, self.leader_loads, 1)
        self._index((change.topic_id, partition_id), old, new)
        change.partitions[partition_id] = new
        self.changed[change.topic_id] = change

    def _exists(self, topic_id: UUID) -> bool:
        return topic_id in self.changed or (
            topic_id in self.base.by_id and topic_id not in self.removed
        )

    def _id_of(self, name: str) -> UUID | None:
        if name in self.names:
            return self.names[name]
        return self.base.by_name.get(name)

    def _change_of(self, topic_id: UUID, record: Record) -> _TopicChange:
        """The topic's change so far; a fresh one, not yet kept, if the topic is unchanged."""
        change = self.changed.get(topic_id)
        if change is not None:
            return change
        if not self._exists(topic_id):
            raise MetadataReplayError(f"{record}: no topic with id {topic_id}")
        base = self.base.by_id[topic_id]
        return _TopicChange(base.name, topic_id, base)

    def create(self, record: TopicRecord) -> None:
        if self._exists(record.topic_id):
            raise MetadataReplayError(f"{record}: topic id {record.topic_id} already exists")
        if self._id_of(record.name) is not None:
            raise MetadataReplayError(f"{record}: topic name {record.name!r} already exists")
        self.changed[record.topic_id] = _TopicChange(record.name, record.topic_id, None)
        self.names[record.name] = record.topic_id

    def set_partition(self, record: PartitionRecord) -> None:
        change = self._change_of(record.topic_id, record)
        self._set(change, record.partition_id, PartitionRegistration.from_record(record))

    def change_partition(self, record: PartitionChangeRecord) -> None:
        change = self._change_of(record.topic_id, record)
        current = change.partition(record.partition_id)
        if current is None:
            raise MetadataReplayError(f"{record}: topic has no partition {record.partition_id}")
        self._set(change, record.partition_id, current.merge(record))

    def remove(self, record: RemoveTopicRecord) -> str:
        """Removes the topic and returns its name (its configs go too)."""
        change = self._change_of(record.topic_id, record)
        self.changed.pop(record.topic_id, None)
        name = change.name
        for partition_id, partition in change.current_partitions():
            count_load(partition, self.replica_loads, self.leader_loads, -1)
            self._index((record.topic_id, partition_id), partition, None)
        if record.topic_id in self.base.by_id:
            self.removed.add(record.topic_id)
        self.names[name] = None
        return name

    def apply(self) -> TopicsImage:
        if not self.changed and not self.removed:
            return self.base
        by_id_changes: dict[UUID, TopicImage | None] = dict.fromkeys(self.removed)
        by_id_changes.update((tid, change.to_image()) for tid, change in self.changed.items())
        return TopicsImage(
            overlaid(self.base.by_id, by_id_changes),
            overlaid(self.base.by_name, self.names),
            _added(self.base.replica_counts, self.replica_loads),
            _added(self.base.leader_counts, self.leader_loads),
            self.isr_changes.applied_to(self._base_index(self.base.isr_index)),
            self.leaderless_changes.applied_to(self._base_index(self.base.leaderless_index)),
            self.imbalanced_changes.applied_to(self._base_index(self.base.imbalanced_index)),
        )

    @staticmethod
    def _base_index(index: BrokerIndex | None) -> BrokerIndex:
        assert index is not None, "an image's indexes are set once it is built"
        return index


class MetadataDelta:
    """The changes that records make to `image`; `apply` turns them into the next image."""

    def __init__(self, image: MetadataImage) -> None:
        self._image = image
        self._features: dict[str, int | None] = {}
        self._brokers: dict[int, BrokerRegistration | None] = {}
        self._topics = _TopicsDelta(image.topics)
        # The full entries of every resource touched, copied from the image on first touch.
        self._configs: dict[ConfigResource, dict[str, str]] = {}
        self._next_producer_id: int | None = None

    @property
    def image(self) -> MetadataImage:
        """The image this delta started from."""
        return self._image

    def changed_topic_ids(self) -> set[UUID]:
        """Topics created or whose partitions changed, and still present."""
        return set(self._topics.changed)

    def removed_topic_ids(self) -> set[UUID]:
        """Topics of the starting image that were removed (even if the id came back since)."""
        return set(self._topics.removed)

    def replay(self, record: Record) -> None:
        """Records the change `record` makes; MetadataReplayError if it cannot apply."""
        match record:
            case RegisterBrokerRecord():
                self._brokers[record.broker_id] = BrokerRegistration.from_record(record)
            case UnregisterBrokerRecord():
                self._registered_broker(record.broker_id, record.broker_epoch, record)
                self._brokers[record.broker_id] = None
            case BrokerRegistrationChangeRecord():
                self._change_broker(record)
            case TopicRecord():
                self._topics.create(record)
            case PartitionRecord():
                self._topics.set_partition(record)
            case PartitionChangeRecord():
                self._topics.change_partition(record)
            case ConfigRecord():
                self._set_config(record)
            case RemoveTopicRecord():
                self._clear_topic_configs(self._topics.remove(record))
            case ProducerIdsRecord():
                self._set_next_producer_id(record)
            case FeatureLevelRecord():
                # Kafka's rule: level 0 means the feature is off, so it leaves the image.
                level = record.feature_level
                self._features[record.name] = level if level != 0 else None
            case NoOpRecord():
                pass
            case _:
                assert_never(record)

    def apply(self, *, offset: int, epoch: int) -> MetadataImage:
        """The image after every record replayed so far, as of the record at `offset` written in
        leader `epoch`; neither may be older than the starting image's. The delta stays usable."""
        if offset < self._image.offset or epoch < self._image.epoch:
            raise MetadataReplayError(
                f"offset/epoch would go back from {self._image.offset}/{self._image.epoch} "
                f"to {offset}/{epoch}"
            )
        return MetadataImage(
            offset=offset,
            epoch=epoch,
            features=self._apply_features(),
            cluster=self._apply_cluster(),
            topics=self._topics.apply(),
            configs=self._apply_configs(),
            producer_ids=self._apply_producer_ids(),
        )

    def _broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self._brokers:
            return self._brokers[broker_id]
        return self._image.cluster.broker(broker_id)

    def _registered_broker(self, broker_id: int, epoch: int, record: Record) -> BrokerRegistration:
        broker = self._broker(broker_id)
        if broker is None or broker.broker_epoch != epoch:
            raise MetadataReplayError(
                f"{record}: no broker {broker_id} registered with epoch {epoch}"
            )
        return broker

    def _change_broker(self, record: BrokerRegistrationChangeRecord) -> None:
        broker = self._registered_broker(record.broker_id, record.broker_epoch, record)
        if record.fenced is not None:
            broker = dataclasses.replace(broker, fenced=record.fenced)
        if record.in_controlled_shutdown is not None:
            broker = dataclasses.replace(
                broker, in_controlled_shutdown=record.in_controlled_shutdown
            )
        self._brokers[record.broker_id] = broker

    def _config_entries(self, resource: ConfigResource) -> dict[str, str]:
        entries = self._configs.get(resource)
        if entries is None:
            resource_type, resource_name = resource
            entries = dict(self._image.configs.get(resource_type, resource_name))
            self._configs[resource] = entries
        return entries

    def _set_config(self, record: ConfigRecord) -> None:
        entries = self._config_entries((record.resource_type, record.resource_name))
        if record.value is None:
            entries.pop(record.name, None)
        else:
            entries[record.name] = record.value

    def _clear_topic_configs(self, topic_name: str) -> None:
        resource = (ConfigResourceType.TOPIC, topic_name)
        if resource in self._configs or self._image.configs.get(*resource):
            self._configs[resource] = {}

    def _set_next_producer_id(self, record: ProducerIdsRecord) -> None:
        current = self._next_producer_id
        if current is None:
            current = self._image.producer_ids.next_producer_id
        if record.next_producer_id < current:
            raise MetadataReplayError(f"{record}: next producer id would go back from {current}")
        self._next_producer_id = record.next_producer_id

    def _apply_features(self) -> FeaturesImage:
        if not self._features:
            return self._image.features
        return FeaturesImage(overlaid(self._image.features.levels, self._features))

    def _apply_cluster(self) -> ClusterImage:
        if not self._brokers:
            return self._image.cluster
        return ClusterImage(overlaid(self._image.cluster.brokers, self._brokers))

    def _apply_configs(self) -> ConfigsImage:
        if not self._configs:
            return self._image.configs
        changes = {
            resource: frozen_entries(entries) if entries else None
            for resource, entries in self._configs.items()
        }
        return ConfigsImage(overlaid(self._image.configs.resources, changes))

    def _apply_producer_ids(self) -> ProducerIdsImage:
        if self._next_producer_id is None:
            return self._image.producer_ids
        return ProducerIdsImage(self._next_producer_id)


def replay_all(image: MetadataImage, records: Iterable[Record]) -> MetadataDelta:
    """A delta from `image` with `records` replayed in order (MetadataReplayError on one that
    cannot apply); `apply(offset=..., epoch=...)` gives the image after them. Every replay of
    records onto an image (a snapshot onto the empty image, a batch, a fetch) goes through here."""
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    return delta
