"""A broker's shutdown with many written logs (issue 18 §1.2): the logs close without an fsync
each and every log directory's filesystem is synced once before its checkpoint files and
clean-shutdown marker are written. Five fsyncs per log made a 20,000-replica broker take 20 s
to stop."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pykraft.broker.log.dir_checkpoints import CLEAN_SHUTDOWN_FILE

from .replica_harness import Harness, record_values

LOGS = 20


def test_closing_written_logs_syncs_each_directory_once_not_each_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = Harness(tmp_path, assignments=[(1,)] * LOGS)
    for partition in range(LOGS):
        assert harness.produce(partition, [b"v"]).error_code == 0
    fsyncs: list[int] = []
    synced: list[Path] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    monkeypatch.setattr(
        "pykraft.broker.replica_manager.sync_filesystem", lambda path: synced.append(path)
    )
    harness.manager.close()

    log_dirs = sorted(d for d in (tmp_path / "a", tmp_path / "b") if any(d.iterdir()))
    assert sorted(synced) == log_dirs
    # The checkpoint files (a file and its directory each) and the markers, nothing per log.
    assert len(fsyncs) <= len(log_dirs) * (3 * 2 + 1), len(fsyncs)
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() for d in log_dirs)
    monkeypatch.undo()

    reopened = Harness(tmp_path, assignments=[(1,)] * LOGS)
    try:
        answers = reopened.fetch({p: 0 for p in range(LOGS)})
        assert [record_values(answers[p].records) for p in range(LOGS)] == [[(0, b"v")]] * LOGS
    finally:
        reopened.manager.close()
