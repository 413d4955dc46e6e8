"""pykraft topics as a Spark Structured Streaming source and sink (PySpark 4 Python data
sources), with the options and schema of Spark's Kafka connector:

    from pykraft.spark import register
    register(spark)
    stream = (spark.readStream.format("pykraft")
              .option("bootstrap.servers", "127.0.0.1:9291").option("subscribe", "orders").load())

Spark needs two settings for it: executors must run the Python that has pykraft installed
(`PYSPARK_PYTHON`, or `spark.pyspark.python`), and a local session should bind to 127.0.0.1
(`SPARK_LOCAL_IP=127.0.0.1`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Makes `format("pykraft")` available in `spark` (once per session)."""
    from pykraft.spark.source import PykraftDataSource

    spark.dataSource.register(PykraftDataSource)
