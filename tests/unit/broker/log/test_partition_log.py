"""PartitionLog behaviour on real files, appending and reading: offsets the leader assigns and the
batches it refuses, reads, timestamp lookup and follower appends. Rolling, retention, truncation
and leader epochs, flushing and reopening are in test_partition_log_segments.py."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest

from pykraft.broker.log import LogConfig, LogError, PartitionLog
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import (
    BatchHeader,
    Compression,
    TimestampType,
    build_batch,
    iter_batches,
    verify_batch,
)

from .support import NOW_MS, batch, fill, open_log, read_all, records


def _headers(data: bytes) -> list[BatchHeader]:
    return [header for _, header in iter_batches(data)]


# --- appending as leader ---


def test_leader_assigns_offsets_and_epoch_whatever_the_client_sent(log: PartitionLog) -> None:
    first = batch([b"a", b"b"], base_offset=1000, partition_leader_epoch=77)
    second = batch([b"c"], base_offset=5)
    info = log.append_as_leader(first + second, leader_epoch=3, now_ms=NOW_MS)
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 2, 2)
    assert info.size_bytes == len(first + second) and info.log_append_time_ms == -1
    data = log.read(0, bytes_max=1 << 20).data
    assert [(h.base_offset, h.partition_leader_epoch) for h in _headers(data)] == [(0, 3), (2, 3)]
    assert [(r.offset, r.value) for r in records(data)] == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert log.log_end_offset == 3


def test_log_append_time_stamps_the_batch_and_keeps_the_crc_valid(directory: Path) -> None:
    config = LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    log = open_log(directory, config)
    info = log.append_as_leader(batch([b"a", b"b"], timestamp=5), leader_epoch=0, now_ms=NOW_MS)
    assert info.log_append_time_ms == NOW_MS and info.max_timestamp == NOW_MS
    data = log.read(0, bytes_max=1 << 20).data
    header = verify_batch(data)
    assert header.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp for r in records(data)] == [NOW_MS, NOW_MS]
    log.close()


def test_compressed_batches_are_stored_as_sent(log: PartitionLog) -> None:
    sent = batch([b"z" * 100] * 5, compression=Compression.ZSTD)
    log.append_as_leader(sent, leader_epoch=0, now_ms=NOW_MS)
    stored = log.read(0, bytes_max=1 << 20).data
    assert len(stored) == len(sent) and stored[16:] == sent[16:]  # after offset and epoch
    assert [r.offset for r in records(stored)] == [0, 1, 2, 3, 4]


def _patched(data: bytes, at: int, fmt: str, value: int) -> bytes:
    """`data` with the field at `at` set, and the CRC computed again so only the field is bad."""
    patched = bytearray(data)
    struct.pack_into(fmt, patched, at, value)
    struct.pack_into(">I", patched, 17, crc32c.crc32c(bytes(patched[21:])))
    return bytes(patched)


def _bad_batches() -> list[tuple[str, bytes, int]]:
    good = batch([b"a", b"b"])
    flipped = bytearray(good)
    flipped[-1] ^= 0xFF
    zstd = batch([b"q" * 50] * 3, compression=Compression.ZSTD)
    return [
        ("crc", bytes(flipped), common_pb2.CORRUPT_MESSAGE),
        ("magic", good[:16] + b"\x01" + good[17:], common_pb2.CORRUPT_MESSAGE),
        ("torn", good[:-3], common_pb2.CORRUPT_MESSAGE),
        ("too large", batch([b"x" * 2000]), common_pb2.MESSAGE_TOO_LARGE),
        ("offset delta", _patched(good, 23, ">i", 5), common_pb2.INVALID_RECORD),
        ("no records", _patched(good, 57, ">i", 0), common_pb2.INVALID_RECORD),
        ("max < first ts", _patched(good, 35, ">q", NOW_MS - 1), common_pb2.INVALID_RECORD),
        ("control", _patched(good, 21, ">h", 0x20), common_pb2.INVALID_RECORD),
        ("codec 6", _patched(good, 21, ">h", 6), common_pb2.INVALID_RECORD),
        ("bad blob", _patched(zstd, 70, ">i", 0x01020304), common_pb2.CORRUPT_MESSAGE),
        ("future", batch([b"a"], timestamp=NOW_MS + 10_000), common_pb2.INVALID_TIMESTAMP),
        ("past", batch([b"a"], timestamp=NOW_MS - 10_000), common_pb2.INVALID_TIMESTAMP),
    ]


@pytest.mark.parametrize(
    ("name", "bad", "code"), _bad_batches(), ids=[name for name, _, _ in _bad_batches()]
)
def test_a_bad_batch_fails_the_whole_request_and_nothing_is_written(
    directory: Path, name: str, bad: bytes, code: int
) -> None:
    config = LogConfig(
        max_message_bytes=1000,
        message_timestamp_before_max_ms=5000,
        message_timestamp_after_max_ms=5000,
    )
    log = open_log(directory, config)
    log.append_as_leader(batch([b"before"]), leader_epoch=0, now_ms=NOW_MS)
    files_before = {p.name: p.read_bytes() for p in directory.iterdir()}
    with pytest.raises(LogError) as raised:
        log.append_as_leader(batch([b"good"]) + bad, leader_epoch=0, now_ms=NOW_MS)
    assert raised.value.error_code == code, str(raised.value)
    assert log.log_end_offset == 1 and read_all(log) == [(0, b"before")]
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == files_before
    log.close()


def test_an_older_leader_epoch_is_fenced(log: PartitionLog) -> None:
    log.append_as_leader(batch([b"a"]), leader_epoch=4, now_ms=NOW_MS)
    with pytest.raises(LogError) as raised:
        log.append_as_leader(batch([b"b"]), leader_epoch=3, now_ms=NOW_MS)
    assert raised.value.error_code == common_pb2.FENCED_LEADER_EPOCH
    assert log.log_end_offset == 1


def test_an_empty_request_appends_nothing(log: PartitionLog) -> None:
    info = log.append_as_leader(b"", leader_epoch=0, now_ms=NOW_MS)
    assert (info.batch_count, info.first_offset, info.last_offset) == (0, 0, -1)
    assert log.log_end_offset == 0


# --- reading ---


def test_read_starts_at_the_batch_holding_the_offset(log: PartitionLog) -> None:
    fill(log, 4)
    result = log.read(7, bytes_max=1)  # offsets 6-8 are the third batch
    assert (result.first_offset, result.next_offset) == (6, 9)
    assert [r.offset for r in records(result.data)] == [6, 7, 8]
    assert result.log_start_offset == 0 and result.high_watermark == 0


def test_read_returns_whole_batches_within_bytes_max(log: PartitionLog) -> None:
    fill(log, 6)
    size = len(log.read(0, bytes_max=1).data)
    result = log.read(0, bytes_max=3 * size + size // 2)
    assert len(_headers(result.data)) == 3 and result.next_offset == 9


def test_read_stops_before_a_batch_reaching_the_upper_offset(log: PartitionLog) -> None:
    fill(log, 4)
    assert log.read(0, bytes_max=1 << 20, upper_offset=8).next_offset == 6
    assert log.read(0, bytes_max=1 << 20, upper_offset=9).next_offset == 9
    empty = log.read(7, bytes_max=1 << 20, upper_offset=8)
    assert (empty.data, empty.first_offset, empty.next_offset) == (b"", 7, 7)


def test_read_outside_the_log_is_out_of_range(log: PartitionLog) -> None:
    fill(log, 2)
    assert log.read(6, bytes_max=100).data == b""
    for offset in (7, 100):
        with pytest.raises(LogError) as raised:
            log.read(offset, bytes_max=100)
        assert raised.value.error_code == common_pb2.OFFSET_OUT_OF_RANGE


def test_reads_cross_segments(log: PartitionLog) -> None:
    fill(log, 40)
    assert len(log.segments()) > 3
    expected = [(3 * n + i, b"v%d-%d" % (n, i)) for n in range(40) for i in range(3)]
    assert read_all(log) == expected
    assert read_all(log, bytes_max=1) == expected


# --- timestamps ---


def test_offset_for_timestamp_finds_the_earliest_record_at_or_after(log: PartitionLog) -> None:
    timestamps = [100, 200, 300, 250, 400] * 6  # not monotonic, over several segments
    for number, timestamp in enumerate(timestamps):
        payload = batch([b"x" * 60, b"y"], timestamp=NOW_MS + timestamp)
        log.append_as_leader(payload, leader_epoch=0, now_ms=NOW_MS)
        assert log.segments()[-1].base_offset <= 2 * number
    assert len(log.segments()) > 2
    assert log.offset_for_timestamp(NOW_MS + 250) == (4, NOW_MS + 300)
    assert log.offset_for_timestamp(NOW_MS + 301) == (8, NOW_MS + 400)
    assert log.offset_for_timestamp(NOW_MS) == (0, NOW_MS + 100)
    assert log.offset_for_timestamp(NOW_MS + 401) is None


def test_offset_for_timestamp_ignores_records_below_the_log_start(log: PartitionLog) -> None:
    for timestamp in (100, 200, 300):
        payload = batch([b"a", b"b"], timestamp=NOW_MS + timestamp)
        log.append_as_leader(payload, leader_epoch=0, now_ms=NOW_MS)
    log.update_high_watermark(6)
    log.delete_records_before(3)
    assert log.offset_for_timestamp(NOW_MS + 100) == (3, NOW_MS + 200)


# --- follower ---


def test_follower_keeps_the_leaders_offsets_and_learns_epochs(log: PartitionLog) -> None:
    leader_batches = batch([b"a", b"b"], base_offset=0, partition_leader_epoch=2) + batch(
        [b"c"], base_offset=2, partition_leader_epoch=5
    )
    info = log.append_as_follower(leader_batches)
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert log.read(0, bytes_max=1 << 20).data == leader_batches
    assert log.end_offset_for_epoch(2) == (2, 2) and log.latest_epoch == 5
    gap = batch([b"d"], base_offset=10, partition_leader_epoch=5)  # the leader's cleaner's gap
    log.append_as_follower(gap)
    assert log.log_end_offset == 11 and read_all(log)[-1] == (10, b"d")


def test_follower_refuses_batches_below_its_end(log: PartitionLog) -> None:
    log.append_as_follower(batch([b"a", b"b"], base_offset=0))
    with pytest.raises(LogError) as raised:
        log.append_as_follower(batch([b"x"], base_offset=1))
    assert raised.value.error_code == common_pb2.UNKNOWN_SERVER_ERROR
    with pytest.raises(LogError) as raised:
        log.append_as_follower(batch([b"x"], base_offset=2)[:-1])
    assert raised.value.error_code == common_pb2.CORRUPT_MESSAGE
    assert log.log_end_offset == 2


@pytest.mark.parametrize("compression", [Compression.NONE, Compression.LZ4])
def test_a_compacted_topic_refuses_records_without_a_key(
    tmp_path: Path, compression: Compression
) -> None:
    config = LogConfig(cleanup_policy=("compact",))
    log = PartitionLog.open(tmp_path / "c-0", config, now_ms=NOW_MS)
    keyed = build_batch([(NOW_MS, b"k", b"v")], compression=compression)
    keyless = build_batch([(NOW_MS, b"k", b"v"), (NOW_MS, None, b"x")], compression=compression)
    with pytest.raises(LogError) as raised:
        log.append_as_leader(keyed + keyless, leader_epoch=0, now_ms=NOW_MS)
    assert raised.value.error_code == common_pb2.INVALID_RECORD
    assert "without a key" in str(raised.value)
    assert log.log_end_offset == 0  # nothing of the request was written
    log.append_as_leader(keyed, leader_epoch=0, now_ms=NOW_MS)
    assert read_all(log) == [(0, b"v")]
    log.close()
