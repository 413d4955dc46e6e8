"""A log directory failing under a running broker (issue 12 §2.7), against a real cluster.

Broker 1 has two log directories. Its second one is swapped for a plain file while it runs (a
disk gone from under it), and a topic created afterwards makes the broker use its directories
while it applies metadata. The partitions in the failed directory go offline on broker 1
(KAFKA_STORAGE_ERROR), the controller takes broker 1 out of their ISR and leadership, and
broker 1 keeps running and serving its other directory: every acks=all record is acknowledged
and read back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.client import Consumer, Producer, TopicPartition
from pykraft.proto import common_pb2

from .cluster import (
    BROKER_IDS,
    create_topic,
    make_broker,
    produce_raw,
    registrations,
    start_brokers,
)
from .controllers import running_quorum
from .processes import wait_for

pytestmark = pytest.mark.integration

BEFORE, AFTER = "before", "after"
PARTITIONS = 6
RECORDS = 600
TOPIC_ARGS = ("--config", "min.insync.replicas=2")


def test_a_failed_log_dir_takes_its_partitions_offline_and_the_broker_serves_the_rest(
    tmp_path: Path,
) -> None:
    with running_quorum(tmp_path) as quorum:
        brokers = {i: make_broker(tmp_path, quorum, i) for i in BROKER_IDS}
        first, second = brokers[1].data_dir / "a", brokers[1].data_dir / "b"
        index = brokers[1].args.index("--log-dirs") + 1
        brokers[1].args[index] = f"{first},{second}"
        try:
            start_brokers(quorum, brokers)
            create_topic(quorum, BEFORE, PARTITIONS, *TOPIC_ARGS)
            failed = {int(p.name.rsplit("-", 1)[1]) for p in second.glob(f"{BEFORE}-*")}
            kept = set(range(PARTITIONS)) - failed
            assert failed and kept, (failed, kept)

            second.rename(brokers[1].data_dir / "b.gone")
            second.write_text("not a directory any more\n")
            create_topic(quorum, AFTER, PARTITIONS, *TOPIC_ARGS)

            def moved() -> bool:
                found = registrations(quorum, BEFORE)
                return all(1 not in found[p].isr and found[p].leader != 1 for p in failed)

            wait_for(moved, timeout_s=30, what="broker 1 out of the failed replicas' ISRs")
            found = registrations(quorum, BEFORE)
            assert all(1 in found[p].isr for p in kept), found
            offline = produce_raw(brokers[1], BEFORE, min(failed), [b"x"], acks=-1)
            assert offline.error_code == common_pb2.KAFKA_STORAGE_ERROR, offline
            assert "offline" in offline.error_message

            bootstrap = ",".join(b.address for b in brokers.values())
            with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
                futures = [
                    producer.send(BEFORE, b"v%04d" % i, partition=i % PARTITIONS)
                    for i in range(RECORDS)
                ]
                producer.flush(timeout=60)
            sent = {(f.result(timeout=0).partition, f.result(timeout=0).offset) for f in futures}
            assert len(sent) == RECORDS
            assert brokers[1].alive
            with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
                consumer.assign([TopicPartition(BEFORE, p) for p in range(PARTITIONS)])
                read: set[tuple[int, int]] = set()

                def all_read() -> bool:
                    read.update((r.partition, r.offset) for r in consumer.poll(timeout_ms=200))
                    return read >= sent

                wait_for(all_read, timeout_s=60, what="every acknowledged record read back")
        finally:
            for broker in brokers.values():
                broker.close()
