"""What a clean restart and a close cost in producer snapshots (issue 18 §1.2: 20,000 replicas):
a log that never had an idempotent producer writes no snapshot at close and reads none at open
(Kafka's LogLoader takes a cleanly closed log without snapshots as one without producers), and
a clean open reads the snapshot at the log end only when the state is first used. A crash still
rebuilds the state from the batches, and a damaged snapshot found late is rebuilt too."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.broker.log import LogError, PartitionLog
from pykraft.broker.log.producer_snapshots import snapshot_path
from pykraft.broker.log.producer_state import ProducerStateManager
from pykraft.proto import common_pb2

from .idempotent import append, crash
from .support import fill, open_log


def _snapshot_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The end offsets of the snapshots decoded from now on."""
    reads: list[int] = []
    real = ProducerStateManager.from_snapshot

    def counting(data: bytes, end_offset: int) -> ProducerStateManager:
        reads.append(end_offset)
        return real(data, end_offset)

    monkeypatch.setattr(ProducerStateManager, "from_snapshot", staticmethod(counting))
    return reads


def _with_producers(directory: Path) -> tuple[PartitionLog, int]:
    """A log two idempotent producers wrote to, closed cleanly; (its last state, log end)."""
    log = open_log(directory)
    fill(log, 3)
    for sequence in range(4):
        append(log, (7, 0, sequence, 1), (8, 0, 2 * sequence, 2))
    return log, log.log_end_offset


def test_a_log_without_producers_nor_snapshots_closes_and_opens_without_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    fill(log, 2)
    log.close()
    reads = _snapshot_reads(monkeypatch)
    log = open_log(directory)
    fill(log, 1)
    log.close()
    assert list(directory.glob("*.snapshot")) == []
    log = open_log(directory)
    assert log.producers() == () and log.log_end_offset == 9 and reads == []
    assert append(log, (5, 0, 0, 1))[2] is False  # a new producer starts at sequence 0
    log.close()
    assert log.producer_snapshot_offsets() == [10]


def test_a_log_that_rolled_keeps_snapshotting_at_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its roll snapshots exist: without one at the end, a clean open would replay the active
    segment from the newest of them."""
    directory = tmp_path / "t-0"
    log = open_log(directory)
    fill(log, 30)
    rolled = log.producer_snapshot_offsets()
    assert rolled
    log.close()
    assert log.producer_snapshot_offsets() == [*rolled, 90]
    reads = _snapshot_reads(monkeypatch)
    log = open_log(directory)
    assert reads == [] and log.producers() == () and reads == [90]
    log.close()


def test_a_clean_open_reads_the_snapshot_on_first_use_of_the_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "t-0"
    log, end = _with_producers(directory)
    before = log.producers()
    log.close()
    reads = _snapshot_reads(monkeypatch)
    log = open_log(directory)
    assert reads == []
    assert log.producers() == before and reads == [end]
    assert append(log, (7, 0, 3, 1))[2], "a retry of the last batch is still recognised"
    log.close()  # unchanged end: the snapshot there stays, unread again
    assert reads == [end]


def test_a_snapshot_damaged_behind_a_clean_close_is_rebuilt_on_first_use(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, end = _with_producers(directory)
    before = log.producers()
    log.close()
    snapshot_path(directory, end).write_bytes(b"\x00\x01garbage")
    log = open_log(directory)
    assert log.producers() == before
    assert end not in log.producer_snapshot_offsets()
    log.close()


def test_a_crash_of_a_log_that_had_no_snapshot_rebuilds_its_producers(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    fill(log, 2)
    log.close()  # no producer: no snapshot
    log = open_log(directory)
    append(log, (7, 0, 0, 2))
    before = log.producers()
    crash(log)
    log = open_log(directory)
    assert not log.had_clean_shutdown and log.producers() == before
    assert append(log, (7, 0, 0, 2))[2], "the retry is recognised after the crash"
    log.close()


def test_a_follower_truncation_before_first_use_rebuilds_the_state_below_the_cut(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "t-0"
    log, end = _with_producers(directory)
    log.close()
    log = open_log(directory)
    log.truncate_to(end - 2)  # drops producer 8's last batch, before the state was read
    assert {e.producer_id: e.last_sequence for e in log.producers()} == {7: 3, 8: 5}
    log.close()


def test_a_snapshot_unreadable_on_first_use_is_a_storage_error(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log, end = _with_producers(directory)
    log.close()
    snapshot_path(directory, end).unlink()
    snapshot_path(directory, end).mkdir()  # reading it fails with an OSError
    log = open_log(directory)
    with pytest.raises(LogError) as raised:
        append(log, (7, 0, 4, 1))
    assert raised.value.error_code == common_pb2.KAFKA_STORAGE_ERROR
