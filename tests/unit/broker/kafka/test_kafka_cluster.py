"""DescribeCluster over Kafka's protocol, answered from the broker's image, through kio's codec."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from pykraft.broker.kafka.api import KAFKA_LISTENER_NAME
from pykraft.broker.kafka.apis.cluster import APIS, AUTHORIZED_OPERATIONS_UNKNOWN
from pykraft.metadata_log import replay_all
from pykraft.metadata_log.image import MetadataImage
from pykraft.metadata_log.records import Endpoint, RegisterBrokerRecord
from tests.unit.broker.kafka.admin_wire import context
from tests.unit.broker.kafka.kio_wire import request_types, through_the_wire

(DESCRIBE_CLUSTER,) = APIS


def _broker(broker_id: int, *, kafka: bool = True, fenced: bool = False) -> RegisterBrokerRecord:
    endpoints = [Endpoint("GRPC", "127.0.0.1", 9290 + broker_id)]
    if kafka:
        endpoints.append(Endpoint(KAFKA_LISTENER_NAME, f"10.0.0.{broker_id}", 9092))
    return RegisterBrokerRecord(
        broker_id=broker_id,
        incarnation_id=uuid.uuid4(),
        broker_epoch=7,
        endpoints=tuple(endpoints),
        rack="r1" if broker_id == 1 else None,
        fenced=fenced,
        in_controlled_shutdown=False,
    )


IMAGE = replay_all(
    MetadataImage.EMPTY,
    [_broker(3), _broker(1), _broker(2, kafka=False), _broker(4, fenced=True)],
).apply(offset=0, epoch=1)


def _request(version: int, endpoint_type: int = 1) -> object:
    module = request_types(DESCRIBE_CLUSTER.key, version)
    extra = {"endpoint_type": endpoint_type} if version >= 1 else {}
    return module.DescribeClusterRequest(include_cluster_authorized_operations=False, **extra)


@pytest.mark.parametrize("version", range(DESCRIBE_CLUSTER.version_min, 2))
def test_describe_cluster_lists_unfenced_brokers_at_their_kafka_addresses(version: int) -> None:
    ctx = context(version, image=IMAGE)
    response = through_the_wire(DESCRIBE_CLUSTER, ctx, _request(version))
    assert (response.error_code, response.cluster_id, response.controller_id) == (
        ErrorCode.none,
        "test-cluster",
        1,  # this broker (2) has no Kafka listener here, so the lowest listed one
    )
    assert [(b.broker_id, b.host, b.port, b.rack) for b in response.brokers] == [
        (1, "10.0.0.1", 9092, "r1"),
        (3, "10.0.0.3", 9092, None),
    ]
    assert response.cluster_authorized_operations == AUTHORIZED_OPERATIONS_UNKNOWN


def test_describe_cluster_refuses_a_request_for_controller_endpoints() -> None:
    response = through_the_wire(DESCRIBE_CLUSTER, context(1, image=IMAGE), _request(1, 2))
    assert response.error_code == ErrorCode.mismatched_endpoint_type
    assert response.error_message
    assert (response.endpoint_type, response.brokers) == (2, ())


def test_describe_cluster_names_this_broker_as_controller_when_it_is_listed() -> None:
    image = replay_all(IMAGE, [_broker(2)]).apply(offset=1, epoch=1)
    response = through_the_wire(DESCRIBE_CLUSTER, context(1, image=image), _request(1))
    assert response.controller_id == 2
    assert [b.broker_id for b in response.brokers] == [1, 2, 3]
