"""Spark's own Kafka connector (`spark-sql-kafka-0-10` from Maven Central) against a real 3-broker
cluster's Kafka listeners (issue 14 §4 item 6).

A topic of three partitions is filled through confluent-kafka, every third record with a header.
`spark_kafka_driver.py` runs Spark in a Python process and JVM of its own (the connector's jars
must be on the class path from the JVM's start, and an earlier test's session may own this
process's JVM): it reads the topic with `format("kafka")` in batch and streaming (availableNow)
into Parquet, and writes it back with Spark's Kafka sink to a second topic, each record to the
partition it came from. This process owns the cluster and checks the results with other readers:
pyarrow reads the Parquet files, confluent-kafka the second topic.

Maven fetches the connector's jars once into build/spark-kafka-jars (again only when
tests/java/spark-kafka/pom.xml changes). Skipped, with the reason, where `java` or `mvn` is
missing.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import confluent_kafka
import pytest

from .kafka_clients import Confluent, Landed, Outgoing, headers_of
from .kafka_cluster import running_kafka_cluster
from .maven_jars import ROOT, skip_without_java_and_maven, spark_kafka_jars

pytestmark = pytest.mark.integration

pytest.importorskip("pyspark")
parquet = pytest.importorskip("pyarrow.parquet")

TOPIC = "spark-kafka-in"
OTHER = "spark-kafka-out"
PARTITIONS = 3
RECORDS = 300
DRIVER_TIMEOUT_S = 300


class Ran(NamedTuple):
    """What the driver left: the cluster's bootstrap, the records produced to TOPIC (where they
    landed), and the folder holding its Parquet sinks."""

    bootstrap: str
    produced: set[Landed]
    work: Path


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ran]:
    """A cluster with TOPIC filled and OTHER empty, and the driver run once against it."""
    skip_without_java_and_maven("the Spark Kafka connector test")
    jars = spark_kafka_jars()
    work = tmp_path_factory.mktemp("spark-kafka-work")
    cluster_dir = tmp_path_factory.mktemp("spark-kafka-cluster")
    with running_kafka_cluster(cluster_dir, topic=TOPIC, partitions=PARTITIONS) as cluster:
        records = [
            Outgoing(b"k%d" % (i % 37), b"v%06d" % i, (("n", b"%d" % i),) if i % 3 == 0 else ())
            for i in range(RECORDS)
        ]
        produced = set(Confluent().produce(cluster.bootstrap, TOPIC, records))
        assert len(produced) == RECORDS
        Confluent().create_topic(cluster.bootstrap, OTHER, PARTITIONS)
        started = time.monotonic()
        driver = subprocess.run(
            [sys.executable, "-m", "tests.integration.spark_kafka_driver", cluster.bootstrap,
             TOPIC, OTHER, str(work), *map(str, jars)],
            cwd=ROOT, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S,
        )  # fmt: skip
        assert driver.returncode == 0, driver.stdout[-2000:] + driver.stderr[-6000:]
        print(f"the Spark Kafka connector driver ran in {time.monotonic() - started:.1f} s")
        yield Ran(cluster.bootstrap, produced, work)


def _parquet_records(path: Path) -> set[Landed]:
    """The Parquet files Spark wrote under `path` as Landed records; fails on a record from
    another topic or a record twice. pyarrow skips Spark's own `_SUCCESS`, `_spark_metadata` and
    `.crc` files, so a file left by a failed task would show as a duplicate."""
    rows = parquet.read_table(path).to_pylist()
    assert {row["topic"] for row in rows} == {TOPIC}
    found = {
        Landed(
            row["partition"], row["offset"], row["key"], row["value"],
            headers_of([(h["key"], h["value"]) for h in row["headers"] or ()]),
        )
        for row in rows
    }  # fmt: skip
    assert len(found) == len(rows), "a record twice in the sink"
    return found


def test_a_batch_read_lands_exactly_the_produced_records_in_parquet(ran: Ran) -> None:
    assert _parquet_records(ran.work / "batch") == ran.produced


def test_a_streaming_read_lands_exactly_the_produced_records_in_parquet(ran: Ran) -> None:
    assert _parquet_records(ran.work / "stream") == ran.produced


def test_the_kafka_sink_writes_back_exactly_the_records_read(ran: Ran) -> None:
    """Each source partition is written by one task in offset order through an idempotent
    producer, so every record lands at its own partition and offset in the second topic."""
    read = Confluent().consume_assigned(ran.bootstrap, OTHER, PARTITIONS, RECORDS)
    assert set(read) == ran.produced
    assert _records_in(ran.bootstrap, OTHER) == RECORDS, "the sink wrote a record twice"


def _records_in(bootstrap: str, topic: str) -> int:
    """How many records `topic` holds: its partitions' high watermarks summed (offsets start at
    0 and nothing was deleted)."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        return sum(
            consumer.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), 30.0)[1]
            for p in range(PARTITIONS)
        )
    finally:
        consumer.close()
