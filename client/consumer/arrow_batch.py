"""The consumer's columnar read (`Consumer.poll_arrow`): records decoded straight into Arrow
buffers (`pykraft.proto.record_batch.columns`) and wrapped as one `pyarrow.RecordBatch`,
with no Python object per record.

Schema (`ARROW_SCHEMA`): key and value binary (nullable), topic string, partition int32, offset
int64, timestamp (ms, UTC), timestamp_type int8 (0 create time, 1 log-append time), headers
list<struct<key: string, value: binary>> (a record without headers has an empty list). Rows
come partition by partition, in offset order within each, as `poll` hands records out.

pyarrow is imported when a batch is built: it is the `arrow` extra, not a dependency of the
client.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Final

from pykraft.client.consumer.fetch_buffer import CompletedFetch
from pykraft.client.types import TopicPartition
from pykraft.proto.record_batch.columns import BinaryColumn, RecordColumns

if TYPE_CHECKING:
    import pyarrow as pa

# poll_arrow's default limit on the rows of one batch (Kafka's max.poll.records for columns):
# large enough that per-batch costs vanish, small enough to bound one batch's memory.
ARROW_ROWS_MAX: Final = 65_536


class ColumnRows:
    """What one poll_arrow collects: the records' columns, and which partition each run of
    rows came from (runs in the order they were taken)."""

    __slots__ = ("columns", "runs")

    def __init__(self) -> None:
        self.columns = RecordColumns()
        self.runs: list[tuple[TopicPartition, int]] = []

    def __len__(self) -> int:
        return len(self.columns)


def take_rows(fetch: CompletedFetch, rows: ColumnRows, limit: int) -> None:
    """`fetch.take_columns` into `rows`, noting the run of rows it added."""
    before = len(rows)
    try:
        fetch.take_columns(rows.columns, limit)
    finally:
        if len(rows) > before:
            rows.runs.append((fetch.tp, len(rows) - before))


def arrow_schema() -> pa.Schema:
    """The schema of `Consumer.poll_arrow`'s batches (see the module's docstring)."""
    import pyarrow as pa

    return pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("ms", tz="UTC")),
            ("timestamp_type", pa.int8()),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ]
    )


def to_record_batch(rows: ColumnRows) -> pa.RecordBatch:
    """`rows` as a RecordBatch of `arrow_schema()`; the buffers are handed over, not copied
    row by row."""
    import pyarrow as pa

    schema = arrow_schema()
    columns = rows.columns
    count = len(columns)
    header_count = len(columns.header_keys)
    header_struct = schema.field("headers").type.value_type
    headers = pa.StructArray.from_arrays(
        [
            _binary(columns.header_keys, pa.string()),
            _binary(columns.header_values, pa.binary()),
        ],
        fields=list(header_struct),
    )
    assert len(headers) == header_count
    arrays = [
        _binary(columns.keys, pa.binary()),
        _binary(columns.values, pa.binary()),
        _topics(rows.runs),
        _partitions(rows.runs),
        _fixed(pa.int64(), count, columns.offsets),
        _fixed(schema.field("timestamp").type, count, columns.timestamps),
        _fixed(pa.int8(), count, columns.timestamp_types),
        pa.ListArray.from_arrays(_fixed(pa.int32(), count + 1, columns.header_rows), headers),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _fixed(kind: pa.DataType, length: int, values: array[int]) -> pa.Array:
    import pyarrow as pa

    assert len(values) == length, (len(values), length)
    return pa.Array.from_buffers(kind, length, [None, pa.py_buffer(values)])


def _binary(column: BinaryColumn, kind: pa.DataType) -> pa.Array:
    """The column as a binary or string array; the validity bytes become a bitmap only when
    some element is null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    length = len(column)
    nulls = length - column.valid.count(1)
    validity = None
    if nulls:
        as_bytes = pa.Array.from_buffers(pa.uint8(), length, [None, pa.py_buffer(column.valid)])
        validity = pc.not_equal(as_bytes, 0).buffers()[1]
    buffers = [validity, pa.py_buffer(column.offsets), pa.py_buffer(column.data())]
    return pa.Array.from_buffers(kind, length, buffers, null_count=nulls)


def _topics(runs: list[tuple[TopicPartition, int]]) -> pa.Array:
    """Each run's topic repeated: built by pyarrow per run, not per row."""
    import pyarrow as pa

    return _repeated([(pa.scalar(tp.topic, pa.string()), rows) for tp, rows in runs], pa.string())


def _partitions(runs: list[tuple[TopicPartition, int]]) -> pa.Array:
    import pyarrow as pa

    return _repeated([(pa.scalar(tp.partition, pa.int32()), rows) for tp, rows in runs], pa.int32())


def _repeated(runs: list[tuple[pa.Scalar, int]], kind: pa.DataType) -> pa.Array:
    """Each value repeated its count of times, end to end."""
    import pyarrow as pa

    return pa.concat_arrays([pa.array([], kind)] + [pa.repeat(value, rows) for value, rows in runs])
