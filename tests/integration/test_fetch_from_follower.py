"""Fetch from the nearest in-sync replica (KIP-392) on a real cluster (issue 15 §1.5).

Three controllers and three brokers in racks rack-1, rack-2 and rack-3, each with
`replica.selector.class` = Kafka's RackAwareReplicaSelector and a Kafka listener; topics of 3
partitions with every broker a replica of each. Consumers in rack-2 (pykraft's with
`client_rack`, librdkafka's with `client.rack`: `rack_readers`) read:

- every partition from broker 2, the leaders in other racks only naming it: the brokers'
  counters (DescribeCounters) show every consumer byte sent by broker 2, none by the others,
  which answered a fetch or so each; the records are exactly the ones acknowledged, in offset
  order per partition;
- through a kill -9 of broker 2 mid-read: back to the leaders, nothing missed or repeated;
- while broker 2 lags (paused, so it falls out of the ISR): from the leaders, never from it
  (a fetch sent to the paused broker would hang the read); once it has caught up and is back in
  the ISR, from it again.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pykraft.client import Producer
from pykraft.proto import broker_pb2

from . import cluster
from .kafka_cluster import KafkaCluster, running_kafka_cluster
from .processes import BrokerProcess, wait_for
from .rack_readers import READ_TIMEOUT_S, READERS, Records

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
]

RACK_AWARE = (
    "--override",
    "replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector",
)
RACK_BROKER = 2  # in rack_readers.RACK
PARTITIONS = 3
RECORDS = 600
BATCH_BYTES = 1024  # several batches per partition, each larger than a reader's fetch
OWN_TOPIC = "racks"


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


def produce(brokers: list[BrokerProcess], topic: str, first: int, count: int) -> Records:
    """Records `first`.. through `brokers` with acks=all and idempotence, in small batches;
    where each was acknowledged."""
    bootstrap = ",".join(broker.address for broker in brokers)
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


def new_topic(running: KafkaCluster, topic: str) -> Records:
    """Creates `topic`, known to every broker, with a partition the rack's broker does not
    lead, and RECORDS records in it; where they were acknowledged."""
    cluster.create_topic(running.quorum, topic, PARTITIONS)
    cluster.wait_until_brokers_know(running.brokers, topic, PARTITIONS)
    leaders = {r.leader for r in cluster.registrations(running.quorum, topic).values()}
    assert leaders != {RACK_BROKER}, "broker 2 leads every partition"
    return produce(list(running.brokers.values()), topic, 0, RECORDS)


@pytest.fixture(scope="module")
def rack_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with running_kafka_cluster(tmp_path_factory.mktemp("racks"), broker_args=RACK_AWARE) as running:
        yield running


@pytest.mark.parametrize("reader", READERS)
def test_a_consumer_reads_every_partition_from_its_racks_replica(
    rack_cluster: KafkaCluster, reader: str
) -> None:
    topic, brokers = f"{reader}-racks", rack_cluster.brokers
    acknowledged = new_topic(rack_cluster, topic)
    fetches_before = {i: consumer_fetches(b) for i, b in brokers.items()}
    got: Records = {}
    consumer = READERS[reader](rack_cluster, list(brokers), topic, PARTITIONS)
    try:
        consumer.read(RECORDS, got)
    finally:
        consumer.close()
    assert got == acknowledged
    served = consumer_bytes(brokers, topic)
    assert served[RACK_BROKER] > 0 and served[1] == served[3] == 0, served
    fetches = {i: consumer_fetches(b) - fetches_before[i] for i, b in brokers.items()}
    # Each leader in another rack answered fetches (naming broker 2), broker 2 the rest.
    leaders = {r.leader for r in cluster.registrations(rack_cluster.quorum, topic).values()}
    assert all(fetches[leader] > 0 for leader in leaders), fetches
    assert fetches[RACK_BROKER] > 2 * (sum(fetches.values()) - fetches[RACK_BROKER]), fetches


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[KafkaCluster]:
    """A cluster of the test's own (it kills or pauses a broker) with OWN_TOPIC."""
    with running_kafka_cluster(
        tmp_path, topic=OWN_TOPIC, partitions=PARTITIONS, broker_args=RACK_AWARE
    ) as running:
        yield running


@pytest.mark.parametrize("reader", READERS)
def test_a_consumer_whose_racks_broker_is_killed_goes_back_to_the_leaders(
    own_cluster: KafkaCluster, reader: str
) -> None:
    brokers = own_cluster.brokers
    acknowledged = produce(list(brokers.values()), OWN_TOPIC, 0, RECORDS)
    got: Records = {}
    consumer = READERS[reader](own_cluster, list(brokers), OWN_TOPIC, PARTITIONS)
    try:
        consumer.read(RECORDS, got)
        served = consumer_bytes(brokers, OWN_TOPIC)
        assert served[1] == served[3] == 0, served
        brokers[RACK_BROKER].kill()
        acknowledged |= produce(list(brokers.values()), OWN_TOPIC, RECORDS, RECORDS)
        consumer.read(RECORDS, got)
    finally:
        consumer.close()
    assert got == acknowledged
    served = consumer_bytes(brokers, OWN_TOPIC)
    assert served[1] + served[3] > 0, served


@pytest.mark.parametrize("reader", READERS)
def test_a_lagging_follower_is_not_chosen_until_it_is_back_in_sync(
    own_cluster: KafkaCluster, reader: str
) -> None:
    quorum, brokers, topic = own_cluster.quorum, own_cluster.brokers, OWN_TOPIC
    others = [i for i in brokers if i != RACK_BROKER]
    brokers[RACK_BROKER].pause()
    try:
        wait_for(
            lambda: all(
                RACK_BROKER not in r.isr for r in cluster.registrations(quorum, topic).values()
            ),
            timeout_s=30,
            what="the paused broker out of every ISR",
        )
        acknowledged = produce([brokers[i] for i in others], topic, 0, RECORDS)
        got: Records = {}
        consumer = READERS[reader](own_cluster, others, topic, PARTITIONS)
        try:
            consumer.read(RECORDS, got)
            assert sum(consumer_bytes({i: brokers[i] for i in others}, topic).values()) > 0
            brokers[RACK_BROKER].resume()
            wait_for(
                lambda: cluster.full_isr(quorum, topic, PARTITIONS),
                timeout_s=30,
                what="the resumed broker back in every ISR",
            )
            acknowledged |= produce([brokers[i] for i in others], topic, RECORDS, RECORDS)
            consumer.read(RECORDS, got)
        finally:
            consumer.close()
    finally:
        brokers[RACK_BROKER].resume()
    assert got == acknowledged
    assert consumer_bytes(brokers, topic)[RACK_BROKER] > 0
