"""Records per key per event-time window, from one pykraft topic to another, with Spark.

    python examples/windowed_counts.py --bootstrap-server 127.0.0.1:9291 \\
        --input clicks --output click-counts [--checkpoint DIR] [--available-now]

Reads `--input` with the `pykraft` Spark source, counts its records per key in tumbling
windows of the records' timestamps (`--window-seconds`, 10), and writes one record per window
and key to `--output`: key = the input key, value = JSON
`{"window_start":"...Z","window_end":"...Z","key":"user-1","count":7}` (times in UTC,
ISO 8601; a record without a key is counted under key null).

The query runs in append mode (Spark refuses update mode for Python data source sinks):
a window's count is written once, final, when the watermark (the latest timestamp seen minus
`--watermark-seconds`, 5) passes the window's end. Records later than that are dropped. So a
window shows up in the output about window + watermark seconds after it opens, and only once
newer records have moved the watermark; with `--available-now` the windows still open at the
end wait in the checkpoint's state for a later run.

Both topics are created when missing (3 partitions, the cluster's default replication factor).
`--checkpoint DIR` keeps offsets and open windows across runs; without it the query starts
from `--starting-offsets` (earliest) with a temporary checkpoint, removed at exit. Progress goes
to stdout, one line a micro-batch; Ctrl-C (or SIGTERM) stops the query, then Spark. The
processed offsets are also committed to the consumer group `windowed-counts-<input>`, so
`pykraft groups describe --group windowed-counts-<input>` shows how far behind it is.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Final

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.listener import StreamingQueryProgress
from pyspark.sql.streaming.query import StreamingQuery

from pykraft.client import AdminClient, KafkaError, TopicAlreadyExistsError
from pykraft.spark import register

APP_NAME: Final = "pykraft-windowed-counts"
GROUP_PREFIX: Final = "windowed-counts"
TOPIC_PARTITIONS: Final = 3
USE_CLUSTER_DEFAULT: Final = -1
PROGRESS_INTERVAL_S: Final = 1.0
# ISO 8601 with milliseconds; the session runs in UTC, so the offset prints as Z.
JSON_OPTIONS: Final = {
    "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX",
    "ignoreNullFields": "false",
}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Count records per key per event-time window from one topic into another."
    )
    parser.add_argument("--bootstrap-server", required=True, help="host:port[,host:port...]")
    parser.add_argument("--input", required=True, help="topic to count")
    parser.add_argument("--output", required=True, help="topic the counts go to")
    parser.add_argument("--checkpoint", help="Spark checkpoint directory (default: temporary)")
    parser.add_argument(
        "--available-now",
        action="store_true",
        help="process what the input holds now, then stop (default: run until Ctrl-C)",
    )
    parser.add_argument("--window-seconds", type=_positive, default=10)
    parser.add_argument("--watermark-seconds", type=_non_negative, default=5)
    parser.add_argument("--trigger-seconds", type=_positive, default=5, help="micro-batch period")
    parser.add_argument("--starting-offsets", default="earliest", help="for a new checkpoint")
    parser.add_argument("--master", default="local[2]", help="Spark master")
    return parser.parse_args(argv)


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def create_topics(bootstrap: str, names: Sequence[str]) -> None:
    """Creates each topic that does not exist yet; an existing one is used as it is."""
    with AdminClient(bootstrap) as admin:
        existing = set(admin.list_topics())
        for name in names:
            if name in existing:
                continue
            try:
                admin.create_topic(name, TOPIC_PARTITIONS, USE_CLUSTER_DEFAULT)
                print(f"created topic {name} ({TOPIC_PARTITIONS} partitions)", flush=True)
            except TopicAlreadyExistsError:
                pass  # created by someone else meanwhile


def spark_session(master: str) -> SparkSession:
    """A session whose Python workers run this interpreter (which has pykraft), with the
    `pykraft` format registered. A local master binds to 127.0.0.1 and runs no web UI."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(APP_NAME)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")  # the state stores; 200 is for clusters
        .config("spark.ui.showConsoleProgress", "false")
    )
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = builder.config("spark.ui.enabled", "false")
    spark = builder.getOrCreate()
    register(spark)
    return spark


def windowed_counts(records: DataFrame, window_seconds: int, watermark_seconds: int) -> DataFrame:
    """`records` (the pykraft source's columns) counted per key and tumbling window of their
    timestamps, as the sink's columns: key (string, null for keyless records) and value (the
    JSON object). In append mode each window and key gives one row, once the watermark is past
    the window's end."""
    counts = (
        records.select(F.col("key").cast("string").alias("key"), F.col("timestamp"))
        .withWatermark("timestamp", f"{watermark_seconds} seconds")
        .groupBy(F.window("timestamp", f"{window_seconds} seconds"), F.col("key"))
        .count()
    )
    result = F.struct(
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
        F.col("key"),
        F.col("count"),
    )
    return counts.select(F.col("key"), F.to_json(result, JSON_OPTIONS).alias("value"))


def start_query(spark: SparkSession, args: argparse.Namespace, checkpoint: str) -> StreamingQuery:
    records = (
        spark.readStream.format("pykraft")
        .option("bootstrap.servers", args.bootstrap_server)
        .option("subscribe", args.input)
        .option("startingOffsets", args.starting_offsets)
        .option("group.id", f"{GROUP_PREFIX}-{args.input}")
        .load()
    )
    writer = (
        windowed_counts(records, args.window_seconds, args.watermark_seconds)
        .writeStream.format("pykraft")
        .option("bootstrap.servers", args.bootstrap_server)
        .option("topic", args.output)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .queryName("windowed_counts")
    )
    if args.available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{args.trigger_seconds} seconds")
    return writer.start()


def follow(query: StreamingQuery) -> int:
    """Prints each micro-batch's progress until the query ends; its exit code (1 if it
    failed). Waits in Python, not in a call to the JVM, so Ctrl-C lands cleanly."""
    printed = -1
    while query.isActive:
        printed = print_progress(query.recentProgress, printed)
        time.sleep(PROGRESS_INTERVAL_S)
    print_progress(query.recentProgress, printed)
    error = query.exception()
    if error is not None:
        print(f"the query failed: {error}", file=sys.stderr, flush=True)
        return 1
    return 0


def print_progress(progress: Sequence[StreamingQueryProgress], printed: int) -> int:
    """Prints the batches after batch `printed`; the last batch printed."""
    for p in progress:
        if p.batchId <= printed:
            continue
        state = p.stateOperators[0] if p.stateOperators else None
        open_windows = "" if state is None else f", {state.numRowsTotal} windows open"
        watermark = p.eventTime.get("watermark", "-")
        line = f"batch {p.batchId}: {p.numInputRows} records in{open_windows}"
        print(f"{line}, watermark {watermark}", flush=True)
        printed = p.batchId
    return printed


@contextmanager
def checkpoint_location(given: str | None) -> Iterator[str]:
    if given is not None:
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="windowed-counts-") as directory:
        print(f"checkpoint: {directory} (temporary; --checkpoint DIR to resume later)")
        yield directory


def run_pipeline(args: argparse.Namespace, checkpoint: str) -> int:
    """Starts Spark and the query, follows the query until it ends, and stops both however
    it ends (Ctrl-C included)."""
    spark: SparkSession | None = None
    try:
        spark = spark_session(args.master)
        return follow(start_query(spark, args, checkpoint))
    finally:
        # Stopping takes a few seconds; a second Ctrl-C must not cut it short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if spark is not None:
            for query in spark.streams.active:
                query.stop()
            spark.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stop as on Ctrl-C
    try:
        create_topics(args.bootstrap_server, [args.input, args.output])
        with checkpoint_location(args.checkpoint) as checkpoint:
            return run_pipeline(args, checkpoint)
    except KafkaError as error:  # only create_topics raises these; Spark has its own
        print(f"could not create the topics: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopped", flush=True)
        return 0


if __name__ == "__main__":
    sys.exit(main())
