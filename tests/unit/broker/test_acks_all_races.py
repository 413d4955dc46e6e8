"""An acks=all append is acknowledged only if this broker still led the partition, in the epoch
it was written in, when the high-water mark covered it: leadership moving at any point of the
check (issue 12, §1 and §2.1) answers NOT_LEADER_OR_FOLLOWER, never NONE.

The hooks below move leadership at the exact points where the metadata thread could: inside
the broker's check of a wait, right after the append, and while the wait sleeps. Each runs on
the producing thread, so the interleaving is the same on every run."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pykraft.broker.controller_channel import monotonic_ms
from pykraft.broker.group.config import OFFSETS_TOPIC, GroupConfig
from pykraft.broker.group.coordinator import CoordinatorError, GroupCoordinator, _Shard
from pykraft.broker.group.shard import GroupShard
from pykraft.broker.partition import Partition
from pykraft.broker.partition_watches import Watch
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.metadata_log.records import PartitionChangeRecord
from pykraft.proto import common_pb2
from pykraft.proto.record_batch import build_batch

from .images import ORDERS_ID
from .replica_harness import Harness

# orders-1 is led by broker 1 with broker 2 in the ISR: an acks=all append waits for broker 2.
PARTITION = 1


def _hook_produce_wait(monkeypatch: pytest.MonkeyPatch, before_wait: Callable[[], None]) -> None:
    """An acks=all produce (or the coordinator's wait for its writes) sleeps on its
    partitions' watch: each of its waits first runs `before_wait` (the metadata thread's
    turn)."""
    wait = Watch.wait

    def hooked(self: Watch, *, deadline_ms: int, clock_ms: Callable[[], int]) -> bool:
        before_wait()
        return wait(self, deadline_ms=deadline_ms, clock_ms=clock_ms)

    monkeypatch.setattr(Watch, "wait", hooked)


class _LeadershipMove:
    """Moves orders-1 to broker 2 once; as a follower refilled by broker 2, this broker's
    high-water mark then passes the appended offsets."""

    def __init__(self, harness: Harness) -> None:
        self._harness = harness
        self.done = False

    def __call__(self) -> None:
        if self.done:
            return
        self.done = True
        harness = self._harness
        harness.change(PartitionChangeRecord(ORDERS_ID, PARTITION, leader=2))
        partition = harness.manager.partition(harness.topic, PARTITION)
        assert partition is not None and not partition.is_leader
        partition.log.update_high_watermark(partition.log.log_end_offset)


def _hook(
    monkeypatch: pytest.MonkeyPatch,
    manager: ReplicaManager | Partition,
    name: str,
    move: _LeadershipMove,
) -> None:
    """Runs `move` first whenever `manager.<name>` is called. The check of issue 12 §1 looked
    leadership up through `manager.hosts()`, which the fixed check no longer calls: a missing
    method is hooked all the same, and the wait's hook moves leadership instead."""
    original: Callable[..., Any] | None = getattr(manager, name, None)

    def hooked(*args: Any) -> Any:
        move()
        return None if original is None else original(*args)

    monkeypatch.setattr(manager, name, hooked, raising=False)


def test_leadership_moving_inside_the_check_is_never_acknowledged(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The defect of §1: the metadata apply finishes while the check looks leadership up."""
    move = _LeadershipMove(harness)
    _hook(monkeypatch, harness.manager, "hosts", move)
    _hook_produce_wait(monkeypatch, move)
    result = harness.produce(PARTITION, [b"x"], acks=-1, timeout_ms=5_000)
    assert move.done
    assert result.error_code == common_pb2.NOT_LEADER_OR_FOLLOWER, result


def test_leadership_moving_right_after_the_append_is_never_acknowledged(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """§2.1: the fast path after the append must check the epoch too. The partition signals
    the append (`on_change`) right after writing it: leadership moves there."""
    move = _LeadershipMove(harness)
    partition = harness.manager.partition(harness.topic, PARTITION)
    assert partition is not None
    _hook(monkeypatch, partition, "_on_change", move)
    result = harness.produce(PARTITION, [b"x"], acks=-1, timeout_ms=5_000)
    assert move.done
    assert result.error_code == common_pb2.NOT_LEADER_OR_FOLLOWER, result


def test_a_replicated_append_is_acknowledged_with_its_offset(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check still says DONE when the follower has the records and nothing moved."""
    partition = harness.manager.partition("orders", PARTITION)
    assert partition is not None

    def follower_catches_up() -> None:
        if partition.log.log_end_offset == 1:
            harness.fetch({PARTITION: 1}, replica_id=2)

    _hook_produce_wait(monkeypatch, follower_catches_up)
    result = harness.produce(PARTITION, [b"x"], acks=-1, timeout_ms=5_000)
    assert (result.error_code, result.base_offset) == (common_pb2.NONE, 0)


def test_an_acks_all_wait_watches_its_own_partitions_only(harness: Harness) -> None:
    """An acks=all produce sleeps on its partitions' watch (issue 17 §5), not on the broker's
    shared condition: appends and high-water marks of other partitions, which every replica
    of the broker signals, do not wake it (nor does it cost them a wake-up each)."""
    results: list[object] = []
    producing = threading.Thread(
        target=lambda: results.append(harness.produce(PARTITION, [b"x"], acks=-1, timeout_ms=5_000))
    )
    watched = harness.manager.watches._by_key
    producing.start()
    deadline_ms = monotonic_ms() + 5_000
    while (harness.topic, PARTITION) not in watched:
        assert monotonic_ms() < deadline_ms, "the acks=all produce never watched its partition"
        producing.join(0.001)
    with harness.manager.changed:
        assert not harness.manager.changed._waiters, "nothing waits on the shared condition"  # type: ignore[attr-defined]
    harness.fetch({PARTITION: 1}, replica_id=2)  # the follower has it: the mark moves
    producing.join(5)
    (result,) = results
    assert (result.error_code, result.base_offset) == (common_pb2.NONE, 0)  # type: ignore[attr-defined]


def test_group_state_is_not_confirmed_when_leadership_moves_inside_the_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator's wait for its own writes had the same two reads as §1."""
    harness = Harness(tmp_path, topic=OFFSETS_TOPIC)
    try:
        coordinator = GroupCoordinator(
            harness.manager, GroupConfig(), clock_ms=monotonic_ms, wall_clock_ms=monotonic_ms
        )
        partition = harness.manager.partition(OFFSETS_TOPIC, PARTITION)
        assert partition is not None
        appended = partition.append_as_leader(build_batch([(0, b"k", b"v")]), acks=-1, now_ms=0)
        move = _LeadershipMove(harness)
        _hook(monkeypatch, harness.manager, "hosts", move)
        _hook_produce_wait(monkeypatch, move)
        shard = _Shard(PARTITION, appended.leader_epoch, GroupShard(coordinator.config))
        with pytest.raises(CoordinatorError) as raised:
            coordinator._await_replicated(shard, appended.info.last_offset + 1)
        assert move.done
        assert raised.value.error_code == common_pb2.NOT_COORDINATOR
    finally:
        harness.manager.close()
