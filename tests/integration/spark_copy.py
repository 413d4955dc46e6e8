"""A streaming copy from a topic to Parquet as its own process, for a test that kills it:

    python -m tests.integration.spark_copy BOOTSTRAP TOPIC SINK CHECKPOINT

Micro-batches of at most 1,000 records every 200 ms, until killed.
"""

from __future__ import annotations

import sys

from pykraft.spark import register

from .spark_session import local_spark_session


def main() -> None:
    bootstrap, topic, sink, checkpoint = sys.argv[1:5]
    spark = local_spark_session("pykraft-spark-copy")
    register(spark)
    query = (
        spark.readStream.format("pykraft")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", "1000")
        .load()
        .writeStream.format("parquet")
        .option("path", sink)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main()
