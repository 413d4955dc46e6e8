"""`ControllerLoop.turn` leaves requests for the next turn once deciding took
REQUESTS_MS_MAX_PER_TURN, so Raft is polled (and the leader heartbeats) in time: decisions that
held the controller thread for 500-900 ms made followers depose every active controller at
100,000 partitions. Driven over the simulation's Raft log with a clock the decisions advance."""

from __future__ import annotations

import logging
import random
from collections import deque

import pytest

from pykraft.metadata_log.records import ConfigRecord, ConfigResourceType
from pykraft.proto import common_pb2
from pykraft.quorum.controller.result import ControllerResult
from pykraft.quorum.controller_core import ControllerCore
from pykraft.quorum.events import DecideContext, Output, Request, WriteRequest
from pykraft.quorum.quorum_controller import (
    REQUESTS_MS_MAX_PER_TURN,
    SLOW_TURN_CPU_MS_MIN,
    ControllerLoop,
    log_slow_turn,
)

from .controller_simulation import node_config
from .sim_raft import SimRaft, SimRaftLog

DECISION_MS = 30


def test_a_turn_stops_deciding_once_its_time_is_spent_and_the_rest_wait_in_the_queue() -> None:
    clock = [0]
    raft = SimRaft(random.Random(1), [1])
    core = ControllerCore(node_config(1), new_id=lambda: NotImplemented)
    answered: list[int] = []

    def on_output(out: Output) -> None:
        answered.extend(answer.request_id for answer in out.answers)

    loop = ControllerLoop(core, SimRaftLog(raft, 1, core.state, lambda *_: None), on_output)
    queue: deque[Request] = deque()

    def turn() -> None:
        loop.turn(0, lambda: clock[0], lambda: queue.popleft() if queue else None)
        raft.commit(len(raft.uncommitted))

    raft.elect(1)
    turn()  # appends LEADER_CHANGE
    turn()  # applies it: active
    assert core.accepts_requests and core.role.epoch == raft.term

    def decide(ctx: DecideContext) -> ControllerResult[common_pb2.ResponseHeader]:
        clock[0] += DECISION_MS  # a decision that takes DECISION_MS
        record = ConfigRecord(ConfigResourceType.TOPIC, "t", "k", str(ctx.next_offset))
        return ControllerResult((record,), common_pb2.ResponseHeader())

    queue.extend(WriteRequest(i, common_pb2.ResponseHeader, 10**9, decide) for i in range(5))
    turn()
    decided_first = -(-REQUESTS_MS_MAX_PER_TURN // DECISION_MS)  # started before time ran out
    assert len(queue) == 5 - decided_first
    while queue or len(answered) < 5:
        turn()
    assert answered == [0, 1, 2, 3, 4]


def test_a_turn_that_held_the_thread_long_is_logged_with_the_role_and_offset(
    caplog: pytest.LogCaptureFixture,
) -> None:
    core = ControllerCore(node_config(1), new_id=lambda: NotImplemented)
    with caplog.at_level(logging.WARNING, logger="pykraft.quorum.quorum_controller"):
        log_slow_turn(SLOW_TURN_CPU_MS_MIN - 1, 400, core)
        assert caplog.messages == []
        log_slow_turn(SLOW_TURN_CPU_MS_MIN, 400, core)
    (message,) = caplog.messages
    assert f"{SLOW_TURN_CPU_MS_MIN} ms of CPU (400 ms in all) as STANDBY" in message
    assert "at offset -1" in message
