"""Kafka clients that no one here wrote against a real 3-broker cluster (issue 14 §4 items 1-3).

For each of confluent-kafka, kafka-python and aiokafka, through the brokers' KAFKA:// listeners:
records produced with acks=all and idempotence are read back by a consumer of assigned partitions
exactly once, in order per partition, keys, values and headers intact; a consumer group commits
what it read and a second member of the group resumes after the committed offsets; the client's
admin API creates, describes and deletes a topic. One cluster serves the whole module.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .cluster import BROKER_IDS, create_topic
from .kafka_clients import CLIENTS, Landed, Outgoing
from .kafka_cluster import KafkaCluster, running_kafka_cluster
from .processes import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
]

PARTITIONS = 3
RECORDS = 60


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with running_kafka_cluster(tmp_path_factory.mktemp("kafka-clients")) as cluster:
        yield cluster


def outgoing(first: int, count: int) -> list[Outgoing]:
    """Numbered records with keys that spread over the partitions and two headers each."""
    return [
        Outgoing(b"k%d" % (i % 7), b"v%d" % i, (("n", b"%d" % i), ("kind", b"test")))
        for i in range(first, first + count)
    ]


def by_partition(records: list[Landed]) -> dict[int, list[Landed]]:
    """Records per partition, in the order given."""
    found: dict[int, list[Landed]] = {}
    for record in records:
        found.setdefault(record.partition, []).append(record)
    return found


def assert_read_back(consumed: list[Landed], landed: list[Landed]) -> None:
    """Exactly the landed records, each once, in offset order within each partition."""
    assert sorted(consumed) == sorted(landed)
    for partition, rows in by_partition(consumed).items():
        offsets = [row.offset for row in rows]
        assert offsets == sorted(offsets), f"partition {partition} out of order"


@pytest.mark.parametrize("name", CLIENTS)
def test_idempotent_acks_all_produce_read_back_by_assign(
    kafka_cluster: KafkaCluster, name: str
) -> None:
    client, topic = CLIENTS[name], f"assign-{name}"
    create_topic(kafka_cluster.quorum, topic, PARTITIONS)
    landed = client.produce(kafka_cluster.bootstrap, topic, outgoing(0, RECORDS))
    assert len(landed) == RECORDS
    for partition, rows in by_partition(sorted(landed)).items():
        assert [row.offset for row in rows] == list(range(len(rows))), partition
    consumed = client.consume_assigned(kafka_cluster.bootstrap, topic, PARTITIONS, RECORDS)
    assert_read_back(consumed, landed)


@pytest.mark.parametrize("name", CLIENTS)
def test_a_group_member_resumes_after_the_committed_offsets(
    kafka_cluster: KafkaCluster, name: str
) -> None:
    client, topic, group = CLIENTS[name], f"group-{name}", f"readers-{name}"
    create_topic(kafka_cluster.quorum, topic, PARTITIONS)
    first = client.produce(kafka_cluster.bootstrap, topic, outgoing(0, RECORDS))
    assert_read_back(client.consume_group(kafka_cluster.bootstrap, topic, group, RECORDS), first)
    second = client.produce(kafka_cluster.bootstrap, topic, outgoing(RECORDS, RECORDS))
    assert_read_back(client.consume_group(kafka_cluster.bootstrap, topic, group, RECORDS), second)


@pytest.mark.parametrize("name", CLIENTS)
def test_admin_creates_describes_and_deletes_a_topic(
    kafka_cluster: KafkaCluster, name: str
) -> None:
    client, topic, bootstrap = CLIENTS[name], f"admin-{name}", kafka_cluster.bootstrap
    client.create_topic(bootstrap, topic, 4)
    wait_for(
        lambda: kafka_cluster.quorum.image().topics.get_by_name(topic),
        timeout_s=30,
        what=f"{topic} in the image",
    )
    replicas = wait_for(
        lambda: client.describe_topic(bootstrap, topic),
        timeout_s=30,
        what=f"{topic} described",
    )
    assert sorted(replicas) == [0, 1, 2, 3]
    assert all(sorted(ids) == list(BROKER_IDS) for ids in replicas.values()), replicas
    client.delete_topic(bootstrap, topic)
    wait_for(
        lambda: kafka_cluster.quorum.image().topics.get_by_name(topic) is None,
        timeout_s=30,
        what=f"{topic} gone from the image",
    )
