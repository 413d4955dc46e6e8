"""The compiled consumer-record construction (`_consumer_records.pyx`) against its pure-Python
twin `fetch_buffer.consumer_records_python`: the same ConsumerRecords, headers as pairs, only
the records at or after the position, on random decoded batches."""

from __future__ import annotations

import gc

from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.client.consumer import fetch_buffer
from pykraft.client.types import ConsumerRecord
from pykraft.proto import extensions
from pykraft.proto.record_batch import BatchBuilder, Compression, TimestampType, decode_batch

_consumer_records = extensions.compiled("pykraft.client.consumer._consumer_records")

headers = st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3)
rows = st.lists(
    st.tuples(
        st.integers(0, 1 << 45),
        st.none() | st.binary(max_size=30),
        st.none() | st.binary(max_size=3000),
        headers,
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=150, deadline=None)
@given(
    records=rows,
    base_offset=st.integers(0, 1 << 62),
    skip=st.integers(-1, 25),
    timestamp_type=st.sampled_from(list(TimestampType)),
    topic=st.text(max_size=20),
    partition=st.integers(0, 1 << 31),
)
def test_both_build_the_same_consumer_records(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    base_offset: int,
    skip: int,
    timestamp_type: TimestampType,
    topic: str,
    partition: int,
) -> None:
    builder = BatchBuilder(
        compression=Compression.NONE, base_offset=base_offset, timestamp_type=timestamp_type
    )
    for timestamp, key, value, record_headers in records:
        builder.append(timestamp, key, value, record_headers)
    decoded = decode_batch(builder.build())
    position = base_offset + skip
    arguments = (topic, partition, timestamp_type, decoded, position)
    compiled = _consumer_records.consumer_records(*arguments)
    assert compiled == fetch_buffer.consumer_records_python(*arguments)
    assert all(type(row) is ConsumerRecord and not gc.is_tracked(row) for row in compiled)
    assert [row.offset for row in compiled] == [
        base_offset + i for i in range(len(records)) if base_offset + i >= position
    ]
    assert [row.headers for row in compiled] == [
        tuple(record_headers)
        for i, (_, _, _, record_headers) in enumerate(records)
        if base_offset + i >= position
    ]
