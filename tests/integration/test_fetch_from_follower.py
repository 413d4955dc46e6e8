"""Fetch from the nearest in-sync replica (KIP-392) on a real cluster (issue 15 §1.5).

Three controllers and three brokers in racks rack-1, rack-2 and rack-3, each with
`replica.selector.class` = Kafka's RackAwareReplicaSelector; topics of 3 partitions with every
broker a replica of each, so each broker leads one partition and follows the others. Consumers
in rack-2 (pykraft's with `client_rack`, librdkafka's with `client.rack`) read:

- every partition from broker 2, the leaders of the others only naming it: the brokers'
  counters (DescribeCounters) show every consumer byte sent by broker 2 and none by the
  others, and the records are exactly the ones acknowledged, in offset order per partition;
- through a kill -9 of broker 2 mid-read: back to the leaders, nothing missed or repeated;
- while broker 2 lags (paused, so it falls out of the ISR): from the leaders, never from it;
  once it has caught up and is back in the ISR, from it again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from pykraft.client import Consumer, Producer, TopicPartition
from pykraft.proto import broker_pb2

from . import cluster
from .kafka_cluster import KafkaCluster, running_kafka_cluster
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

RACK_AWARE = (
    "--override",
    "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector",
)
RACK, RACK_BROKER = "rack-2", 2
PARTITIONS = 3
RECORDS = 600
READ_TIMEOUT_S = 60
# Fetches smaller than a batch bring one batch each: reading takes the rack's broker dozens
# of answers, where the other leaders answer one fetch per partition (naming it).
FETCH_BYTES_MAX = 256
BATCH_BYTES = 1024

# (partition, offset) -> value, as acknowledged or as read.
Records = dict[tuple[int, int], bytes]


def consumer_bytes(brokers: dict[int, BrokerProcess], topic: str) -> dict[int, int]:
    """Record bytes each live broker sent to consumers of `topic` (its counters)."""
    found = {}
    for broker_id, broker in brokers.items():
        if not broker.alive:
            continue
        answer = broker.stub().DescribeCounters(broker_pb2.DescribeCountersRequest(), timeout=10)
        found[broker_id] = sum(
            c.value
            for c in answer.counters
            if c.name == "consumer_bytes_out_total" and c.labels["topic"] == topic
        )
    return found


def consumer_fetches(broker: BrokerProcess) -> int:
    """Consumer Fetch requests `broker` answered (its counters)."""
    answer = broker.stub().DescribeCounters(broker_pb2.DescribeCountersRequest(), timeout=10)
    return sum(
        c.value
        for c in answer.counters
        if c.name == "requests_total" and c.labels["request"] == "FetchConsumer"
    )


def produce(bootstrap: str, topic: str, first: int, count: int) -> Records:
    """Records `first`.. with acks=all and idempotence, in small batches (many fetches read
    them); where each was acknowledged."""
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=BATCH_BYTES) as producer:
        sent = [
            (producer.send(topic, b"v%06d" % i), b"v%06d" % i) for i in range(first, first + count)
        ]
        producer.flush(timeout=READ_TIMEOUT_S)
    acknowledged: Records = {}
    for future, value in sent:
        meta = future.result(timeout=0)
        acknowledged[meta.partition, meta.offset] = value
    return acknowledged


def read(consumer: Consumer, count: int, got: Records) -> None:
    """Polls `count` more records into `got` (what was read before), each checked to follow
    the one before it in its partition: none missed, none repeated."""
    last: dict[int, int] = {}
    for partition, offset in got:
        last[partition] = max(offset, last.get(partition, -1))
    wanted = len(got) + count
    deadline = time.monotonic() + READ_TIMEOUT_S
    while len(got) < wanted:
        assert time.monotonic() < deadline, f"only {len(got)} of {wanted} read in time"
        for record in consumer.poll(200):
            assert record.offset == last.get(record.partition, -1) + 1, record
            last[record.partition] = record.offset
            assert record.value is not None
            got[record.partition, record.offset] = record.value


def rack_consumer(bootstrap: str, topic: str) -> Consumer:
    """A consumer in rack-2 of every partition of `topic` from the beginning, in small
    fetches (so each broker's request count shows where they went)."""
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        client_rack=RACK,
        max_partition_fetch_bytes=FETCH_BYTES_MAX,
    )
    consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    return consumer


def new_topic(rack_cluster: KafkaCluster, topic: str) -> Records:
    """Creates `topic`, known to every broker, with a partition the rack's broker does not
    lead, and RECORDS records in it; where they were acknowledged."""
    quorum, brokers = rack_cluster.quorum, rack_cluster.brokers
    cluster.create_topic(quorum, topic, PARTITIONS)
    cluster.wait_until_brokers_know(brokers, topic, PARTITIONS)
    leaders = {r.leader for r in cluster.registrations(quorum, topic).values()}
    assert leaders != {RACK_BROKER}, "broker 2 leads every partition"
    return produce(grpc_bootstrap(brokers), topic, 0, RECORDS)


@pytest.fixture(scope="module")
def rack_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with running_kafka_cluster(tmp_path_factory.mktemp("racks"), broker_args=RACK_AWARE) as running:
        yield running


def grpc_bootstrap(brokers: dict[int, BrokerProcess]) -> str:
    return ",".join(broker.address for broker in brokers.values())


def test_pykrafts_consumer_reads_every_partition_from_its_racks_replica(
    rack_cluster: KafkaCluster,
) -> None:
    topic, brokers = "pykraft-racks", rack_cluster.brokers
    acknowledged = new_topic(rack_cluster, topic)
    bootstrap = grpc_bootstrap(brokers)
    fetches_before = {i: consumer_fetches(b) for i, b in brokers.items()}
    got: Records = {}
    with rack_consumer(bootstrap, topic) as consumer:
        read(consumer, RECORDS, got)
    assert got == acknowledged
    served = consumer_bytes(brokers, topic)
    assert served[RACK_BROKER] > 0 and served[1] == served[3] == 0, served
    fetches = {i: consumer_fetches(b) - fetches_before[i] for i, b in brokers.items()}
    # Each leader in another rack answered fetches (naming broker 2), broker 2 the rest.
    leaders = {r.leader for r in cluster.registrations(rack_cluster.quorum, topic).values()}
    assert all(fetches[leader] > 0 for leader in leaders), fetches
    assert fetches[RACK_BROKER] > 2 * (sum(fetches.values()) - fetches[RACK_BROKER]), fetches


def test_librdkafkas_consumer_with_client_rack_reads_from_its_racks_replica(
    rack_cluster: KafkaCluster,
) -> None:
    topic, brokers = "librdkafka-racks", rack_cluster.brokers
    acknowledged = new_topic(rack_cluster, topic)
    consumer = confluent_kafka.Consumer(
        {
            "bootstrap.servers": rack_cluster.bootstrap, "group.id": "unused",
            "enable.auto.commit": False, "client.rack": RACK,
        }
    )  # fmt: skip
    got: Records = {}
    try:
        consumer.assign(
            [
                confluent_kafka.TopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING)
                for p in range(PARTITIONS)
            ]
        )
        deadline = time.monotonic() + READ_TIMEOUT_S
        while len(got) < RECORDS:
            assert time.monotonic() < deadline, f"only {len(got)} of {RECORDS} read in time"
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            partition, offset, value = message.partition(), message.offset(), message.value()
            assert partition is not None and offset is not None and isinstance(value, bytes)
            assert (partition, offset - 1) in got or offset == 0, (partition, offset)
            got[partition, offset] = value
    finally:
        consumer.close()
    assert got == acknowledged
    served = consumer_bytes(brokers, topic)
    assert served[RACK_BROKER] > 0 and served[1] == served[3] == 0, served


def test_a_consumer_whose_racks_broker_is_killed_goes_back_to_the_leaders(
    tmp_path: Path,
) -> None:
    topic = "kill-racks"
    with cluster.running_cluster(
        tmp_path, topic=topic, partitions=PARTITIONS, broker_args=RACK_AWARE
    ) as (_, brokers):
        bootstrap = grpc_bootstrap(brokers)
        acknowledged = produce(bootstrap, topic, 0, RECORDS)
        got: Records = {}
        with rack_consumer(bootstrap, topic) as consumer:
            read(consumer, RECORDS, got)
            served = consumer_bytes(brokers, topic)
            assert served[1] == served[3] == 0, served
            brokers[RACK_BROKER].kill()
            acknowledged |= produce(bootstrap, topic, RECORDS, RECORDS)
            read(consumer, RECORDS, got)
            assert not consumer.poll(300), "nothing beyond what was produced"
        assert got == acknowledged
        served = consumer_bytes(brokers, topic)
        assert served[1] + served[3] > 0, served


def test_a_lagging_follower_is_not_chosen_until_it_is_back_in_sync(tmp_path: Path) -> None:
    topic = "lag-racks"
    with cluster.running_cluster(
        tmp_path, topic=topic, partitions=PARTITIONS, broker_args=RACK_AWARE
    ) as (quorum, brokers):
        others = {i: b for i, b in brokers.items() if i != RACK_BROKER}
        brokers[RACK_BROKER].pause()
        try:
            wait_for(
                lambda: all(
                    RACK_BROKER not in r.isr for r in cluster.registrations(quorum, topic).values()
                ),
                timeout_s=30,
                what="the paused broker out of every ISR",
            )
            acknowledged = produce(grpc_bootstrap(others), topic, 0, RECORDS)
            got: Records = {}
            with rack_consumer(grpc_bootstrap(others), topic) as consumer:
                read(consumer, RECORDS, got)  # a fetch sent to the paused broker would hang
                assert sum(consumer_bytes(others, topic).values()) > 0
                brokers[RACK_BROKER].resume()
                wait_for(
                    lambda: cluster.full_isr(quorum, topic, PARTITIONS),
                    timeout_s=30,
                    what="the resumed broker back in every ISR",
                )
                acknowledged |= produce(grpc_bootstrap(others), topic, RECORDS, RECORDS)
                read(consumer, RECORDS, got)
        finally:
            brokers[RACK_BROKER].resume()
        assert got == acknowledged
        assert consumer_bytes(brokers, topic)[RACK_BROKER] > 0
