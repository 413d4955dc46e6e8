"""An idempotent producer with 5 batches of a partition in flight through a leader's death
(issue 17 §1), against a real cluster.

Three controllers and three brokers, a topic of 3 partitions with replication factor 3 and
min.insync.replicas=2. A thread sends RECORDS records round-robin over the partitions in small
batches with Kafka's defaults (acks=all, idempotence, max.in.flight 5). Once partition 0 has 5
batches in flight, its leader is killed (kill -9), a new leader is elected, and the old one is
started again, all mid-stream. Every record is acknowledged, and reading the topic back gives
each partition exactly the records sent to it, once each, in send order, at the offsets their
acknowledgements named.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pykraft.client import Consumer, Producer, TopicPartition

from . import cluster
from .processes import wait_for

pytestmark = pytest.mark.integration

TOPIC = "pipelining"
PARTITIONS = 3
RECORDS = 30_000
BATCH_BYTES = 2048  # small batches: many per partition, so several are in flight at once
IN_FLIGHT = 5  # Kafka's default max.in.flight.requests.per.connection
TARGET = TopicPartition(TOPIC, 0)
TIMEOUT_S = 120


def value(index: int) -> bytes:
    return b"record-%06d" % index


def test_five_batches_in_flight_survive_the_leaders_death_once_each_in_order(
    tmp_path: Path,
) -> None:
    with cluster.running_cluster(tmp_path, topic=TOPIC, partitions=PARTITIONS) as running:
        quorum, brokers = running
        bootstrap = ",".join(b.address for b in brokers.values())
        with Producer(bootstrap_servers=bootstrap, batch_size=BATCH_BYTES) as producer:
            futures = []

            def send_all() -> None:
                for i in range(RECORDS):
                    futures.append(producer.send(TOPIC, value(i), partition=i % PARTITIONS))

            sender = threading.Thread(target=send_all, name="test-sends")
            sender.start()
            # The sender thread's own count (no public gauge): the precondition of the test.
            unresolved = producer._sender._unresolved
            wait_for(
                lambda: unresolved.unresolved_count(TARGET) >= IN_FLIGHT,
                timeout_s=TIMEOUT_S,
                what=f"{IN_FLIGHT} batches of {TARGET} in flight",
            )
            victim = cluster.registrations(quorum, TOPIC)[TARGET.partition].leader
            brokers[victim].kill()
            wait_for(
                lambda: (
                    cluster.registrations(quorum, TOPIC)[TARGET.partition].leader
                    not in (victim, -1)
                ),
                timeout_s=TIMEOUT_S,
                what=f"{TARGET} led by another broker",
            )
            brokers[victim].start()
            sender.join(TIMEOUT_S)
            assert not sender.is_alive(), "every send returned"
            producer.flush(timeout=TIMEOUT_S)
        assert len(futures) == RECORDS
        assert brokers[victim].alive
        acknowledged: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        for i, future in enumerate(futures):
            meta = future.result(timeout=0)  # raises if any record failed
            acknowledged[meta.partition].append((meta.offset, value(i)))
        read = read_back(bootstrap)
        for p in range(PARTITIONS):
            sent_here = [value(i) for i in range(p, RECORDS, PARTITIONS)]
            assert [v for _, v in read[p]] == sent_here, f"partition {p}: once each, in order"
            assert read[p] == acknowledged[p], f"partition {p}: at the acknowledged offsets"


def read_back(bootstrap: str) -> dict[int, list[tuple[int, bytes]]]:
    """(offset, value) of every record of TOPIC, per partition, up to the end offsets."""
    partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    received: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign(partitions)
        consumer.seek_to_beginning(partitions)
        total = sum(consumer.end_offsets(partitions).values())
        deadline = time.monotonic() + TIMEOUT_S
        count = 0
        while count < total:
            assert time.monotonic() < deadline, f"only {count} of {total} read in time"
            for record in consumer.poll(200):
                received[record.partition].append((record.offset, record.value or b""))
                count += 1
    return received
