"""`ControllerCore` stepped by hand: activation, replies only after commit, NOT_CONTROLLER when
leadership moves, expired requests, timers. The Raft log is played by the test: it applies
entries to `core.state` and steps the outcomes, as `ControllerLoop` does after a poll."""

from __future__ import annotations

import itertools
import uuid
from pathlib import Path
from typing import Any

from google.protobuf.message import Message

from pykraft.metadata_log.records import NoOpRecord
from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.batch import BatchKind, QuorumBatch
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.controller import topics
from pykraft.quorum.controller.result import ControllerResult
from pykraft.quorum.controller_core import ControllerCore
from pykraft.quorum.events import (
    Append,
    AppendDone,
    DecideContext,
    Output,
    RaftPolled,
    Tick,
    WriteRequest,
)
from pykraft.quorum.raft import RaftStatus
from pykraft.quorum.replies import header_of
from pykraft.quorum.roles import Role, RoleState

from .controller.conftest import broker

NODE_ID = 1
LISTENERS = {1: "c1:9092", 2: "c2:9092", 3: "c3:9092"}


def _core(**settings: Any) -> ControllerCore:
    config = ControllerConfig(
        node_id=NODE_ID,
        voters={i: f"c{i}:9093" for i in LISTENERS},
        controller_listeners=LISTENERS,
        data_dir=Path("unused"),
        **settings,
    )
    ids = itertools.count(1)
    return ControllerCore(config, new_id=lambda: uuid.UUID(int=next(ids)))


def _status(term: int, leader_id: int) -> RaftStatus:
    return RaftStatus(NODE_ID, leader_id, term, leader_id == NODE_ID, 0, 0, 0, ())


def _commit(core: ControllerCore, append: Append, now_ms: int = 0) -> Output:
    result = core.state.apply(append.batch.encode())
    return core.step(AppendDone(append.append_id, result, None), now_ms)


def _active(term: int = 1, **settings: Any) -> ControllerCore:
    """An active controller of `term` with one unfenced broker (1) registered; `settings` are
    ControllerConfig's."""
    core = _core(**settings)
    out = core.step(RaftPolled(_status(term, NODE_ID)), 0)
    (barrier,) = out.appends
    assert barrier.batch.kind is BatchKind.LEADER_CHANGE and barrier.batch.epoch == term
    assert core.role == RoleState(Role.ACTIVATING, term) and not core.accepts_requests
    _commit(core, barrier)
    assert core.role == RoleState(Role.ACTIVE, term) and core.accepts_requests
    register = WriteRequest(
        0,
        common_pb2.ResponseHeader,
        1000,
        lambda ctx: ControllerResult((broker(1),), common_pb2.ResponseHeader()),
    )
    (append,) = core.step(register, 0).appends
    _commit(core, append)
    return core


def _create_topic(request_id: int, name: str, deadline_ms: int = 1000) -> WriteRequest:
    request = admin_pb2.CreateTopicsRequest(
        topics=[admin_pb2.CreatableTopic(name=name, num_partitions=1, replication_factor=1)]
    )

    def decide(ctx: DecideContext) -> ControllerResult[admin_pb2.CreateTopicsResponse]:
        return topics.create_topics(ctx.image, request, new_topic_id=ctx.new_topic_id)

    return WriteRequest(request_id, admin_pb2.CreateTopicsResponse, deadline_ms, decide)


def test_a_write_is_answered_only_once_its_records_apply() -> None:
    core = _active()
    out = core.step(_create_topic(7, "orders"), 10)
    (append,) = out.appends
    assert append.request_ids == (7,) and append.batch.epoch == 1 and out.answers == []

    (answer,) = _commit(core, append).answers
    assert answer.request_id == 7
    assert isinstance(answer.response, admin_pb2.CreateTopicsResponse)
    assert answer.response.topics[0].topic_id == str(uuid.UUID(int=1))  # the injected id
    assert "orders" in core.state.image.topics.by_name


def test_writes_in_flight_are_answered_not_controller_when_leadership_moves() -> None:
    core = _active()
    core.step(_create_topic(7, "orders"), 10)
    out = core.step(RaftPolled(_status(2, 3)), 20)
    (answer,) = out.answers
    assert isinstance(answer.response, Message)
    header = header_of(answer.response)
    assert header.error_code == common_pb2.NOT_CONTROLLER and header.controller_id == 3
    assert header.controller_address == "c3:9092"
    assert core.role.role is Role.STANDBY


def test_a_request_past_its_deadline_is_answered_with_nothing() -> None:
    core = _active()
    out = core.step(_create_topic(7, "orders", deadline_ms=5), 6)
    assert out.appends == [] and [(a.request_id, a.response) for a in out.answers] == [(7, None)]


def test_a_write_that_commits_just_before_a_newer_leader_change_is_answered() -> None:
    """This node's last write commits, then another controller's LEADER_CHANGE, and this node
    applies both in one poll before it hears of the new term. The write did commit: it is
    answered, and the controller must not stop (it used to fail an assertion that the pending
    image equals the committed one, which killed the controller thread)."""
    core = _active(term=1)
    (append,) = core.step(_create_topic(7, "orders"), 10).appends
    result = core.state.apply(append.batch.encode())
    newer = QuorumBatch(BatchKind.LEADER_CHANGE, 2, 3, (NoOpRecord(),))
    core.state.apply(newer.encode())

    (answer,) = core.step(AppendDone(append.append_id, result, None), 20).answers
    assert answer.request_id == 7
    assert isinstance(answer.response, Message)
    assert header_of(answer.response).error_code == common_pb2.NONE
    core.step(RaftPolled(_status(2, 3)), 20)
    assert core.role.role is Role.STANDBY


def test_a_broker_not_heard_from_since_activation_is_fenced_by_the_next_tick() -> None:
    core = _active()
    out = core.step(Tick(), 1)
    (fence,) = out.appends
    assert fence.request_ids == () and out.answers == []
    _commit(core, fence)
    assert core.state.image.cluster.brokers[1].fenced
