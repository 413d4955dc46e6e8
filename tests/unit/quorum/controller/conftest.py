"""Images for the controller's decision tests, built the way controllers build them: by replaying
records through `MetadataDelta`. Tests import these helpers from this module."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping
from uuid import UUID

from pykraft.metadata_log import replay_all
from pykraft.metadata_log.image import MetadataImage, PartitionRegistration
from pykraft.metadata_log.records import (
    ConfigRecord,
    ConfigResourceType,
    Endpoint,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)
from pykraft.quorum.controller.result import ControllerResult

CLUSTER_ID = "test-cluster"


def image_with(*records: Record, base: MetadataImage = MetadataImage.EMPTY) -> MetadataImage:
    """`base` (empty by default) after `records`, one offset each."""
    delta = replay_all(base, records)
    return delta.apply(offset=base.offset + len(records), epoch=max(base.epoch, 1))


def after(image: MetadataImage, result: ControllerResult[object]) -> MetadataImage:
    """The image once a decision's records are committed and replayed."""
    return image_with(*result.records, base=image)


def broker_epoch(broker_id: int) -> int:
    """The epoch `broker` gives each test broker: distinct per id, easy to recognise."""
    return 100 + broker_id


def incarnation(broker_id: int, generation: int = 0) -> UUID:
    return UUID(int=(generation << 32) + broker_id + 1)


def broker(
    broker_id: int,
    *,
    rack: str | None = None,
    fenced: bool = False,
    in_controlled_shutdown: bool = False,
) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id,
        incarnation(broker_id),
        broker_epoch(broker_id),
        (Endpoint("PLAINTEXT", f"broker{broker_id}", 9092),),
        rack=rack,
        fenced=fenced,
        in_controlled_shutdown=in_controlled_shutdown,
    )


def brokers(*broker_ids: int, racks: Mapping[int, str] | None = None) -> list[Record]:
    """Unfenced registrations for `broker_ids`, with the given racks."""
    racks = racks or {}
    return [broker(broker_id, rack=racks.get(broker_id)) for broker_id in broker_ids]


def topic(
    name: str,
    topic_id: UUID,
    partitions: Iterable[tuple[int, ...] | PartitionRegistration],
    configs: Mapping[str, str] | None = None,
) -> list[Record]:
    """A topic's records; a tuple is a fresh partition (ISR = replicas, first replica leads)."""
    records: list[Record] = [TopicRecord(name, topic_id)]
    for key, value in (configs or {}).items():
        records.append(ConfigRecord(ConfigResourceType.TOPIC, name, key, value))
    for partition_id, partition in enumerate(partitions):
        if isinstance(partition, tuple):
            records.append(
                PartitionRecord(topic_id, partition_id, partition, partition, partition[0])
            )
        else:
            records.append(partition.to_record(topic_id, partition_id))
    return records


def cluster_config(key: str, value: str) -> ConfigRecord:
    return ConfigRecord(ConfigResourceType.BROKER, "", key, value)


def topic_ids(start: int = 1) -> Callable[[], UUID]:
    """A deterministic topic id generator: UUID(int=start), UUID(int=start+1), ..."""
    counter = itertools.count(start)
    return lambda: UUID(int=next(counter))
