"""A consumer reading through a leader's death (issue 5 §2.3), against a real cluster.

Three controllers and three brokers, a topic of 6 partitions with replication factor 3 and
min.insync.replicas=2. 12,000 records are produced with acks=all. A consumer reads them with
small fetches (so it cannot have read ahead); a third of the way through the partition with
the most records, kill -9 of the broker leading it. The consumer refreshes its metadata, follows
the new leaders and reads every record exactly once, in offset order per partition, with the
values that were acknowledged there; it never raises.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from pykraft.client import Consumer, Producer, TopicPartition

from . import cluster
from .processes import wait_for

pytestmark = pytest.mark.integration

TOPIC = "failover"
PARTITIONS = 6
RECORDS = 12_000
POLL_RECORDS_MAX = 200
FETCH_BYTES_MAX = 4096
READ_TIMEOUT_S = 90


def test_a_consumer_follows_new_leaders_and_reads_everything_once(tmp_path: Path) -> None:
    with cluster.running_cluster(tmp_path, topic=TOPIC, partitions=PARTITIONS) as running:
        quorum, brokers = running
        bootstrap = ",".join(b.address for b in brokers.values())
        with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
            futures = [producer.send(TOPIC, b"v%05d" % i) for i in range(RECORDS)]
            producer.flush(timeout=60)
        acknowledged = {}
        for i, future in enumerate(futures):
            meta = future.result(timeout=0)
            acknowledged[(meta.partition, meta.offset)] = b"v%05d" % i
        # kill -9 of the leader of the fullest partition a third of the way through it (the
        # sticky partitioner may leave a partition with few records or none).
        counts = Counter(partition for partition, _ in acknowledged)
        target, target_records = counts.most_common(1)[0]
        victim = cluster.registrations(quorum, TOPIC)[target].leader
        kill_after = target_records // 3

        partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        received: dict[int, list[tuple[int, bytes | None]]] = {p: [] for p in range(PARTITIONS)}
        # Small fetches and buffer: the consumer cannot have read ahead past the kill.
        with Consumer(
            bootstrap_servers=bootstrap,
            auto_offset_reset="earliest",
            max_partition_fetch_bytes=FETCH_BYTES_MAX,
            fetch_max_bytes=FETCH_BYTES_MAX,
            fetch_buffer_bytes_max=2 * FETCH_BYTES_MAX,
        ) as consumer:
            consumer.assign(partitions)
            deadline = time.monotonic() + READ_TIMEOUT_S
            count = 0
            while count < RECORDS:
                assert time.monotonic() < deadline, f"only {count} of {RECORDS} read in time"
                if len(received[target]) >= kill_after and brokers[victim].alive:
                    brokers[victim].kill()
                for record in consumer.poll(200, records_max=POLL_RECORDS_MAX):
                    received[record.partition].append((record.offset, record.value))
                    count += 1
            assert not consumer.poll(300), "nothing beyond what was produced"
        assert not brokers[victim].alive
        wait_for(
            lambda: cluster.registrations(quorum, TOPIC)[target].leader != victim,
            timeout_s=30,
            what=f"partition {target} led by another broker",
        )
        for p, rows in received.items():
            assert [offset for offset, _ in rows] == list(range(len(rows))), f"partition {p}"
        read = {(p, offset): value for p, rows in received.items() for offset, value in rows}
        assert read == acknowledged  # every acknowledged record, once, where its ack said
