"""A broker's shutdown with many written logs (issue 18 §1.2): the logs close without an fsync
each and every log directory's filesystem is synced once before its checkpoint files and
clean-shutdown marker are written. Five fsyncs per log made a 20,000-replica broker take 20 s
to stop."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.broker.log.dir_checkpoints import CLEAN_SHUTDOWN_FILE

from .replica_harness import Harness, record_values

LOGS = 20


def test_closing_written_logs_syncs_each_directory_once_not_each_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fsynced_paths: list[Path]
) -> None:
    harness = Harness(tmp_path, assignments=[(1,)] * LOGS)
    for partition in range(LOGS):
        assert harness.produce(partition, [b"v"]).error_code == 0
    synced: list[Path] = []
    monkeypatch.setattr(
        "pykraft.broker.replica_manager.sync_filesystem", lambda path: synced.append(path)
    )
    fsynced_paths.clear()
    harness.manager.close()

    log_dirs = sorted(d for d in (tmp_path / "a", tmp_path / "b") if any(d.iterdir()))
    assert sorted(synced) == log_dirs
    # The checkpoint files and the markers (each in a log directory), nothing inside a log's.
    assert fsynced_paths and {p if p in log_dirs else p.parent for p in fsynced_paths} <= set(
        log_dirs
    ), fsynced_paths
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() for d in log_dirs)
    monkeypatch.undo()

    reopened = Harness(tmp_path, assignments=[(1,)] * LOGS)
    try:
        answers = reopened.fetch({p: 0 for p in range(LOGS)})
        assert [record_values(answers[p].records) for p in range(LOGS)] == [[(0, b"v")]] * LOGS
    finally:
        reopened.manager.close()
