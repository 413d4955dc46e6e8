"""The `pykraft` source: batch (`spark.read`) and streaming (`spark.readStream`) reads of
topics, with the schema and options of Spark's Kafka source.

Where things run (PySpark's Python data sources): planning (`initialOffset`, `latestOffset`,
`partitions`, `commit`) runs in one long-lived Python process per query, which keeps one
client (`_Planner`) opened lazily; `read` runs on executors, on a pickled copy of the reader,
and reads its offset ranges straight from the partitions' leaders with a consumer kept per
worker process (`_read_consumers`). Nothing that holds a connection is pickled.

Tasks: Spark runs each task of a Python data source through a Python worker, at a cost of
tens of milliseconds of CPU whatever it reads (bench/spark.py's empty source), so a task
reads several partitions' ranges one after another until there is a task for every
`TASK_RECORDS_MIN` records (at least `minPartitions` tasks, where given). Spark's Kafka source
runs one task per partition instead; its tasks cost far less.

Offsets are `{"topic": {"partition": offset}}`. A partition that appears while the query runs
is read from its earliest offset. Spark's checkpoint is the source of truth; with `group.id`
(or `groupIdPrefix`) the processed end offsets are also committed to that consumer group, so
`pykraft groups describe` shows the pipeline's lag.
"""

from __future__ import annotations

import logging
from bisect import bisect_left
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pykraft.client import (
    AdminClient,
    Consumer,
    KafkaError,
    LogTruncationError,
    OffsetAndMetadata,
    OffsetOutOfRangeError,
    TopicPartition,
)
from pykraft.spark import offsets
from pykraft.spark.offsets import OffsetRange, Offsets
from pykraft.spark.options import EARLIEST, LATEST, OffsetSpec, SourceOptions

log = logging.getLogger(__name__)

FORMAT = "pykraft"
POLL_TIMEOUT_MS = 500
# Rows of one Arrow batch a task yields at most (each a poll_arrow).
ARROW_ROWS_MAX = 65_536
# A task reads one partition at a time: each Fetch may bring this much of it (Kafka's default,
# 1 MiB, shares a Fetch among many partitions). Larger answers cost more than their round trips
# save: every buffer of 8 MiB (the answer read, parsed, its records) is fresh memory the kernel
# faults in page by page, since the allocator hands blocks that large back to it when freed
# (a task's read of 250k records of bench/spark.py alone: 8 MiB 78 ms, 70 ms of CPU of which
# 30 ms in the kernel; 2 MiB 54 ms, 47 ms of CPU of which 5 ms in the kernel).
TASK_FETCH_BYTES_MAX = 2 << 20
# Records per task, below which the source packs more ranges into one task (module doc).
TASK_RECORDS_MIN = 200_000
# A task gives up when its range stops growing for this long (the records should be there:
# the range ends at offsets the leader reported).
READ_STALL_MS_MAX = 60_000

HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType()), StructField("value", BinaryType())])
)


def schema(include_headers: bool) -> StructType:
    """Spark's Kafka source schema."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE))
    return StructType(fields)


class PykraftDataSource(DataSource):
    """`format("pykraft")`: register with `pykraft.spark.register(spark)`."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        headers = str(self.options.get("includeHeaders", "false")).lower() == "true"
        return schema(headers)

    def reader(self, schema: StructType) -> DataSourceReader:
        return BatchReader(SourceOptions.parse(self.options, batch=True))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return StreamReader(SourceOptions.parse(self.options, batch=False))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from pykraft.spark.sink import BatchWriter, SinkOptions

        return BatchWriter(SinkOptions.parse(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from pykraft.spark.sink import SinkOptions, StreamWriter

        return StreamWriter(SinkOptions.parse(self.options, schema))


class RangesPartition(InputPartition):
    """One task: offset ranges of one or more partitions, read in this order."""

    def __init__(self, ranges: tuple[OffsetRange, ...]) -> None:
        super().__init__(ranges)
        self.ranges = ranges


# --- planning ---


class _Planner:
    """The planning process's client: which partitions the query reads and their offsets."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.consumer = Consumer(bootstrap_servers=options.bootstrap_servers)
        self._admin: AdminClient | None = None

    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.options.bootstrap_servers)
        return self._admin

    def partitions(self) -> list[tuple[str, int]]:
        if self.options.assign:
            return list(self.options.assign)
        if self.options.subscribe_pattern:
            topics = [t for t in self.admin().list_topics() if self.options.wants(t)]
        else:
            topics = list(self.options.subscribe)
        return [(t, p) for t in sorted(topics) for p in self.consumer.partitions_for(t)]

    def earliest(self, tps: Sequence[tuple[str, int]]) -> Offsets:
        found = self.consumer.beginning_offsets([TopicPartition(*tp) for tp in tps])
        return {(tp.topic, tp.partition): offset for tp, offset in found.items()}

    def latest(self, tps: Sequence[tuple[str, int]]) -> Offsets:
        found = self.consumer.end_offsets([TopicPartition(*tp) for tp in tps])
        return {(tp.topic, tp.partition): offset for tp, offset in found.items()}

    def resolve(self, spec: OffsetSpec, tps: Sequence[tuple[str, int]]) -> Offsets:
        """Offsets of `tps` by a startingOffsets/endingOffsets spec (-2/-1 resolved)."""
        if spec == "earliest":
            return self.earliest(tps)
        if spec == "latest":
            return self.latest(tps)
        assert isinstance(spec, dict)
        earliest, latest = self.earliest(tps), self.latest(tps)
        resolved = {}
        for topic, partition in tps:
            given = spec.get(topic, {}).get(partition, LATEST)
            bound = {EARLIEST: earliest, LATEST: latest}.get(given)
            resolved[(topic, partition)] = given if bound is None else bound[(topic, partition)]
        return resolved

    def by_timestamp(self, timestamp_ms: int, tps: Sequence[tuple[str, int]]) -> Offsets:
        found = self.consumer.offsets_for_times({TopicPartition(*tp): timestamp_ms for tp in tps})
        latest = self.latest(tps)
        return {
            (tp.topic, tp.partition): latest[(tp.topic, tp.partition)]
            if hit is None
            else hit.offset
            for tp, hit in found.items()
        }

    def start(self, tps: Sequence[tuple[str, int]]) -> Offsets:
        if self.options.starting_timestamp is not None:
            return self.by_timestamp(self.options.starting_timestamp, tps)
        return self.resolve(self.options.starting_offsets, tps)

    def commit_group(self, end: Offsets) -> None:
        """Best effort: the checkpoint, not the group, is what restarts read from."""
        group = self.options.group_id
        if group is None or not end:
            return
        try:
            self.admin().alter_consumer_group_offsets(
                group, {TopicPartition(*tp): OffsetAndMetadata(o) for tp, o in end.items()}
            )
        except KafkaError as error:
            log.warning("could not commit the processed offsets to group %s: %s", group, error)

    def close(self) -> None:
        self.consumer.close()
        if self._admin is not None:
            self._admin.close()


class _Reader:
    """What batch and stream readers share: the options, the planner, reading a range."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._planner_cache: _Planner | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"options": self.options, "_planner_cache": None}

    @property
    def _planner(self) -> _Planner:
        if self._planner_cache is None:
            self._planner_cache = _Planner(self.options)
        return self._planner_cache

    def _tasks(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        ranges = [
            OffsetRange(topic, partition, start.get((topic, partition), stop), stop)
            for (topic, partition), stop in sorted(end.items())
        ]
        parts = offsets.split(ranges, self.options.min_partitions)
        tasks = offsets.pack(parts, TASK_RECORDS_MIN, self.options.min_partitions or 1)
        return [RangesPartition(task) for task in tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, RangesPartition)
        return read_ranges(self.options, partition.ranges)


class BatchReader(_Reader, DataSourceReader):
    def partitions(self) -> Sequence[InputPartition]:
        tps = self._planner.partitions()
        start = self._planner.start(tps)
        end = self._planner.resolve(self.options.ending_offsets, tps)
        return self._tasks(start, end)


class StreamReader(_Reader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        super().__init__(options)
        self._target: Offsets | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "_target": None}

    def initialOffset(self) -> dict[str, dict[str, int]]:
        return offsets.to_json(self._planner.start(self._planner.partitions()))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_offsets_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self._planner.partitions()
        self._target = self._planner.latest(tps)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        begun = offsets.from_json(start)
        tps = self._planner.partitions()
        latest = self._planner.latest(tps)
        new = [tp for tp in tps if tp not in begun]
        base = {**self._planner.earliest(new), **begun} if new else dict(begun)
        if self._target is not None:  # availableNow: nothing written after the query began
            latest = {
                tp: min(end, self._target.get(tp, base.get(tp, 0))) for tp, end in latest.items()
            }
        latest = {tp: max(end, base.get(tp, end)) for tp, end in latest.items()}
        if isinstance(limit, ReadMaxRows):
            latest = offsets.limit(base, latest, limit.max_rows)
        return offsets.to_json({**begun, **latest})

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begun, until = offsets.from_json(start), offsets.from_json(end)
        new = [tp for tp in until if tp not in begun]
        if new:
            begun = {**self._planner.earliest(new), **begun}
        return self._tasks(begun, until)

    def commit(self, end: dict[str, Any]) -> None:
        self._planner.commit_group(offsets.from_json(end))

    def stop(self) -> None:
        if self._planner_cache is not None:
            self._planner_cache.close()
            self._planner_cache = None


# --- reading on executors ---

# Consumers a worker process keeps per cluster: one that a task reads from and one that
# already fetches the task's next range (each its own fetch thread, and one partition each, so
# a poll never mixes partitions); the next range's first fetch then does not stall the task.
READ_CONSUMERS = 2
# What each of them buffers ahead of the task at most.
READ_BUFFER_BYTES_MAX = 2 * TASK_FETCH_BYTES_MAX
# How long a broker may hold their Fetch for records not there yet. A range's records are there
# (it ends at offsets the leader reported); what a broker holds is the Fetch a consumer sent
# past the range's end, at the log's end, and until it answers that consumer sends nothing else
# to that broker (one Fetch in flight per broker): the next range's first Fetch, if its leader
# is the same broker, waits this long at most (Kafka's default, 500 ms, stalled tasks).
READ_FETCH_WAIT_MS = 20

_consumers: dict[str, list[Consumer]] = {}


def _read_consumers(bootstrap: str) -> list[Consumer]:
    """The worker's consumers for `bootstrap`, reused by the tasks it runs one by one."""
    consumers = _consumers.get(bootstrap)
    if consumers is None:
        consumers = _consumers[bootstrap] = [
            Consumer(
                bootstrap_servers=bootstrap,
                auto_offset_reset="none",
                enable_auto_commit=False,
                max_partition_fetch_bytes=TASK_FETCH_BYTES_MAX,
                fetch_buffer_bytes_max=READ_BUFFER_BYTES_MAX,
                fetch_max_wait_ms=READ_FETCH_WAIT_MS,
            )
            for _ in range(READ_CONSUMERS)
        ]
    return consumers


def read_ranges(options: SourceOptions, ranges: Sequence[OffsetRange]) -> Iterator[pa.RecordBatch]:
    """The records of `ranges`, one range after another, as `read_range` reads each; the
    next range is fetched ahead on another consumer while one is read, and a consumer is
    unassigned once its range is read, so it fetches nothing past it while idle."""
    consumers = _read_consumers(options.bootstrap_servers)
    for index, task in enumerate(ranges):
        if index == 0:
            _start(consumers[0], task)
        if index + 1 < len(ranges):
            _start(consumers[(index + 1) % READ_CONSUMERS], ranges[index + 1])
        consumer = consumers[index % READ_CONSUMERS]
        yield from read_range(options, task, consumer)
        consumer.assign([])


def _start(consumer: Consumer, task: OffsetRange) -> None:
    """`consumer` assigned to the partition of `task` at its start: it fetches from there on."""
    tp = TopicPartition(task.topic, task.partition)
    consumer.assign([tp])
    consumer.seek(tp, task.start)


def read_range(
    options: SourceOptions, task: OffsetRange, consumer: Consumer
) -> Iterator[pa.RecordBatch]:
    """Records [start, end) of one partition as Arrow batches of the source schema (one per
    `poll_arrow`, decoded into Arrow buffers with no Python object per record; Spark takes
    Arrow without converting row by row), read with `consumer`, which `_start` set at the
    range's start. Records deleted by retention
    before they were read, or a log truncated by an unclean leader election, fail the task
    (failOnDataLoss=true, the default) or are skipped with a warning; no record is yielded
    twice."""
    if task.end <= task.start:
        return
    tp = TopicPartition(task.topic, task.partition)
    position = task.start
    stalled_ms = 0
    while position < task.end:
        try:
            polled = consumer.poll_arrow(timeout_ms=POLL_TIMEOUT_MS, rows_max=ARROW_ROWS_MAX)
        except OffsetOutOfRangeError as error:
            position = _recover(consumer, error, task, position, options.fail_on_data_loss)
            continue
        if not polled.num_rows:
            stalled_ms += POLL_TIMEOUT_MS
            if stalled_ms >= READ_STALL_MS_MAX:
                raise RuntimeError(f"{tp}: no records past offset {position} in {stalled_ms} ms")
            continue
        stalled_ms = 0
        in_range = polled.slice(0, _rows_before(polled, task.end))
        if in_range.num_rows:
            position = in_range.column("offset")[-1].as_py() + 1
            yield _spark_batch(in_range, options.include_headers)
        else:
            position = task.end


def _rows_before(polled: pa.RecordBatch, end: int) -> int:
    """How many rows of `polled` (one partition's, in offset order) lie below offset `end`
    (a binary search: no pyarrow.compute, whose import the planning process would pay)."""
    offsets_column = polled.column("offset")
    if offsets_column[-1].as_py() < end:
        return int(polled.num_rows)
    return bisect_left(offsets_column, end, key=lambda offset: int(offset.as_py()))


def _spark_batch(polled: pa.RecordBatch, include_headers: bool) -> pa.RecordBatch:
    """A `Consumer.poll_arrow` batch in the source's schema: the same buffers, the timestamp
    in microseconds and the timestamp type as int32 (both cast column-wise)."""
    columns = [
        polled.column("key"),
        polled.column("value"),
        polled.column("topic"),
        polled.column("partition"),
        polled.column("offset"),
        polled.column("timestamp").cast(pa.timestamp("us", tz="UTC")),
        polled.column("timestamp_type").cast(pa.int32()),
    ]
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    if include_headers:
        columns.append(polled.column("headers"))  # already list<struct<key, value>>
        names.append("headers")
    return pa.RecordBatch.from_arrays(columns, names=names)


def _recover(
    consumer: Consumer, error: OffsetOutOfRangeError, task: OffsetRange, position: int, fail: bool
) -> int:
    """Where the task reads on after its consumer could not fetch `position` (never below it:
    what was yielded stays yielded); raises instead when `fail` (failOnDataLoss)."""
    tp = TopicPartition(task.topic, task.partition)
    if isinstance(error, LogTruncationError):
        _truncated(tp, position, error, fail)
    else:
        position = _data_lost(consumer, tp, task, position, fail)
    consumer.seek(tp, position)  # also ends the consumer's truncation error
    return position


def _truncated(tp: TopicPartition, position: int, error: LogTruncationError, fail: bool) -> None:
    """The leader's log parts from what the task read (KIP-320): records it yielded may not
    be in the partition any more, and others may stand at their offsets."""
    divergent = error.divergent_offsets.get(tp)
    where = "an offset the leader could not name" if divergent is None else divergent.offset
    message = (
        f"{tp}: the log was truncated (an unclean leader election) while the query read "
        f"offset {position}: records from offset {where} on may differ from those the query "
        "planned"
    )
    if fail:
        raise RuntimeError(
            f"{message}; set failOnDataLoss=false to go on reading the new records from "
            f"offset {position}."
        ) from error
    log.warning("%s; reading on from offset %d (failOnDataLoss=false)", message, position)


def _data_lost(
    consumer: Consumer, tp: TopicPartition, task: OffsetRange, position: int, fail: bool
) -> int:
    """As Spark's Kafka source: skip to the log start when retention deleted the records at
    `position`, or to the task's end when the log holds nothing of [position, end)."""
    earliest = consumer.beginning_offsets([tp])[tp]
    latest = consumer.end_offsets([tp])[tp]
    if position >= latest or earliest >= task.end:
        message = (
            f"{tp}: offsets {position} to {task.end - 1} are not in the log (it holds "
            f"{earliest} to {latest - 1})"
        )
        resume = task.end
    elif earliest > position:
        message = (
            f"{tp}: offsets {position} to {earliest - 1} were deleted (retention) before the "
            "query read them"
        )
        resume = earliest
    else:
        return position  # in the log again (a leader change): fetch it anew
    if fail:
        raise RuntimeError(
            f"{message}. Some data may have been lost; set failOnDataLoss=false to skip "
            "such records and go on."
        )
    log.warning("%s; skipped (failOnDataLoss=false)", message)
    return resume
