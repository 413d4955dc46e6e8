"""The data plane listener on real brokers (issue 17 §5/§7): each broker registers it and its
metadata names it (`data_port`), pykraft's producer, consumer and the followers send Produce and
Fetch there and not over gRPC (the brokers' request metrics by listener say so), and bytes that
are not a frame close only their own connection."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.client import Consumer, Producer, TopicPartition
from pykraft.proto import broker_pb2

from .cluster import BROKER_IDS, create_topic, make_broker, start_brokers, wait_until_brokers_know
from .controllers import Quorum, running_quorum
from .metrics_scrape import total, with_metrics
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

TOPIC = "plane"
PARTITIONS = 3
REQUESTS = "kafka_network_requestmetrics_requests_total"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[Quorum, dict[int, BrokerProcess], list[str]]]:
    with running_quorum(tmp_path) as quorum:
        brokers = {i: make_broker(tmp_path, quorum, i) for i in BROKER_IDS}
        try:
            metrics = [with_metrics(broker) for broker in brokers.values()]
            start_brokers(quorum, brokers)
            create_topic(quorum, TOPIC, PARTITIONS)
            wait_until_brokers_know(brokers, TOPIC, PARTITIONS)
            yield quorum, brokers, metrics
        finally:
            for broker in brokers.values():
                broker.close()


def bootstrap(brokers: dict[int, BrokerProcess]) -> str:
    return ",".join(broker.address for broker in brokers.values())


def data_ports(broker: BrokerProcess) -> dict[int, int]:
    response = broker.stub().Metadata(broker_pb2.MetadataRequest(), timeout=10)
    return {b.id: b.data_port for b in response.brokers}


def round_trip(brokers: dict[int, BrokerProcess], values: list[bytes]) -> list[bytes]:
    """`values` produced with acks=all to partition 0, then read back from its start."""
    with Producer(bootstrap_servers=bootstrap(brokers), acks="all") as producer:
        for value in values:
            producer.send(TOPIC, value, partition=0).result(timeout=30)
    read: list[bytes] = []
    with Consumer(bootstrap_servers=bootstrap(brokers)) as consumer:
        consumer.assign([TopicPartition(TOPIC, 0)])
        consumer.seek_to_beginning([TopicPartition(TOPIC, 0)])

        def all_read() -> bool:
            read.extend(r.value for r in consumer.poll(200) if r.value is not None)
            return len(read) >= len(values)

        wait_for(all_read, timeout_s=30, what="the records read back")
    return read


def test_clients_and_followers_use_the_data_plane(
    cluster: tuple[Quorum, dict[int, BrokerProcess], list[str]],
) -> None:
    _, brokers, metrics = cluster
    ports = data_ports(brokers[1])
    assert set(ports) == set(BROKER_IDS) and all(port > 0 for port in ports.values())
    assert round_trip(brokers, [b"a", b"b", b"c"]) == [b"a", b"b", b"c"]
    assert total(metrics, REQUESTS, request="Produce", listener="data") >= 3
    assert total(metrics, REQUESTS, request="Fetch", listener="data") > 0  # both kinds
    assert total(metrics, REQUESTS, request="Produce", listener="grpc") == 0
    assert total(metrics, REQUESTS, request="Fetch", listener="grpc") == 0


def test_bytes_that_are_not_a_frame_close_only_their_connection(
    cluster: tuple[Quorum, dict[int, BrokerProcess], list[str]],
) -> None:
    _, brokers, _ = cluster
    port = data_ports(brokers[1])[1]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")  # a length of 1.2 GB: refused
        assert sock.recv(1) == b""
    wait_for(
        lambda: b"data plane: closing" in brokers[1].log_path.read_bytes(),
        timeout_s=10,
        what="the broker's line about the closed connection",
    )
    assert brokers[1].alive
    assert round_trip(brokers, [b"still", b"served"]) == [b"still", b"served"]
