"""Damaged and malformed batches: each raises the right BatchError, never another exception."""

from __future__ import annotations

import contextlib
import functools
import struct

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.proto import common_pb2
from pykraft.proto.record_batch import (
    BatchBuilder,
    BatchError,
    BatchHeader,
    Compression,
    CorruptBatchError,
    decode_batch,
    iter_batches,
    verify_batch,
)
from pykraft.proto.record_batch.columns import RecordColumns, decode_batch_columns
from tests.unit.proto.batch_helpers import reseal, seal
from tests.unit.proto.test_record_batch_columns import DECODERS as COLUMN_DECODERS
from tests.unit.proto.test_record_batch_columns import check_like_decode_batch, decoding_with
from tests.unit.proto.test_record_batch_reference import EXPECTED_BATCH, RECORD_0, RECORD_1

CORRUPT = common_pb2.CORRUPT_MESSAGE
INVALID = common_pb2.INVALID_RECORD
RECORD_COUNT_AT = 57
_SETTINGS = settings(max_examples=200, deadline=None)


def _small_batch(codec: Compression = Compression.NONE) -> bytes:
    builder = BatchBuilder(compression=codec, base_offset=3)
    builder.append(1000, b"key", b"value", [("h", b"v")])
    builder.append(1001, None, b"other")
    return builder.build()


def _assert_corrupt(batch: bytes) -> None:
    for check in (verify_batch, decode_batch):
        with pytest.raises(CorruptBatchError) as caught:
            check(batch)
        assert caught.value.error_code == CORRUPT


def _assert_invalid(batch: bytes, match: str) -> None:
    """decode_batch and the columnar decoder, compiled and pure Python, refuse it alike."""
    verify_batch(batch)  # the bytes are intact: the CRC matches
    decoders = [decode_batch] + [
        functools.partial(_decode_columns, decoder) for decoder in COLUMN_DECODERS
    ]
    for decode in decoders:
        with pytest.raises(BatchError, match=match) as caught:
            decode(batch)
        assert type(caught.value) is BatchError
        assert caught.value.error_code == INVALID


def _check_columns_alike(batch: bytes) -> None:
    """The columnar decoders, compiled and pure Python, give what decode_batch gives."""
    for decoder in COLUMN_DECODERS:
        with decoding_with(decoder):
            check_like_decode_batch(batch)


def _decode_columns(decoder: str, batch: bytes) -> None:
    with decoding_with(decoder):
        decode_batch_columns(batch, 0, RecordColumns(), 0)


@pytest.mark.parametrize("codec", list(Compression))
def test_every_flipped_byte_after_the_crc_field_fails_the_crc(codec: Compression) -> None:
    batch = _small_batch(codec)
    for position in range(21, len(batch)):
        for mask in (0x01, 0x80, 0xFF):
            damaged = bytearray(batch)
            damaged[position] ^= mask
            _assert_corrupt(bytes(damaged))


def test_a_flipped_crc_byte_fails_the_crc() -> None:
    for position in range(17, 21):
        damaged = bytearray(EXPECTED_BATCH)
        damaged[position] ^= 0x10
        _assert_corrupt(bytes(damaged))


def test_every_truncation_is_corrupt() -> None:
    batch = _small_batch(Compression.GZIP)
    for size in range(len(batch)):
        _assert_corrupt(batch[:size])


def test_bad_magic_is_corrupt() -> None:
    for magic in (0, 1, 3, 0xFF):
        damaged = bytearray(EXPECTED_BATCH)
        damaged[16] = magic
        _assert_corrupt(bytes(damaged))
        with pytest.raises(CorruptBatchError, match="magic"):
            BatchHeader.parse(damaged)


def test_a_length_that_does_not_match_the_bytes_is_corrupt() -> None:
    for delta in (-1, 1, 1000):
        damaged = bytearray(EXPECTED_BATCH + b"\x00")
        (length,) = struct.unpack_from(">i", damaged, 8)
        struct.pack_into(">i", damaged, 8, length + delta)
        _assert_corrupt(bytes(damaged))
    for length in (-1, 0, 48):  # too small to hold the header
        damaged = bytearray(EXPECTED_BATCH)
        struct.pack_into(">i", damaged, 8, length)
        _assert_corrupt(bytes(damaged))


def test_a_record_count_that_does_not_match_is_invalid() -> None:
    for count in (1, 3, 1000, -1):
        damaged = bytearray(EXPECTED_BATCH)
        struct.pack_into(">i", damaged, RECORD_COUNT_AT, count)
        _assert_invalid(reseal(damaged), match="record|count")


def test_trailing_bytes_after_the_last_record_are_invalid() -> None:
    _assert_invalid(reseal(EXPECTED_BATCH + b"\x00"), match="follow the last")


def test_bytes_in_an_empty_batch_are_invalid() -> None:
    damaged = bytearray(EXPECTED_BATCH)
    struct.pack_into(">i", damaged, RECORD_COUNT_AT, 0)
    _assert_invalid(reseal(damaged), match="empty batch")


def _with_records(*records: bytes, last_offset_delta: int = 1) -> bytes:
    head = bytearray(EXPECTED_BATCH[:61])
    struct.pack_into(">i", head, 23, last_offset_delta)
    struct.pack_into(">i", head, RECORD_COUNT_AT, len(records))
    return reseal(head + b"".join(records))


def test_offset_deltas_must_increase_from_zero_within_the_last_delta() -> None:
    # RECORD_1 with OffsetDelta 0 (byte 4: 0x02 -> 0x00), repeating RECORD_0's delta.
    repeated = RECORD_1[:4] + b"\x00" + RECORD_1[5:]
    _assert_invalid(_with_records(RECORD_0, repeated), match="offset delta")
    negative = RECORD_0[:3] + b"\x01" + RECORD_0[4:]  # OffsetDelta -1
    _assert_invalid(_with_records(negative, RECORD_1), match="offset delta")
    _assert_invalid(_with_records(RECORD_0, RECORD_1, last_offset_delta=0), match="offset delta")


def test_a_null_header_key_is_invalid() -> None:
    null_key = RECORD_0[:10] + b"\x01" + RECORD_0[11:]  # HeaderKeyLength 1 -> -1
    _assert_invalid(_with_records(null_key, RECORD_1), match="header key")


def test_a_negative_header_count_and_bad_lengths_are_invalid() -> None:
    negative_count = RECORD_0[:9] + b"\x03" + RECORD_0[10:]  # HeadersCount -2
    _assert_invalid(_with_records(negative_count, RECORD_1), match="header count")
    negative_key = RECORD_1[:5] + b"\x03" + RECORD_1[6:]  # KeyLength -2
    _assert_invalid(_with_records(RECORD_0, negative_key), match="negative length")
    short_record = b"\x0e" + RECORD_1[1:]  # Length 7 where the record holds 8
    _assert_invalid(_with_records(RECORD_0, short_record), match="length says")


def test_overlong_varints_are_invalid() -> None:
    # OffsetDelta 1 padded to six bytes: a varint may take five at most.
    overlong = RECORD_1[:4] + b"\x82\x80\x80\x80\x80\x00" + RECORD_1[5:]
    fixed_length = bytes([(len(overlong) - 1) * 2]) + overlong[1:]
    _assert_invalid(_with_records(RECORD_0, fixed_length), match="varint")


def test_an_unknown_codec_is_invalid() -> None:
    for codec in (5, 6, 7):
        damaged = bytearray(EXPECTED_BATCH)
        struct.pack_into(">h", damaged, 21, codec)
        _assert_invalid(reseal(damaged), match="codec")


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_compressed_bytes_that_do_not_decompress_are_corrupt(codec: Compression) -> None:
    batch = bytearray(_small_batch(codec))
    for position in range(61, len(batch)):
        batch[position] ^= 0x55
    with pytest.raises(CorruptBatchError, match="decompress") as caught:
        decode_batch(reseal(batch))
    assert caught.value.error_code == CORRUPT


def test_a_torn_xerial_snappy_block_is_corrupt() -> None:
    blob = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", 100) + b"\x00" * 10
    batch = seal({"attributes": Compression.SNAPPY}, blob)
    with pytest.raises(CorruptBatchError, match="xerial"):
        decode_batch(batch)
    raw = bytes(cramjam.snappy.compress_raw(b"\x00" * 10))
    with pytest.raises(BatchError):  # ten zero bytes are no record
        decode_batch(seal({"attributes": Compression.SNAPPY}, raw))


@_SETTINGS
@given(data=st.binary(max_size=200), position=st.integers(0, 70))
def test_random_bytes_raise_only_batch_errors(data: bytes, position: int) -> None:
    """Anything but a BatchError escaping (IndexError, struct.error, ...) fails the test."""
    for check in (verify_batch, decode_batch):
        with contextlib.suppress(BatchError):
            check(data, position)
    with contextlib.suppress(CorruptBatchError):
        for found, header in iter_batches(data):
            assert found + header.size_bytes <= len(data)


@_SETTINGS
@given(
    payload=st.binary(max_size=300),
    attributes=st.integers(0, 0x3F),
    record_count=st.integers(-2, 20),
    last_offset_delta=st.integers(-1, 20),
)
def test_random_records_behind_a_valid_crc_raise_only_batch_errors(
    payload: bytes, attributes: int, record_count: int, last_offset_delta: int
) -> None:
    fields = {
        "attributes": attributes,
        "record_count": record_count,
        "last_offset_delta": last_offset_delta,
    }
    batch = seal(fields, payload)
    _check_columns_alike(batch)
    try:
        records = decode_batch(batch)
    except BatchError:
        return
    assert len(records) == record_count


@_SETTINGS
@given(codec=st.sampled_from(list(Compression)), flips=st.lists(st.integers(0, 10_000), max_size=4))
def test_damaged_compressed_records_behind_a_valid_crc_raise_only_batch_errors(
    codec: Compression, flips: list[int]
) -> None:
    batch = bytearray(_small_batch(codec))
    for flip in flips:
        batch[61 + flip % (len(batch) - 61)] ^= 1 + flip % 255
    sealed = reseal(batch)
    _check_columns_alike(sealed)
    with contextlib.suppress(BatchError):
        assert len(decode_batch(sealed)) == verify_batch(sealed).record_count
