"""Idempotent producers on a partition log: snapshots of the state (Kafka's layout, damage
refused), retries answered with their original offsets, and the state following the log through
follower appends, truncation, restarts, crashes, retention and the cleaner."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from pykraft.broker.log import LogConfig, LogError, PartitionLog
from pykraft.broker.log.checkpoints import RECOVERY_POINT_FILE
from pykraft.broker.log.cleaner import clean_log
from pykraft.broker.log.dir_checkpoints import CLEAN_SHUTDOWN_FILE
from pykraft.broker.log.producer_snapshots import snapshot_path
from pykraft.broker.log.producer_state import (
    SEQUENCE_MAX,
    BatchMetadata,
    ProducerEntry,
    ProducerStateManager,
    SnapshotCorruptError,
    next_sequence,
)
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import TimestampType, build_batch, iter_batches

from .idempotent import ONE_BY_ONE, append, crash, idempotent_batch, state_after
from .support import NOW_MS, open_log, read_all

# --- 1. snapshots ---


def test_a_snapshot_holds_every_cached_batch_in_kafkas_layout() -> None:
    state = state_after([*ONE_BY_ONE, (2, 3, SEQUENCE_MAX - 1, 4), (1, 0, 6, 2)])
    data = state.encode_snapshot()
    entries = 5 + 1
    assert data[:2] == b"\x00\x01", "version 1"
    assert int.from_bytes(data[6:10], "big") == entries
    assert len(data) == 10 + entries * 46
    loaded = ProducerStateManager.from_snapshot(data, state.end_offset)
    assert loaded.entries() == state.entries()
    assert loaded.end_offset == state.end_offset
    assert loaded.encode_snapshot() == data


def _flip(data: bytes, position: int) -> bytes:
    return data[:position] + bytes([data[position] ^ 0x40]) + data[position + 1 :]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: _flip(d, 30), "crc"),
        (lambda d: _flip(d, 3), "crc"),
        (lambda d: d[:-5], "crc"),
        (lambda d: b"\x00\x02" + d[2:], "version"),
        (lambda d: d[:4], "too short"),
    ],
)
def test_a_damaged_snapshot_is_refused(damage: Callable[[bytes], bytes], message: str) -> None:
    data = state_after([(1, 0, 0, 2), (2, 0, 0, 1)]).encode_snapshot()
    with pytest.raises(SnapshotCorruptError, match=message):
        ProducerStateManager.from_snapshot(damage(data), 3)


def test_a_snapshot_of_batches_past_its_own_offset_is_refused() -> None:
    data = state_after([(1, 0, 0, 2), (2, 0, 0, 1)]).encode_snapshot()
    with pytest.raises(SnapshotCorruptError, match="out of range"):
        ProducerStateManager.from_snapshot(data, 2)


# --- 2. the partition log ---

MANY = 20  # one-record batches per producer: more than a segment of SMALL (13 fit)


def replayed(log: PartitionLog) -> tuple[ProducerEntry, ...]:
    """The state a fresh replay of every batch in the log (from offset 0) builds."""
    state = ProducerStateManager(0)
    offset = 0
    while offset < log.log_end_offset:
        result = log.read(offset, bytes_max=1 << 20)
        state.apply([header for _, header in iter_batches(result.data)])
        offset = result.next_offset
    return state.entries()


def fill(log: PartitionLog, producers: Sequence[int], batches: int) -> None:
    """`batches` one-record batches per producer, interleaved, each in sequence."""
    for sequence in range(batches):
        for producer_id in producers:
            append(log, (producer_id, 0, sequence, 1))


def test_a_retry_gets_the_original_offsets_and_writes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert append(log, (1, 0, 0, 3)) == (0, 2, False)
    assert append(log, (2, 0, 0, 1)) == (3, 3, False)
    records = read_all(log)
    assert append(log, (1, 0, 0, 3)) == (0, 2, True)
    assert log.log_end_offset == 4 and read_all(log) == records
    assert append(log, (1, 0, 3, 1)) == (4, 4, False)
    log.close()


def test_a_duplicate_on_a_log_append_time_topic_answers_the_original_append_time(
    tmp_path: Path,
) -> None:
    config = LogConfig(message_timestamp_type=TimestampType.LOG_APPEND_TIME)
    log = PartitionLog.open(tmp_path / "t-0", config, now_ms=NOW_MS)
    first = log.append_as_leader(idempotent_batch(1, 0, 0), leader_epoch=0, now_ms=NOW_MS + 5)
    again = log.append_as_leader(idempotent_batch(1, 0, 0), leader_epoch=0, now_ms=NOW_MS + 9)
    assert again.duplicate and again.log_append_time_ms == first.log_append_time_ms == NOW_MS + 5
    log.close()


def test_a_refused_request_writes_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    append(log, (1, 0, 0, 2))
    with pytest.raises(LogError) as raised:
        append(log, (2, 0, 0, 1), (1, 0, 5, 1))
    assert raised.value.error_code == common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 2
    assert [entry.producer_id for entry in log.producers()] == [1]
    assert append(log, (2, 0, 0, 1), (1, 0, 2, 1)) == (2, 3, False)
    log.close()


def test_a_new_leader_dedupes_a_retry_of_what_the_old_leader_wrote(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader-0")
    follower = open_log(tmp_path / "follower-0")
    append(leader, (1, 0, 0, 2))
    append(leader, (1, 0, 2, 3))
    follower.append_as_follower(leader.read(0, bytes_max=1 << 20).data)
    assert follower.producers() == leader.producers()
    leader.close()
    # The old leader's answer to the second batch was lost; the producer retries on the new one.
    assert append(follower, (1, 0, 2, 3)) == (2, 4, True)
    assert append(follower, (1, 0, 5, 1)) == (5, 5, False)
    follower.close()


def test_truncation_forgets_the_batches_it_drops(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, [1, 2], MANY)
    assert len(log.segments()) > 2 and len(log.producer_snapshot_offsets()) > 1
    offset = log.producer_snapshot_offsets()[0] + 3  # inside the second segment
    log.truncate_to(offset)
    assert all(snapshot <= offset for snapshot in log.producer_snapshot_offsets())
    assert log.producers() == replayed(log)
    # Both producers' later batches are gone: their retries are new batches now.
    entry = log.producers()[-1]
    retry = (entry.producer_id, 0, next_sequence(entry.last_sequence), 1)
    assert append(log, retry) == (offset, offset, False)
    assert log.producers() == replayed(log)
    log.close()


def test_truncating_fully_forgets_every_producer(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, [1], MANY)
    log.truncate_fully_and_start_at(100)
    assert log.producers() == () and log.producer_snapshot_offsets() == []
    with pytest.raises(LogError) as raised:
        append(log, (1, 0, MANY, 1))
    assert raised.value.error_code == common_pb2.UNKNOWN_PRODUCER_ID
    log.close()
    log = open_log(tmp_path / "t-0")
    assert log.producers() == ()
    log.close()


def test_a_clean_close_snapshots_at_the_end_and_open_loads_it(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    fill(log, [1, 2, 3], 4)
    before, end = log.producers(), log.log_end_offset
    log.close()
    assert snapshot_path(directory, end).exists()
    log = open_log(directory)
    assert log.producers() == before
    log.close()
    # The snapshot is what open reads: a producer only it knows of is there after opening.
    extra = ProducerEntry(99, 4, (BatchMetadata(7, 7, 0, 0, NOW_MS),))
    snapshot_path(directory, end).write_bytes(
        ProducerStateManager(end, [*before, extra]).encode_snapshot()
    )
    log = open_log(directory)
    assert 99 in [entry.producer_id for entry in log.producers()]
    log.close()


def test_a_corrupt_snapshot_is_deleted_and_the_state_rebuilt(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    fill(log, [1, 2], MANY)
    before, end = log.producers(), log.log_end_offset
    log.close()
    newest = snapshot_path(directory, end)
    newest.write_bytes(_flip(newest.read_bytes(), 20))
    log = open_log(directory)
    assert log.producers() == before
    assert end not in log.producer_snapshot_offsets()
    log.close()


def test_a_restart_after_a_crash_without_snapshots_rebuilds_the_same_state(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    fill(log, [1, 2, 3], MANY)
    before = log.producers()
    crash(log)
    for path in directory.glob("*.snapshot"):
        path.unlink()
    assert not (directory / CLEAN_SHUTDOWN_FILE).exists()
    log = open_log(directory)
    assert not log.had_clean_shutdown
    assert log.producers() == before
    assert append(log, (3, 0, MANY - 1, 1))[2], "the last batch is still recognised"
    log.close()


def test_a_restart_loads_the_last_roll_snapshot_and_replays_the_tail(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    fill(log, [1, 2], MANY)
    last_roll = log.producer_snapshot_offsets()[-1]
    assert last_roll == log.segments()[-1].base_offset < log.log_end_offset
    before, end = log.producers(), log.log_end_offset
    crash(log)
    stale = ProducerStateManager(end + 5, [ProducerEntry(42, 0, (BatchMetadata(0, 0, 0, 0, 0),))])
    snapshot_path(directory, end + 5).write_bytes(stale.encode_snapshot())
    log = open_log(directory)
    assert log.producers() == before
    assert log.producer_snapshot_offsets()[-1] == last_roll, "the one past the end went"
    log.close()


def test_a_crash_that_loses_the_tail_forgets_it_and_the_snapshots_past_it(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    fill(log, [1, 2], MANY)
    end = log.log_end_offset
    log.close()  # a snapshot at the end, then the tail is lost as if never fsynced
    (directory / CLEAN_SHUTDOWN_FILE).unlink()
    (directory / RECOVERY_POINT_FILE).unlink()
    active = sorted(directory.glob("*.log"))[-1]
    os.truncate(active, active.stat().st_size - 30)  # into the last batch
    log = open_log(directory)
    assert log.log_end_offset == end - 1
    assert end not in log.producer_snapshot_offsets()
    assert log.producers() == replayed(log)
    entry = log.producers()[-1]
    assert append(log, (entry.producer_id, 0, next_sequence(entry.last_sequence), 1))[0] == end - 1
    log.close()


def test_retention_keeps_producers_and_the_snapshot_a_restart_needs(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    append(log, (1, 0, 0, 2))  # producer 1 writes only at the very start
    fill(log, [2], 3 * MANY)
    log.update_high_watermark(log.log_end_offset)
    start = log.segments()[2].base_offset + 1
    log.delete_records_before(start)
    assert log.segments()[0].base_offset == start - 1
    assert log.producer_snapshot_offsets()[0] == start - 1, "older snapshots went"
    assert [entry.producer_id for entry in log.producers()] == [1, 2]
    before = log.producers()
    crash(log)
    log = open_log(directory)
    assert log.producers() == before
    # Kafka's answer to a retry of a batch below the log start: its original offsets.
    assert append(log, (1, 0, 0, 2)) == (0, 1, True)
    log.close()


def test_the_state_survives_the_cleaner_rebuilding_and_dropping_batches(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=400, index_interval_bytes=64, cleanup_policy=("compact",))
    directory = tmp_path / "t-0"
    log = PartitionLog.open(directory, config, now_ms=NOW_MS)
    for sequence in range(30):
        batch = build_batch(
            [(NOW_MS, b"key-%d" % (sequence % 3), b"v%d" % sequence)],
            producer_id=1,
            producer_epoch=0,
            base_sequence=sequence,
        )
        log.append_as_leader(batch, leader_epoch=0, now_ms=NOW_MS)
    log.update_high_watermark(log.log_end_offset)
    before = log.producers()
    assert clean_log(log, now_ms=NOW_MS).segments_cleaned > 0
    assert log.producers() == before
    crash(log)
    for path in directory.glob("*.snapshot"):
        path.unlink()
    log = PartitionLog.open(directory, config, now_ms=NOW_MS)
    rebuilt = log.producers()
    assert [entry.last_sequence for entry in rebuilt] == [29], "the last batch survives"
    log.close()
