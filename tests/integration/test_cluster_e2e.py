"""The whole cluster end to end with the real client (issue 4 §5.1 and §5.6).

Three controllers and three brokers; a topic with 6 partitions, replication factor 3 and
min.insync.replicas=2. §5.1: 100,000 keyed records produced with acks=all are all acknowledged
and a consumer of every partition reads each exactly once, offsets consecutive per partition.
§5.6: SIGTERM of the broker leading most partitions while a producer runs moves its leaderships
away first (controlled shutdown); every send still succeeds, nothing acknowledged is lost, and the
broker restarts and is back in every ISR.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pykraft.client import Consumer, Producer, TopicPartition
from pykraft.client.producer.future import FutureRecordMetadata
from pykraft.client.types import RecordMetadata
from pykraft.metadata_log import PartitionRegistration

from . import cluster
from .controllers import Quorum
from .processes import BrokerProcess, wait_for

pytestmark = pytest.mark.integration

# Each poll drains what is buffered (wait_for pauses between polls).
RECORDS_PER_POLL_MAX = 100_000

TOPIC = "e2e-cluster"
PARTITIONS = 6
RECORDS = 100_000
KEYS = 1000
# Records the background producer of §5.6 has in flight at most (its own backpressure).
IN_FLIGHT_MAX = 2000


def registrations(quorum: Quorum) -> dict[int, PartitionRegistration]:
    return cluster.registrations(quorum, TOPIC)


def full_isr(quorum: Quorum) -> bool:
    return cluster.full_isr(quorum, TOPIC, PARTITIONS)


@contextmanager
def three_broker_cluster(tmp_path: Path) -> Iterator[tuple[Quorum, dict[int, BrokerProcess]]]:
    """Three controllers, three brokers and TOPIC (6 partitions, RF 3, min.insync.replicas=2)
    with every replica in the ISR; the brokers are closed on exit."""
    with cluster.running_cluster(tmp_path, topic=TOPIC, partitions=PARTITIONS) as running:
        yield running


def bootstrap(brokers: dict[int, BrokerProcess]) -> str:
    return ",".join(b.address for b in brokers.values())


def consume_all(
    brokers: dict[int, BrokerProcess], timeout_s: float
) -> dict[int, list[tuple[int, bytes | None]]]:
    """(offset, value) per partition of everything in TOPIC: read from the beginning up to the
    end offsets taken first (the caller has stopped producing)."""
    received: dict[int, list[tuple[int, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
    with Consumer(bootstrap_servers=bootstrap(brokers), auto_offset_reset="earliest") as consumer:
        partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(partitions)
        ends = {tp.partition: end for tp, end in consumer.end_offsets(partitions).items()}

        def all_received() -> bool:
            for record in consumer.poll(500, records_max=RECORDS_PER_POLL_MAX):
                received[record.partition].append((record.offset, record.value))
            return all(len(received[p]) >= end for p, end in ends.items())

        wait_for(all_received, timeout_s=timeout_s, what=f"{sum(ends.values())} records consumed")
    return received


def assert_none_lost(
    received: dict[int, list[tuple[int, bytes | None]]], acknowledged: dict[bytes, RecordMetadata]
) -> None:
    """Offsets consecutive from 0 per partition, every acknowledged value where its ack said."""
    for p, rows in received.items():
        assert [offset for offset, _ in rows] == list(range(len(rows))), f"partition {p}"
    where = {(p, offset): value for p, rows in received.items() for offset, value in rows}
    misplaced = [
        value
        for value, meta in acknowledged.items()
        if where.get((meta.partition, meta.offset)) != value
    ]
    assert not misplaced, f"{len(misplaced)} acknowledged records missing or misplaced"


def test_hundred_thousand_records_each_consumed_exactly_once(tmp_path: Path) -> None:
    with three_broker_cluster(tmp_path) as (_, brokers):
        with Producer(bootstrap_servers=bootstrap(brokers), acks="all", linger_ms=10) as producer:
            futures = [
                producer.send(TOPIC, b"v%d" % i, key=b"k%d" % (i % KEYS)) for i in range(RECORDS)
            ]
            producer.flush(timeout=120)
            sent = [future.result(timeout=0) for future in futures]
        acknowledged = {b"v%d" % i: meta for i, meta in enumerate(sent)}
        assert len({meta.partition for meta in sent}) == PARTITIONS  # the keys spread
        received = consume_all(brokers, timeout_s=120)
        assert sum(len(rows) for rows in received.values()) == RECORDS  # none twice, none extra
        assert_none_lost(received, acknowledged)


class BackgroundProducer:
    """Sends numbered keyed records with acks=all from a thread until stopped, never more than
    IN_FLIGHT_MAX unanswered; keeps every future so the test can check each one."""

    def __init__(self, producer: Producer) -> None:
        self.producer = producer
        self.futures: list[FutureRecordMetadata] = []
        self.answered = 0  # futures done, failed or not
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(IN_FLIGHT_MAX)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BackgroundProducer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        assert not self._thread.is_alive()

    def _done(self, _: FutureRecordMetadata) -> None:
        with self._lock:
            self.answered += 1
        self._slots.release()

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            if not self._slots.acquire(timeout=0.1):
                continue
            future = self.producer.send(TOPIC, b"s%d" % i, key=b"k%d" % (i % KEYS))
            future.add_done_callback(self._done)
            self.futures.append(future)
            i += 1


def test_sigterm_of_the_busiest_leader_loses_nothing(tmp_path: Path) -> None:
    with three_broker_cluster(tmp_path) as (quorum, brokers):
        leaders = Counter(r.leader for r in registrations(quorum).values())
        victim_id = leaders.most_common(1)[0][0]
        victim = brokers[victim_id]
        producer = Producer(bootstrap_servers=bootstrap(brokers), acks="all", linger_ms=5)
        with producer, BackgroundProducer(producer) as background:
            wait_for(lambda: background.answered >= 2000, timeout_s=30, what="first acks")
            assert victim.stop() == 0
            stopped_at = background.answered
            # Fencing by session expiry would take broker.session.timeout.ms (9 s): leaderships
            # gone the moment the process exits mean the controlled shutdown moved them.
            moved = registrations(quorum)
            assert all(r.leader != victim_id for r in moved.values()), moved
            assert all(victim_id not in r.isr for r in moved.values()), moved
            wait_for(
                lambda: background.answered >= stopped_at + 2000,
                timeout_s=30,
                what="acks after the shutdown",
            )
        assert "controlled shutdown done" in victim.log_path.read_text()
        sent = [future.result(timeout=0) for future in background.futures]  # none failed
        acknowledged = {b"s%d" % i: meta for i, meta in enumerate(sent)}
        # Without idempotence a retried batch may land twice (as in Kafka); none may be missing.
        received = consume_all(brokers, timeout_s=60)
        assert_none_lost(received, acknowledged)

        victim.start()
        wait_for(lambda: full_isr(quorum), timeout_s=30, what="the restarted broker in every ISR")
