"""A classic consumer group survives the loss of its coordinator (issue 14 §2), with librdkafka.

Two confluent-kafka consumers share a 4-partition topic, committing what they read. Once the
group is Stable, kill -9 of the broker that leads the group's `__consumer_offsets` partition
moves the coordinator to another broker, which loads the group from the log: the consumers
heartbeat on with their member ids and generation, so nobody's partitions are revoked or
assigned again, DescribeGroups on the new coordinator shows the same members Stable, every
record is read exactly once, and the committed offsets end at the log ends.

DescribeGroups goes through kafka-python's admin client: librdkafka's aborts the process when
a coordinator's connection drops under a describe (librdkafka issue 4605).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import confluent_kafka
import kafka.admin
import kafka.errors
import pytest

from pykraft.broker.group.config import OFFSETS_TOPIC, GroupConfig
from pykraft.broker.group.coordinator import partition_for

from .cluster import create_topic, registrations
from .kafka_cluster import KafkaCluster, running_kafka_cluster
from .processes import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
]

TOPIC = "ledger"
GROUP = "ledger-readers"
PARTITIONS = 4
RECORDS_EACH_SIDE = 400  # produced before the kill, and again after it
WAIT_S = 60.0


@pytest.fixture
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with running_kafka_cluster(tmp_path_factory.mktemp("kafka-group-failover")) as cluster:
        yield cluster


class Reader:
    """One consumer of the group: what it read, and every assignment change it was told of
    (revoked, lost or assigned partitions, in order)."""

    def __init__(self, name: str, bootstrap: str) -> None:
        self.name = name
        self.consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": bootstrap, "group.id": GROUP, "client.id": name,
                "auto.offset.reset": "earliest", "enable.auto.commit": False,
                "session.timeout.ms": 30_000, "heartbeat.interval.ms": 500,
            }
        )  # fmt: skip
        self.read: list[tuple[int, int, bytes]] = []  # (partition, offset, value)
        self.changes: list[tuple[str, frozenset[int]]] = []
        self.consumer.subscribe(
            [TOPIC],
            on_assign=lambda _, parts: self._changed("assigned", parts),
            on_revoke=lambda _, parts: self._changed("revoked", parts),
            on_lost=lambda _, parts: self._changed("lost", parts),
        )

    def _changed(self, what: str, parts: list[confluent_kafka.TopicPartition]) -> None:
        self.changes.append((what, frozenset(tp.partition for tp in parts)))

    def assigned(self) -> frozenset[int]:
        return frozenset(tp.partition for tp in self.consumer.assignment())

    def poll(self) -> None:
        """Reads what arrives within a short poll and commits it, synchronously."""
        messages = self.consumer.consume(num_messages=100, timeout=0.1)
        for message in messages:
            assert message.error() is None, message.error()
            partition, offset, value = message.partition(), message.offset(), message.value()
            assert partition is not None and offset is not None and value is not None
            self.read.append((partition, offset, value))
        if messages:
            self.consumer.commit(asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


def _coordinator(cluster: KafkaCluster) -> int:
    """The broker that leads the group's `__consumer_offsets` partition."""
    index = partition_for(GROUP, GroupConfig().offsets_topic_partitions)
    return registrations(cluster.quorum, OFFSETS_TOPIC)[index].leader


def _described(
    admin: kafka.admin.KafkaAdminClient, cluster: KafkaCluster
) -> tuple[str, set[tuple[str, str]]]:
    """The group's state and its members' (client id, member id), by DescribeGroups to the
    broker that leads its offsets partition now."""
    coordinator = _coordinator(cluster)
    group: dict[str, Any] = admin.describe_groups([GROUP], coordinator)[GROUP]
    assert group["error"] is None, group["error"]
    assert group["protocol_type"] == "consumer"
    return group["group_state"], {(m["client_id"], m["member_id"]) for m in group["members"]}


def _produce(bootstrap: str, start: int) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for i in range(start, start + RECORDS_EACH_SIDE):
        producer.produce(TOPIC, b"r%d" % i, partition=i % PARTITIONS)
    assert producer.flush(WAIT_S) == 0, "records left undelivered"


def _read_all(readers: list[Reader], count: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while sum(len(r.read) for r in readers) < count:
        assert time.monotonic() < deadline, f"{sum(len(r.read) for r in readers)} of {count}"
        for reader in readers:
            reader.poll()


def test_a_stable_classic_group_keeps_its_members_and_partitions_when_its_coordinator_dies(
    kafka_cluster: KafkaCluster,
) -> None:
    bootstrap = kafka_cluster.bootstrap
    create_topic(kafka_cluster.quorum, TOPIC, PARTITIONS)
    admin = kafka.admin.KafkaAdminClient(
        bootstrap_servers=bootstrap.split(","), request_timeout_ms=5_000
    )
    readers = [Reader(name, bootstrap) for name in ("reader-a", "reader-b")]
    try:
        _produce(bootstrap, 0)

        def split_in_two() -> bool:
            for reader in readers:
                reader.poll()
            return [len(r.assigned()) for r in readers] == [2, 2]

        wait_for(split_in_two, timeout_s=WAIT_S, what="two partitions each")
        _read_all(readers, RECORDS_EACH_SIDE)
        state, members = _described(admin, kafka_cluster)
        assert state == "Stable" and {client for client, _ in members} == {"reader-a", "reader-b"}
        assignments = [r.assigned() for r in readers]
        changes_before = [list(r.changes) for r in readers]

        victim = kafka_cluster.brokers[_coordinator(kafka_cluster)]
        victim.kill()

        def moved() -> bool:
            for reader in readers:
                reader.poll()
            return _coordinator(kafka_cluster) not in (-1, victim.node_id)

        wait_for(moved, timeout_s=WAIT_S, what="the group's offsets partition led elsewhere")

        def described_again() -> tuple[str, set[tuple[str, str]]] | None:
            for reader in readers:
                reader.poll()
            try:
                return _described(admin, kafka_cluster)
            except kafka.errors.KafkaError:
                return None  # the new coordinator is not found yet, or still loading

        after = wait_for(described_again, timeout_s=WAIT_S, what="the new coordinator's answer")
        assert after == ("Stable", members), "the same members, without a rebalance"
        _produce(bootstrap, RECORDS_EACH_SIDE)
        _read_all(readers, 2 * RECORDS_EACH_SIDE)

        assert [list(r.changes) for r in readers] == changes_before, "a rebalance happened"
        assert [r.assigned() for r in readers] == assignments
        read = [value for r in readers for _, _, value in r.read]
        assert sorted(read) == sorted(b"r%d" % i for i in range(2 * RECORDS_EACH_SIDE))
        ends = {
            p: readers[0].consumer.get_watermark_offsets(
                confluent_kafka.TopicPartition(TOPIC, p), timeout=10
            )[1]
            for p in range(PARTITIONS)
        }
        committed = readers[0].consumer.committed(
            [confluent_kafka.TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=10
        )
        assert {tp.partition: tp.offset for tp in committed} == ends
    finally:
        admin.close()
        for reader in readers:
            reader.close()
