"""A standby controller holds requests while no leader is known (`quorum/leader_wait.py`), so the
client is redirected as soon as the election ends instead of backing off: redirected to the new
leader, decided by this node once it is active, refused after LEADER_WAIT_MS_MAX, dropped after
the request's own deadline. Stepped by hand as in `test_controller_core.py`."""

from __future__ import annotations

from google.protobuf.message import Message

from pykraft.proto import common_pb2
from pykraft.quorum.events import Output, RaftPolled, Stop, Tick
from pykraft.quorum.leader_wait import LEADER_WAIT_MS_MAX
from pykraft.quorum.raft import RaftStatus, VoterProgress
from pykraft.quorum.replies import header_of
from pykraft.quorum.roles import Role

from .test_controller_core import NODE_ID, _active, _commit, _create_topic


def _no_leader(term: int) -> RaftPolled:
    return RaftPolled(RaftStatus(NODE_ID, None, term, False, 0, 0, 0, ()))


def _leader(term: int, leader_id: int) -> RaftPolled:
    return RaftPolled(RaftStatus(NODE_ID, leader_id, term, leader_id == NODE_ID, 0, 0, 0, ()))


def _not_controller_naming(out: Output) -> int:
    (answer,) = out.answers
    assert answer.request_id == 7 and isinstance(answer.response, Message)
    header = header_of(answer.response)
    assert header.error_code == common_pb2.NOT_CONTROLLER
    return header.controller_id


def test_a_request_held_during_an_election_is_redirected_to_the_leader_it_elects() -> None:
    core = _active(term=1)
    core.step(_no_leader(2), 10)  # the active controller lost its term; nobody leads yet
    assert core.role.role is Role.STANDBY
    out = core.step(_create_topic(7, "orders", deadline_ms=5000), 20)
    assert out.answers == [] and out.wake_at_ms == 20 + LEADER_WAIT_MS_MAX
    assert _not_controller_naming(core.step(_leader(2, 3), 400)) == 3


def test_a_request_held_during_an_election_this_node_wins_is_decided_here() -> None:
    core = _active(term=1)
    core.step(_no_leader(2), 10)
    core.step(_create_topic(7, "orders", deadline_ms=5000), 20)
    (barrier,) = core.step(_leader(3, NODE_ID), 400).appends
    assert core.role.role is Role.ACTIVATING
    out = _commit(core, barrier, now_ms=410)  # active: the held write is decided
    (append,) = out.appends
    assert append.request_ids == (7,) and out.answers == []
    (answer,) = _commit(core, append, now_ms=420).answers
    assert isinstance(answer.response, Message)
    assert header_of(answer.response).error_code == 0
    assert "orders" in core.state.image.topics.by_name


def test_a_request_is_held_no_longer_than_the_wait_or_its_deadline() -> None:
    core = _active(term=1)
    core.step(_no_leader(2), 0)
    core.step(_create_topic(7, "orders", deadline_ms=5000), 0)
    assert core.step(Tick(), LEADER_WAIT_MS_MAX - 1).answers == []
    assert _not_controller_naming(core.step(Tick(), LEADER_WAIT_MS_MAX)) == -1

    core.step(_create_topic(8, "orders", deadline_ms=300), 0)
    (expired,) = core.step(Tick(), 301).answers
    assert expired.request_id == 8 and expired.response is None  # its caller gave up


def test_a_stopping_controller_answers_the_requests_it_holds() -> None:
    core = _active(term=1)
    core.step(_no_leader(2), 0)
    core.step(_create_topic(7, "orders", deadline_ms=5000), 0)
    assert _not_controller_naming(core.step(Stop("stopping"), 1)) == -1


def test_a_request_is_held_while_the_leader_raft_still_names_is_unreachable() -> None:
    """After a kill -9 of the active controller the followers name it until their election
    timeout fires: redirecting a client to it sent the client into its backoff."""
    core = _active(term=1)

    def status(term: int, leader_id: int, *, connected: bool) -> RaftPolled:
        voters = (VoterProgress(leader_id, f"c{leader_id}:9093", None, connected),)
        return RaftPolled(RaftStatus(NODE_ID, leader_id, term, False, 0, 0, 0, voters))

    core.step(status(2, 3, connected=True), 0)
    assert _not_controller_naming(core.step(_create_topic(7, "orders", deadline_ms=5000), 1)) == 3
    core.step(status(2, 3, connected=False), 10)  # node 3 died; no election yet
    out = core.step(_create_topic(7, "orders", deadline_ms=5000), 20)
    assert out.answers == []
    assert _not_controller_naming(core.step(status(3, 2, connected=True), 400)) == 2
