"""The columnar decoder (`decode_batch_columns`) against `decode_batch`: for any batch, the same
records (offsets, timestamps, keys, values, nulls, headers) from any starting offset, and the
same error for the same damaged bytes, with the columns left as they were after an error.

Every property runs with both record decoders, the compiled `_columns_ext` (which `make venv`
builds: its absence fails here) and the pure-Python fallback PYKRAFT_NO_EXTENSIONS=1 selects."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.proto import extensions
from pykraft.proto.record_batch import (
    BatchBuilder,
    BatchError,
    BatchHeader,
    Compression,
    Record,
    RecordHeader,
    TimestampType,
    decode_batch,
)
from pykraft.proto.record_batch import columns as columns_module
from pykraft.proto.record_batch.columns import BinaryColumn, RecordColumns, decode_batch_columns

Row = tuple[int, bytes | None, bytes | None, list[RecordHeader]]
_SETTINGS = settings(max_examples=80, deadline=None)
DECODERS: dict[str, Callable[[bytes, BatchHeader, RecordColumns, int], None]] = {
    "compiled": extensions.compiled("pykraft.proto.record_batch._columns_ext").decode_records,
    "python": columns_module.decode_records_python,
}
decoders = pytest.mark.parametrize("decoder", sorted(DECODERS))


@contextmanager
def decoding_with(decoder: str) -> Iterator[None]:
    """decode_batch_columns through `decoder` (a context, not a fixture: hypothesis runs many
    examples in one test call)."""
    selected = columns_module._decode
    columns_module._decode = DECODERS[decoder]
    try:
        yield
    finally:
        columns_module._decode = selected


nullable_bytes = st.none() | st.binary(max_size=200)
headers = st.lists(
    st.builds(RecordHeader, st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3
)
rows = st.lists(
    st.tuples(st.integers(0, 1 << 45), nullable_bytes, nullable_bytes, headers),
    min_size=1,
    max_size=30,
)


def build(
    codec: Compression,
    records: Sequence[Row],
    *,
    base_offset: int = 0,
    log_append_time: bool = False,
) -> bytes:
    builder = BatchBuilder(
        compression=codec,
        base_offset=base_offset,
        timestamp_type=TimestampType.LOG_APPEND_TIME
        if log_append_time
        else TimestampType.CREATE_TIME,
    )
    for timestamp, key, value, record_headers in records:
        builder.append(timestamp, key, value, record_headers)
    return builder.build()


def as_records(columns: RecordColumns) -> list[Record]:
    return [
        Record(
            columns.offsets[row],
            columns.timestamps[row],
            columns.keys.get(row),
            columns.values.get(row),
            tuple(RecordHeader(k, v) for k, v in columns.headers(row)),
        )
        for row in range(len(columns))
    ]


def snapshot(columns: RecordColumns) -> tuple[object, ...]:
    binary = (columns.keys, columns.values, columns.header_keys, columns.header_values)
    return (
        *((bytes(c.offsets), c.data(), bytes(c.valid), c.size) for c in binary),
        bytes(columns.offsets),
        bytes(columns.timestamps),
        bytes(columns.header_rows),
    )


@decoders
@_SETTINGS
@given(
    codec=st.sampled_from(list(Compression)),
    records=rows,
    base_offset=st.integers(0, 1 << 40),
    skip=st.integers(0, 31),
)
def test_the_same_records_as_decode_batch_from_any_offset(
    decoder: str,
    codec: Compression,
    records: Sequence[Row],
    base_offset: int,
    skip: int,
) -> None:
    with decoding_with(decoder):
        batch = build(codec, records, base_offset=base_offset)
        columns = RecordColumns()
        decode_batch_columns(batch, 0, columns, base_offset + skip)
        expected = [r for r in decode_batch(batch) if r.offset >= base_offset + skip]
        assert as_records(columns) == expected
        assert list(columns.timestamp_types) == [int(TimestampType.CREATE_TIME)] * len(expected)


@decoders
@_SETTINGS
@given(first=rows, second=rows)
def test_batches_append_one_after_another(
    decoder: str,
    first: Sequence[Row],
    second: Sequence[Row],
) -> None:
    """Two batches into the same columns, the second with log-append time: every record of
    both in order, each with its own batch's timestamp rule."""
    with decoding_with(decoder):
        one = build(Compression.NONE, first)
        two = build(Compression.LZ4, second, base_offset=len(first), log_append_time=True)
        columns = RecordColumns()
        decode_batch_columns(one + two, 0, columns, 0)
        decode_batch_columns(one + two, len(one), columns, 0)
        assert as_records(columns) == decode_batch(one) + decode_batch(two)
        assert list(columns.timestamp_types) == [0] * len(first) + [1] * len(second)


def check_like_decode_batch(batch: bytes) -> None:
    """The columns after an earlier good batch: the same records or the same error code as
    decode_batch, and nothing appended on an error."""
    columns = RecordColumns()
    earlier = build(Compression.NONE, [(7, None, b"before", [RecordHeader("a", None)])])
    decode_batch_columns(earlier, 0, columns, 0)
    before = snapshot(columns)
    expected: list[Record] | BatchError
    try:
        expected = decode_batch(batch)
    except BatchError as error:
        expected = error
    try:
        decode_batch_columns(batch, 0, columns, 0)
    except BatchError as error:
        assert isinstance(expected, BatchError), error
        assert error.error_code == expected.error_code
        assert snapshot(columns) == before
        return
    assert not isinstance(expected, BatchError), expected
    assert as_records(columns)[1:] == expected


def test_truncate_keeps_the_first_rows_and_their_headers() -> None:
    records = [
        (i, None if i % 2 else b"k", f"v{i}".encode(), [RecordHeader(f"h{i}", b"x")] * i)
        for i in range(5)
    ]
    columns = RecordColumns()
    decode_batch_columns(build(Compression.NONE, records), 0, columns, 0)
    with pytest.raises(AssertionError):
        columns.truncate(6)
    columns.truncate(3)
    assert as_records(columns) == decode_batch(build(Compression.NONE, records))[:3]


@decoders
@_SETTINGS
@given(batches=st.lists(rows, min_size=1, max_size=4), data=st.data())
def test_truncate_across_batches_keeps_the_first_rows(
    decoder: str, batches: list[list[Row]], data: st.DataObject
) -> None:
    """A cut anywhere in columns appended batch by batch keeps exactly the records before it,
    and the columns stay appendable: the next batch lands after them."""
    with decoding_with(decoder):
        columns, expected = RecordColumns(), list[Record]()
        for batch in batches:
            encoded = build(Compression.NONE, batch, base_offset=len(expected))
            decode_batch_columns(encoded, 0, columns, 0)
            expected += decode_batch(encoded)
        cut = data.draw(st.integers(0, len(expected)))
        columns.truncate(cut)
        assert as_records(columns) == expected[:cut]
        after = build(Compression.NONE, batches[0], base_offset=len(expected))
        decode_batch_columns(after, 0, columns, 0)
        assert as_records(columns) == expected[:cut] + decode_batch(after)


def test_truncate_copies_only_the_chunk_it_cuts() -> None:
    """The chunks before the cut are kept as they are (not joined and sliced: a poll_arrow that
    stops inside a batch would copy all of its keys and values twice)."""
    column = BinaryColumn()
    for chunk in (b"v00v01v02", b"v03v04v05", b"v06v07v08"):  # as a decoder appends batches
        column.chunks.append(chunk)
        column.offsets.extend(column.size + 3 * (i + 1) for i in range(3))
        column.size += len(chunk)
        column.valid += b"\x01" * 3
    first = column.chunks[0]
    column.truncate(5)
    assert column.chunks[0] is first
    assert column.chunks[1:] == [b"v03v04"]
    assert (column.size, len(column), column.data()) == (15, 5, b"v00v01v02v03v04")


def test_the_compiled_decoder_is_used_unless_pykraft_no_extensions() -> None:
    """A fresh interpreter picks the compiled decoder, or the pure-Python one when told."""
    probe = "from pykraft.proto.record_batch import columns; print(columns._decode.__module__)"
    for flag, expected in (("", "_columns_ext"), ("1", "columns")):
        env = {**os.environ, "PYKRAFT_NO_EXTENSIONS": flag}
        found = subprocess.run(
            [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        assert found.rsplit(".", 1)[-1] == expected, (flag, found)
