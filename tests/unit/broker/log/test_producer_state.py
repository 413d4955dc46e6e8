"""Idempotent producers on a partition: the leader's sequence and epoch rules (a table), duplicates
among the last five batches and not beyond, multi-batch requests, snapshots, and the state
following the log through follower appends, truncation, restarts, crashes and retention; then a
model-based test that checks the log's state against an independent reference after every
step."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pykraft.broker.log import LogConfig, LogError, PartitionLog
from pykraft.broker.log import producer_state as producer_state_module
from pykraft.broker.log.checkpoints import RECOVERY_POINT_FILE
from pykraft.broker.log.cleaner import clean_log
from pykraft.broker.log.producer_snapshots import snapshot_path
from pykraft.broker.log.producer_state import (
    SEQUENCE_MAX,
    BatchMetadata,
    Duplicate,
    ProducerEntry,
    ProducerStateManager,
    SnapshotCorruptError,
    next_sequence,
)
from pykraft.broker.log.recovery import CLEAN_SHUTDOWN_FILE
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import BatchHeader, TimestampType, build_batch, iter_batches

from .support import NOW_MS, open_log, read_all

Sent = tuple[int, int, int, int]  # producer id, epoch, first sequence, record count


def idempotent_batch(
    producer_id: int, epoch: int, sequence: int, count: int = 1, *, base_offset: int = 0
) -> bytes:
    """A batch of `count` records whose values name the producer, epoch and sequence, so a
    record written twice shows up twice."""
    values = [
        b"p%d-e%d-s%d" % (producer_id, epoch, next_sequence(sequence, i) if sequence >= 0 else i)
        for i in range(count)
    ]
    return build_batch(
        [(NOW_MS, None, value) for value in values],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        base_offset=base_offset,
    )


def header_of(sent: Sent, base_offset: int = 0) -> BatchHeader:
    return BatchHeader.parse(idempotent_batch(*sent, base_offset=base_offset))


def state_after(history: Sequence[Sent]) -> ProducerStateManager:
    """A fresh state that applied `history`, written back to back from offset 0."""
    state = ProducerStateManager(0)
    for sent in history:
        state.apply([header_of(sent, state.end_offset)])
    return state


def check(state: ProducerStateManager, *requests: Sent) -> Duplicate | None:
    return state.check_leader_append(
        [header_of(sent) for sent in requests], base_offset=state.end_offset
    )


# --- 1. the leader's rules ---

NEW = "new"
ONE_BY_ONE = [(1, 0, sequence, 1) for sequence in range(6)]
RULES: list[tuple[str, list[Sent], Sent, object]] = [
    ("unknown producer starting at 0", [], (1, 0, 0, 3), NEW),
    ("unknown producer past 0", [], (1, 0, 5, 1), common_pb2.UNKNOWN_PRODUCER_ID),
    ("another producer's state does not count", [(2, 0, 0, 3)], (1, 0, 3, 1),
     common_pb2.UNKNOWN_PRODUCER_ID),
    ("next in sequence", [(1, 0, 0, 3)], (1, 0, 3, 2), NEW),
    ("a gap", [(1, 0, 0, 3)], (1, 0, 4, 1), common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("behind, not a cached batch", [(1, 0, 0, 3)], (1, 0, 1, 1),
     common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("same first sequence, other last", [(1, 0, 0, 3)], (1, 0, 0, 2),
     common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("duplicate of the last batch", [(1, 0, 0, 3), (1, 0, 3, 2)], (1, 0, 3, 2), (3, 4)),
    ("duplicate of the oldest of five", ONE_BY_ONE[:5], (1, 0, 0, 1), (0, 0)),
    ("duplicate of the sixth batch back", ONE_BY_ONE, (1, 0, 0, 1),
     common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("duplicate of the fifth batch back", ONE_BY_ONE, (1, 0, 1, 1), (1, 1)),
    ("older epoch", [(1, 2, 0, 1)], (1, 1, 1, 1), common_pb2.INVALID_PRODUCER_EPOCH),
    ("older epoch repeating a batch", [(1, 2, 0, 1)], (1, 1, 0, 1),
     common_pb2.INVALID_PRODUCER_EPOCH),
    ("newer epoch from 0", [(1, 0, 0, 3)], (1, 1, 0, 1), NEW),
    ("newer epoch not from 0", [(1, 0, 0, 3)], (1, 1, 3, 1),
     common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER),
    ("a batch of the old epoch after a bump", [(1, 0, 0, 3), (1, 1, 0, 1)], (1, 0, 0, 3),
     common_pb2.INVALID_PRODUCER_EPOCH),
    ("negative sequence", [], (1, 0, -1, 1), common_pb2.INVALID_RECORD),
    ("no producer id: no checks", [(1, 0, 0, 3)], (-1, -1, -1, 2), NEW),
]  # fmt: skip


@pytest.mark.parametrize(("history", "sent", "expected"), [c[1:] for c in RULES],
                         ids=[c[0] for c in RULES])  # fmt: skip
def test_the_leaders_rules(history: list[Sent], sent: Sent, expected: object) -> None:
    state = state_after(history)
    before = state.entries()
    if expected == NEW:
        assert check(state, sent) is None
    elif isinstance(expected, tuple):
        duplicate = check(state, sent)
        assert duplicate is not None
        assert (duplicate.first_offset, duplicate.last_offset) == expected
        assert duplicate.max_timestamp == NOW_MS
    else:
        with pytest.raises(LogError) as raised:
            check(state, sent)
        assert raised.value.error_code == expected
    assert state.entries() == before, "a check changes nothing"


def test_an_out_of_order_batch_names_the_expected_and_the_sent_sequence() -> None:
    state = state_after([(7, 2, 0, 3)])
    with pytest.raises(LogError, match=r"producer 7 \(epoch 2\) sent sequence 9, expected 3"):
        check(state, (7, 2, 9, 1))


def test_sequences_wrap_to_zero_after_the_largest() -> None:
    state = state_after([(1, 0, SEQUENCE_MAX - 1, 2)])
    entry = state.entry(1)
    assert entry is not None and entry.last_sequence == SEQUENCE_MAX
    assert check(state, (1, 0, 0, 1)) is None
    with pytest.raises(LogError) as raised:
        check(state, (1, 0, SEQUENCE_MAX, 1))
    assert raised.value.error_code == common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_batch_spanning_the_wrap_continues_after_it_and_is_recognised_again() -> None:
    state = state_after([(1, 0, SEQUENCE_MAX - 1, 4)])
    entry = state.entry(1)
    assert entry is not None
    # MAX - 1, MAX, 0, 1
    assert (entry.batches[0].first_sequence, entry.last_sequence) == (SEQUENCE_MAX - 1, 1)
    assert check(state, (1, 0, 2, 1)) is None
    duplicate = check(state, (1, 0, SEQUENCE_MAX - 1, 4))
    assert duplicate is not None and (duplicate.first_offset, duplicate.last_offset) == (0, 3)


def test_an_epoch_bump_starts_an_empty_batch_cache() -> None:
    state = state_after([(1, 0, 0, 2), (1, 0, 2, 2), (1, 1, 0, 1)])
    entry = state.entry(1)
    assert entry is not None and entry.producer_epoch == 1
    assert [(b.first_sequence, b.last_sequence) for b in entry.batches] == [(0, 0)]


def test_only_the_last_five_batches_are_kept() -> None:
    state = state_after([*ONE_BY_ONE, (1, 0, 6, 1)])
    entry = state.entry(1)
    assert entry is not None
    assert [b.first_sequence for b in entry.batches] == [2, 3, 4, 5, 6]
    assert [b.first_offset for b in entry.batches] == [2, 3, 4, 5, 6]


# --- 2. requests with several batches ---


def test_batches_of_one_request_are_checked_against_the_earlier_ones() -> None:
    state = state_after([(1, 0, 0, 2)])
    assert check(state, (1, 0, 2, 2), (1, 0, 4, 1), (2, 0, 0, 1)) is None
    with pytest.raises(LogError) as raised:
        check(state, (1, 0, 2, 2), (1, 0, 5, 1))
    assert raised.value.error_code == common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert state.entry(2) is None and state.end_offset == 2, "nothing was taken in"


def test_a_request_of_duplicates_answers_the_original_offsets() -> None:
    state = state_after([(1, 0, 0, 2), (2, 0, 0, 3), (1, 0, 2, 1)])
    duplicate = check(state, (1, 0, 0, 2), (2, 0, 0, 3), (1, 0, 2, 1))
    assert duplicate == Duplicate(first_offset=0, last_offset=5, max_timestamp=NOW_MS)


@pytest.mark.parametrize(
    "request_",
    [
        [(1, 0, 0, 2), (1, 0, 2, 1)],  # a duplicate, then the next batch
        [(1, 0, 2, 1), (1, 0, 2, 1)],  # a new batch twice: the second repeats the first
        [(1, 0, 0, 2), (-1, -1, -1, 1)],  # a duplicate and a batch without producer id
    ],
)
def test_duplicates_mixed_with_new_batches_are_refused(request_: list[Sent]) -> None:
    state = state_after([(1, 0, 0, 2)])
    with pytest.raises(LogError, match="mixes") as raised:
        check(state, *request_)
    assert raised.value.error_code == common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_past_producers_max_the_least_recent_writer_is_forgotten(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(producer_state_module, "PRODUCERS_MAX", 2)
    state = state_after([(1, 0, 0, 1), (2, 0, 0, 1), (1, 0, 1, 1), (3, 0, 0, 1)])
    assert [entry.producer_id for entry in state.entries()] == [1, 3]
    with pytest.raises(LogError) as raised:
        check(state, (2, 0, 1, 1))
    assert raised.value.error_code == common_pb2.UNKNOWN_PRODUCER_ID


# --- 3. snapshots ---


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


# --- 4. the partition log ---

MANY = 20  # one-record batches per producer: more than a segment of SMALL (13 fit)


def append(log: PartitionLog, *sent: Sent) -> tuple[int, int, bool]:
    """(first offset, last offset, duplicate) of a leader append of one request."""
    data = b"".join(idempotent_batch(*s) for s in sent)
    info = log.append_as_leader(data, leader_epoch=0, now_ms=NOW_MS)
    return info.first_offset, info.last_offset, info.duplicate


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


def crash(log: PartitionLog) -> None:
    """Closes the files as a killed process leaves them: no snapshot, no clean marker."""
    log._local.close()


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


# --- 5. a model: the log's state against a reference, through every change of the log ---

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=64, retention_bytes=1200)
PRODUCERS = (1, 2, 3)


@dataclass(frozen=True)
class Written:
    sent: Sent
    first_offset: int

    @property
    def last_offset(self) -> int:
        return self.first_offset + self.sent[3] - 1

    @property
    def sequences(self) -> tuple[int, int]:
        _, _, first, count = self.sent
        return first, next_sequence(first, count - 1)


def reference_outcome(written: Sequence[Written], sent: Sent) -> object:
    """What the leader must answer, from the batches in the log (a plain reading of the rules):
    NEW, the duplicated batch, or an error code."""
    producer_id, epoch, first, count = sent
    mine = [w for w in written if w.sent[0] == producer_id]
    if not mine:
        return NEW if first == 0 else common_pb2.UNKNOWN_PRODUCER_ID
    current = mine[-1].sent[1]
    if epoch == current:
        cached = [w for w in mine if w.sent[1] == current][-5:]
        for candidate in cached:
            if candidate.sequences == (first, next_sequence(first, count - 1)):
                return candidate
    if epoch < current:
        return common_pb2.INVALID_PRODUCER_EPOCH
    expected = 0 if epoch > current else next_sequence(mine[-1].sequences[1])
    return NEW if first == expected else common_pb2.OUT_OF_ORDER_SEQUENCE_NUMBER


def reference_entries(
    written: Sequence[Written],
) -> list[tuple[int, int, list[tuple[int, int, int, int]]]]:
    """(producer id, epoch, cached (first seq, last seq, first offset, last offset)) of each
    producer, least recent writer first."""
    entries = []
    for producer_id in PRODUCERS:
        mine = [w for w in written if w.sent[0] == producer_id]
        if not mine:
            continue
        epoch = mine[-1].sent[1]
        cached = [w for w in mine if w.sent[1] == epoch][-5:]
        batches = [(*w.sequences, w.first_offset, w.last_offset) for w in cached]
        entries.append((mine[-1].last_offset, producer_id, epoch, batches))
    return [(p, e, b) for _, p, e, b in sorted(entries)]


class ProducerLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.temp = tempfile.TemporaryDirectory()
        self.directory = Path(self.temp.name) / "model-0"
        self.log = PartitionLog.open(self.directory, CONFIG, now_ms=NOW_MS)
        self.written: list[Written] = []  # every batch the state must know, in offset order
        self.sent: list[Sent] = []  # everything ever sent, for retries

    def teardown(self) -> None:
        self.log.close()
        self.temp.cleanup()

    def _produce(self, sent: Sent) -> None:
        expected = reference_outcome(self.written, sent)
        end = self.log.log_end_offset
        self.sent.append(sent)
        try:
            first, last, duplicate = append(self.log, sent)
        except LogError as error:
            assert error.error_code == expected
            assert self.log.log_end_offset == end
            return
        if expected == NEW:
            assert (first, duplicate) == (end, False)
            self.written.append(Written(sent, first))
        else:
            assert isinstance(expected, Written), expected
            assert (first, last, duplicate) == (expected.first_offset, expected.last_offset, True)
            assert self.log.log_end_offset == end
        self.log.update_high_watermark(self.log.log_end_offset)

    @rule(producer_id=st.sampled_from(PRODUCERS), count=st.integers(1, 3))
    def send_next(self, producer_id: int, count: int) -> None:
        mine = [w for w in self.written if w.sent[0] == producer_id]
        if not mine:
            self._produce((producer_id, 0, 0, count))
            return
        epoch = mine[-1].sent[1]
        self._produce((producer_id, epoch, next_sequence(mine[-1].sequences[1]), count))

    @rule(data=st.data())
    def retry(self, data: st.DataObject) -> None:
        if self.sent:
            self._produce(data.draw(st.sampled_from(self.sent[-8:])))

    @rule(
        producer_id=st.sampled_from(PRODUCERS),
        epoch=st.integers(0, 2),
        first=st.sampled_from([0, 1, 2, 5, SEQUENCE_MAX]),
        count=st.integers(1, 3),
    )
    def send_anything(self, producer_id: int, epoch: int, first: int, count: int) -> None:
        self._produce((producer_id, epoch, first, count))

    @rule()
    def roll(self) -> None:
        self.log.roll(now_ms=NOW_MS)

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        offset = data.draw(st.integers(0, self.log.log_end_offset))
        start = self.log.log_start_offset
        self.log.truncate_to(offset)
        kept = [w for w in self.written if w.last_offset < offset]
        new_end = kept[-1].last_offset + 1 if kept else 0
        if offset < start or new_end < start:  # below the log start: the log was emptied
            kept = []
        self.written = kept

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        log = self.log
        start = log.log_start_offset
        log.delete_records_before(data.draw(st.integers(start, log.high_watermark)))
        if log.log_start_offset > start:
            self._check_old_snapshots_went()

    @rule()
    def retention(self) -> None:
        if self.log.delete_old_segments(now_ms=NOW_MS):
            self._check_old_snapshots_went()

    def _check_old_snapshots_went(self) -> None:
        """Once segments or records went, so did snapshots no load would use."""
        offsets = self.log.producer_snapshot_offsets()
        below_start = [o for o in offsets if o <= self.log.log_start_offset]
        assert len(below_start) <= 1, "only the newest snapshot at or below the start stays"

    @rule()
    def restart(self) -> None:
        self.log.close()
        self.log = PartitionLog.open(self.directory, CONFIG, now_ms=NOW_MS)

    @rule()
    def crash(self) -> None:
        crash(self.log)
        self.log = PartitionLog.open(self.directory, CONFIG, now_ms=NOW_MS)
        self.log.update_high_watermark(self.log.log_end_offset)

    @invariant()
    def state_agrees(self) -> None:
        found = [
            (
                entry.producer_id,
                entry.producer_epoch,
                [(b.first_sequence, b.last_sequence, b.first_offset, b.last_offset)
                 for b in entry.batches],
            )
            for entry in self.log.producers()
        ]  # fmt: skip
        assert found == reference_entries(self.written)

    @invariant()
    def no_record_is_written_twice(self) -> None:
        values = [value for _, value in read_all(self.log)]
        assert len(values) == len(set(values))

    @invariant()
    def snapshots_lie_within_the_log(self) -> None:
        offsets = self.log.producer_snapshot_offsets()
        first_base = self.log.segments()[0].base_offset
        assert all(first_base <= o <= self.log.log_end_offset for o in offsets), offsets


ProducerLogMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=35,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestProducerLogModel = ProducerLogMachine.TestCase


def test_the_reference_agrees_with_the_rules_table() -> None:
    """The model's reference must itself read the rules as the table does."""
    for _, history, sent, expected in RULES:
        if sent[0] < 0 or sent[2] < 0:
            continue  # the reference covers batches with a producer id and a sequence
        offsets = itertools.accumulate([0, *(h[3] for h in history)])
        written = [Written(h, o) for h, o in zip(history, offsets, strict=False)]
        outcome = reference_outcome(written, sent)
        if isinstance(outcome, Written):
            outcome = (outcome.first_offset, outcome.last_offset)
        assert outcome == expected, (history, sent)
