"""Spark's own Kafka connector (`format("kafka")`) in a process of its own, for
test_spark_kafka_connector.py:

    python -m tests.integration.spark_kafka_driver BOOTSTRAP TOPIC OUT_TOPIC WORK_DIR JAR...

Why a process: the connector's jars must be on the class path when the JVM starts, and pyspark
starts one JVM per Python process, with the first session's settings; in the test's own process an
earlier test's session (test_spark.py) may already own it, and the jars would never load.

It reads TOPIC with its headers in batch into WORK_DIR/batch and streaming (availableNow) into
WORK_DIR/stream as Parquet, then writes TOPIC's records back with Spark's Kafka sink to OUT_TOPIC,
each to the partition it was read from. The test checks all three with readers other than Spark;
a failure here exits non-zero with its traceback (Spark's error) on stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from .spark_session import local_spark_session, run_available_now


def kafka_source(spark: SparkSession, bootstrap: str, topic: str, *, streaming: bool) -> DataFrame:
    reader = spark.readStream if streaming else spark.read
    return (
        reader.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )


def main() -> None:
    bootstrap, topic, out_topic, work = sys.argv[1:5]
    jars = [Path(jar) for jar in sys.argv[5:]]
    spark = local_spark_session("pykraft-spark-kafka", jars=jars)
    try:
        kafka_source(spark, bootstrap, topic, streaming=False).write.parquet(f"{work}/batch")
        run_available_now(
            kafka_source(spark, bootstrap, topic, streaming=True),
            Path(work, "stream"),
            Path(work, "checkpoint"),
        )
        # Idempotence spelled out (kafka-clients 3.x has it on by default): with it, the records
        # of each source partition, written by one task in offset order, land in that order.
        (
            kafka_source(spark, bootstrap, topic, streaming=False)
            .select("partition", "key", "value", "headers")
            .write.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("kafka.enable.idempotence", "true")
            .option("topic", out_topic)
            .save()
        )
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
