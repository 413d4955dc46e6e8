"""PartitionLog behaviour on real files: offsets the leader assigns, reads, timestamp lookup,
rolling, retention, truncation and leader epochs, follower appends, flushing and reopening."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import crc32c
import pytest

from pykraft.broker.log import LogConfig, LogError, PartitionLog
from pykraft.broker.log.recovery import CLEAN_SHUTDOWN_FILE
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import (
    BatchHeader,
    Compression,
    TimestampType,
    build_batch,
    iter_batches,
    verify_batch,
)

from .support import NOW_MS, SMALL, batch, open_log, read_all, records


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "orders-0"


@pytest.fixture
def log(directory: Path) -> Iterator[PartitionLog]:
    opened = open_log(directory)
    yield opened
    opened.close()


def _fill(log: PartitionLog, count: int, *, per_batch: int = 3, epoch: int = 0) -> None:
    for number in range(count):
        values = [b"v%d-%d" % (number, i) for i in range(per_batch)]
        log.append_as_leader(batch(values), leader_epoch=epoch, now_ms=NOW_MS)


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
    _fill(log, 4)
    result = log.read(7, bytes_max=1)  # offsets 6-8 are the third batch
    assert (result.first_offset, result.next_offset) == (6, 9)
    assert [r.offset for r in records(result.data)] == [6, 7, 8]
    assert result.log_start_offset == 0 and result.high_watermark == 0


def test_read_returns_whole_batches_within_bytes_max(log: PartitionLog) -> None:
    _fill(log, 6)
    size = len(log.read(0, bytes_max=1).data)
    result = log.read(0, bytes_max=3 * size + size // 2)
    assert len(_headers(result.data)) == 3 and result.next_offset == 9


def test_read_stops_before_a_batch_reaching_the_upper_offset(log: PartitionLog) -> None:
    _fill(log, 4)
    assert log.read(0, bytes_max=1 << 20, upper_offset=8).next_offset == 6
    assert log.read(0, bytes_max=1 << 20, upper_offset=9).next_offset == 9
    empty = log.read(7, bytes_max=1 << 20, upper_offset=8)
    assert (empty.data, empty.first_offset, empty.next_offset) == (b"", 7, 7)


def test_read_outside_the_log_is_out_of_range(log: PartitionLog) -> None:
    _fill(log, 2)
    assert log.read(6, bytes_max=100).data == b""
    for offset in (7, 100):
        with pytest.raises(LogError) as raised:
            log.read(offset, bytes_max=100)
        assert raised.value.error_code == common_pb2.OFFSET_OUT_OF_RANGE


def test_reads_cross_segments(log: PartitionLog) -> None:
    _fill(log, 40)
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


# --- rolling ---


def test_segments_roll_before_exceeding_segment_bytes(log: PartitionLog) -> None:
    _fill(log, 40)
    infos = log.segments()
    assert all(info.size_bytes <= SMALL.segment_bytes for info in infos)
    assert [info.base_offset for info in infos[1:]] == [info.last_offset + 1 for info in infos[:-1]]


def test_segments_roll_when_record_time_passes_segment_ms(directory: Path) -> None:
    log = open_log(directory, LogConfig(segment_ms=1000))
    for timestamp in (0, 500, 1000, 1001, 1500, 2002):
        payload = batch([b"a"], timestamp=NOW_MS + timestamp)
        log.append_as_leader(payload, leader_epoch=0, now_ms=NOW_MS + 5000)
    assert [info.base_offset for info in log.segments()] == [0, 3, 5]
    log.close()


@pytest.mark.parametrize(("step_ms", "bases"), [(0, [0, 4]), (1, [0, 3, 6])])
def test_segments_roll_when_an_index_is_full(
    directory: Path, step_ms: int, bases: list[int]
) -> None:
    """24 index bytes hold 3 offset-index entries and 2 time-index entries. Every batch but a
    segment's first gets an offset-index entry; a time-index entry needs a larger timestamp."""
    log = open_log(directory, LogConfig(segment_index_bytes=24, index_interval_bytes=0))
    for number in range(8):
        payload = batch([b"a"], timestamp=NOW_MS + step_ms * number)
        log.append_as_leader(payload, leader_epoch=0, now_ms=NOW_MS)
    assert [info.base_offset for info in log.segments()] == bases
    log.close()


def test_roll_starts_a_segment_at_the_log_end_unless_the_active_one_is_empty(
    log: PartitionLog,
) -> None:
    _fill(log, 1)
    log.roll(now_ms=NOW_MS)
    log.roll(now_ms=NOW_MS)
    assert [info.base_offset for info in log.segments()] == [0, 3]
    assert log.recovery_point == 3  # the finished segment was fsynced
    _fill(log, 1)
    assert log.segments()[-1].last_offset == 5


# --- retention ---


def _aged_log(directory: Path, config: LogConfig) -> PartitionLog:
    log = open_log(directory, config)
    for age in range(20):
        key = b"key-%d" % age  # keyed: a compacted log refuses records without a key
        payload = build_batch([(NOW_MS + 1000 * age, key, b"x" * 100)])
        log.append_as_leader(payload, leader_epoch=0, now_ms=NOW_MS + 20_000)
    return log


def test_retention_by_time_deletes_old_segments_below_the_high_watermark(directory: Path) -> None:
    log = _aged_log(directory, LogConfig(segment_bytes=600, retention_ms=10_000))
    count = len(log.segments())
    assert log.delete_old_segments(now_ms=NOW_MS + 10**9) == 0  # high watermark still 0
    log.update_high_watermark(log.log_end_offset)
    deleted = log.delete_old_segments(now_ms=NOW_MS + 25_000)
    infos = log.segments()
    assert deleted > 0 and len(infos) == count - deleted
    assert all(NOW_MS + 25_000 - info.largest_timestamp <= 10_000 for info in infos[:1])
    assert log.log_start_offset == infos[0].base_offset
    assert read_all(log)[0][0] == log.log_start_offset
    assert log.delete_old_segments(now_ms=NOW_MS + 10**9) == count - deleted - 1  # active stays
    assert len(log.segments()) == 1 and log.segments()[0].size_bytes > 0
    log.close()


def test_retention_by_bytes_keeps_the_log_within_the_limit(directory: Path) -> None:
    log = _aged_log(directory, LogConfig(segment_bytes=600, retention_bytes=1500))
    log.update_high_watermark(log.log_end_offset)
    total = sum(info.size_bytes for info in log.segments())
    assert total > 1500 and log.delete_old_segments(now_ms=NOW_MS) > 0
    sizes = [info.size_bytes for info in log.segments()]
    assert sum(sizes) - sizes[0] < 1500 <= sum(sizes)  # Kafka's rule: never below the limit
    log.close()


def test_compact_policy_deletes_nothing_by_time_or_size(directory: Path) -> None:
    config = LogConfig(
        segment_bytes=600, retention_ms=1, retention_bytes=1, cleanup_policy=("compact",)
    )
    log = _aged_log(directory, config)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments(now_ms=NOW_MS + 10**9) == 0
    log.close()


def test_delete_records_moves_the_log_start_and_drops_whole_segments(log: PartitionLog) -> None:
    _fill(log, 30)
    with pytest.raises(LogError) as raised:
        log.delete_records_before(10)
    assert raised.value.error_code == common_pb2.OFFSET_OUT_OF_RANGE  # above the high watermark
    log.update_high_watermark(60)
    second_base = log.segments()[1].base_offset
    log.delete_records_before(second_base + 1)
    assert log.log_start_offset == second_base + 1
    assert log.segments()[0].base_offset == second_base
    with pytest.raises(LogError):
        log.read(second_base, bytes_max=100)
    assert read_all(log)[0][0] == second_base + 1


# --- high watermark, truncation, epochs ---


def test_high_watermark_never_moves_back_nor_past_the_end(log: PartitionLog) -> None:
    _fill(log, 2)
    log.update_high_watermark(4)
    log.update_high_watermark(2)
    assert log.high_watermark == 4
    with pytest.raises(AssertionError):
        log.update_high_watermark(7)


def test_truncate_drops_everything_from_the_offset(log: PartitionLog) -> None:
    _fill(log, 10, epoch=1)
    _fill(log, 10, epoch=2)
    log.update_high_watermark(50)
    expected = read_all(log)
    log.truncate_to(34)  # inside the batch 33-35: it goes whole
    assert log.log_end_offset == 33 and log.high_watermark == 33
    assert log.end_offset_for_epoch(2) == (2, 33)
    assert read_all(log) == expected[:33]
    log.truncate_to(12)
    assert log.log_end_offset == 12 and log.end_offset_for_epoch(2) == (-1, -1)
    assert log.end_offset_for_epoch(1) == (1, 12)
    _fill(log, 1, epoch=3)
    assert read_all(log)[-1] == (14, b"v0-2") and log.log_end_offset == 15


def test_truncate_below_the_log_start_empties_the_log(log: PartitionLog) -> None:
    _fill(log, 10)
    log.update_high_watermark(30)
    log.delete_records_before(20)
    log.truncate_to(5)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (5, 5, 5)
    _fill(log, 1)
    assert read_all(log) == [(5, b"v0-0"), (6, b"v0-1"), (7, b"v0-2")]


def test_end_offset_for_epoch_follows_leader_changes(log: PartitionLog) -> None:
    for epoch, count in ((1, 2), (3, 1), (4, 3)):
        _fill(log, count, epoch=epoch)
    assert log.end_offset_for_epoch(1) == (1, 6)
    assert log.end_offset_for_epoch(2) == (1, 6)
    assert log.end_offset_for_epoch(3) == (3, 9)
    assert log.end_offset_for_epoch(4) == (4, 18)
    assert log.end_offset_for_epoch(5) == (-1, -1)
    assert log.end_offset_for_epoch(0) == (0, 0)


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


# --- flushing, closing, reopening ---


def test_no_fsync_by_default_and_flush_moves_the_recovery_point(log: PartitionLog) -> None:
    _fill(log, 3)
    assert log.recovery_point == 0
    log.update_high_watermark(5)
    log.flush()
    assert log.recovery_point == 9
    text = (log.directory / "replication-offset-checkpoint").read_text()
    assert text == "0\n1\norders 0 5\n"


def test_flush_messages_and_flush_ms(directory: Path) -> None:
    log = open_log(directory, LogConfig(flush_messages=5, flush_ms=1000))
    _fill(log, 1)
    assert log.recovery_point == 0
    _fill(log, 1)  # six messages
    assert log.recovery_point == 6
    log.append_as_leader(batch([b"t"]), leader_epoch=0, now_ms=NOW_MS + 999)
    assert log.recovery_point == 6
    log.append_as_leader(batch([b"t"]), leader_epoch=0, now_ms=NOW_MS + 1000)
    assert log.recovery_point == 8
    log.append_as_follower(batch([b"f"], base_offset=8))
    log.maybe_flush(now_ms=NOW_MS + 1500)
    assert log.recovery_point == 8
    log.maybe_flush(now_ms=NOW_MS + 2000)
    assert log.recovery_point == 9
    log.close()


def test_reopen_after_close_keeps_everything(directory: Path) -> None:
    log = open_log(directory)
    _fill(log, 20, epoch=2)
    _fill(log, 5, epoch=4)
    log.update_high_watermark(70)
    log.delete_records_before(10)
    before = (read_all(log), log.segments(), log.epoch_entries(), log.log_end_offset)
    log.close()
    assert (directory / CLEAN_SHUTDOWN_FILE).exists()
    with pytest.raises(LogError):
        log.append_as_leader(batch([b"late"]), leader_epoch=4, now_ms=NOW_MS)
    reopened = open_log(directory)
    assert reopened.had_clean_shutdown and not (directory / CLEAN_SHUTDOWN_FILE).exists()
    assert (read_all(reopened), reopened.segments(), reopened.epoch_entries()) == before[:3]
    assert (reopened.log_start_offset, reopened.high_watermark) == (10, 70)
    assert reopened.log_end_offset == before[3] == reopened.recovery_point
    reopened.append_as_leader(batch([b"more"]), leader_epoch=4, now_ms=NOW_MS)
    assert read_all(reopened)[-1] == (75, b"more")
    reopened.close()


def test_a_directory_that_is_not_a_partition_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        open_log(tmp_path / "not_a_partition")


# --- threads ---


def test_reads_run_alongside_appends_and_retention(directory: Path) -> None:
    config = LogConfig(segment_bytes=2048, retention_bytes=8192)
    log = open_log(directory, config)
    stop = threading.Event()
    problems: list[BaseException] = []
    reads: list[int] = []

    def reader() -> None:
        while not stop.wait(0.0005):  # paced, so the GIL reaches the writer
            reads.append(1)
            try:
                start = log.log_start_offset
                result = log.read(start, bytes_max=4096)
                offsets = [r.offset for r in records(result.data)]
                assert offsets == list(range(result.first_offset, result.next_offset))
            except LogError as error:
                if error.error_code != common_pb2.OFFSET_OUT_OF_RANGE:  # retention raced us
                    problems.append(error)
            except BaseException as error:
                problems.append(error)
                return

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    try:
        for number in range(200):
            log.append_as_leader(batch([b"r%d" % number] * 4), leader_epoch=0, now_ms=NOW_MS)
            log.update_high_watermark(log.log_end_offset)
            log.delete_old_segments(now_ms=NOW_MS)
            assert time.monotonic() < deadline
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=10)
    assert not problems, problems[:3]
    assert len(reads) > 20 and log.log_start_offset > 0 and log.log_end_offset == 800
    log.close()


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
