"""The Kafka fuzzers against a real cluster's listeners (issue 14): three controllers and three
brokers as processes, the same checks as in one process (`listener_checks`, `records`), and
then the brokers themselves: each still alive, no traceback in any node's log, and once the
fuzzers' connections are gone, no more sockets, threads or memory held than before, within
bounds. Run it under `flock /tmp/pykraft-cluster.lock` where clusters share the machine.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pytest

from pykraft.broker.kafka.server import WORKERS_MAX

from ...integration.kafka_cluster import KafkaCluster, running_kafka_cluster
from ...integration.processes import NodeProcess
from .listener_checks import assert_released, fuzz_bytes, fuzz_pipelined, open_sockets
from .records import PRODUCE_KEY, Partition, fuzz_damaged_batches
from .requests import KafkaRequest, Vocabulary
from .unit_world import ADVERTISED, SERVED
from .wire import Connection

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:Generating overly large repr"),
]

TOPIC: Final = "fuzz-records"
GROUP: Final = "fuzz-group"
PIPELINED_EXAMPLES: Final = 200
BYTE_EXAMPLES: Final = 300
RECORD_EXAMPLES: Final = 60
SOCKETS_SLACK: Final = 16  # the brokers' own connections (controllers, followers) may change
THREADS_SLACK: Final = WORKERS_MAX + 16  # the listener's handler pool fills up to its bound
RSS_GROWTH_MAX: Final = 256 * 1024 * 1024
_TRACEBACK: Final = re.compile(rb"^Traceback \(most recent call last\)", re.MULTILINE)


@dataclass(frozen=True)
class Usage:
    sockets: int
    threads: int
    rss_bytes: int


def usage(node: NodeProcess) -> Usage:
    """What `node`'s process holds, from /proc."""
    assert node.process is not None
    pid = node.process.pid
    status = dict(
        line.split(":", 1)
        for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if ":" in line
    )
    rss_kib = int(status["VmRSS"].split()[0])
    return Usage(open_sockets(pid), int(status["Threads"]), rss_kib * 1024)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    tmp_path: Path = tmp_path_factory.mktemp("kafka-fuzz")
    with running_kafka_cluster(tmp_path, topic=TOPIC) as running:
        yield running


@pytest.fixture(scope="module")
def baseline(cluster: KafkaCluster) -> dict[int, Usage]:
    return {broker_id: usage(broker) for broker_id, broker in cluster.brokers.items()}


def _vocabulary(cluster: KafkaCluster) -> Vocabulary:
    image = cluster.quorum.image()
    topics = {name: image.topics.get_by_name(name) for name in (TOPIC, "__consumer_offsets")}
    found = {name: topic for name, topic in topics.items() if topic is not None}
    ids = tuple(topic.topic_id for topic in found.values())
    return Vocabulary(topics=(*found, "orders"), topic_ids=ids, groups=(GROUP,))


def _address(cluster: KafkaCluster, broker_id: int) -> tuple[str, int]:
    return "127.0.0.1", cluster.kafka_ports[broker_id]


def test_every_broker_advertises_the_versions_fuzzed(cluster: KafkaCluster) -> None:
    for broker_id in cluster.brokers:
        with Connection(_address(cluster, broker_id)) as connection:
            assert connection.advertised() == SERVED


def test_damaged_batches_are_refused_and_store_nothing(cluster: KafkaCluster) -> None:
    """Before the fuzzers below, which may delete TOPIC (DeleteTopics names it too)."""
    topic = cluster.quorum.image().topics.get_by_name(TOPIC)
    assert topic is not None
    leader = topic.partitions[0].leader

    def send(request: KafkaRequest) -> bytes:
        with Connection(_address(cluster, leader)) as connection:
            connection.send(request.frame())
            payload = connection.answer()
        assert payload is not None, "the leader closed the connection"
        return payload

    fuzz_damaged_batches(Partition(send, TOPIC, 0), SERVED[PRODUCE_KEY], RECORD_EXAMPLES, "broker")


def test_pipelined_requests_are_answered_in_order_and_the_connection_serves_on(
    cluster: KafkaCluster, baseline: dict[int, Usage]
) -> None:
    address = _address(cluster, 1)
    fuzz_pipelined(address, ADVERTISED, _vocabulary(cluster), PIPELINED_EXAMPLES, "broker")


def test_bad_bytes_get_an_answer_or_a_clean_close(
    cluster: KafkaCluster, baseline: dict[int, Usage]
) -> None:
    fuzz_bytes(_address(cluster, 2), SERVED, _vocabulary(cluster), BYTE_EXAMPLES, "broker")


def test_the_nodes_live_without_tracebacks_and_hold_what_they_held(
    cluster: KafkaCluster, baseline: dict[int, Usage]
) -> None:
    """Last in this module: after every fuzzer above."""
    nodes: list[NodeProcess] = [*cluster.brokers.values(), *cluster.quorum.controllers]
    for node in nodes:
        assert node.alive, f"{node.log_path.name}: the process died"
        assert not _TRACEBACK.search(node.log_path.read_bytes()), f"a traceback in {node.log_path}"
    for broker_id, broker in cluster.brokers.items():
        _assert_released(broker, baseline[broker_id], f"broker {broker_id}")


def _assert_released(broker: NodeProcess, before: Usage, name: str) -> None:
    assert_released(lambda: usage(broker).sockets, before.sockets, SOCKETS_SLACK, f"{name} sockets")
    assert_released(lambda: usage(broker).threads, before.threads, THREADS_SLACK, f"{name} threads")
    assert_released(
        lambda: usage(broker).rss_bytes, before.rss_bytes, RSS_GROWTH_MAX, f"{name} RSS"
    )
