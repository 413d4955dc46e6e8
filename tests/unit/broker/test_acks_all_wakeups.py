"""An acks=all produce waiting for its partition's high-water mark looks again only when that
partition (or the metadata) changed: appends, fetches and high-water mark moves of the broker's
other partitions do not wake it (issue 17 §4: with a condition variable shared by every
partition, each change woke every waiting produce thread and each re-checked all its waits)."""

from __future__ import annotations

import threading

import pytest

from pykraft.broker.partition import AckState, Partition
from pykraft.broker.partition_watches import PartitionWatches
from pykraft.proto import broker_pb2, common_pb2

from .replica_harness import Harness

OTHER_APPENDS = 3
WAIT_S = 10
# How long each other partition's append is given to wake the wait (it would within
# microseconds: this only has to outlast the interpreter's thread switch).
WAKE_UP_S = 0.1
# orders-1 is led by broker 1 with broker 2 in the ISR: an acks=all append there waits for 2.
WAITING_PARTITION = 1


def test_wait_until_looks_again_only_after_a_change_of_its_keys() -> None:
    watches = PartitionWatches()
    looks: list[int] = []
    now_ms = [0]

    def is_done() -> bool:
        looks.append(now_ms[0])
        if len(looks) == 1:
            watches.changed(("orders", 1))  # another partition: no second look
            now_ms[0] = 10
        return False

    assert not watches.wait_until(
        [("orders", 0)], is_done, deadline_ms=10, clock_ms=lambda: now_ms[0]
    )
    assert looks == [0]
    done = iter([False, True])

    def changed_then_done() -> bool:
        answer = next(done)
        if not answer:
            watches.changed(("orders", 0))
        return answer

    assert watches.wait_until(
        [("orders", 0)], changed_then_done, deadline_ms=1_000_000, clock_ms=lambda: 0
    )


def test_an_acks_all_wait_looks_again_only_when_its_partition_changes(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    looks: list[AckState] = []
    looked = threading.Event()
    ack_state = Partition.ack_state

    def counting(partition: Partition, leader_epoch: int, end_offset: int) -> AckState:
        state = ack_state(partition, leader_epoch, end_offset)
        looks.append(state)
        looked.set()
        return state

    monkeypatch.setattr(Partition, "ack_state", counting)
    answered: list[broker_pb2.ProducePartitionResult] = []
    waiter = threading.Thread(
        target=lambda: answered.append(
            harness.produce(WAITING_PARTITION, [b"mine"], acks=-1, timeout_ms=WAIT_S * 1000)
        )
    )
    waiter.start()
    assert looked.wait(timeout=WAIT_S)
    for i in range(OTHER_APPENDS):
        looked.clear()
        harness.produce(0, [b"other-%d" % i])  # orders-0: broker 1 alone, its mark moves too
        assert not looked.wait(timeout=WAKE_UP_S), f"woken by another partition: {looks}"
    harness.fetch({WAITING_PARTITION: 1}, replica_id=2)  # the follower has it: the mark moves
    waiter.join(timeout=WAIT_S)
    assert answered and answered[0].error_code == common_pb2.NONE, answered
    assert looks == [AckState.WAIT, AckState.DONE]  # parked once, looked again once
