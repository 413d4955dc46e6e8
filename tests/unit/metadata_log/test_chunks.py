"""Chunked encoding (`encode_chunks`, `split_batch`): what snapshots and MetadataFetch streams are
made of. Every chunk decodes alone, stays within its limit unless one record alone is larger,
and the chunks in order hold exactly the records that were cut, for any valid history."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykraft.metadata_log import (
    CorruptRecordError,
    decode_records,
    encode_chunks,
    encode_records,
    split_batch,
)
from pykraft.metadata_log.records import NoOpRecord, ProducerIdsRecord, Record

from .strategies import valid_histories

# Small limits, so that histories of a few records get cut many ways.
LIMITS = st.integers(min_value=1, max_value=400)


def _single_record_bytes(record: Record) -> int:
    return len(encode_records([record]))


@given(valid_histories(), LIMITS)
def test_chunks_stay_within_the_limit_and_hold_the_records_in_order(
    records: list[Record], bytes_max: int
) -> None:
    chunks = list(encode_chunks(iter(records), bytes_max))
    decoded = [decode_records(chunk) for chunk in chunks]
    assert [record for part in decoded for record in part] == records
    for chunk, part in zip(chunks, decoded, strict=True):
        if len(part) != 1:
            assert len(chunk) <= bytes_max
        else:  # one record alone may be over the limit, never two
            assert len(chunk) <= max(bytes_max, _single_record_bytes(part[0]))
    assert all(decoded) or decoded == [[]]


@given(valid_histories(), LIMITS)
def test_a_split_batch_is_its_records_in_order_with_their_indexes(
    records: list[Record], bytes_max: int
) -> None:
    data = encode_records(records)
    pieces = list(split_batch(data, bytes_max))
    rebuilt: list[Record] = []
    for index, chunk in pieces:
        assert index == len(rebuilt)
        part = decode_records(chunk)
        assert len(chunk) <= bytes_max or len(part) == 1 or chunk == data
        rebuilt += part
    assert rebuilt == records
    # Cutting re-frames the same record bytes: the same cut as encoding in chunks.
    if len(data) > bytes_max:
        assert [chunk for _, chunk in pieces] == list(encode_chunks(records, bytes_max))


def test_no_records_give_one_empty_chunk() -> None:
    assert list(encode_chunks([], 100)) == [encode_records([])]


def test_a_badly_framed_batch_is_refused() -> None:
    data = encode_records([NoOpRecord(), ProducerIdsRecord(1, 1, 1000), NoOpRecord()])
    with pytest.raises(CorruptRecordError):
        list(split_batch(data[:-1], 8))  # the last record runs past the end
    with pytest.raises(CorruptRecordError):
        list(split_batch(data + b"\x00", 8))  # garbage after the last record
