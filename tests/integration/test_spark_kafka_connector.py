"""Spark's own Kafka connector (`spark-sql-kafka-0-10` from Maven Central) against a real 3-broker
cluster's Kafka listeners (issue 14 §4 item 6).

A topic of three partitions is filled through confluent-kafka; Spark reads it with
`format("kafka")` (batch, and streaming with availableNow) into Parquet sinks, and writes it back
with Spark's Kafka sink (an idempotent producer) to a second topic that confluent-kafka reads. Maven
fetches the connector's jars once into build/spark-kafka-jars (re-fetched only when
tests/java/spark-kafka/pom.xml changes). Skipped, with the reason, where `java` or `mvn` is missing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest

from .kafka_clients import Confluent, Landed, Outgoing
from .kafka_cluster import KafkaCluster, running_kafka_cluster

pytestmark = pytest.mark.integration

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import DataFrame, SparkSession  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
POM = ROOT / "tests" / "java" / "spark-kafka" / "pom.xml"
JARS_DIR = ROOT / "build" / "spark-kafka-jars"
TOPIC = "spark-kafka-in"
OTHER = "spark-kafka-out"
PARTITIONS = 3
RECORDS = 300
QUERY_TIMEOUT_S = 120


def _connector_jars() -> list[Path]:
    """The connector's jars in build/spark-kafka-jars, fetched by Maven when the pom changed since
    the last fetch (its hash is kept beside the jars); only the pom's own dependencies, since
    pyspark ships the rest."""
    stamp = JARS_DIR / ".pom-sha256"
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()
    if not (stamp.exists() and stamp.read_text() == digest):
        shutil.rmtree(JARS_DIR, ignore_errors=True)
        fetched = subprocess.run(
            ["mvn", "-q", "-f", str(POM), "dependency:copy-dependencies",
             f"-DoutputDirectory={JARS_DIR}", "-DincludeScope=runtime", "-DexcludeTransitive=true"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert fetched.returncode == 0, fetched.stdout + fetched.stderr
        stamp.write_text(digest)
    return sorted(JARS_DIR.glob("*.jar"))


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    """A local[2] session with the connector on its class path; skips where Java or Maven is
    missing."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"the Spark Kafka connector test needs {' and '.join(missing)} on PATH")
    jars = ",".join(str(jar) for jar in _connector_jars())
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    session = (
        SparkSession.builder.master("local[2]")
        .appName("pykraft-spark-kafka-tests")
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaCluster, set[Landed]]]:
    """The cluster and every record confluent-kafka produced to TOPIC, where it landed."""
    tmp = tmp_path_factory.mktemp("spark-kafka-cluster")
    with running_kafka_cluster(tmp, topic=TOPIC, partitions=PARTITIONS) as cluster:
        records = [Outgoing(b"k%d" % (i % 37), b"v%06d" % i, ()) for i in range(RECORDS)]
        landed = Confluent().produce(cluster.bootstrap, TOPIC, records)
        assert len(landed) == RECORDS
        yield cluster, set(landed)


def _kafka_source(spark: SparkSession, bootstrap: str, *, streaming: bool) -> DataFrame:
    reader = spark.readStream if streaming else spark.read
    return (
        reader.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
        .load()
    )


def _rows_of(spark: SparkSession, path: Path) -> set[Landed]:
    """The Parquet sink at `path` as Landed records (without headers); fails on duplicates."""
    rows = spark.read.parquet(str(path)).select("partition", "offset", "key", "value").collect()
    found = {Landed(r.partition, r.offset, bytes(r.key), bytes(r.value), ()) for r in rows}
    assert len(found) == len(rows), "a record twice in the sink"
    return found


def test_a_batch_read_lands_exactly_the_produced_records_in_parquet(
    spark: SparkSession, filled: tuple[KafkaCluster, set[Landed]], tmp_path: Path
) -> None:
    cluster, produced = filled
    df = _kafka_source(spark, cluster.bootstrap, streaming=False)
    assert df.filter(df.topic != TOPIC).count() == 0
    df.write.parquet(str(tmp_path / "sink"))
    assert _rows_of(spark, tmp_path / "sink") == produced


def test_a_streaming_read_lands_exactly_the_produced_records_in_parquet(
    spark: SparkSession, filled: tuple[KafkaCluster, set[Landed]], tmp_path: Path
) -> None:
    cluster, produced = filled
    query = (
        _kafka_source(spark, cluster.bootstrap, streaming=True)
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "sink"))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
    assert _rows_of(spark, tmp_path / "sink") == produced


def test_the_kafka_sink_writes_back_exactly_the_records_read(
    spark: SparkSession, filled: tuple[KafkaCluster, set[Landed]]
) -> None:
    cluster, produced = filled
    Confluent().create_topic(cluster.bootstrap, OTHER, PARTITIONS)
    (
        _kafka_source(spark, cluster.bootstrap, streaming=False)
        .selectExpr("key", "value")
        .write.format("kafka")
        .option("kafka.bootstrap.servers", cluster.bootstrap)
        .option("topic", OTHER)
        .save()
    )
    read = Confluent().consume_assigned(cluster.bootstrap, OTHER, PARTITIONS, RECORDS)
    assert sorted((r.key, r.value) for r in read) == sorted((r.key, r.value) for r in produced)
    assert len({(r.partition, r.offset) for r in read}) == RECORDS
    assert _records_in(cluster.bootstrap, OTHER) == RECORDS, "the sink wrote a record twice"


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
