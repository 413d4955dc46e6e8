"""PartitionLog over time on real files: rolling segments, retention and deleted records, the
high watermark, truncation and leader epochs, flushing, closing and reopening, and reads running
alongside appends and retention."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from pykraft.broker.log import LogConfig, LogError, PartitionLog
from pykraft.broker.log.dir_checkpoints import CLEAN_SHUTDOWN_FILE
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import build_batch

from .support import NOW_MS, SMALL, batch, fill, open_log, read_all, records

# --- rolling ---


def test_segments_roll_before_exceeding_segment_bytes(log: PartitionLog) -> None:
    fill(log, 40)
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
    fill(log, 1)
    log.roll(now_ms=NOW_MS)
    log.roll(now_ms=NOW_MS)
    assert [info.base_offset for info in log.segments()] == [0, 3]
    assert log.recovery_point == 3  # the finished segment was fsynced
    fill(log, 1)
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
    fill(log, 30)
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
    fill(log, 2)
    log.update_high_watermark(4)
    log.update_high_watermark(2)
    assert log.high_watermark == 4
    with pytest.raises(AssertionError):
        log.update_high_watermark(7)


def test_truncate_drops_everything_from_the_offset(log: PartitionLog) -> None:
    fill(log, 10, epoch=1)
    fill(log, 10, epoch=2)
    log.update_high_watermark(50)
    expected = read_all(log)
    log.truncate_to(34)  # inside the batch 33-35: it goes whole
    assert log.log_end_offset == 33 and log.high_watermark == 33
    assert log.end_offset_for_epoch(2) == (2, 33)
    assert read_all(log) == expected[:33]
    log.truncate_to(12)
    assert log.log_end_offset == 12 and log.end_offset_for_epoch(2) == (-1, -1)
    assert log.end_offset_for_epoch(1) == (1, 12)
    fill(log, 1, epoch=3)
    assert read_all(log)[-1] == (14, b"v0-2") and log.log_end_offset == 15


def test_truncate_below_the_log_start_empties_the_log(log: PartitionLog) -> None:
    fill(log, 10)
    log.update_high_watermark(30)
    log.delete_records_before(20)
    log.truncate_to(5)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (5, 5, 5)
    fill(log, 1)
    assert read_all(log) == [(5, b"v0-0"), (6, b"v0-1"), (7, b"v0-2")]


def test_end_offset_for_epoch_follows_leader_changes(log: PartitionLog) -> None:
    for epoch, count in ((1, 2), (3, 1), (4, 3)):
        fill(log, count, epoch=epoch)
    assert log.end_offset_for_epoch(1) == (1, 6)
    assert log.end_offset_for_epoch(2) == (1, 6)
    assert log.end_offset_for_epoch(3) == (3, 9)
    assert log.end_offset_for_epoch(4) == (4, 18)
    assert log.end_offset_for_epoch(5) == (-1, -1)
    assert log.end_offset_for_epoch(0) == (0, 0)


# --- flushing, closing, reopening ---


def test_no_fsync_by_default_and_flush_moves_the_recovery_point(log: PartitionLog) -> None:
    fill(log, 3)
    assert log.recovery_point == 0
    log.update_high_watermark(5)
    log.flush()
    assert log.recovery_point == 9
    log.close()  # a log on its own keeps its checkpoint files and writes them at close
    text = (log.directory / "replication-offset-checkpoint").read_text()
    assert text == "0\n1\norders 0 5\n"


def test_flush_messages_and_flush_ms(directory: Path) -> None:
    log = open_log(directory, LogConfig(flush_messages=5, flush_ms=1000))
    fill(log, 1)
    assert log.recovery_point == 0
    fill(log, 1)  # six messages
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
    fill(log, 20, epoch=2)
    fill(log, 5, epoch=4)
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
