from __future__ import annotations

import dataclasses
from uuid import UUID

import pytest

from pykraft.metadata_log.codec import decode_records, encode_records
from pykraft.metadata_log.delta import replay_all
from pykraft.metadata_log.image import (
    BrokerRegistration,
    ClusterImage,
    ConfigsImage,
    FeaturesImage,
    MetadataImage,
    PartitionRegistration,
    ProducerIdsImage,
    TopicImage,
    TopicsImage,
)
from pykraft.metadata_log.records import (
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)

TOPIC = ConfigResourceType.TOPIC
ENDPOINT = Endpoint("PLAINTEXT", "h", 1)

# A small snapshot in the order `write` must produce, sorted within each part.
SNAPSHOT: list[Record] = [
    FeatureLevelRecord("metadata.version", 1),
    FeatureLevelRecord("a.version", 2),
    FeatureLevelRecord("z.version", 1),
    RegisterBrokerRecord(1, UUID(int=11), 3, (ENDPOINT,), "r1", False, False),
    RegisterBrokerRecord(2, UUID(int=12), 4, (ENDPOINT,), None, True, False),
    TopicRecord("a", UUID(int=2)),
    PartitionRecord(UUID(int=2), 0, (1, 2), (1,), 1, 4, 6),
    TopicRecord("b", UUID(int=1)),
    PartitionRecord(UUID(int=1), 0, (2,), (2,), 2, 0, 0),
    PartitionRecord(UUID(int=1), 1, (1,), (1,), 1, 0, 0),
    ConfigRecord(TOPIC, "a", "retention.ms", "5"),
    ConfigRecord(TOPIC, "a", "segment.ms", "7"),
    ConfigRecord(ConfigResourceType.BROKER, "", "num.partitions", "2"),
    ProducerIdsRecord(-1, -1, 2000),
]


def snapshot_image() -> MetadataImage:
    return replay_all(MetadataImage.EMPTY, SNAPSHOT).apply(offset=41, epoch=3)


def test_empty_image() -> None:
    empty = MetadataImage.EMPTY
    assert (empty.offset, empty.epoch) == (-1, -1)
    assert empty.write() == []
    assert empty.producer_ids.next_producer_id == 0
    assert empty.cluster.unfenced_broker_ids() == []
    assert empty.topics.get(UUID(int=1)) is None
    assert empty.topics.get_by_name("a") is None
    assert replay_all(MetadataImage.EMPTY, []).apply(offset=-1, epoch=-1) == empty


def test_write_gives_the_snapshot_in_order() -> None:
    image = snapshot_image()
    assert (image.offset, image.epoch) == (41, 3)
    assert image.write() == SNAPSHOT


def test_snapshot_round_trips_through_the_codec() -> None:
    image = snapshot_image()
    records = decode_records(encode_records(image.write()))
    assert replay_all(MetadataImage.EMPTY, records).apply(offset=41, epoch=3) == image


def test_images_compare_by_value() -> None:
    assert snapshot_image() == snapshot_image()
    assert snapshot_image() is not snapshot_image()
    assert snapshot_image() != replay_all(MetadataImage.EMPTY, SNAPSHOT).apply(offset=42, epoch=3)
    assert snapshot_image() != replay_all(MetadataImage.EMPTY, SNAPSHOT[:-1]).apply(
        offset=41, epoch=3
    )


def test_lookups() -> None:
    image = snapshot_image()
    topic = image.topics.get_by_name("a")
    assert topic is not None
    assert topic is image.topics.get(UUID(int=2))
    assert topic.partitions[0] == PartitionRegistration((1, 2), (1,), 1, 4, 6)
    assert image.cluster.broker(1) == BrokerRegistration(
        1, UUID(int=11), 3, (ENDPOINT,), "r1", False, False
    )
    assert image.cluster.broker(3) is None
    assert image.cluster.unfenced_broker_ids() == [1]
    assert image.configs.get(TOPIC, "a") == {"retention.ms": "5", "segment.ms": "7"}
    assert image.configs.get(TOPIC, "b") == {}
    assert dict(image.features.levels)["a.version"] == 2


def test_images_cannot_be_mutated() -> None:
    image = snapshot_image()
    with pytest.raises(dataclasses.FrozenInstanceError):
        image.offset = 0  # type: ignore[misc]
    mappings: list[object] = [
        image.cluster.brokers,
        image.topics.by_id,
        image.topics.by_name,
        image.configs.resources,
        image.configs.get(TOPIC, "a"),
        image.configs.get(TOPIC, "none"),
        image.features.levels,
    ]
    topic = image.topics.get_by_name("a")
    assert topic is not None
    mappings.append(topic.partitions)
    for mapping in mappings:
        with pytest.raises(TypeError):
            mapping[0] = None  # type: ignore[index]


def test_images_built_from_dicts_copy_them() -> None:
    levels = {"metadata.version": 1}
    entries = {"retention.ms": "1"}
    resources = {(TOPIC, "a"): entries}
    features, configs = FeaturesImage(levels), ConfigsImage(resources)
    levels["metadata.version"] = 2
    entries["retention.ms"] = "2"
    resources.clear()
    assert dict(features.levels) == {"metadata.version": 1}
    assert configs.get(TOPIC, "a") == {"retention.ms": "1"}


def test_sub_images_from_scratch_equal_replayed_ones() -> None:
    topic = TopicImage("t", UUID(int=5), {0: PartitionRegistration((1,), (1,), 1, 0, 0)})
    built = MetadataImage(
        offset=7,
        epoch=2,
        features=FeaturesImage({}),
        cluster=ClusterImage({}),
        topics=TopicsImage({UUID(int=5): topic}, {"t": UUID(int=5)}),
        configs=ConfigsImage({}),
        producer_ids=ProducerIdsImage(),
    )
    replayed = replay_all(MetadataImage.EMPTY, topic.write()).apply(offset=7, epoch=2)
    assert built == replayed
