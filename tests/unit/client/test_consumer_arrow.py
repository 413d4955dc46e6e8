"""The consumer's columnar read against its record read, on the same fetched bytes.

`CompletedFetch.take_columns` (poll_arrow's path) against `CompletedFetch.take` (poll's): for
any fetch (compressed batches, nulls, headers, control batches, compacted gaps, a fetch offset
inside a batch) and any sequence of reads of either kind with any limits, the rows are the
records `take` alone would hand out, in order, and the position after each read is the same.
Then `Consumer.poll_arrow` through real gRPC against the in-process fake brokers.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.client import Consumer, ConsumerRecord, CorruptMessageError, TopicPartition
from pykraft.client.consumer import fetch_buffer
from pykraft.client.consumer.arrow_batch import ColumnRows, take_rows, to_record_batch
from pykraft.client.consumer.fetch_buffer import CompletedFetch
from pykraft.proto.record_batch import Compression, RecordHeader, TimestampType
from tests.unit.client.consumer_polling import T0, T1, WAIT_MS, poll_until
from tests.unit.client.fake_broker import running
from tests.unit.proto.batch_helpers import reseal
from tests.unit.proto.test_record_batch_columns import build

CONTROL_FLAG = 0x20
TP = TopicPartition("t", 3)

Row = tuple[bytes | None, bytes | None, list[RecordHeader]]
record_rows = st.lists(
    st.tuples(
        st.none() | st.binary(max_size=30),
        st.none() | st.binary(max_size=60),
        st.lists(
            st.builds(RecordHeader, st.text(max_size=5), st.none() | st.binary(max_size=8)),
            max_size=2,
        ),
    ),
    min_size=1,
    max_size=12,
)
batch_specs = st.lists(
    st.tuples(
        record_rows,
        st.sampled_from(list(Compression)),
        st.booleans(),  # a control batch
        st.integers(0, 3),  # offsets left out after the batch (compaction)
        st.booleans(),  # log-append time
    ),
    min_size=1,
    max_size=6,
)


def build_fetch(
    specs: Sequence[tuple[list[Row], Compression, bool, int, bool]],
) -> tuple[bytes, int]:
    """The batches of `specs` one after another, and the offset after the last."""
    data = bytearray()
    offset = 0
    for rows, codec, control, gap, log_append_time in specs:
        timed = [(5_000 + offset + i, *row) for i, row in enumerate(rows)]
        batch = bytearray(build(codec, timed, base_offset=offset, log_append_time=log_append_time))
        if control:
            attributes = struct.unpack_from(">h", batch, 21)[0] | CONTROL_FLAG
            struct.pack_into(">h", batch, 21, attributes)
            batch = bytearray(reseal(batch))
        data += batch
        offset += len(rows) + gap
    return bytes(data), offset


def as_records(rows: ColumnRows) -> list[ConsumerRecord]:
    """The rows as the records poll hands out, through the RecordBatch poll_arrow returns."""
    table = to_record_batch(rows).to_pylist()
    return [
        ConsumerRecord(
            row["topic"],
            row["partition"],
            row["offset"],
            int(row["timestamp"].timestamp() * 1000),
            TimestampType(row["timestamp_type"]),
            row["key"],
            row["value"],
            tuple((h["key"], h["value"]) for h in row["headers"]),
        )
        for row in table
    ]


def read_all(fetch: CompletedFetch | None, reads: list[tuple[bool, int]]) -> list[object]:
    """What each read gave and the position after it, reading in columns where asked."""
    if fetch is None:
        return []
    seen: list[object] = []
    for columns, limit in [*reads, *[(False, 1_000)] * 2]:
        if columns:
            rows = ColumnRows()
            take_rows(fetch, rows, limit)
            seen.append(as_records(rows))
        else:
            out: list[ConsumerRecord] = []
            fetch.take(out, limit)
            seen.append(out)
        seen.append(fetch.position)
    assert fetch.exhausted
    return seen


@settings(max_examples=60, deadline=None)
@given(
    specs=batch_specs,
    start=st.integers(0, 20),
    reads=st.lists(st.tuples(st.booleans(), st.integers(1, 15)), max_size=8),
)
def test_columns_hand_out_what_records_do_mixed_in_any_order(
    specs: list[tuple[list[Row], Compression, bool, int, bool]],
    start: int,
    reads: list[tuple[bool, int]],
) -> None:
    data, end = build_fetch(specs)
    start = min(start, end)

    def fetch() -> CompletedFetch | None:
        return CompletedFetch.of_records(TP, start, data, check_crcs=True)

    expected = read_all(fetch(), [(False, limit) for _, limit in reads])
    assert read_all(fetch(), reads) == expected
    assert read_all(fetch(), [(True, limit) for _, limit in reads]) == expected


def test_a_corrupt_batch_raises_only_after_the_rows_before_it() -> None:
    good, end = build_fetch([([(b"k", b"v", [])] * 3, Compression.NONE, False, 0, False)])
    bad, _ = build_fetch([([(None, b"w", [])] * 2, Compression.NONE, False, 0, False)])
    damaged = bytearray(bad)
    struct.pack_into(">q", damaged, 0, end)  # its offsets follow the good batch's
    damaged[-2] ^= 1  # past the CRC check's start: the CRC no longer matches
    fetch = CompletedFetch.of_records(TP, 0, good + bytes(damaged), check_crcs=True)
    assert fetch is not None
    rows = ColumnRows()
    take_rows(fetch, rows, 10)
    assert [r.offset for r in as_records(rows)] == [0, 1, 2]
    for _ in range(2):  # raised again until a seek past it
        with pytest.raises(CorruptMessageError, match="seek to 5"):
            take_rows(fetch, ColumnRows(), 10)
    assert fetch.position == 3


def test_poll_arrow_reads_what_poll_does_across_partitions_and_moves_positions() -> None:
    with running({"t": 2}) as cluster:
        for tp in (T0, T1):
            for first in range(0, 40, 10):
                cluster.append(tp, [b"%d-%d" % (tp.partition, first + i) for i in range(10)])
        with Consumer(
            bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest"
        ) as consumer:
            consumer.assign([T0, T1])
            batches: list[pa.RecordBatch] = []
            while sum(b.num_rows for b in batches) < 80:
                batch = consumer.poll_arrow(timeout_ms=WAIT_MS, rows_max=15)
                assert 0 < batch.num_rows <= 15
                batches.append(batch)
            table = pa.Table.from_batches(batches)
            assert table.schema == to_record_batch(ColumnRows()).schema
            rows = table.to_pylist()
            for tp in (T0, T1):
                mine = [r for r in rows if r["partition"] == tp.partition]
                assert [r["offset"] for r in mine] == list(range(40))
                assert [r["value"] for r in mine] == [
                    b"%d-%d" % (tp.partition, i) for i in range(40)
                ]
                assert {r["topic"] for r in mine} == {"t"}
                assert consumer.position(tp) == 40
            assert {r["key"] for r in rows} == {None}
            assert consumer.poll_arrow(timeout_ms=0).num_rows == 0
            cluster.append(T0, [b"after"])
            assert [r.value for r in poll_until(consumer, 1)] == [b"after"]
            assert consumer.position(T0) == 41


def test_columns_stop_taking_batches_past_their_bytes_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Arrow's int32 offsets: past COLUMN_BYTES_MAX no further batch is decoded into the
    same columns, though the first batch is always taken (progress)."""
    monkeypatch.setattr(fetch_buffer, "COLUMN_BYTES_MAX", 250)
    rows: list[Row] = [(b"k", b"v" * 100, [])] * 2
    data, _ = build_fetch([(rows, Compression.NONE, False, 0, False)] * 3)
    fetch = CompletedFetch.of_records(TP, 0, data, check_crcs=True)
    assert fetch is not None
    taken: list[list[int]] = []
    while not fetch.exhausted:
        columns = ColumnRows()
        take_rows(fetch, columns, 100)
        taken.append([r.offset for r in as_records(columns)])
    assert taken == [[0, 1, 2, 3], [4, 5]]
