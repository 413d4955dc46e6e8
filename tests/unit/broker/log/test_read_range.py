"""`PartitionLog.read_range`: the batches `read` returns, as a range of a segment file on a
duplicated descriptor, which stays readable after the log closes and deletes the segment."""

from __future__ import annotations

import errno
import os

import pytest

from pykraft.broker.log import FileRange, PartitionLog

from .support import fill


@pytest.mark.parametrize("bytes_max", [0, 100, 300, 1 << 20])
@pytest.mark.parametrize("offset", [0, 4, 9, 30])
def test_a_range_holds_the_bytes_read_returns(
    log: PartitionLog, offset: int, bytes_max: int
) -> None:
    fill(log, 15)
    log.update_high_watermark(40)
    for upper in (None, log.high_watermark):
        expected = log.read(offset, bytes_max=bytes_max, upper_offset=upper)
        found = log.read_range(offset, bytes_max=bytes_max, upper_offset=upper)
        assert isinstance(found.data, FileRange)
        try:
            assert found.data.read() == expected.data
            assert found.data.length == len(expected.data)
        finally:
            found.data.close()
        assert (found.first_offset, found.next_offset) == (
            expected.first_offset,
            expected.next_offset,
        )
        assert (found.high_watermark, found.log_start_offset) == (40, 0)


def test_nothing_below_the_upper_offset_is_no_range(log: PartitionLog) -> None:
    fill(log, 2)
    found = log.read_range(3, bytes_max=1000, upper_offset=3)
    assert found.data is None and found.first_offset == found.next_offset == 3
    assert log.read_range(6, bytes_max=1000).data is None  # the log end


def test_a_range_outlives_the_segment_being_closed_and_deleted(log: PartitionLog) -> None:
    fill(log, 15)
    expected = log.read(0, bytes_max=1 << 20).data
    found = log.read_range(0, bytes_max=1 << 20)
    assert isinstance(found.data, FileRange)
    path = log.segments()[0].path
    log.close()
    path.unlink()
    try:
        assert found.data.read() == expected
    finally:
        found.data.close()
    with pytest.raises(OSError):
        os.fstat(found.data.fd if found.data.fd >= 0 else 10**6)
    found.data.close()  # idempotent


def test_out_of_descriptors_the_bytes_are_read(
    log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(log, 4)

    def no_descriptor(fd: int) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(os, "dup", no_descriptor)
    found = log.read_range(0, bytes_max=1 << 20)
    assert found.data == log.read(0, bytes_max=1 << 20).data
