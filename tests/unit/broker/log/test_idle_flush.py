"""Flushing and closing a log that did not change since it was last durable fsyncs none of its
segment, index, offset checkpoint or producer snapshot files again: a broker with thousands of
idle partitions closes them at shutdown, and each such fsync cost it time (issue 18 §1.2)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .support import NOW_MS, batch, fill, open_log, read_all


def _fsynced_names(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    names: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        names.append(Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return names


def test_an_idle_log_is_closed_without_fsyncing_its_files_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = open_log(tmp_path / "t-0")
    fill(log, 5)
    log.close()
    reopened = open_log(tmp_path / "t-0")
    expected = read_all(reopened)
    fsynced = _fsynced_names(monkeypatch)
    reopened.flush()
    reopened.close()
    data_files = [name for name in fsynced if name != "t-0"]  # the directory itself
    assert data_files == []  # nor the producer snapshot at the same log end

    again = open_log(tmp_path / "t-0")
    fsynced.clear()
    again.append_as_leader(batch([b"new"]), leader_epoch=0, now_ms=NOW_MS)
    again.flush()
    assert any(name.endswith(".log") for name in fsynced), fsynced
    # The recovery point moved: its log directory's file is written with the next checkpoint
    # of the directory, which a log owning its checkpoints writes at close.
    assert not any("recovery-point-offset-checkpoint" in name for name in fsynced), fsynced
    again.close()
    assert any("recovery-point-offset-checkpoint" in name for name in fsynced), fsynced
    assert read_all(open_log(tmp_path / "t-0")) == [*expected, (len(expected), b"new")]
