"""Benchmark of pykraft's Kafka listener against Apache Kafka 4.x itself, in one run, with the same
unchanged client (issue 14 §5).

Both clusters get the workload of bench/cluster.py: 3 brokers, a topic of 6 partitions with
replication factor 3 and min.insync.replicas=2 (created through the Kafka admin API), N records
of 100 bytes. pykraft runs three controllers and three brokers (each with a KAFKA:// listener);
Apache Kafka runs three nodes with combined broker and controller roles (bench/apache_kafka.py).
The clusters run one after the other, so neither takes CPU from the other.

Prints, for each cluster and as the ratio pykraft / Kafka (the figure that matters; absolute
figures depend on the machine):
- confluent-kafka producing N records with acks=all and idempotence, first send to last ack;
- confluent-kafka consuming the whole topic from the beginning (one consumer, every partition);
- kcat producing N more records (acks=all, idempotence) and consuming all 2N, when kcat is on
  PATH ("kcat: not installed" otherwise).

Run: `.venv/bin/python bench/kafka_compare.py [--records 1000000]`. The first run downloads
Kafka's jars with Maven (bench/kafka/pom.xml, cached in build/kafka-jars/).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka import libversion as librdkafka_version
from confluent_kafka import version as confluent_version
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.apache_kafka import kafka_cluster, kafka_jars, kafka_version  # noqa: E402
from tests.integration.cluster import BROKER_IDS, make_broker, start_brokers  # noqa: E402
from tests.integration.controllers import running_quorum  # noqa: E402
from tests.integration.kafka_cluster import add_kafka_listener  # noqa: E402
from tests.integration.processes import wait_for  # noqa: E402

TOPIC = "kafka-compare"
PARTITIONS = 6
REPLICATION_FACTOR = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}
VALUE_BYTES = 100
TIMEOUT_S = 600
CONSUME_BATCH_MAX = 10_000
# Each figure, in the order taken: what it is -> (records moved, seconds).
Figures = dict[str, tuple[int, float]]


@contextmanager
def pykraft_cluster(tmp: Path) -> Iterator[str]:
    """Three controllers and three brokers with KAFKA:// listeners; their Kafka bootstrap."""
    with running_quorum(tmp) as quorum:
        brokers = {i: make_broker(tmp, quorum, i) for i in BROKER_IDS}
        try:
            ports = [add_kafka_listener(broker) for broker in brokers.values()]
            start_brokers(quorum, brokers)
            yield ",".join(f"127.0.0.1:{port}" for port in ports)
        finally:
            for broker in brokers.values():
                broker.close()


def create_topic(bootstrap: str) -> None:
    """TOPIC through the admin API, then waits until every replica is in its ISR."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(TOPIC, PARTITIONS, REPLICATION_FACTOR, config=TOPIC_CONFIG)
    admin.create_topics([topic])[TOPIC].result(timeout=60)

    def full_isr() -> bool:
        found = admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
        return (
            found.error is None
            and len(found.partitions) == PARTITIONS
            and all(len(p.isrs) == REPLICATION_FACTOR for p in found.partitions.values())
        )

    wait_for(full_isr, timeout_s=60, what=f"every replica of {TOPIC} in its ISR")


def produce(bootstrap: str, records: int) -> float:
    """Seconds from the first send of `records` values to the last ack (acks=all, idempotent);
    one acknowledged record beforehand warms metadata, connections and the producer id."""
    errors: list[KafkaError] = []
    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": 5, "delivery.report.only.error": True,
        "on_delivery": lambda error, _message: errors.append(error),
    })  # fmt: skip
    value = b"x" * VALUE_BYTES
    producer.produce(TOPIC, value)
    assert producer.flush(60) == 0, "the warm-up record was not acknowledged"
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(TOPIC, value)
                break
            except BufferError:  # librdkafka's queue is full: serve acks, then retry
                producer.poll(0.01)
    assert producer.flush(TIMEOUT_S) == 0, "records still unacknowledged"
    seconds = time.perf_counter() - started
    assert not errors, f"{len(errors)} sends failed, the first: {errors[0]}"
    return seconds


def topic_size(bootstrap: str) -> int:
    """Records in TOPIC: the sum of its partitions' high watermarks (nothing is deleted)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-compare-size"})
    try:
        partitions = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
        return sum(consumer.get_watermark_offsets(tp, timeout=10)[1] for tp in partitions)
    finally:
        consumer.close()


def consume(bootstrap: str) -> tuple[int, float]:
    """Records read and seconds taken by one consumer assigned every partition from the
    beginning, until it has the whole topic."""
    total = topic_size(bootstrap)
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "kafka-compare", "enable.auto.commit": False,
    })  # fmt: skip
    try:
        started = time.perf_counter()
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        count = 0
        while count < total:
            assert time.perf_counter() - started < TIMEOUT_S, f"{count} of {total} consumed"
            # Never more than what is left: consume() waits for the whole count or the timeout.
            for message in consumer.consume(min(CONSUME_BATCH_MAX, total - count), timeout=1.0):
                assert message.error() is None, message.error()
                count += 1
        return count, time.perf_counter() - started
    finally:
        consumer.close()


def kcat_produce(kcat: str, bootstrap: str, records: int, tmp: Path) -> float:
    """Seconds kcat takes to send `records` lines of VALUE_BYTES, each a record (acks=all,
    idempotent), process start to exit."""
    lines = tmp / "kcat-records.txt"
    lines.write_bytes((b"k" * VALUE_BYTES + b"\n") * records)
    command = [kcat, "-P", "-l", "-b", bootstrap, "-t", TOPIC, "-X", "acks=all",
               "-X", "enable.idempotence=true", "-X", "linger.ms=5", str(lines)]  # fmt: skip
    started = time.perf_counter()
    subprocess.run(command, check=True, timeout=TIMEOUT_S, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def kcat_consume(kcat: str, bootstrap: str) -> tuple[int, float]:
    """Records and seconds of kcat reading every partition from the beginning to the end
    (one "." printed per record, so the count is checked against the high watermarks without
    moving the values)."""
    total = topic_size(bootstrap)
    command = [kcat, "-C", "-b", bootstrap, "-t", TOPIC, "-o", "beginning", "-e", "-q",
               "-f", "."]  # fmt: skip
    started = time.perf_counter()
    done = subprocess.run(command, check=True, timeout=TIMEOUT_S, capture_output=True)
    seconds = time.perf_counter() - started
    assert len(done.stdout) == total, f"kcat read {len(done.stdout)} of {total} records"
    return total, seconds


def measure(name: str, bootstrap: str, records: int, tmp: Path) -> Figures:
    """Every figure of one cluster, each printed as it is taken."""
    figures: Figures = {}

    def take(what: str, moved: int, seconds: float) -> None:
        figures[what] = (moved, seconds)
        print(f"  {name}: {what}: {moved} records in {seconds:.2f} s, "
              f"{moved / seconds:.0f} records/s", flush=True)  # fmt: skip

    create_topic(bootstrap)
    take("confluent-kafka produce, acks=all, idempotent", records, produce(bootstrap, records))
    take("confluent-kafka consume, all partitions", *consume(bootstrap))
    kcat = shutil.which("kcat")
    if kcat is not None:
        take(
            "kcat produce, acks=all, idempotent",
            records,
            kcat_produce(kcat, bootstrap, records, tmp),
        )
        take("kcat consume, all partitions", *kcat_consume(kcat, bootstrap))
    return figures


def run(name: str, cluster: Callable[[Path], AbstractContextManager[str]], records: int) -> Figures:
    """`cluster` started in a fresh directory, measured, stopped; {} (and why, printed) when it
    could not be run."""
    print(f"{name}: starting", flush=True)
    try:
        with tempfile.TemporaryDirectory() as tmp, cluster(Path(tmp)) as bootstrap:
            return measure(name, bootstrap, records, Path(tmp))
    except (
        AssertionError,
        KafkaException,
        OSError,
        RuntimeError,
        subprocess.SubprocessError,
    ) as error:
        print(f"{name}: could not be run: {error!r}", flush=True)
        return {}


def summary(pykraft: Figures, kafka: Figures) -> None:
    """records/s of each and the ratio pykraft / Kafka for every figure taken ("-" where a
    cluster lacks it)."""
    print("records/s (pykraft / Kafka):")
    for what in dict.fromkeys([*pykraft, *kafka]):
        rates = [figures[what][0] / figures[what][1] if what in figures else None
                 for figures in (pykraft, kafka)]  # fmt: skip
        mine, theirs = (f"{rate:.0f}" if rate else "-" for rate in rates)
        ratio = f"{rates[0] / rates[1]:.3f}" if rates[0] and rates[1] else "-"
        print(f"  {what}: pykraft {mine}, Kafka {theirs}, ratio {ratio}")
    if shutil.which("kcat") is None:
        print("kcat: not installed")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    args = parser.parse_args()
    kafka = f"Apache Kafka {kafka_version(kafka_jars())}"
    print(
        f"{args.records} records of {VALUE_BYTES} B, {PARTITIONS} partitions, RF "
        f"{REPLICATION_FACTOR}, 3 brokers; confluent-kafka {confluent_version()} "
        f"(librdkafka {librdkafka_version()[0]}); pykraft against {kafka}"
    )
    pykraft_figures = run("pykraft", pykraft_cluster, args.records)
    kafka_figures = run(kafka, kafka_cluster, args.records)
    summary(pykraft_figures, kafka_figures)
    return 0 if pykraft_figures and kafka_figures else 1


if __name__ == "__main__":
    sys.exit(main())
