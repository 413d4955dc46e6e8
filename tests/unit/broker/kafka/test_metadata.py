"""Metadata v0-12 through kio's codec: Kafka addresses, topics, errors, ids, per version."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import Any

import pytest
from kio.index import load_payload_module, load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from pykraft.broker.kafka.api import KAFKA_LISTENER_NAME, KafkaServices
from pykraft.broker.kafka.apis import ALL_APIS
from pykraft.broker.kafka.codec import SIZE, decode_response, encode_request
from pykraft.broker.kafka.dispatch import Dispatcher
from pykraft.broker.kafka.entities import build
from pykraft.metadata_log import MetadataImage
from pykraft.metadata_log.records import Endpoint, Record, RegisterBrokerRecord
from tests.unit.broker.images import ORDERS_ID, advance, topic_records

DISPATCHER = Dispatcher(ALL_APIS)
ALL = object()  # ask for every topic, as the version spells it


def _broker(broker_id: int, *, kafka: bool = True, fenced: bool = False) -> RegisterBrokerRecord:
    endpoints = [Endpoint("PLAINTEXT", "127.0.0.1", 9190 + broker_id)]
    if kafka:
        endpoints.append(Endpoint(KAFKA_LISTENER_NAME, f"kafka-{broker_id}", 9090 + broker_id))
    return RegisterBrokerRecord(
        broker_id,
        uuid.UUID(int=100 + broker_id),
        broker_epoch=broker_id,
        endpoints=tuple(endpoints),
        rack="rack-1" if broker_id == 1 else None,
        fenced=fenced,
    )


def _services() -> KafkaServices:
    """Brokers 1 and 2 with Kafka listeners, 3 without, 4 fenced; "orders" on 1, 2 and 4."""
    records: list[Record] = [_broker(1), _broker(2), _broker(3, kafka=False)]
    records += [_broker(4, fenced=True), *topic_records("orders", ORDERS_ID, [(1, 2, 4), (2, 1)])]
    image = advance(MetadataImage.EMPTY, records)[1]
    config = SimpleNamespace(node_id=2, cluster_id="cluster-x")
    services: Any = SimpleNamespace(manager=SimpleNamespace(image=image), config=config)
    return services  # type: ignore[no-any-return]


def _ask(version: int, topics: Any = ALL, topic_ids: tuple[uuid.UUID, ...] = ()) -> Any:
    module = load_payload_module(3, version, EntityType.request)
    if topics is ALL:
        topics = () if version == 0 else None
    else:
        topics = tuple(build(module.MetadataRequestTopic, name=n, topic_id=None) for n in topics)
        topics += tuple(
            build(module.MetadataRequestTopic, name=None, topic_id=i) for i in topic_ids
        )
    request = build(
        module.MetadataRequest,
        topics=topics,
        allow_auto_topic_creation=True,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    frame = encode_request(11, request)
    answer = DISPATCHER.answer(DISPATCHER.decode(frame[SIZE.size :]), _services(), "peer")
    assert isinstance(answer, bytes)
    correlation_id, body = decode_response(answer[SIZE.size :], load_response_schema(3, version))
    assert correlation_id == 11
    return body


@pytest.mark.parametrize("version", range(13))
def test_every_version_lists_the_kafka_listeners_and_the_topics(version: int) -> None:
    body = _ask(version)
    brokers = [(b.node_id, b.host, b.port) for b in body.brokers]
    assert brokers == [(1, "kafka-1", 9091), (2, "kafka-2", 9092)]
    [topic] = body.topics
    assert (topic.name, topic.error_code) == ("orders", ErrorCode.none)
    first, second = topic.partitions
    assert (first.partition_index, first.leader_id, first.replica_nodes) == (0, 1, (1, 2, 4))
    assert (second.partition_index, second.leader_id, second.isr_nodes) == (1, 2, (2, 1))
    if version >= 1:
        assert body.controller_id == 2 and body.brokers[0].rack == "rack-1"
    if version >= 2:
        assert body.cluster_id == "cluster-x"
    if version >= 5:
        assert first.offline_replicas == (4,)
    if version >= 7:
        assert first.leader_epoch == 0
    if version >= 10:
        assert topic.topic_id == ORDERS_ID


def test_unknown_names_and_ids_are_errors_and_an_empty_list_is_no_topic() -> None:
    unknown_id = uuid.UUID(int=99)
    body = _ask(12, topics=("nope",), topic_ids=(unknown_id, ORDERS_ID))
    answers = {(t.name, t.topic_id): t.error_code for t in body.topics}
    assert answers == {
        (None, unknown_id): ErrorCode.unknown_topic_id,
        ("nope", None): ErrorCode.unknown_topic_or_partition,
        ("orders", ORDERS_ID): ErrorCode.none,
    }
    assert _ask(4, topics=()).topics == ()
    assert [t.name for t in _ask(0, topics=("orders",)).topics] == ["orders"]


@pytest.mark.parametrize("version", [10, 11])
def test_before_v12_a_topic_named_by_id_alone_is_an_invalid_request(version: int) -> None:
    """v10-11 carry topic ids but not null names in their answers; Kafka refuses ids there
    (INVALID_REQUEST, the name answered as ""). An unknown id made the answer unwritable and
    closed the connection (found by the Kafka fuzzer)."""
    body = _ask(version, topics=("orders",), topic_ids=(uuid.UUID(int=99), ORDERS_ID))
    answers = sorted((t.name, t.error_code) for t in body.topics)
    assert answers == [
        ("", ErrorCode.invalid_request),
        ("", ErrorCode.invalid_request),
        ("orders", ErrorCode.none),
    ]
