"""Build then decode: every codec, every field, absolute offsets and timestamps."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.proto.record_batch import (
    HEADER_SIZE,
    BatchBuilder,
    Compression,
    Record,
    RecordHeader,
    TimestampType,
    build_batch,
    decode_batch,
    verify_batch,
)

CODECS = list(Compression)
_SETTINGS = settings(max_examples=60, deadline=None)

nullable_bytes = st.none() | st.binary(max_size=300)
headers = st.lists(
    st.builds(RecordHeader, st.text(max_size=10), st.none() | st.binary(max_size=20)), max_size=3
)
records = st.lists(
    st.tuples(st.integers(-(1 << 40), 1 << 50), nullable_bytes, nullable_bytes, headers),
    min_size=1,
    max_size=40,
)


def _round_trip(
    codec: Compression,
    rows: list[tuple[int, bytes | None, bytes | None, list[RecordHeader]]],
    base_offset: int = 0,
) -> list[Record]:
    builder = BatchBuilder(compression=codec, base_offset=base_offset)
    for timestamp, key, value, record_headers in rows:
        builder.append(timestamp, key, value, record_headers)
    batch = builder.build()
    assert len(batch) <= builder.estimated_size_bytes()
    header = verify_batch(batch)
    assert verify_batch(memoryview(batch)) == verify_batch(bytearray(batch)) == header
    assert header.compression is codec
    assert header.record_count == builder.record_count() == len(rows)
    assert header.base_timestamp == rows[0][0]
    assert header.max_timestamp == max(row[0] for row in rows)
    assert header.last_offset == base_offset + len(rows) - 1
    decoded = decode_batch(batch)
    assert decode_batch(bytearray(batch)) == decode_batch(memoryview(batch)) == decoded
    return decoded


def _expected(
    rows: list[tuple[int, bytes | None, bytes | None, list[RecordHeader]]], base_offset: int = 0
) -> list[Record]:
    return [
        Record(base_offset + i, timestamp, key, value, tuple(record_headers))
        for i, (timestamp, key, value, record_headers) in enumerate(rows)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_fields_survive_every_codec(codec: Compression) -> None:
    rows: list[tuple[int, bytes | None, bytes | None, list[RecordHeader]]] = [
        (1_700_000_000_000, b"key", b"value", [RecordHeader("trace", b"abc")]),
        (1_699_999_999_000, None, b"", []),  # earlier than the first: a negative delta
        (1_700_000_000_500, b"", None, [RecordHeader("é-ü", None), RecordHeader("", b"")]),
        (1_700_000_000_500, None, None, []),
    ]
    assert _round_trip(codec, rows, base_offset=1 << 40) == _expected(rows, base_offset=1 << 40)


@pytest.mark.parametrize("codec", CODECS)
def test_a_one_mebibyte_value_and_incompressible_data(codec: Compression) -> None:
    rows: list[tuple[int, bytes | None, bytes | None, list[RecordHeader]]] = [
        (5, os.urandom(300), os.urandom(1 << 20), [RecordHeader("h", os.urandom(70_000))]),
        (6, b"k", b"v" * (1 << 20), []),
    ]
    assert _round_trip(codec, rows) == _expected(rows)


@pytest.mark.parametrize("codec", CODECS)
def test_many_records(codec: Compression) -> None:
    rows: list[tuple[int, bytes | None, bytes | None, list[RecordHeader]]] = [
        (1000 + i * 7, str(i).encode(), b"x" * (i % 200), []) for i in range(20_000)
    ]
    assert _round_trip(codec, rows, base_offset=77) == _expected(rows, base_offset=77)


@_SETTINGS
@given(codec=st.sampled_from(CODECS), rows=records, base_offset=st.integers(0, 1 << 62))
def test_generated_records_round_trip(
    codec: Compression,
    rows: list[tuple[int, bytes | None, bytes | None, list[RecordHeader]]],
    base_offset: int,
) -> None:
    assert _round_trip(codec, rows, base_offset) == _expected(rows, base_offset)


def test_header_tuples_and_record_headers_encode_alike() -> None:
    with_tuples = BatchBuilder()
    with_tuples.append(1, b"k", b"v", [("a", b"1"), ("b", None)])
    with_classes = BatchBuilder()
    with_classes.append(1, b"k", b"v", [RecordHeader("a", b"1"), RecordHeader("b", None)])
    assert with_tuples.build() == with_classes.build()


def test_producer_fields_and_flags_are_written() -> None:
    batch = build_batch(
        [(10, b"k", b"v"), (11, b"k", b"w")],
        base_offset=5,
        producer_id=123456789,
        producer_epoch=3,
        base_sequence=40,
        partition_leader_epoch=9,
        is_transactional=True,
        compression=Compression.ZSTD,
    )
    header = verify_batch(batch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (123456789, 3, 40)
    assert (header.partition_leader_epoch, header.base_offset) == (9, 5)
    assert header.is_transactional and not header.is_control
    assert header.timestamp_type is TimestampType.CREATE_TIME
    assert header.attributes == 0x10 | Compression.ZSTD


def test_log_append_time_reads_every_timestamp_as_the_batch_max() -> None:
    builder = BatchBuilder(timestamp_type=TimestampType.LOG_APPEND_TIME)
    builder.append(500, None, b"a")
    builder.append(900, None, b"b")
    batch = builder.build()
    assert verify_batch(batch).timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [record.timestamp for record in decode_batch(batch)] == [900, 900]


def test_the_cleaner_keeps_offsets_and_the_last_offset() -> None:
    builder = BatchBuilder(base_offset=100, last_offset_delta=9, base_sequence=50)
    builder.append(1, b"a", b"1", offset_delta=2)
    builder.append(2, b"b", b"2", offset_delta=7)
    batch = builder.build()
    header = verify_batch(batch)
    assert (header.last_offset, header.record_count) == (109, 2)
    assert [record.offset for record in decode_batch(batch)] == [102, 107]


def test_an_emptied_batch_keeps_its_header() -> None:
    for codec in CODECS:
        batch = BatchBuilder(compression=codec, base_offset=10, last_offset_delta=4).build()
        header = verify_batch(batch)
        assert len(batch) == HEADER_SIZE
        assert (header.record_count, header.last_offset, header.base_timestamp) == (0, 14, -1)
        assert decode_batch(batch) == []


def test_builder_rejects_what_it_cannot_write() -> None:
    builder = BatchBuilder()
    with pytest.raises(ValueError, match="empty batch"):
        builder.build()
    builder.append(1, None, b"a", offset_delta=3)
    with pytest.raises(ValueError, match="offset delta"):
        builder.append(1, None, b"b", offset_delta=3)
    with pytest.raises(ValueError, match="timestamp"):
        builder.append(1 << 63, None, b"c")
    with pytest.raises(ValueError, match="null"):
        builder.append(9, None, b"d", [(None, b"x")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="producer_epoch"):
        BatchBuilder(producer_epoch=1 << 15)
    assert [record.timestamp for record in decode_batch(builder.build())] == [1]  # no trace
    assert verify_batch(builder.build()).max_timestamp == 1
    cleaned = BatchBuilder(last_offset_delta=2)
    cleaned.append(1, None, b"e", offset_delta=5)
    with pytest.raises(ValueError, match="last_offset_delta"):
        cleaned.build()


def test_build_is_repeatable_and_appending_continues() -> None:
    builder = BatchBuilder(compression=Compression.LZ4)
    builder.append(1, None, b"a")
    first = builder.build()
    assert builder.build() == first
    builder.append(2, None, b"b")
    assert [record.value for record in decode_batch(builder.build())] == [b"a", b"b"]


@pytest.mark.parametrize("codec", CODECS)
def test_estimated_size_is_exact_uncompressed_and_an_upper_bound_compressed(
    codec: Compression,
) -> None:
    builder = BatchBuilder(compression=codec)
    for i in range(200):
        builder.append(i, os.urandom(8), os.urandom(1000))
    size = len(builder.build())
    estimate = builder.estimated_size_bytes()
    assert size <= estimate
    if codec is Compression.NONE:
        assert size == estimate
    else:
        assert estimate < 1.2 * size  # a bound, but not a useless one
