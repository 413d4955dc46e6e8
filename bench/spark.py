"""Benchmark of the Spark source (issue 7 §4): Spark reading a pykraft topic against Parquet.

Three controllers and three brokers on 127.0.0.1, a topic of 6 partitions (replication factor
3) holding N keyed records of 100-byte values, and one local[2] SparkSession in this process.

Prints, for the same N rows in the same run:
- records/s of an availableNow query reading the topic (`format("pykraft")`, startingOffsets
  earliest) into Spark's noop sink, from `start()` to the end of `awaitTermination`;
- records/s of the same query shape reading the same rows from Parquet files
  (`readStream.parquet`), written from the topic beforehand and not timed;
- each of them the median of `STREAM_RUNS` queries, the stream shapes (these two and the
  Python sources' below) taken in turn: the first query of a shape with full-size batches
  pays for the JVM compiling its hot paths (about 100 ms more, whichever shape runs first);
- pykraft / parquet;
- the same comparison as batch reads (`spark.read` of every row and column, written to the
  noop sink), the median of `BATCH_READS` reads of each, taken in turn: no streaming query,
  so not the planning process a Python streaming source starts per query (below);
- Spark's own split of each query's time (durationMs summed over its batches), and records/s
  of one Consumer reading the topic with poll_arrow in this process, without Spark;
- what any Python data source costs here, whatever it reads: the seconds of the same query
  shape on a Python source that yields nothing (one empty task), and on one that yields the
  same number of rows of the same schema from Arrow batches held in memory, in as many tasks
  as the pykraft source packs the topic into (the best ratio a Python source can reach), as a
  stream and as batch reads.

Spark's own start-up is excluded: the session is up and both queries have run once on a small
warm-up topic before anything is timed, the pykraft one in as many tasks as the timed one, so
each Python worker a timed task may run on has imported the source and holds its consumers.
The timed pykraft stream does include starting its planning process: Spark starts a fresh
Python process for every streaming query on a Python source (not from its daemon of forked
workers), which imports pyspark and pyarrow, about 1 s here whatever the source (the empty
source's figure). Row counts are Spark's own (`numInputRows` of each query's progress; a count
before the batch reads), checked against N.

`--code DIR` (bench/source_tree.py) runs the cluster and Spark (its JVM and Python workers) on
that tree: the same bench before a change. Spark's JVM is started once per process and keeps
the environment it started with, so with more than one tree each tree's measurement is a child
process of its own (a cluster and a session each), trees in turn, reversed every other round;
a summary of every tree's ratios ends the run.

Run: `.venv/bin/python bench/spark.py [--records 500000] [--code DIR ...] [--rounds N]`
(PySpark needs Java 17 or later).
Figures depend on the machine (2 cores here, shared by the cluster and Spark): compare ratios
of one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
from pyspark.sql import DataFrame, DataFrameReader, SparkSession  # noqa: E402
from pyspark.sql.datasource import (  # noqa: E402
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.readwriter import DataStreamReader  # noqa: E402
from pyspark.sql.types import StructType  # noqa: E402

from bench.source_tree import (  # noqa: E402
    SourceTree,
    add_code_argument,
    each_tree,
    in_round_order,
    trees_of,
)
from pykraft.client import AdminClient, Consumer, Producer, TopicPartition  # noqa: E402
from pykraft.spark import register  # noqa: E402
from pykraft.spark.offsets import OffsetRange, pack  # noqa: E402
from pykraft.spark.source import ARROW_ROWS_MAX, TASK_RECORDS_MIN, schema  # noqa: E402
from tests.integration.cluster import full_isr, running_cluster  # noqa: E402
from tests.integration.controllers import Quorum  # noqa: E402
from tests.integration.processes import wait_for  # noqa: E402

TOPIC = "bench-spark"
WARMUP_TOPIC = "bench-spark-warmup"
PARTITIONS = 6
VALUE = b"v" * 100
WARMUP_RECORDS = 6_000
FLUSH_TIMEOUT_S = 600
QUERY_TIMEOUT_S = 1_800
# Batch reads of each source, taken in turn; the median is reported.
BATCH_READS = 5
# Queries of each stream shape, taken in turn; the median is reported (module doc).
STREAM_RUNS = 3
# What starts the line each measurement ends with (the summary of several trees collects them).
RATIO_LINE = "pykraft / parquet"


def produce(bootstrap: str, topic: str, records: int) -> None:
    """`records` records with distinct keys (so the key hash spreads them over the partitions);
    fails unless the topic then holds exactly that many once the followers caught up (acks=1
    answers before the high watermark moves)."""
    with Producer(bootstrap_servers=bootstrap, acks="1", linger_ms=5) as producer:
        for i in range(records):
            producer.send(topic, VALUE, key=b"key-%09d" % i)
        producer.flush(timeout=FLUSH_TIMEOUT_S)
    wait_for(
        lambda: records_in_topic(bootstrap, topic) == records,
        timeout_s=120,
        what=f"{topic} holding the {records:,} records sent",
    )


def records_in_topic(bootstrap: str, topic: str) -> int:
    with Consumer(bootstrap_servers=bootstrap) as consumer:
        partitions = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        return sum(consumer.end_offsets(partitions).values())


def create_topic(quorum: Quorum, bootstrap: str, topic: str) -> None:
    with AdminClient(bootstrap) as admin:
        admin.create_topic(topic, PARTITIONS, 3)
    wait_for(
        lambda: full_isr(quorum, topic, PARTITIONS),
        timeout_s=60,
        what=f"every replica of {topic} in its ISR",
    )


class MemoryStreamReader(DataSourceStreamReader):
    """One micro-batch of `rows` rows of the pykraft source's schema in `tasks` tasks, sliced
    from one Arrow batch each task builds (100-byte values, 13-byte keys): Spark's intake from
    a Python source that reads nothing. With `rows` 0, one task that yields nothing."""

    def __init__(self, rows: int, tasks: int) -> None:
        self.rows, self.tasks = rows, tasks

    def initialOffset(self) -> dict[str, int]:
        return {"batch": 0}

    def latestOffset(self, start: dict[str, int], limit: object) -> dict[str, int]:
        return {"batch": 1}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        if start == end:
            return []
        return [InputPartition(i) for i in range(self.tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return memory_rows(self.rows, self.tasks, partition.value)


class MemoryBatchReader(DataSourceReader):
    """`MemoryStreamReader`'s rows in its tasks, as a batch read."""

    def __init__(self, rows: int, tasks: int) -> None:
        self.rows, self.tasks = rows, tasks

    def partitions(self) -> list[InputPartition]:
        return [InputPartition(i) for i in range(self.tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return memory_rows(self.rows, self.tasks, partition.value)


def memory_rows(rows: int, tasks: int, task: int) -> Iterator[pa.RecordBatch]:
    """Task `task`'s share of `rows` rows split over `tasks` tasks (see MemoryStreamReader)."""
    share = rows // tasks + (task < rows % tasks)
    size = min(share, ARROW_ROWS_MAX)
    if not size:
        return
    whole = pa.RecordBatch.from_arrays(
        [
            pa.array([b"key-%09d" % i for i in range(size)], pa.binary()),
            pa.array([VALUE] * size, pa.binary()),
            pa.array([TOPIC] * size, pa.string()),
            pa.array([task] * size, pa.int32()),
            pa.array(range(size), pa.int64()),
            pa.array([0] * size, pa.timestamp("us", tz="UTC")),
            pa.array([0] * size, pa.int32()),
        ],
        names=schema(False).fieldNames(),
    )
    for start in range(0, share, size):
        yield whole.slice(0, min(size, share - start))


class MemorySource(DataSource):
    """`format("bench_memory")`, options `rows` and `tasks`: `MemoryStreamReader`, or
    `MemoryBatchReader` for a batch read."""

    @classmethod
    def name(cls) -> str:
        return "bench_memory"

    def schema(self) -> StructType:
        return schema(False)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return MemoryStreamReader(int(self.options["rows"]), int(self.options["tasks"]))

    def reader(self, schema: StructType) -> DataSourceReader:
        return MemoryBatchReader(int(self.options["rows"]), int(self.options["tasks"]))


def memory_frame(reader: DataFrameReader | DataStreamReader, rows: int, tasks: int) -> DataFrame:
    """`reader` (`spark.read` or `spark.readStream`) on the memory source."""
    return (
        reader.format("bench_memory").option("rows", str(rows)).option("tasks", str(tasks)).load()
    )


def pykraft_tasks(records: int) -> int:
    """How many tasks the pykraft source reads `records` in, spread evenly over the topic."""
    share = records // PARTITIONS
    ranges = [OffsetRange(TOPIC, p, 0, share) for p in range(PARTITIONS)]
    return len(pack(ranges, TASK_RECORDS_MIN, 1))


def start_spark(jars: Sequence[Path] = ()) -> SparkSession:
    """The bench's session; `jars` reach the class path only if this process started no Spark
    yet (bench/spark_kafka.py's connector)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("pykraft-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    if jars:
        builder = builder.config("spark.jars", ",".join(str(jar) for jar in jars))
    spark = builder.getOrCreate()
    register(spark)
    spark.dataSource.register(MemorySource)
    return spark


def pykraft_stream(
    spark: SparkSession, bootstrap: str, topic: str, min_partitions: int = 1
) -> DataFrame:
    return (
        spark.readStream.format("pykraft")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("minPartitions", str(min_partitions))
        .load()
    )


def pykraft_batch(spark: SparkSession, bootstrap: str, topic: str) -> DataFrame:
    return (
        spark.read.format("pykraft")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )


def parquet_stream(spark: SparkSession, path: Path) -> DataFrame:
    schema = spark.read.parquet(str(path)).schema
    return spark.readStream.schema(schema).parquet(str(path))


def to_parquet(spark: SparkSession, bootstrap: str, topic: str, path: Path) -> None:
    """Every record of `topic` (a batch read) as Parquet files under `path`; fails unless the
    files hold as many rows as the topic."""
    pykraft_batch(spark, bootstrap, topic).write.parquet(str(path))
    written, held = spark.read.parquet(str(path)).count(), records_in_topic(bootstrap, topic)
    if written != held:
        raise RuntimeError(f"{path} holds {written:,} rows, {topic} {held:,} records")


def drain(stream: DataFrame, checkpoint: Path, records: int) -> float:
    """Wall seconds of `stream` run to Spark's noop sink with the availableNow trigger
    (everything there at start, then the query ends); fails unless Spark counted `records`
    input rows."""
    started = time.perf_counter()
    query = (
        stream.writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    finished = query.awaitTermination(QUERY_TIMEOUT_S)
    seconds = time.perf_counter() - started
    if not finished:
        query.stop()
        raise RuntimeError(f"the query did not finish within {QUERY_TIMEOUT_S} s")
    error = query.exception()
    if error is not None:
        raise RuntimeError(f"the query failed: {error}")
    rows = sum(progress.numInputRows for progress in query.recentProgress)
    if rows != records:
        raise RuntimeError(f"Spark counted {rows:,} input rows, expected {records:,}")
    phases: dict[str, int] = {}
    for progress in query.recentProgress:
        for phase, ms in progress.durationMs.items():
            phases[phase] = phases.get(phase, 0) + ms
    print(f"  Spark's durationMs, summed over {len(query.recentProgress)} batches: {phases}")
    return seconds


def batch_seconds(frame: DataFrame) -> float:
    """Wall seconds of one batch read of every row and column of `frame` into the noop sink."""
    started = time.perf_counter()
    frame.write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def batch_reads(
    spark: SparkSession, frames: dict[str, DataFrame], records: int
) -> dict[str, float]:
    """Median seconds of BATCH_READS batch reads of each of `frames`, taken in turn; prints
    them. Fails unless each holds `records` rows."""
    for name, frame in frames.items():
        if (rows := frame.count()) != records:
            raise RuntimeError(f"a batch read of {name} counted {rows:,} rows, not {records:,}")
    seconds: dict[str, list[float]] = {name: [] for name in frames}
    for _ in range(BATCH_READS):
        for name, frame in frames.items():
            seconds[name].append(batch_seconds(frame))
    medians = {name: statistics.median(each) for name, each in seconds.items()}
    for name, each in seconds.items():
        rounded = ", ".join(f"{s:.2f}" for s in each)
        median = medians[name]
        print(f"batch read, {name}: median {median:.2f} s ({rounded}), {records / median:,.0f}/s")
    return medians


def consumer_alone(bootstrap: str, topic: str, records: int) -> float:
    """records/s of one Consumer reading every partition with poll_arrow in this process (no
    Spark): what the executors' reads cost at most."""
    started = time.perf_counter()
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        rows = 0
        deadline = started + QUERY_TIMEOUT_S
        while rows < records:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"poll_arrow read {rows:,} of {records:,} records")
            rows += consumer.poll_arrow(timeout_ms=500).num_rows
    seconds = time.perf_counter() - started
    rate = records / seconds
    print(f"Consumer.poll_arrow alone: {records:,} records in {seconds:,.1f} s, {rate:,.0f}/s")
    return rate


def stream_runs(streams: dict[str, tuple[DataFrame, int]], checkpoints: Path) -> dict[str, float]:
    """Median seconds of STREAM_RUNS queries of each of `streams` (name: the stream and the
    rows it must count), taken in turn, each from its start (a checkpoint of its own under
    `checkpoints`); prints them."""
    seconds: dict[str, list[float]] = {name: [] for name in streams}
    for run in range(STREAM_RUNS):
        for index, (name, (stream, records)) in enumerate(streams.items()):
            checkpoint = checkpoints / f"checkpoint-{index}-{run}"
            seconds[name].append(drain(stream, checkpoint, records))
    medians = {name: statistics.median(each) for name, each in seconds.items()}
    for name, (_, records) in streams.items():
        rounded = ", ".join(f"{s:.2f}" for s in seconds[name])
        median = medians[name]
        print(
            f"{name}: {records:,} records in {median:,.2f} s (median of {rounded}), "
            f"{records / median:,.0f} records/s"
        )
    return medians


def warm_up(spark: SparkSession, quorum: Quorum, bootstrap: str, tmp: Path, tasks: int) -> None:
    """Both timed query shapes once on a small topic: the JVM's code, the Python workers
    (and their consumers) and Parquet's readers are warm before anything is timed. The pykraft
    query runs `tasks` tasks, as the timed one, so every worker a timed task may run on is warm
    (one task would warm one worker, and the timed query would start the others)."""
    create_topic(quorum, bootstrap, WARMUP_TOPIC)
    produce(bootstrap, WARMUP_TOPIC, WARMUP_RECORDS)
    drain(
        pykraft_stream(spark, bootstrap, WARMUP_TOPIC, min_partitions=tasks),
        tmp / "checkpoint-warmup-pykraft",
        WARMUP_RECORDS,
    )
    to_parquet(spark, bootstrap, WARMUP_TOPIC, tmp / "warmup.parquet")
    drain(
        parquet_stream(spark, tmp / "warmup.parquet"),
        tmp / "checkpoint-warmup-parquet",
        WARMUP_RECORDS,
    )
    drain(
        memory_frame(spark.readStream, WARMUP_RECORDS, 2),
        tmp / "checkpoint-warmup-memory",
        WARMUP_RECORDS,
    )


def _measure(records: int) -> None:
    """Every figure of the module docstring, on a fresh cluster and Spark session."""
    with (
        tempfile.TemporaryDirectory() as tmp_dir,
        running_cluster(Path(tmp_dir), topic=TOPIC, partitions=PARTITIONS) as (quorum, brokers),
    ):
        tmp = Path(tmp_dir)
        bootstrap = ",".join(b.address for b in brokers.values())
        produce(bootstrap, TOPIC, records)
        spark = start_spark()
        tasks = pykraft_tasks(records)
        try:
            warm_up(spark, quorum, bootstrap, tmp, tasks)
            parquet = tmp / "bench.parquet"
            to_parquet(spark, bootstrap, TOPIC, parquet)
            topic_name, parquet_name = f"pykraft, {PARTITIONS} partitions", "parquet"
            nothing_name = "Python source yielding nothing (one empty task)"
            memory_name = f"Python source yielding the rows from memory ({tasks} tasks)"
            streams = stream_runs(
                {
                    topic_name: (pykraft_stream(spark, bootstrap, TOPIC), records),
                    parquet_name: (parquet_stream(spark, parquet), records),
                    nothing_name: (memory_frame(spark.readStream, 0, 1), 0),
                    memory_name: (memory_frame(spark.readStream, records, tasks), records),
                },
                tmp,
            )
            from_topic, from_parquet = streams[topic_name], streams[parquet_name]
            nothing, from_memory = streams[nothing_name], streams[memory_name]
            batch = batch_reads(
                spark,
                {
                    "pykraft": pykraft_batch(spark, bootstrap, TOPIC),
                    "parquet": spark.read.parquet(str(parquet)),
                    f"Python source from memory ({tasks} tasks)": memory_frame(
                        spark.read, records, tasks
                    ),
                },
                records,
            )
            memory_batch_s = batch[f"Python source from memory ({tasks} tasks)"]
            consumer_alone(bootstrap, TOPIC, records)
        finally:
            spark.stop()
        print(
            f"{RATIO_LINE}: stream {from_parquet / from_topic:.2f}, batch "
            f"{batch['parquet'] / batch['pykraft']:.2f}; Python source from memory / parquet: "
            f"batch {batch['parquet'] / memory_batch_s:.2f}, stream "
            f"{from_parquet / from_memory:.2f}; a Python source yielding nothing takes "
            f"{nothing / from_parquet:.2f}x parquet's whole query "
            f"(local[2], availableNow to noop; cores: {os.cpu_count()})"
        )


def _measure_in_child(tree: SourceTree, records: int) -> str:
    """One tree's measurement in a process of its own (its own JVM); echoes its output and
    returns its ratio line."""
    command = [sys.executable, "-u", __file__, "--records", str(records), "--code", tree.name]
    print(f"-- {tree.label}", flush=True)
    child = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    print(child.stdout, end="", flush=True)
    return next(line for line in child.stdout.splitlines() if line.startswith(RATIO_LINE))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=1, help="with several trees: rounds")
    add_code_argument(parser)
    args = parser.parse_args()
    trees = trees_of(args)
    if len(trees) == 1:
        for tree in each_tree(trees):
            if not tree.is_this_tree:
                print(f"Spark workers' and the cluster's code: {tree.label}")
            _measure(args.records)
        return 0
    ratios: list[tuple[str, str]] = []
    for round_index in range(args.rounds):
        for tree in in_round_order(trees, round_index):
            ratios.append((tree.label, _measure_in_child(tree, args.records)))
    print(f"Summary, {args.records:,} records:")
    for label, line in ratios:
        print(f"  {label}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
