"""The `pykraft` Spark data source against a real cluster and a real local SparkSession
(issue 7 §3): three controllers and three brokers, one session (local[2]) for the module.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from pykraft.client import AdminClient, Consumer, Producer, TopicPartition

from . import cluster
from .processes import wait_for

pytestmark = pytest.mark.integration

pyspark = pytest.importorskip("pyspark")

from pyspark.sql import SparkSession  # noqa: E402

from pykraft.spark import register  # noqa: E402

from .spark_session import QUERY_TIMEOUT_S, local_spark_session, run_available_now  # noqa: E402

TOPIC = "spark-in"
PARTITIONS = 6


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp = tmp_path_factory.mktemp("spark-cluster")
    with cluster.running_cluster(
        tmp,
        topic=TOPIC,
        partitions=PARTITIONS,
        broker_args=("--override", "log.retention.check.interval.ms=300"),
    ) as (_, brokers):
        yield ",".join(b.address for b in brokers.values())


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    session = local_spark_session("pykraft-tests")
    register(session)
    yield session
    session.stop()


def produce(
    bootstrap: str, topic: str, count: int, *, start: int = 0
) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value of every acknowledged record."""
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        futures = [
            (producer.send(topic, b"v%06d" % i, key=b"k%d" % (i % 97)), b"v%06d" % i)
            for i in range(start, start + count)
        ]
        producer.flush(timeout=120)
    acknowledged = {}
    for future, value in futures:
        meta = future.result(timeout=0)
        acknowledged[(meta.partition, meta.offset)] = value
    return acknowledged


def stream(spark: SparkSession, bootstrap: str, topic: str, **options: str):  # type: ignore[no-untyped-def]
    reader = (
        spark.readStream.format("pykraft")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def rows_of(spark: SparkSession, path: Path) -> dict[tuple[int, int], bytes]:
    rows = spark.read.parquet(str(path)).select("partition", "offset", "value").collect()
    found = {(r.partition, r.offset): bytes(r.value) for r in rows}
    assert len(found) == len(rows), "a record twice in the sink"
    return found


def test_stream_100k_records_exactly_once_and_across_a_restart(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    """§3.1 and §3.2: availableNow reads exactly the produced records with their partitions and
    offsets; a query stopped mid-way and restarted from its checkpoint misses none and reads
    none twice."""
    acknowledged = produce(bootstrap, TOPIC, 100_000)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    started = time.monotonic()
    run_available_now(stream(spark, bootstrap, TOPIC), sink, checkpoint)
    print(f"100,000 records through Spark in {time.monotonic() - started:.1f} s")
    assert rows_of(spark, sink) == acknowledged

    # Stopped mid-way: a processing-time query with small batches, stopped after some.
    more = produce(bootstrap, TOPIC, 3_000, start=100_000)
    query = (
        stream(spark, bootstrap, TOPIC, maxOffsetsPerTrigger="500")
        .writeStream.format("parquet")
        .option("path", str(sink))
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    wait_for(lambda: len(query.recentProgress) >= 2, timeout_s=QUERY_TIMEOUT_S, what="two batches")
    query.stop()
    assert all(p["numInputRows"] <= 500 for p in query.recentProgress), "maxOffsetsPerTrigger"
    later = produce(bootstrap, TOPIC, 2_000, start=103_000)
    run_available_now(stream(spark, bootstrap, TOPIC), sink, checkpoint)
    assert rows_of(spark, sink) == {**acknowledged, **more, **later}


def test_batch_read_of_a_range_and_write_then_read_back(
    spark: SparkSession, bootstrap: str
) -> None:
    """§2.1, §2.2 and §3.4: a bounded range by JSON offsets; minPartitions splits it; a batch
    write and a streaming write land in topics and read back."""
    with AdminClient(bootstrap) as admin:
        admin.create_topic("spark-range", 2, 3)
        admin.create_topic("spark-out", 3, 3)
        admin.create_topic("spark-copy", 3, 3)
    acknowledged = produce(bootstrap, "spark-range", 400)
    ranged = (
        spark.read.format("pykraft")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", "spark-range")
        .option("startingOffsets", '{"spark-range": {"0": 10, "1": -2}}')
        .option("endingOffsets", '{"spark-range": {"0": 50, "1": -1}}')
        .option("minPartitions", "8")
        .load()
    )
    assert ranged.rdd.getNumPartitions() >= 8
    rows = ranged.select("partition", "offset").collect()
    ones = sum(1 for p, _ in acknowledged if p == 1)
    assert sorted((r.partition, r.offset) for r in rows) == sorted(
        [(0, o) for o in range(10, 50)] + [(1, o) for o in range(ones)]
    )

    values = spark.createDataFrame(
        [(f"k{i}", f"value-{i}") for i in range(1000)], "key string, value string"
    )
    values.write.format("pykraft").option("bootstrap.servers", bootstrap).option(
        "topic", "spark-out"
    ).mode("append").save()
    read_back = (
        spark.read.format("pykraft")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", "spark-out")
        .option("includeHeaders", "true")
        .load()
    )
    assert sorted(bytes(r.value).decode() for r in read_back.select("value").collect()) == sorted(
        f"value-{i}" for i in range(1000)
    )
    assert "headers" in read_back.columns

    query = (
        stream(spark, bootstrap, "spark-out")
        .select("key", "value")
        .writeStream.format("pykraft")
        .option("bootstrap.servers", bootstrap)
        .option("topic", "spark-copy")
        .option(
            "checkpointLocation",
            str(Path(os.environ.get("TMPDIR", "/tmp")) / f"cp-{time.time_ns()}"),
        )
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S)
    copied = (
        spark.read.format("pykraft")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", "spark-copy")
        .load()
    )
    assert copied.count() == 1000


def test_every_column_as_sent_keys_and_header_values_null_or_not(
    spark: SparkSession, bootstrap: str
) -> None:
    """Issue 17 §3: the columnar read (poll_arrow) brings every field through Spark as the
    producer sent it: null and present keys and values, headers in order with null values,
    timestamps, topic and partition."""
    with AdminClient(bootstrap) as admin:
        admin.create_topic("spark-columns", 2, 3)
    sent = {}
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for i in range(300):
            key = None if i % 3 == 0 else b"key-%d" % i
            value = None if i % 7 == 0 else b"value-%d" % i
            headers = [(f"h{j}", None if j == 1 else b"%d" % (i * j)) for j in range(i % 3)]
            future = producer.send(
                "spark-columns", value, key=key, partition=i % 2, headers=headers,
                timestamp_ms=1_700_000_000_000 + i,
            )  # fmt: skip
            sent[future] = (key, value, tuple(headers), 1_700_000_000_000 + i)
        producer.flush(timeout=120)
    expected = {(f.result(timeout=0).partition, f.result(timeout=0).offset): row
                for f, row in sent.items()}  # fmt: skip
    rows = (
        spark.read.format("pykraft")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", "spark-columns")
        .option("includeHeaders", "true")
        .load()
        .selectExpr("*", "unix_millis(timestamp) AS timestamp_ms")
        .collect()
    )
    found = {
        (r.partition, r.offset): (
            None if r.key is None else bytes(r.key),
            None if r.value is None else bytes(r.value),
            tuple((h.key, None if h.value is None else bytes(h.value)) for h in r.headers),
            r.timestamp_ms,
        )
        for r in rows
    }
    assert len(found) == len(rows) == 300
    assert found == expected
    assert {(r.topic, r.timestampType) for r in rows} == {("spark-columns", 0)}


def test_unknown_and_conflicting_options_are_named(spark: SparkSession, bootstrap: str) -> None:
    with pytest.raises(Exception, match="unknown option"):
        spark.read.format("pykraft").option("bootstrap.servers", bootstrap).option(
            "subscribe", TOPIC
        ).option("maxOffsetPerTrigger", "5").load().collect()
    with pytest.raises(Exception, match="exactly one of subscribe"):
        spark.read.format("pykraft").option("bootstrap.servers", bootstrap).option(
            "subscribe", TOPIC
        ).option("assign", '{"x": [0]}').load().collect()


def count_topic(spark: SparkSession, bootstrap: str, topic: str) -> int:
    return int(
        spark.read.format("pykraft")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
        .count()
    )


def test_a_replayed_micro_batch_is_not_written_twice(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    """§2.2: Spark replays the last micro-batch when its commit log entry is missing (a crash
    after the sink committed); the sink recognises the batch id and writes nothing again."""
    with AdminClient(bootstrap) as admin:
        admin.create_topic("spark-src", 3, 3)
        admin.create_topic("spark-dst", 3, 3)
    produce(bootstrap, "spark-src", 500)
    checkpoint = tmp_path / "copy-checkpoint"

    def copy() -> None:
        query = (
            stream(spark, bootstrap, "spark-src", **{"group.id": "copier"})
            .select("key", "value")
            .writeStream.format("pykraft")
            .option("bootstrap.servers", bootstrap)
            .option("topic", "spark-dst")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        assert query.awaitTermination(QUERY_TIMEOUT_S)
        assert query.exception() is None, query.exception()

    copy()
    assert count_topic(spark, bootstrap, "spark-dst") == 500
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    # As if Spark died after the sink's commit, before writing its own commit log entry.
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    copy()
    assert count_topic(spark, bootstrap, "spark-dst") == 500, "the replayed batch was rewritten"
    produce(bootstrap, "spark-src", 100, start=500)
    copy()
    assert count_topic(spark, bootstrap, "spark-dst") == 600
    with AdminClient(bootstrap) as admin:
        committed = admin.list_consumer_group_offsets("copier")
    assert sum(o.offset for o in committed.values()) >= 500, "the pipeline's progress is visible"


def test_fail_on_data_loss_both_ways(spark: SparkSession, bootstrap: str) -> None:
    """§3.3: offsets deleted by retention before they were read fail the query with a clear
    message, or, with failOnDataLoss=false, are skipped."""
    with AdminClient(bootstrap) as admin:
        admin.create_topic(
            "spark-lossy", 1, 3, {"segment.bytes": "2048", "retention.bytes": "4096"}
        )
    with Producer(bootstrap_servers=bootstrap, batch_size=1024) as producer:
        for i in range(300):
            producer.send("spark-lossy", b"%03d" % i + b"x" * 500)
        producer.flush(timeout=60)
    tp = TopicPartition("spark-lossy", 0)
    with Consumer(bootstrap_servers=bootstrap) as consumer:
        log_start = wait_for(
            lambda: consumer.beginning_offsets([tp])[tp] or None,
            timeout_s=30,
            what="retention deleting the oldest segments",
        )

    def read(fail_on_data_loss: str):  # type: ignore[no-untyped-def]
        return (
            spark.read.format("pykraft")
            .option("bootstrap.servers", bootstrap)
            .option("subscribe", "spark-lossy")
            .option("startingOffsets", '{"spark-lossy": {"0": 0}}')
            .option("failOnDataLoss", fail_on_data_loss)
            .load()
        )

    with pytest.raises(Exception, match=r"were deleted \(retention\) before the query read them"):
        read("true").collect()
    offsets = sorted(r.offset for r in read("false").select("offset").collect())
    assert offsets and offsets[0] >= log_start and offsets[-1] == 299
    assert offsets == list(range(offsets[0], 300)), "everything after the loss, once"


def test_example_windowed_counts_pipeline(bootstrap: str, tmp_path: Path) -> None:
    """§3.5: examples/windowed_counts.py counts records per key per 10 s window of their
    timestamps and writes the counts back to a topic."""
    window_ms = 10_000
    base_ms = (int(time.time() * 1000) // window_ms - 6) * window_ms  # a window boundary
    expected: dict[tuple[str, int], int] = {}
    with AdminClient(bootstrap) as admin:
        admin.create_topic("clicks", 3, 3)
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for i in range(300):
            key, at_ms = f"user-{i % 3}", base_ms + (i * 97) % (3 * window_ms)
            producer.send("clicks", b"c", key=key.encode(), timestamp_ms=at_ms)
            window = at_ms - at_ms % window_ms
            expected[(key, window)] = expected.get((key, window), 0) + 1
        # Far later: moves the watermark past every window above, so they are final.
        producer.send("clicks", b"c", key=b"late", timestamp_ms=base_ms + 10 * window_ms)
        producer.flush(timeout=60)
    example = Path(__file__).resolve().parents[2] / "examples" / "windowed_counts.py"
    done = subprocess.run(
        [sys.executable, str(example), "--bootstrap-server", bootstrap, "--input", "clicks",
         "--output", "click-counts", "--checkpoint", str(tmp_path / "cp"), "--available-now"],
        capture_output=True, text=True, timeout=QUERY_TIMEOUT_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition("click-counts", p) for p in range(3)])
        counted: dict[tuple[str, int], int] = {}
        deadline = time.monotonic() + 30
        while len(counted) < len(expected) and time.monotonic() < deadline:
            for record in consumer.poll(timeout_ms=500):
                value = json.loads(record.value or b"{}")
                start = datetime.fromisoformat(value["window_start"].replace("Z", "+00:00"))
                counted[(value["key"], int(start.timestamp() * 1000))] = value["count"]
    assert counted == expected


def test_pattern_new_partitions_timestamps_and_limits_under_available_now(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    """§1.3 and §1.4: subscribePattern finds the topics; maxOffsetsPerTrigger bounds every
    batch under availableNow too; a partition added while the query lives is read from its
    earliest offset; startingTimestamp and assign pick where and what a query reads."""
    with AdminClient(bootstrap) as admin:
        admin.create_topic("metrics-a", 2, 3)
        admin.create_topic("metrics-b", 1, 3)
    first = {
        **produce(bootstrap, "metrics-a", 300),
        **{(p + 10, o): v for (p, o), v in produce(bootstrap, "metrics-b", 100).items()},
    }
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    query = (
        spark.readStream.format("pykraft")
        .option("bootstrap.servers", bootstrap)
        .option("subscribePattern", "metrics-.*")
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "120")
        .load()
        .writeStream.format("parquet")
        .option("path", str(sink))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S)
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 400 and max(sizes) <= 120 and len(sizes) >= 4, sizes
    read = spark.read.parquet(str(sink)).select("topic", "partition", "offset").collect()
    assert len({(r.topic, r.partition, r.offset) for r in read}) == len(first)

    with AdminClient(bootstrap) as admin:
        admin.create_partitions({"metrics-b": 2})

    def partitions_seen() -> bool:
        """Every broker's metadata has the new partition (a producer may ask any of them)."""
        for address in bootstrap.split(","):
            with Consumer(bootstrap_servers=address) as consumer:
                if len(consumer.partitions_for("metrics-b")) != 2:
                    return False
        return True

    wait_for(partitions_seen, timeout_s=30, what="brokers knowing the new partition")
    with Producer(bootstrap_servers=bootstrap) as producer:
        for i in range(50):
            producer.send("metrics-b", b"new-%d" % i, partition=1)
        producer.flush(timeout=60)
    run_available_now(
        spark.readStream.format("pykraft")
        .option("bootstrap.servers", bootstrap)
        .option("subscribePattern", "metrics-.*")
        .load(),
        sink,
        checkpoint,
    )
    new = spark.read.parquet(str(sink)).where("topic = 'metrics-b' AND partition = 1")
    assert sorted(r.offset for r in new.select("offset").collect()) == list(range(50))

    cut_ms = int(time.time() * 1000)
    time.sleep(0.01)
    produce(bootstrap, "metrics-a", 20, start=300)
    since = (
        spark.read.format("pykraft")
        .option("bootstrap.servers", bootstrap)
        .option("assign", '{"metrics-a": [0, 1]}')
        .option("startingTimestamp", str(cut_ms))
        .load()
    )
    assert since.count() == 20


def test_a_query_killed_mid_way_restarts_from_its_checkpoint_exactly_once(
    spark: SparkSession, bootstrap: str, tmp_path: Path
) -> None:
    """§1.5: kill -9 of the Spark driver (and its JVM) in the middle of a streaming query;
    restarted from the checkpoint, the sink holds every record exactly once."""
    with AdminClient(bootstrap) as admin:
        admin.create_topic("spark-crash", 3, 3)
    acknowledged = produce(bootstrap, "spark-crash", 20_000)
    sink, checkpoint = tmp_path / "sink", tmp_path / "checkpoint"
    driver = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.spark_copy", bootstrap, "spark-crash",
         str(sink), str(checkpoint)],
        cwd=Path(__file__).resolve().parents[2], start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        wait_for(
            lambda: (
                len(list((checkpoint / "commits").glob("[0-9]*"))) >= 3
                if (checkpoint / "commits").exists()
                else None
            ),
            timeout_s=QUERY_TIMEOUT_S,
            what="three committed micro-batches",
        )
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    run_available_now(stream(spark, bootstrap, "spark-crash"), sink, checkpoint)
    assert rows_of(spark, sink) == acknowledged
