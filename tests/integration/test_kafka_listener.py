"""Unchanged Kafka clients against a real 3-broker cluster's Kafka listeners (issue 14 §1).

confluent-kafka (librdkafka) and kafka-python bootstrap from the brokers' KAFKA:// listeners and
see every broker at its Kafka address and a topic created through pykraft's admin. Raw sockets
check what closes a connection (a frame over socket.request.max.bytes, garbage) while the broker
keeps serving, and that an ApiVersions version from the future gets UNSUPPORTED_VERSION with the
supported ranges in the v0 body.
"""

from __future__ import annotations

import io
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaConsumer
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from pykraft.broker.kafka.codec import SIZE, decode_response
from pykraft.broker.kafka.server import REQUEST_BYTES_MAX

from .cluster import BROKER_IDS
from .kafka_cluster import KafkaCluster, running_kafka_cluster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
]

TOPIC = "orders"
PARTITIONS = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """A running cluster with `TOPIC`, its brokers listening for Kafka's protocol."""
    tmp_path: Path = tmp_path_factory.mktemp("kafka-listener")
    with running_kafka_cluster(tmp_path, topic=TOPIC, partitions=PARTITIONS) as cluster:
        yield cluster


def test_librdkafka_sees_the_brokers_kafka_addresses_and_the_topic(
    cluster: KafkaCluster,
) -> None:
    metadata = AdminClient({"bootstrap.servers": cluster.bootstrap}).list_topics(timeout=10)
    brokers = {b.id: (str(b.host), b.port) for b in metadata.brokers.values()}
    assert brokers == {i: ("127.0.0.1", port) for i, port in cluster.kafka_ports.items()}
    topic = metadata.topics[TOPIC]
    assert topic.error is None and sorted(topic.partitions) == list(range(PARTITIONS))
    for partition in topic.partitions.values():
        assert partition.leader in BROKER_IDS and sorted(partition.isrs) == list(BROKER_IDS)


def test_kafka_python_admin_and_consumer_see_the_cluster(cluster: KafkaCluster) -> None:
    bootstrap = cluster.bootstrap.split(",")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        described = admin.describe_cluster()
        found = {(b["broker_id"], b["host"], b["port"]) for b in described["brokers"]}
        assert found == {(i, "127.0.0.1", port) for i, port in cluster.kafka_ports.items()}
        assert TOPIC in admin.list_topics()
    finally:
        admin.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        assert TOPIC in consumer.topics()
        assert consumer.partitions_for_topic(TOPIC) == set(range(PARTITIONS))
    finally:
        consumer.close()


def _connect(cluster: KafkaCluster) -> socket.socket:
    return socket.create_connection(("127.0.0.1", cluster.kafka_ports[1]), timeout=10)


def _api_versions_v99(correlation_id: int) -> bytes:
    header = RequestHeader(
        request_api_key=i16(18),
        request_api_version=i16(99),
        correlation_id=i32(correlation_id),
        client_id="probe",
    )
    buffer = io.BytesIO()
    entity_writer(RequestHeader)(buffer, header)
    buffer.write(b"\x00")  # the body: no tagged fields
    return SIZE.pack(buffer.tell()) + buffer.getvalue()


def _read_frame(sock: socket.socket) -> bytes:
    data = b""
    size = SIZE.size
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "connection closed"
        data += chunk
        if len(data) == SIZE.size and size == SIZE.size:
            size += SIZE.unpack(data)[0]
    return data[SIZE.size :]


def _assert_api_versions_v99_answered(cluster: KafkaCluster) -> None:
    with _connect(cluster) as sock:
        sock.sendall(_api_versions_v99(77))
        correlation_id, body = decode_response(_read_frame(sock), ApiVersionsResponseV0)
    assert correlation_id == 77 and body.error_code is ErrorCode.unsupported_version
    ranges = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}
    assert ranges[18] == (0, 3) and ranges[3] == (0, 12)


def test_an_unknown_api_versions_version_gets_the_ranges(cluster: KafkaCluster) -> None:
    _assert_api_versions_v99_answered(cluster)


@pytest.mark.parametrize(
    "frame",
    [SIZE.pack(REQUEST_BYTES_MAX + 1) + b"\x00" * 1024, SIZE.pack(8) + b"\xff" * 8],
    ids=["oversized", "garbage"],
)
def test_bad_frames_close_the_connection_and_the_broker_keeps_serving(
    cluster: KafkaCluster, frame: bytes
) -> None:
    with _connect(cluster) as sock:
        sock.sendall(frame)
        assert sock.recv(1) == b""
    _assert_api_versions_v99_answered(cluster)
