"""The `pykraft` sink: `df.write.format("pykraft")` and `df.writeStream.format("pykraft")`.

Columns as Spark's Kafka sink takes them: `value` (required, string or binary), `key`,
`headers` (array of key/value), `topic` (unless the `topic` option names it, which wins) and
`partition` (else the producer's partitioner). Each task writes its rows through the
idempotent producer (acks=all), waits for every acknowledgement, and fails on the first error,
so a micro-batch Spark reports as written is on every in-sync replica. Like Spark's Kafka sink
this is at least once: a micro-batch replayed after a failure is written again.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pykraft.client import Producer
from pykraft.spark.options import OptionError, bootstrap_servers, check_known

_KNOWN = frozenset({"bootstrap.servers", "kafka.bootstrap.servers", "topic", "checkpointlocation"})
FLUSH_TIMEOUT_S = 120


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None

    @classmethod
    def parse(cls, options: Mapping[str, str], schema: StructType) -> SinkOptions:
        given = {key.lower(): value for key, value in options.items()}
        check_known(given, _KNOWN)
        columns = set(schema.names)
        if "value" not in columns:
            raise OptionError("the DataFrame needs a value column (string or binary)")
        topic = given.get("topic") or None
        if topic is None and "topic" not in columns:
            raise OptionError("name the topic: a topic column or the topic option")
        return cls(bootstrap_servers(given), topic)


@dataclass
class WrittenMessage(WriterCommitMessage):
    records: int


def write_rows(options: SinkOptions, rows: Iterator[Row]) -> WrittenMessage:
    """Produces every row and waits for all acknowledgements; raises the first failure."""
    count = 0
    with Producer(bootstrap_servers=options.bootstrap_servers, linger_ms=5) as producer:
        futures = []
        for row in rows:
            fields = row.asDict()
            topic = options.topic or fields.get("topic")
            if not topic:
                raise ValueError(f"row {count} has no topic")
            futures.append(
                producer.send(
                    topic,
                    _bytes(fields["value"]),
                    key=_bytes(fields.get("key")),
                    partition=fields.get("partition"),
                    headers=[(h["key"], _bytes(h["value"])) for h in fields.get("headers") or ()],
                )
            )
            count += 1
        producer.flush(timeout=FLUSH_TIMEOUT_S)
        for future in futures:
            future.result(timeout=0)
    return WrittenMessage(count)


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    raise TypeError(f"key, value and header values must be string or binary, not {type(value)}")


class BatchWriter(DataSourceWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Row]) -> WrittenMessage:
        return write_rows(self.options, iterator)


class StreamWriter(DataSourceStreamWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Row]) -> WrittenMessage:
        return write_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # every task waited for its acknowledgements

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # what was written stays (at least once, as Spark's Kafka sink)
