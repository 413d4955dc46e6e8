"""librdkafka through failures and rebalances on a real 3-broker cluster (issue 14 §4 "Also").

A consumer group of three confluent-kafka consumers splits 6 partitions two each, and the two left
cover all six when one leaves. kill -9 of a partition leader while an idempotent acks=all producer
runs: every acknowledged record is read back exactly once, where its acknowledgement put it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import confluent_kafka
import pytest

from .cluster import create_topic, registrations
from .kafka_cluster import KafkaCluster, running_kafka_cluster
from .processes import wait_for

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore:read_text is deprecated:DeprecationWarning"),
]

PARTITIONS = 6
ACKS_BEFORE_KILL = 2000
WAIT_S = 60.0


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    with running_kafka_cluster(tmp_path_factory.mktemp("kafka-failover")) as cluster:
        yield cluster


def assignments(consumers: list[confluent_kafka.Consumer]) -> list[set[int]] | None:
    """Each consumer's partitions after a short poll of each (rebalances run inside poll); None
    while the assignments overlap or some consumer has none."""
    for consumer in consumers:
        message = consumer.poll(0.1)
        assert message is None or message.error() is None, message.error()
    found = [{tp.partition for tp in consumer.assignment()} for consumer in consumers]
    if not all(found) or sum(map(len, found)) != len(set().union(*found)):
        return None
    return found


def test_three_consumers_split_six_partitions_and_rebalance_when_one_leaves(
    kafka_cluster: KafkaCluster,
) -> None:
    topic = "split"
    create_topic(kafka_cluster.quorum, topic, PARTITIONS)
    config = {"bootstrap.servers": kafka_cluster.bootstrap, "group.id": "trio"}
    consumers = [confluent_kafka.Consumer(config) for _ in range(3)]
    try:
        for consumer in consumers:
            consumer.subscribe([topic])
        wait_for(
            lambda: (found := assignments(consumers)) and [len(p) for p in found] == [2, 2, 2],
            timeout_s=WAIT_S,
            what="two partitions each",
        )
        consumers.pop().close()
        wait_for(
            lambda: (found := assignments(consumers)) and set().union(*found) == set(range(6)),
            timeout_s=WAIT_S,
            what="the two left cover all six",
        )
    finally:
        for consumer in consumers:
            consumer.close()


class AckedProducer:
    """An idempotent acks=all confluent-kafka producer of numbered records ("r<i>") that keeps
    where each acknowledged one landed; a failed delivery is not acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                "linger.ms": 5,
            }
        )  # fmt: skip
        self.acknowledged: dict[bytes, tuple[int, int]] = {}  # value: (partition, offset)
        self.sent = 0
        self.marked_at = 0  # the number of the first record sent after `mark`
        self.acked_since_mark: set[int] = set()  # partitions that acknowledged one of those

    def mark(self) -> None:
        """From now on, `acked_since_mark` gathers the partitions of records sent after now:
        records sent earlier may still be in flight, and their acknowledgements say nothing
        about what happened since."""
        self.marked_at, self.acked_since_mark = self.sent, set()

    def _report(self, error: object, message: confluent_kafka.Message) -> None:
        value, partition, offset = message.value(), message.partition(), message.offset()
        if error is None:
            assert value is not None and partition is not None and offset is not None
            self.acknowledged[value] = (partition, offset)
            if int(value[1:]) >= self.marked_at:
                self.acked_since_mark.add(partition)

    def produce_until(self, done: Callable[[], bool], what: str) -> None:
        """Sends until `done()`, failing at the deadline."""
        deadline = time.monotonic() + WAIT_S
        while not done():
            assert time.monotonic() < deadline, f"{what} after {len(self.acknowledged)} acks"
            try:
                value = b"r%d" % self.sent
                self.producer.produce(
                    self.topic, value, b"k%d" % (self.sent % 100), on_delivery=self._report
                )
                self.sent += 1
            except BufferError:  # the local queue is full: let deliveries drain it
                self.producer.poll(0.1)
            self.producer.poll(0)

    def flush(self) -> None:
        assert self.producer.flush(WAIT_S) == 0, "records left undelivered"


def read_everything(bootstrap: str, topic: str) -> list[tuple[bytes, int, int]]:
    """(value, partition, offset) of every record of `topic`, read by assign up to the end
    offsets taken first."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    try:
        parts = [confluent_kafka.TopicPartition(topic, p) for p in range(PARTITIONS)]
        ends = {tp.partition: consumer.get_watermark_offsets(tp, WAIT_S)[1] for tp in parts}
        for tp in parts:
            tp.offset = confluent_kafka.OFFSET_BEGINNING
        consumer.assign(parts)
        got: list[tuple[bytes, int, int]] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < sum(ends.values()):
            assert time.monotonic() < deadline, f"{len(got)} of {sum(ends.values())} records"
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            value, partition, offset = message.value(), message.partition(), message.offset()
            assert value is not None and partition is not None and offset is not None
            got.append((value, partition, offset))
        return got
    finally:
        consumer.close()


def test_kill_9_of_a_leader_loses_and_duplicates_no_acknowledged_record(
    kafka_cluster: KafkaCluster,
) -> None:
    topic = "killed"
    quorum = kafka_cluster.quorum
    create_topic(quorum, topic, PARTITIONS, "--config", "min.insync.replicas=2")
    victim = kafka_cluster.brokers[registrations(quorum, topic)[0].leader]
    producer = AckedProducer(kafka_cluster.bootstrap, topic)
    producer.produce_until(lambda: len(producer.acknowledged) >= ACKS_BEFORE_KILL, "first acks")
    victim.kill()
    producer.produce_until(
        lambda: all(r.leader != victim.node_id for r in registrations(quorum, topic).values()),
        "leaderships moved off the killed broker",
    )
    # With fencing on the session stream's end the leaderships move within milliseconds, while
    # tens of thousands of records sent before the kill are still being acknowledged: only
    # records sent after the move say whether the killed leader's partitions took writes again.
    producer.mark()
    producer.produce_until(
        lambda: producer.acked_since_mark == set(range(PARTITIONS)),
        "every partition acknowledged a record sent after the move",
    )
    producer.flush()

    records = read_everything(kafka_cluster.bootstrap, topic)
    values = [value for value, _, _ in records]
    assert len(values) == len(set(values)), "a record was written twice"
    where = {value: (partition, offset) for value, partition, offset in records}
    misplaced = {v: at for v, at in producer.acknowledged.items() if where.get(v) != at}
    assert not misplaced, f"{len(misplaced)} acknowledged records missing or misplaced"
