"""A log directory that fails while the broker applies metadata goes offline, as Kafka's does
(issue 12 §2.7): its partitions answer KAFKA_STORAGE_ERROR, the heartbeat names them so the
controller moves their leadership, the broker keeps serving the partitions of its other
directories, and later metadata still applies. Nothing is acknowledged from a log that could not
be opened.

The harness's broker has log directories a and b: orders-0 and orders-2 are placed in a,
orders-1 in b (each new partition goes to the directory holding the fewest)."""

from __future__ import annotations

import errno
import uuid
from pathlib import Path
from typing import Any

import pytest

from pykraft.broker.log import PartitionLog
from pykraft.metadata_log.records import PartitionChangeRecord
from pykraft.proto import common_pb2

from .images import EVENTS_ID, ORDERS_ID, topic_records
from .replica_harness import Harness

MORE_ID = uuid.UUID(int=3)


def _fail_opens_in(monkeypatch: pytest.MonkeyPatch, *failing: Path) -> None:
    """Opening a log under `failing` fails as it did with 6,700 replicas on one broker."""
    original = PartitionLog.open

    def open_(path: Path, *args: Any, **kwargs: Any) -> PartitionLog:
        if path.parent in failing:
            raise OSError(errno.EMFILE, "Too many open files", str(path))
        return original(path, *args, **kwargs)

    monkeypatch.setattr(PartitionLog, "open", staticmethod(open_))


def test_a_failed_open_takes_its_directory_offline_and_the_rest_keeps_serving(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (tmp_path / "b" / "orders-1").is_dir()
    _fail_opens_in(monkeypatch, tmp_path / "b")
    harness.change(*topic_records("events", EVENTS_ID, [(1,), (1,)]))  # events-0 lands in b

    assert harness.manager.offline_replicas() == {EVENTS_ID: [0], ORDERS_ID: [1]}
    result = harness.produce(1, [b"x"])
    assert result.error_code == common_pb2.KAFKA_STORAGE_ERROR, result
    assert "offline" in result.error_message and "Too many open files" in result.error_message
    assert harness.fetch({1: 0})[1].error_code == common_pb2.KAFKA_STORAGE_ERROR
    served = harness.produce(0, [b"y"], acks=-1)
    assert (served.error_code, served.base_offset) == (common_pb2.NONE, 0)
    assert harness.manager.partition("events", 1) is not None  # placed in a, which works

    harness.change(PartitionChangeRecord(ORDERS_ID, 1, leader=2))  # metadata still applies
    assert harness.manager.partition("orders", 1) is None
    assert harness.manager.failure is None


def test_a_directory_that_cannot_be_listed_goes_offline_with_its_replicas(
    harness: Harness, tmp_path: Path
) -> None:
    """The disk under `b` is gone (a file in its place): placement picks b (it holds the fewest;
    directories are listed once, not at every placement), finds it is no directory, which takes
    b offline with its replicas, and places the new partition and the next in a."""
    (tmp_path / "b").rename(tmp_path / "b.gone")
    (tmp_path / "b").write_text("not a directory\n")
    harness.change(*topic_records("events", EVENTS_ID, [(1,)]))
    assert harness.manager.offline_replicas() == {ORDERS_ID: [1]}
    assert harness.produce(1, [b"x"]).error_code == common_pb2.KAFKA_STORAGE_ERROR
    events = harness.manager.partition("events", 0)
    assert events is not None and events.log.directory.parent == tmp_path / "a"
    harness.change(*topic_records("more", MORE_ID, [(1,)]))
    more = harness.manager.partition("more", 0)
    assert more is not None and more.log.directory.parent == tmp_path / "a"


def test_every_directory_failing_is_the_broker_failing(
    harness: Harness, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka stops a broker whose every log directory failed: it can serve nothing."""
    _fail_opens_in(monkeypatch, tmp_path / "b")
    harness.change(*topic_records("events", EVENTS_ID, [(1,)]))  # lands in b
    assert harness.manager.failure is None
    _fail_opens_in(monkeypatch, tmp_path / "a", tmp_path / "b")
    harness.change(*topic_records("more", MORE_ID, [(1,)]))  # only a is left
    assert harness.manager.failure is not None
    assert "every log directory" in str(harness.manager.failure)


def test_a_log_gone_offline_by_itself_takes_its_directory_offline(harness: Harness) -> None:
    """A write that failed and could not be undone left the log offline: the next heartbeat's
    look at the replicas takes the directory offline, so the controller moves leadership."""
    failing = harness.manager.partition("orders", 1)
    assert failing is not None
    failing.log._local.fail("write of a segment failed and could not be undone")
    assert harness.manager.offline_replicas() == {ORDERS_ID: [1]}
    assert failing.ack_state(failing.leader_epoch, 0).name == "LOST"
    assert harness.produce(0, [b"x"]).error_code == common_pb2.NONE  # orders-0 lives in a
