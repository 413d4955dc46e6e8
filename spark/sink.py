"""The `pykraft` sink: `df.write.format("pykraft")` and `df.writeStream.format("pykraft")`.

Columns as Spark's Kafka sink takes them: `value` (required, string or binary), `key`,
`headers` (array of key/value), `topic` (unless the `topic` option names it, which wins) and
`partition` (else the producer's partitioner). Each task writes its rows through the
idempotent producer (acks=all), waits for every acknowledgement, and fails on the first error,
so a micro-batch Spark reports as written is on every in-sync replica.

Streaming writes use the batch id so that a micro-batch is not written twice when Spark replays
it after the sink committed it (a restart after a crash between the sink's commit and Spark's
commit log). The driver's `commit(messages, batchId)` records the batch as written, as the
committed offset of a marker group named after the checkpoint location (`marker_group`); a task
learns its batch id from Spark's `streaming.sql.batchId` task property and writes nothing for a
batch already recorded. A failure while tasks are writing, before the commit, still leads to a
replay that writes those rows again (at least once there, as Spark's Kafka sink): without
transactions nothing can make the tasks' writes and the commit one step.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from pykraft.client import AdminClient, OffsetAndMetadata, Producer, TopicPartition
from pykraft.spark.options import OptionError, bootstrap_servers, check_known

# checkpointLocation and queryName are passed by Spark itself.
_KNOWN = frozenset(
    {"bootstrap.servers", "kafka.bootstrap.servers", "topic", "checkpointlocation", "queryname"}
)
FLUSH_TIMEOUT_S = 120


@dataclass(frozen=True)
class SinkOptions:
    bootstrap_servers: str
    topic: str | None
    checkpoint_location: str | None = None

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
        return cls(bootstrap_servers(given), topic, given.get("checkpointlocation"))


# The marker lives as a committed offset of this partition, which exists wherever groups work.
MARKER_PARTITION: Final = TopicPartition("__consumer_offsets", 0)
MARKER_GROUP_PREFIX: Final = "pykraft-spark-sink-"
BATCH_ID_PROPERTY: Final = "streaming.sql.batchId"


@dataclass
class WrittenMessage(WriterCommitMessage):
    records: int
    skipped: bool = False


def marker_group(checkpoint_location: str) -> str:
    """The group whose committed offset is 1 + the last batch id this query's sink wrote."""
    digest = hashlib.sha256(checkpoint_location.encode()).hexdigest()[:16]
    return MARKER_GROUP_PREFIX + digest


def written_batches(options: SinkOptions) -> int:
    """How many batches (ids 0 .. n-1) the sink has recorded as written."""
    assert options.checkpoint_location is not None
    with AdminClient(options.bootstrap_servers) as admin:
        found = admin.list_consumer_group_offsets(
            marker_group(options.checkpoint_location), [MARKER_PARTITION]
        )
    marker = found.get(MARKER_PARTITION)
    return 0 if marker is None else marker.offset


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


def _task_batch_id() -> int | None:
    """The micro-batch this task writes, from Spark's task properties (None outside one)."""
    from pyspark import TaskContext

    context = TaskContext.get()
    value = None if context is None else context.getLocalProperty(BATCH_ID_PROPERTY)
    return None if value is None else int(value)


class BatchWriter(DataSourceWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Row]) -> WrittenMessage:
        return write_rows(self.options, iterator)


class StreamWriter(DataSourceStreamWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[Row]) -> WrittenMessage:
        batch_id = _task_batch_id()
        replayed = (
            batch_id is not None
            and self.options.checkpoint_location is not None
            and batch_id < written_batches(self.options)
        )
        if replayed:
            return WrittenMessage(sum(1 for _ in iterator), skipped=True)
        return write_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Every task waited for its acknowledgements: record the batch as written."""
        if self.options.checkpoint_location is None:
            return
        group = marker_group(self.options.checkpoint_location)
        with AdminClient(self.options.bootstrap_servers) as admin:
            admin.alter_consumer_group_offsets(
                group, {MARKER_PARTITION: OffsetAndMetadata(batchId + 1, "last batch + 1")}
            )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        pass  # what was written stays (at least once, as Spark's Kafka sink)
