"""Benchmark of Spark's own Kafka connector reading pykraft, against Parquet (issue 17 §3).

Three controllers and three brokers on 127.0.0.1, each broker with a Kafka listener beside its
gRPC one (`tests/integration/kafka_cluster.py`), a topic of 6 partitions (replication factor 3)
holding N keyed records of 100-byte values (bench/spark.py's `produce`), and one local[2]
SparkSession in this process (bench/spark.py's) with Spark's JVM Kafka connector,
`spark-sql-kafka-0-10`, on its class path: `tests/integration/maven_jars.py`'s
`spark_kafka_jars`, which the connector's test uses too (Maven fetches them on the first run). The
same rows are written to Parquet (through the pykraft source, as bench/spark.py does; not timed).

Prints, for the same N rows in the same run, records/s of:
- a batch read of every row and column with `spark.read.format("kafka")` (startingOffsets
  earliest, endingOffsets latest; the connector's defaults otherwise: a task per partition) into
  Spark's noop sink;
- the same batch read of the Parquet files (`spark.read.parquet`);
- an availableNow query on `spark.readStream.format("kafka")` into the noop sink, from `start()`
  to the end of `awaitTermination`;
- the same query shape on the Parquet files (`readStream.parquet`);
after one warm-up run of each shape (so the JVM has compiled each shape's hot paths and the
connector has its consumers before anything is timed), the batch reads and then the streams
timed as bench/spark.py times them (`batch_reads`, `stream_runs`: the sources in turn, medians).
Then the ratios kafka connector / parquet, batch and stream, one line each: what the
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
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyspark.sql import DataFrame, DataFrameReader, SparkSession  # noqa: E402
from pyspark.sql.streaming.readwriter import DataStreamReader  # noqa: E402

from bench.spark import (  # noqa: E402
    PARTITIONS,
    batch_reads,
    batch_seconds,
    drain,
    parquet_stream,
    produce,
    start_spark,
    stream_runs,
    to_parquet,
)
from tests.integration.kafka_cluster import running_kafka_cluster  # noqa: E402
from tests.integration.maven_jars import missing_java_tools, spark_kafka_jars  # noqa: E402

TOPIC = "bench-spark-kafka"
CONNECTOR, PARQUET = "kafka connector", "parquet"
STREAM = "stream, "  # what starts a stream's name (batch_reads names its lines itself)
RATIO_LINE = "kafka connector / parquet"


def connector_jars() -> list[Path]:
    """The connector's jars; fails naming what is missing where `java` or `mvn` is."""
    if missing := missing_java_tools():
        raise RuntimeError(f"Spark's Kafka connector needs {' and '.join(missing)} on PATH")
    return spark_kafka_jars()


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
                CONNECTOR: kafka_frame(spark.read, cluster.bootstrap, fetch_max_wait_ms),
                PARQUET: spark.read.parquet(str(parquet)),
            }
            streams = {
                STREAM + CONNECTOR: (
                    kafka_frame(spark.readStream, cluster.bootstrap, fetch_max_wait_ms),
                    records,
                ),
                STREAM + PARQUET: (parquet_stream(spark, parquet), records),
            }
            for name, frame in batch.items():
                print(f"  warm-up, batch read, {name}: {batch_seconds(frame):.2f} s")
            for index, (name, (stream, _)) in enumerate(streams.items()):
                warm_s = drain(stream, tmp / f"checkpoint-warm-up-{index}", records)
                print(f"  warm-up, {name}: {warm_s:.2f} s")
            batch_s = batch_reads(spark, batch, records)
            stream_s = stream_runs(streams, tmp / "checkpoints")
            ratios = {
                "batch read": batch_s[PARQUET] / batch_s[CONNECTOR],
                "stream": stream_s[STREAM + PARQUET] / stream_s[STREAM + CONNECTOR],
            }
        finally:
            spark.stop()
    wait = "500, Kafka's default" if fetch_max_wait_ms is None else fetch_max_wait_ms
    for shape, ratio in ratios.items():
        print(
            f"{RATIO_LINE}, {shape}: {ratio:.2f} (local[2], {PARTITIONS} partitions, noop sink, "
            f"fetch.max.wait.ms {wait}; cores: {os.cpu_count()})"
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
