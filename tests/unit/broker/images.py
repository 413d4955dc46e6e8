"""Metadata images for broker unit tests, built by replaying records as the controller writes
them."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from pykraft.metadata_log import MetadataDelta, MetadataImage, replay_all
from pykraft.metadata_log.records import (
    Endpoint,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    TopicRecord,
)

ORDERS_ID = UUID(int=1)
EVENTS_ID = UUID(int=2)


def broker_record(broker_id: int, *, fenced: bool = False) -> RegisterBrokerRecord:
    return RegisterBrokerRecord(
        broker_id,
        UUID(int=100 + broker_id),
        broker_epoch=broker_id,
        endpoints=(Endpoint("PLAINTEXT", "127.0.0.1", 9190 + broker_id),),
        rack=f"rack-{broker_id}",
        fenced=fenced,
    )


def topic_records(
    name: str, topic_id: UUID, assignments: Sequence[tuple[int, ...]], *, isr_all: bool = True
) -> list[Record]:
    """A topic whose partition p has replicas `assignments[p]`, led by the first replica."""
    records: list[Record] = [TopicRecord(name, topic_id)]
    for partition, replicas in enumerate(assignments):
        isr = replicas if isr_all else replicas[:1]
        records.append(PartitionRecord(topic_id, partition, replicas, isr, replicas[0]))
    return records


def advance(image: MetadataImage, records: Sequence[Record]) -> tuple[MetadataDelta, MetadataImage]:
    delta = replay_all(image, records)
    return delta, delta.apply(offset=image.offset + len(records), epoch=max(image.epoch, 1))


def cluster_image(*topics: list[Record]) -> MetadataImage:
    """Brokers 1-3 unfenced, and the given topics."""
    records: list[Record] = [broker_record(b) for b in (1, 2, 3)]
    for topic in topics:
        records += topic
    return advance(MetadataImage.EMPTY, records)[1]
