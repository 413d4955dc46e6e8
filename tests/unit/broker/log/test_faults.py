"""Disk failures (ENOSPC, EIO) injected through file operations that raise OSError: the append is
refused with KAFKA_STORAGE_ERROR and cut back off, so the log is never left half-written; when
even that fails the log goes offline and only a reopen (which recovers it) brings it back."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

import pytest

from pykraft.broker.log import LogError, PartitionLog
from pykraft.broker.log.checkpoints import LeaderEpochCheckpointFile
from pykraft.broker.log.segment import LogSegment
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import Buffer

from .support import NOW_MS, batch, open_log, read_all


def half_write_then_enospc(fd: int, data: Buffer) -> None:
    """Stands in for `files.write_all`: half the bytes reach the disk, then ENOSPC."""
    os.write(fd, bytes(data)[: max(1, len(data) // 2)])
    raise OSError(errno.ENOSPC, "No space left on device")


def half_writev_then_enospc(fd: int, pieces: Sequence[Buffer]) -> None:
    """Stands in for `files.writev_all`: half the bytes reach the disk, then ENOSPC."""
    half_write_then_enospc(fd, b"".join(pieces))


def eio(*args: object) -> None:
    raise OSError(errno.EIO, "Input/output error")


_SEGMENT_WRITE: Final = "pykraft.broker.log.segment.writev_all"


@pytest.fixture
def log(tmp_path: Path) -> Iterator[PartitionLog]:
    opened = open_log(tmp_path / "t-0")
    opened.append_as_leader(batch([b"first", b"second"]), leader_epoch=0, now_ms=NOW_MS)
    yield opened
    opened.close()


def _active(log: PartitionLog) -> LogSegment:
    return log._local.active


def _append(log: PartitionLog, value: bytes, epoch: int = 0) -> None:
    log.append_as_leader(batch([value]), leader_epoch=epoch, now_ms=NOW_MS)


def _storage_error(log: PartitionLog, value: bytes, epoch: int = 0) -> None:
    with pytest.raises(LogError) as raised:
        _append(log, value, epoch)
    assert raised.value.error_code == common_pb2.KAFKA_STORAGE_ERROR


def test_a_failed_log_write_is_cut_back_and_the_log_goes_on(log: PartitionLog) -> None:
    segment = _active(log)
    size = segment.log_path.stat().st_size
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_SEGMENT_WRITE, half_writev_then_enospc)
        _storage_error(log, b"lost")
    assert segment.log_path.stat().st_size == size and log.log_end_offset == 2
    _append(log, b"third")
    assert read_all(log) == [(0, b"first"), (1, b"second"), (2, b"third")]


def test_a_failed_index_write_fails_the_flush_and_reopening_rebuilds_the_index(
    tmp_path: Path,
) -> None:
    """Index entries reach their file on flush (not per append): a write that fails there is a
    storage error for the partition, the recovery point stays put, and reopening rebuilds the
    index from the log with nothing lost."""
    from pykraft.broker.log import LogConfig

    config = LogConfig(index_interval_bytes=0)
    log = PartitionLog.open(tmp_path / "t-0", config, now_ms=NOW_MS)
    _append(log, b"a")
    _append(log, b"b")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("pykraft.broker.log.index.write_all", half_write_then_enospc)
        with pytest.raises(LogError) as raised:
            log.flush()
    assert raised.value.error_code == common_pb2.KAFKA_STORAGE_ERROR
    with pytest.raises(LogError):
        _append(log, b"c")  # the log is offline until reopened
    log.close()
    reopened = PartitionLog.open(tmp_path / "t-0", config, now_ms=NOW_MS)
    assert read_all(reopened) == [(0, b"a"), (1, b"b")]
    rebuilt = _active(reopened).offset_index
    assert rebuilt.entry_count >= 1
    _append(reopened, b"c")
    assert read_all(reopened)[-1] == (2, b"c")
    reopened.close()  # the rebuilt entries reach the file with the others
    assert rebuilt.path.stat().st_size == 8 * rebuilt.entry_count


def test_a_failed_epoch_checkpoint_undoes_the_append(
    log: PartitionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_write(self: LeaderEpochCheckpointFile, entries: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    size = _active(log).log_path.stat().st_size
    with monkeypatch.context() as patch:
        patch.setattr(LeaderEpochCheckpointFile, "write", failing_write)
        _storage_error(log, b"new epoch", epoch=1)
    assert _active(log).log_path.stat().st_size == size
    assert log.latest_epoch == 0 and log.log_end_offset == 2
    _append(log, b"new epoch", epoch=1)
    assert log.end_offset_for_epoch(0) == (0, 2)


@pytest.mark.parametrize("failing", ["create", "fsync of the directory"])
def test_a_failed_roll_leaves_the_log_usable(
    log: PartitionLog, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    def fail(*args: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        if failing == "create":
            patch.setattr(LogSegment, "create", fail)
        else:
            patch.setattr("pykraft.broker.log.local_log.fsync_directory", fail)
        with pytest.raises(LogError) as raised:
            log.roll(now_ms=NOW_MS)
        assert raised.value.error_code == common_pb2.KAFKA_STORAGE_ERROR
    assert len(log.segments()) == 1
    assert not (log.directory / "00000000000000000002.log").exists()
    log.roll(now_ms=NOW_MS)
    _append(log, b"after")
    assert [info.base_offset for info in log.segments()] == [0, 2]


def test_when_the_undo_fails_the_log_goes_offline_until_reopened(
    log: PartitionLog, tmp_path: Path
) -> None:
    segment = _active(log)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_SEGMENT_WRITE, half_writev_then_enospc)
        patch.setattr(segment, "_truncate_file", eio)
        _storage_error(log, b"half written")
        assert segment.log_path.stat().st_size > log.segments()[-1].size_bytes  # left behind
        _storage_error(log, b"refused")  # offline: no more appends
        for mutation in (log.flush, lambda: log.truncate_to(0), lambda: log.roll(now_ms=NOW_MS)):
            with pytest.raises(LogError):
                mutation()
        assert log.read(0, bytes_max=100).next_offset == 2  # what was appended stays readable
        log.close()  # no clean-shutdown marker: the next open recovers
    reopened = open_log(tmp_path / "t-0")
    assert not reopened.had_clean_shutdown
    assert read_all(reopened) == [(0, b"first"), (1, b"second")]
    _append(reopened, b"third")
    assert reopened.log_end_offset == 3
    reopened.close()
