"""What the Spark tests and their driver processes share: the one way they start a local
SparkSession (local[2], for the suite's two cores; bound to 127.0.0.1; no web UI or console
progress bars; two shuffle partitions instead of 200, for small data; workers on this Python), and
an availableNow query into a Parquet sink, run to its end.

pyspark keeps one JVM per Python process and builds it with the first session's settings, so
`jars` reach the class path only in a process that has started no Spark yet: a test that needs
them runs its Spark part in a process of its own (`spark_kafka_driver.py`).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

QUERY_TIMEOUT_S = 300


def local_spark_session(app_name: str, *, jars: Sequence[Path] = ()) -> SparkSession:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    builder = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    if jars:
        builder = builder.config("spark.jars", ",".join(str(jar) for jar in jars))
    return builder.getOrCreate()


def run_available_now(df: DataFrame, path: Path, checkpoint: Path) -> None:
    """Streams `df` into Parquet at `path` until the query has read everything available when it
    started; fails if it takes longer than QUERY_TIMEOUT_S or the query failed."""
    query = (
        df.writeStream.format("parquet")
        .option("path", str(path))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(QUERY_TIMEOUT_S), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
