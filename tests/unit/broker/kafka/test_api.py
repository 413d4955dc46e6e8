"""Where a broker's Kafka listener is, read from its registration."""

from __future__ import annotations

import uuid

from pykraft.broker.kafka.api import KAFKA_LISTENER_NAME, kafka_endpoint
from pykraft.metadata_log import replay_all
from pykraft.metadata_log.image import MetadataImage
from pykraft.metadata_log.records import Endpoint, RegisterBrokerRecord


def _image(*endpoints: Endpoint) -> MetadataImage:
    record = RegisterBrokerRecord(
        broker_id=1,
        incarnation_id=uuid.uuid4(),
        broker_epoch=7,
        endpoints=endpoints,
        rack=None,
        fenced=False,
        in_controlled_shutdown=False,
    )
    return replay_all(MetadataImage.EMPTY, [record]).apply(offset=0, epoch=1)


def test_the_kafka_endpoint_is_the_one_named_kafka() -> None:
    image = _image(
        Endpoint("GRPC", "127.0.0.1", 9291), Endpoint(KAFKA_LISTENER_NAME, "10.0.0.1", 9092)
    )
    assert kafka_endpoint(image, 1) == ("10.0.0.1", 9092)


def test_no_kafka_endpoint_for_unknown_brokers_or_grpc_only_ones() -> None:
    image = _image(Endpoint("GRPC", "127.0.0.1", 9291))
    assert kafka_endpoint(image, 1) is None
    assert kafka_endpoint(image, 2) is None
