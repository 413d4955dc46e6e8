"""A fetcher round that truncates many partitions (issue 18 §1.2-1.3): the log directory's
checkpoint files are written once for the round, not once per partition, and they hold every
lowered offset when the round returns; the log says so in one line, not one per partition."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykraft.broker.log.checkpoints import (
    HIGH_WATERMARK_FILE,
    OffsetCheckpointFile,
    TopicPartition,
)
from pykraft.broker.log.dir_checkpoints import DeferredWrites, LogDirCheckpoints
from pykraft.broker.partition import Partition
from pykraft.broker.replica_fetcher import FetcherThread
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.broker.replication_throttle import FollowerThrottle
from pykraft.metadata_log.records import PartitionChangeRecord
from pykraft.proto import broker_pb2
from pykraft.proto.record_batch import build_batch

from .images import ORDERS_ID, advance, cluster_image, topic_records
from .replica_harness import broker_config

PARTITIONS = 20
LEADER = 2
WAIT_S = 10.0
RECORDS = 3  # each follower log holds offsets 0-2, all below the leader's high watermark


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[ReplicaManager]:
    """Broker 1 following broker 2 in every partition of orders, each log holding RECORDS
    batches of epoch 0 with the high watermark at its end."""
    manager = ReplicaManager(broker_config(tmp_path / "logs"), lambda now_ms: True)
    base = cluster_image()
    manager.on_metadata(None, base, now_ms=0)
    delta, image = advance(base, topic_records("orders", ORDERS_ID, [(LEADER, 1)] * PARTITIONS))
    manager.on_metadata(delta, image, now_ms=0)
    batches = b"".join(
        build_batch([(1_000, None, b"v")], base_offset=offset, partition_leader_epoch=0)
        for offset in range(RECORDS)
    )  # one record each, so a truncation may keep some
    for partition in manager.partitions():
        partition.append_as_follower(batches, leader_high_watermark=RECORDS)
    manager.checkpoint()
    yield manager
    manager.close()


@pytest.fixture
def fetcher(manager: ReplicaManager) -> Iterator[FetcherThread]:
    """A fetcher of broker 2's partitions, never started: the test hands it answers."""
    thread = FetcherThread(
        LEADER,
        "127.0.0.1:9192",
        manager,
        broker_id=1,
        broker_epoch=lambda: 1,
        clock_ms=lambda: 0,
        throttle=FollowerThrottle(1),
    )
    thread.set_partitions(frozenset(("orders", p) for p in range(PARTITIONS)))
    yield thread
    thread.stop()


def _diverging_answer(epoch: int, end_offset: int) -> broker_pb2.FetchResponse:
    """The leader's answer: every partition diverges at (`epoch`, `end_offset`)."""
    response = broker_pb2.FetchResponse()
    topic = response.topics.add(topic="orders")
    for partition in range(PARTITIONS):
        result = topic.partitions.add(partition=partition, high_watermark=end_offset)
        result.diverging_epoch.epoch = epoch
        result.diverging_epoch.end_offset = end_offset
    return response


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the checkpoint files written from now on, one entry per write."""
    written: list[str] = []
    real_write = OffsetCheckpointFile.write

    def counting_write(self: OffsetCheckpointFile, entries: dict[TopicPartition, int]) -> None:
        written.append(self.path.name)
        real_write(self, entries)

    monkeypatch.setattr(OffsetCheckpointFile, "write", counting_write)
    return written


@pytest.mark.parametrize("epoch, end_offset", [(0, 1), (-1, 0)], ids=["diverged", "no-epoch"])
def test_a_round_of_truncations_writes_the_checkpoints_once(
    manager: ReplicaManager,
    fetcher: FetcherThread,
    writes: list[str],
    tmp_path: Path,
    epoch: int,
    end_offset: int,
) -> None:
    fetch = fetcher.build_request(now_ms=0)
    assert len(fetch.partitions) == PARTITIONS

    fetcher.apply_response(_diverging_answer(epoch, end_offset), fetch)

    assert writes.count(HIGH_WATERMARK_FILE) == 1, writes
    for partition in manager.partitions():
        assert partition.log_end_offset == end_offset
    # The round returned only once the lowered offsets were stored: a crash now keeps them.
    stored = OffsetCheckpointFile(tmp_path / "logs" / HIGH_WATERMARK_FILE).read()
    assert stored == {TopicPartition("orders", p): end_offset for p in range(PARTITIONS)}


def test_a_round_where_the_leader_holds_no_epoch_logs_one_line(
    manager: ReplicaManager, fetcher: FetcherThread, caplog: pytest.LogCaptureFixture
) -> None:
    fetch = fetcher.build_request(now_ms=0)
    with caplog.at_level(logging.INFO, logger="pykraft.broker.replica_fetcher"):
        fetcher.apply_response(_diverging_answer(-1, 0), fetch)

    lines = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert f"{PARTITIONS} partitions" in lines[0].getMessage()
    assert all(partition.log_end_offset == 0 for partition in manager.partitions())


def test_a_metadata_change_during_the_rounds_write_deadlocks_nothing(
    manager: ReplicaManager, fetcher: FetcherThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The metadata thread takes the manager's lock, then each partition's role lock; the
    round holds the truncated partitions' role locks until its write, which therefore must not
    need the manager's lock."""
    updating = threading.Event()
    real_update = Partition.update

    def signalling_update(partition: Partition, *args: Any, **kwargs: Any) -> None:
        updating.set()
        real_update(partition, *args, **kwargs)

    monkeypatch.setattr(Partition, "update", signalling_update)
    image = manager.image
    delta, moved = advance(image, [PartitionChangeRecord(ORDERS_ID, 0, isr=(LEADER,))])
    change = threading.Thread(target=manager.on_metadata, args=(delta, moved, 0), daemon=True)
    real_take = DeferredWrites.take

    def take_during_a_change(deferred: DeferredWrites) -> list[LogDirCheckpoints]:
        change.start()
        assert updating.wait(WAIT_S), "the metadata change never reached a partition"
        return real_take(deferred)

    monkeypatch.setattr(DeferredWrites, "take", take_during_a_change)
    fetch = fetcher.build_request(now_ms=0)
    round_ = threading.Thread(
        target=fetcher.apply_response, args=(_diverging_answer(0, 1), fetch), daemon=True
    )
    round_.start()
    round_.join(WAIT_S)
    change.join(WAIT_S)
    assert not round_.is_alive() and not change.is_alive(), "deadlocked"
    assert all(partition.log_end_offset == 1 for partition in manager.partitions())


def test_a_round_whose_write_fails_takes_the_directory_offline(
    manager: ReplicaManager, fetcher: FetcherThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing_write_all(checkpoints: LogDirCheckpoints) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(LogDirCheckpoints, "write_all", failing_write_all)
    fetch = fetcher.build_request(now_ms=0)
    fetcher.apply_response(_diverging_answer(0, 1), fetch)
    assert manager.offline_replicas() == {ORDERS_ID: list(range(PARTITIONS))}
