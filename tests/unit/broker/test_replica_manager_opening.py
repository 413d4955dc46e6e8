"""New partitions' logs are opened outside the replica manager's lock: a metadata change that
creates thousands of partitions (each log a directory, files and fsyncs) must not hold up the
heartbeat, which reads the offline replicas under that lock. It did: a broker creating 20,000
partitions missed its session and was fenced."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from pykraft.broker.log import PartitionLog

from .images import EVENTS_ID, topic_records
from .replica_harness import Harness

WAIT_S = 10.0


def test_the_offline_replicas_answer_while_new_logs_are_being_opened(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    opening = threading.Event()
    may_finish = threading.Event()
    original = PartitionLog.open

    def slow_open(path: Path, *args: Any, **kwargs: Any) -> PartitionLog:
        opening.set()
        assert may_finish.wait(3 * WAIT_S), "the test never let the open finish"
        return original(path, *args, **kwargs)

    monkeypatch.setattr(PartitionLog, "open", staticmethod(slow_open))
    change = threading.Thread(
        target=harness.change, args=topic_records("events", EVENTS_ID, [(1,), (1,)])
    )
    change.start()
    try:
        assert opening.wait(WAIT_S)
        answered: list[object] = []
        heartbeat = threading.Thread(
            target=lambda: answered.append(harness.manager.offline_replicas())
        )
        heartbeat.start()
        heartbeat.join(WAIT_S)
        assert answered == [{}], "offline_replicas waited for the logs being opened"
    finally:
        may_finish.set()
        change.join(WAIT_S)
    assert not change.is_alive()
    assert harness.manager.partition("events", 0) is not None
    assert harness.manager.partition("events", 1) is not None


def test_a_log_that_fails_to_close_leaves_none_of_its_task_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Logs are closed a task of several at a time: one that fails must not stop the rest of
    its task, and the failure still reaches the caller."""
    monkeypatch.setattr("pykraft.broker.recovery_threads.LOGS_PER_TASK", 3)
    harness = Harness(tmp_path, assignments=[(1,)] * 7)
    logs = [partition.log for partition in harness.manager.partitions()]
    original = PartitionLog.close
    closed: list[PartitionLog] = []

    def close(log: PartitionLog, **kwargs: bool) -> None:
        original(log, **kwargs)
        closed.append(log)
        if log is logs[1]:
            raise OSError("disk gone")

    monkeypatch.setattr(PartitionLog, "close", close)
    with pytest.raises(OSError, match="disk gone"):
        harness.manager.close()
    assert sorted(map(id, closed)) == sorted(map(id, logs))
