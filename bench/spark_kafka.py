"""Benchmark of Spark's own Kafka connector reading pykraft, against Parquet (issue 17 §3).

Three controllers and three brokers on 127.0.0.1, each broker with a Kafka listener beside its
gRPC one (`tests/integration/kafka_cluster.py`), a topic of 6 partitions (replication factor 3)
holding N keyed records of 100-byte values (bench/spark.py's `produce`), and one local[2]
SparkSession in this process (bench/spark.py's) with Spark's JVM Kafka connector,
`spark-sql-kafka-0-10`, on its class path: the jars of `tests/java/spark-kafka/pom.xml`, fetched by
Maven into build/spark-kafka-jars on the first run (`tests/integration/maven_jars.py`). The same
rows are written to Parquet (through the pykraft source, as bench/spark.py does; not timed).

Prints, for the same N rows in the same run, records/s of:
- a batch read of every row and column with `spark.read.format("kafka")` (startingOffsets
  earliest, endingOffsets latest; the connector's defaults otherwise: a task per partition) into
  Spark's noop sink;
- the same batch read of the Parquet files (`spark.read.parquet`);
- an availableNow query on `spark.readStream.format("kafka")` into the noop sink, from `start()`
  to the end of `awaitTermination`;
- the same query shape on the Parquet files (`readStream.parquet`);
each the median of `RUNS` runs, the four taken in turn, after one warm-up run of each (so the
JVM has compiled each shape's hot paths and the connector has its consumers before anything is
timed). Then the ratios kafka connector / parquet, batch and stream, one line each: what the
fastest way to read pykraft from Spark reaches (bench/spark.py measures the Python source,
`format("pykraft")`, and the best any Python source can do here).

Row counts are Spark's own (a count before the batch reads, `numInputRows` of each query's
progress), checked against N. Spark's own start-up is excluded.

`--fetch-max-wait-ms MS` sets the connector's consumers' `fetch.max.wait.ms` (Kafka's default,
500, otherwise). With the default, every task ends about 500 ms after its last record: the Kafka
consumer has already sent its next Fetch (at the log end, which the broker holds that long, as
Kafka's does), and the task's last requests (ListOffsets) wait behind it on the same connection,
answered in order; with 6 tasks on 2 cores a read pays that three times.

Run (it starts a cluster and Spark; needs `java` 17+ and, on the first run, `mvn`):
`flock /tmp/pykraft-cluster.lock .venv/bin/python bench/spark_kafka.py [--records N]
[--fetch-max-wait-ms MS]` (N 500,000 unless given). Figures depend on the machine (2 cores here,
shared by the cluster and Spark): compare ratios of one run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyspark.sql import DataFrame, DataFrameReader, SparkSession  # noqa: E402
from pyspark.sql.streaming.readwriter import DataStreamReader  # noqa: E402

from bench.spark import (  # noqa: E402
    PARTITIONS,
    batch_seconds,
    drain,
    parquet_stream,
    produce,
    start_spark,
    to_parquet,
)
from tests.integration.kafka_cluster import running_kafka_cluster  # noqa: E402
from tests.integration.maven_jars import maven_jars  # noqa: E402

TOPIC = "bench-spark-kafka"
POM = ROOT / "tests" / "java" / "spark-kafka" / "pom.xml"
JARS_DIR = ROOT / "build" / "spark-kafka-jars"
# Timed runs of each of the four shapes, taken in turn after one warm-up run each; the median
# is reported.
RUNS = 3
RATIO_LINE = "kafka connector / parquet"


def connector_jars() -> list[Path]:
    """The connector's jars (only the pom's own: pyspark ships the rest, and a second copy of a
    jar would be a conflict); fails naming what is missing where `java` or `mvn` is."""
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        raise RuntimeError(f"Spark's Kafka connector needs {' and '.join(missing)} on PATH")
    return maven_jars(POM, JARS_DIR, transitive=False)


def kafka_frame(
    reader: DataFrameReader | DataStreamReader, bootstrap: str, fetch_max_wait_ms: int | None
) -> DataFrame:
    """`reader` (`spark.read` or `spark.readStream`) on TOPIC through the connector, every
    record from the earliest offset (to the latest, for a batch read); the consumers'
    `fetch.max.wait.ms` when given (Kafka's default otherwise, 500)."""
    reader = (
        reader.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", TOPIC)
        .option("startingOffsets", "earliest")
    )
    if isinstance(reader, DataFrameReader):
        reader = reader.option("endingOffsets", "latest")
    if fetch_max_wait_ms is not None:
        reader = reader.option("kafka.fetch.max.wait.ms", str(fetch_max_wait_ms))
    return reader.load()


def timed_runs(shapes: dict[str, Callable[[int], float]]) -> dict[str, list[float]]:
    """Seconds of RUNS runs of each of `shapes` (name: a run, given its index, returning its
    seconds), taken in turn after one warm-up run of each (index 0, printed, not counted)."""
    seconds: dict[str, list[float]] = {name: [] for name in shapes}
    for run in range(RUNS + 1):
        for name, shape in shapes.items():
            took = shape(run)
            if run:
                seconds[name].append(took)
            else:
                print(f"  warm-up, {name}: {took:.2f} s")
    return seconds


def _measure(records: int, fetch_max_wait_ms: int | None) -> None:
    """Every figure of the module docstring, on a fresh cluster and Spark session."""
    jars = connector_jars()
    with (
        tempfile.TemporaryDirectory() as tmp_dir,
        running_kafka_cluster(Path(tmp_dir), topic=TOPIC, partitions=PARTITIONS) as cluster,
    ):
        tmp = Path(tmp_dir)
        grpc_bootstrap = ",".join(b.address for b in cluster.brokers.values())
        produce(grpc_bootstrap, TOPIC, records)
        spark: SparkSession = start_spark(jars)
        try:
            parquet = tmp / "bench.parquet"
            to_parquet(spark, grpc_bootstrap, TOPIC, parquet)
            batch = {
                "kafka connector": kafka_frame(spark.read, cluster.bootstrap, fetch_max_wait_ms),
                "parquet": spark.read.parquet(str(parquet)),
            }
            for name, frame in batch.items():
                if (rows := frame.count()) != records:
                    raise RuntimeError(f"a batch read of {name} counted {rows:,} rows")
            streams = {
                "kafka connector": kafka_frame(
                    spark.readStream, cluster.bootstrap, fetch_max_wait_ms
                ),
                "parquet": parquet_stream(spark, parquet),
            }

            def batch_run(name: str) -> Callable[[int], float]:
                return lambda run: batch_seconds(batch[name])

            def stream_run(name: str) -> Callable[[int], float]:
                def run_once(run: int) -> float:
                    checkpoint = tmp / f"checkpoint-{name.replace(' ', '-')}-{run}"
                    return drain(streams[name], checkpoint, records)

                return run_once

            shapes = {f"batch read, {name}": batch_run(name) for name in batch} | {
                f"stream, {name}": stream_run(name) for name in streams
            }
            seconds = timed_runs(shapes)
        finally:
            spark.stop()
    medians = {name: statistics.median(each) for name, each in seconds.items()}
    for name, median in medians.items():
        rounded = ", ".join(f"{s:.2f}" for s in seconds[name])
        print(
            f"{name}: {records:,} records in {median:.2f} s (median of {rounded}), "
            f"{records / median:,.0f} records/s"
        )
    wait = "500, Kafka's default" if fetch_max_wait_ms is None else fetch_max_wait_ms
    for shape in ("batch read", "stream"):
        ratio = medians[f"{shape}, parquet"] / medians[f"{shape}, kafka connector"]
        print(
            f"{RATIO_LINE}, {shape}: {ratio:.2f} (local[2], {PARTITIONS} partitions, noop "
            f"sink, fetch.max.wait.ms {wait}; cores: {os.cpu_count()})"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument(
        "--fetch-max-wait-ms",
        type=int,
        help="the connector's consumers' fetch.max.wait.ms (Kafka's default, 500, unless given)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    _measure(args.records, args.fetch_max_wait_ms)
    print(f"bench/spark_kafka.py took {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
