"""What the broker does with whole batches: stamp offsets and epochs, walk a log of them."""

from __future__ import annotations

import pytest

from pykraft.proto.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchBuilder,
    Compression,
    CorruptBatchError,
    build_batch,
    decode_batch,
    iter_batches,
    rewrite_offsets,
    verify_batch,
)
from tests.unit.proto.batch_helpers import reseal


def _batch(count: int, codec: Compression = Compression.NONE, base_offset: int = 0) -> bytes:
    rows = [(1000 + i, b"k%d" % i, b"v" * i) for i in range(count)]
    return build_batch(rows, compression=codec, base_offset=base_offset)


@pytest.mark.parametrize("codec", list(Compression))
def test_rewrite_offsets_keeps_the_crc_valid(codec: Compression) -> None:
    batch = _batch(3, codec)
    crc_before = verify_batch(batch).crc
    log = bytearray(b"\xee" * 5 + batch)  # the batch at a position other than 0
    rewrite_offsets(log, 5, base_offset=1_000_000, partition_leader_epoch=42)
    header = verify_batch(log, 5)  # raises if the CRC no longer matched
    assert (header.base_offset, header.partition_leader_epoch) == (1_000_000, 42)
    assert header.crc == crc_before
    assert log[:5] == b"\xee" * 5
    assert [record.offset for record in decode_batch(log, 5)] == [1_000_000, 1_000_001, 1_000_002]


def test_rewrite_offsets_refuses_what_is_not_a_batch() -> None:
    with pytest.raises(CorruptBatchError):
        rewrite_offsets(
            bytearray(_batch(1)[: HEADER_SIZE - 1]), 0, base_offset=1, partition_leader_epoch=1
        )
    with pytest.raises(CorruptBatchError):
        rewrite_offsets(bytearray(HEADER_SIZE), 0, base_offset=1, partition_leader_epoch=1)
    with pytest.raises(ValueError, match="base_offset"):
        rewrite_offsets(bytearray(_batch(1)), 0, base_offset=-1, partition_leader_epoch=1)


def _log(*batches: bytes) -> tuple[bytes, list[int]]:
    positions, position = [], 0
    for batch in batches:
        positions.append(position)
        position += len(batch)
    return b"".join(batches), positions


def test_iter_batches_yields_each_whole_batch() -> None:
    batches = [_batch(1), _batch(4, Compression.GZIP, 1), _batch(2, Compression.ZSTD, 5)]
    log, positions = _log(*batches)
    found = list(iter_batches(log))
    assert [position for position, _ in found] == positions
    assert [header.base_offset for _, header in found] == [0, 1, 5]
    assert [header.size_bytes for _, header in found] == [len(batch) for batch in batches]
    assert list(iter_batches(b"")) == []


def test_iter_batches_stops_silently_at_a_torn_tail() -> None:
    whole, positions = _log(_batch(2), _batch(3, Compression.LZ4, 2))
    tail = _batch(5, Compression.SNAPPY, 5)
    for torn in (1, LOG_OVERHEAD - 1, LOG_OVERHEAD, HEADER_SIZE - 1, HEADER_SIZE, len(tail) - 1):
        for verify in (True, False):
            found = list(iter_batches(whole + tail[:torn], verify=verify))
            assert [position for position, _ in found] == positions
            last_position, last = found[-1]
            assert last_position + last.size_bytes == len(whole)


def test_iter_batches_raises_on_a_damaged_whole_batch_only_when_verifying() -> None:
    first, second = _batch(2), _batch(3, base_offset=2)
    damaged = bytearray(first + second)
    damaged[len(first) + 40] ^= 0xFF  # inside the second batch's CRC-covered bytes
    with pytest.raises(CorruptBatchError, match="crc"):
        list(iter_batches(damaged))
    assert len(list(iter_batches(damaged, verify=False))) == 2


def test_iter_batches_raises_on_a_nonsense_length_or_magic() -> None:
    first = _batch(1)
    for position, value in ((8 + 3, 0x05), (16, 0x01)):  # BatchLength 5; magic 1
        damaged = bytearray(first + first)
        damaged[len(first) + position] = value
        for verify in (True, False):
            iterator = iter_batches(damaged, verify=verify)
            assert next(iterator)[0] == 0
            with pytest.raises(CorruptBatchError):
                next(iterator)


def test_estimated_size_grows_with_each_append() -> None:
    builder = BatchBuilder()
    sizes = [builder.estimated_size_bytes()]
    for i in range(3):
        builder.append(i, None, b"x" * 10)
        sizes.append(builder.estimated_size_bytes())
    assert sizes[0] == HEADER_SIZE
    assert sizes == sorted(set(sizes))
    assert sizes[-1] == len(builder.build())


def test_a_rejected_bytearray_stays_resizable() -> None:
    """No memoryview of the caller's buffer outlives a call, even one that raised."""
    damaged = bytearray(_batch(3, Compression.GZIP))
    damaged[61] ^= 0xFF  # the first byte of the gzip magic
    for batch in (bytes(damaged), reseal(damaged)):  # the CRC fails; gzip fails behind a good CRC
        log = bytearray(batch)
        try:
            decode_batch(log)
        except CorruptBatchError:
            log.extend(b"appended")  # BufferError if a view were still exported
        assert log.endswith(b"appended")
