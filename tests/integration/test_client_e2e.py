"""The client library against a real broker: the Producer's keyed records land where Kafka's
murmur2 partitioner puts them, and the Consumer reads every one back, in order per partition,
none missing, none twice; `pykraft produce` and `pykraft consume` do the same from the shell.

Three controllers and one broker (replication factor 1: replication is tested elsewhere).
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from pykraft.client import Consumer, Producer, TopicPartition
from pykraft.client.producer.partitioner import partition_for_key

from .cluster import make_broker
from .controllers import one_broker_unfenced, pykraft, run_cli, running_quorum
from .processes import wait_for

pytestmark = pytest.mark.integration

# Each poll drains what is buffered (wait_for pauses between polls).
RECORDS_PER_POLL_MAX = 100_000

TOPIC = "e2e"
PARTITIONS = 3
RECORDS = 2000


def test_producer_and_consumer_round_trip_through_a_real_broker(tmp_path: Path) -> None:
    with running_quorum(tmp_path) as quorum:
        broker = make_broker(tmp_path, quorum, 1)
        broker.start()
        try:
            wait_for(lambda: one_broker_unfenced(quorum), timeout_s=30, what="the broker unfenced")
            created = run_cli(
                quorum, "topics", "create", "--topic", TOPIC,
                "--partitions", str(PARTITIONS), "--replication-factor", "1",
            )  # fmt: skip
            assert created.returncode == 0, created.stderr
            with Producer(bootstrap_servers=broker.address, acks="all", linger_ms=5) as producer:
                futures = [
                    producer.send(TOPIC, b"value-%d" % i, key=b"key-%d" % (i % 50))
                    for i in range(RECORDS)
                ]
                sent = [future.result(timeout=60) for future in futures]
            by_partition: dict[int, list[int]] = defaultdict(list)
            for i, metadata in enumerate(sent):
                key = b"key-%d" % (i % 50)
                assert metadata.partition == partition_for_key(key, PARTITIONS)
                by_partition[metadata.partition].append(metadata.offset)
            for offsets in by_partition.values():
                assert offsets == list(range(len(offsets)))  # consecutive, in send order

            consumer = Consumer(bootstrap_servers=broker.address, auto_offset_reset="earliest")
            partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
            consumer.assign(partitions)
            consumer.seek_to_beginning(partitions)
            received: list[tuple[int, int, bytes | None]] = []

            def all_received() -> bool:
                received.extend(
                    (r.partition, r.offset, r.value)
                    for r in consumer.poll(500, records_max=RECORDS_PER_POLL_MAX)
                )
                return len(received) >= RECORDS

            wait_for(all_received, timeout_s=60, what=f"{RECORDS} records consumed")
            assert len(received) == RECORDS
            assert {value for _, _, value in received} == {b"value-%d" % i for i in range(RECORDS)}
            for p in range(PARTITIONS):
                offsets = [offset for partition, offset, _ in received if partition == p]
                assert offsets == sorted(offsets) == list(range(len(by_partition[p])))
            assert consumer.end_offsets(partitions) == {
                tp: len(by_partition[tp.partition]) for tp in partitions
            }
            consumer.close()

            lines = "".join(f"k{i}:line {i}\n" for i in range(10))
            produced = pykraft(
                "produce", "--topic", TOPIC, "--bootstrap-server", broker.address,
                "--key-separator", ":",
                stdin=lines,
            )  # fmt: skip
            assert produced.returncode == 0, produced.stderr
            consumed = pykraft(
                "consume", "--topic", TOPIC, "--bootstrap-server", broker.address,
                "--from-beginning",
                "--max-messages", str(RECORDS + 10), "--timeout-ms", "20000", "--output", "json",
            )  # fmt: skip
            assert consumed.returncode == 0, consumed.stderr
            rows = [json.loads(line) for line in consumed.stdout.splitlines()]
            assert len(rows) == RECORDS + 10
            shell = {row["key"]: row["value"] for row in rows if row["value"].startswith("line")}
            assert shell == {f"k{i}": f"line {i}" for i in range(10)}

            # Admin commands work through a broker too: it forwards them to the controller.
            via_broker = ("--bootstrap-server", broker.address)
            made = pykraft("topics", "create", "--topic", "via-broker", *via_broker)
            assert made.returncode == 0, made.stderr
            listed = pykraft("topics", "list", "--output", "json", *via_broker)
            assert json.loads(listed.stdout) == sorted([TOPIC, "via-broker"])
            duplicate = pykraft("topics", "create", "--topic", "via-broker", *via_broker)
            assert duplicate.returncode == 1 and "TOPIC_ALREADY_EXISTS" in duplicate.stderr
        finally:
            broker.stop()
