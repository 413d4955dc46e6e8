"""KIP-853's AddRaftVoter and RemoveRaftVoter: the active controller checks the change against
the current voters, then has the Raft log commit it (one change at a time).

Differences from Kafka, which pysyncobj's membership imposes: a voter is identified by its node
id and Raft address (no directory id), and is added before it starts (a node that is not yet
a voter would campaign and disturb the quorum; it catches up as a voter, counted in the
majority meanwhile). The leader cannot remove itself, so it first hands the leadership to the
most caught-up follower and answers NOT_CONTROLLER; the client asks the new leader.
"""

from __future__ import annotations

from typing import TypeVar

from google.protobuf.message import Message

from pykraft.proto import admin_pb2, common_pb2
from pykraft.quorum.quorum_controller import (
    VOTER_CHANGES_QUEUED_MAX,
    QuorumController,
    VoterChange,
)
from pykraft.quorum.raft import AppendCallback, AppendError, PySyncObjRaftLog, RaftStatus
from pykraft.quorum.raft.voters import Voter
from pykraft.quorum.replies import controller_listeners, error_response, not_controller

PORT_MAX = 65_535
M = TypeVar("M", bound=Message)


def add_raft_voter(
    controller: QuorumController, request: admin_pb2.AddRaftVoterRequest, timeout_ms: int
) -> admin_pb2.AddRaftVoterResponse:
    response_cls = admin_pb2.AddRaftVoterResponse
    status = controller.raft_status()
    if status is None or not status.is_leader:
        return _not_leader(controller, status, response_cls)
    refusal = _add_refusal(status, request)
    if refusal:
        return error_response(response_cls, common_pb2.INVALID_REQUEST, refusal)
    voter = Voter(request.voter_id, request.raft_address, request.listener)
    error = _change(controller, lambda raft, done: raft.add_voter(voter, done), timeout_ms)
    return _answer(controller, response_cls, error, f"add voter {voter.node_id}")


def remove_raft_voter(
    controller: QuorumController, request: admin_pb2.RemoveRaftVoterRequest, timeout_ms: int
) -> admin_pb2.RemoveRaftVoterResponse:
    response_cls = admin_pb2.RemoveRaftVoterResponse
    status = controller.raft_status()
    if status is None or not status.is_leader:
        return _not_leader(controller, status, response_cls)
    voter_ids = {voter.node_id for voter in status.voters}
    if request.voter_id not in voter_ids:
        message = f"node {request.voter_id} is not a voter (voters: {sorted(voter_ids)})"
        return error_response(response_cls, common_pb2.INVALID_REQUEST, message)
    address = next(v.address for v in status.voters if v.node_id == request.voter_id)
    if request.raft_address != address:
        message = f"voter {request.voter_id} listens on {address}, not {request.raft_address!r}"
        return error_response(response_cls, common_pb2.INVALID_REQUEST, message)
    if voter_ids == {request.voter_id}:
        message = f"node {request.voter_id} is the only voter"
        return error_response(response_cls, common_pb2.INVALID_REQUEST, message)
    if request.voter_id == status.node_id:
        moved = _change(controller, _transfer_leadership, timeout_ms) is None
        reason = "the leadership moves first; ask again" if moved else "no follower caught up"
        return not_controller(response_cls, status.node_id, {}, None, reason)
    node_id = request.voter_id
    error = _change(controller, lambda raft, done: raft.remove_voter(node_id, done), timeout_ms)
    return _answer(controller, response_cls, error, f"remove voter {node_id}")


def _add_refusal(status: RaftStatus, request: admin_pb2.AddRaftVoterRequest) -> str:
    """Why the voter cannot be added, or "" when it can."""
    for name, address in (("raft_address", request.raft_address), ("listener", request.listener)):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) <= PORT_MAX:
            return f"{name} {address!r} is not host:port"
    if request.voter_id < 0:
        return f"voter_id {request.voter_id} is negative"
    for voter in status.voters:
        if voter.node_id == request.voter_id:
            return f"node {voter.node_id} is already a voter"
        if request.raft_address == voter.address or request.listener == voter.listener:
            return f"voter {voter.node_id} already uses {voter.address} / {voter.listener}"
    return ""


def _transfer_leadership(raft: PySyncObjRaftLog, done: AppendCallback) -> None:
    done(None, None if raft.transfer_leadership() else AppendError.DENIED)


_RETRY_LATER = {
    AppendError.DENIED: "another voter change is not committed yet; retry",
    AppendError.QUEUE_FULL: f"{VOTER_CHANGES_QUEUED_MAX} voter changes are queued; retry",
}


def _change(
    controller: QuorumController, change: VoterChange, timeout_ms: int
) -> AppendError | str | None:
    """None once committed; an AppendError; or a message when no answer came in time."""
    try:
        return controller.change_voters(change, timeout_ms)
    except TimeoutError:
        return f"no answer within {timeout_ms} ms (the change may still commit)"


def _answer(
    controller: QuorumController,
    response_cls: type[M],
    outcome: AppendError | str | None,
    what: str,
) -> M:
    """Success; REQUEST_TIMED_OUT (Kafka's answer while another change is pending) for what
    may succeed when asked again here; NOT_CONTROLLER, naming the new leader, otherwise."""
    if outcome is None:
        return response_cls()
    if isinstance(outcome, str) or outcome in _RETRY_LATER:
        message = outcome if isinstance(outcome, str) else _RETRY_LATER[outcome]
        return error_response(response_cls, common_pb2.REQUEST_TIMED_OUT, f"{what}: {message}")
    return _not_leader(
        controller, controller.raft_status(), response_cls, f"{what}: {outcome.value}"
    )


def _not_leader(
    controller: QuorumController, status: RaftStatus | None, response_cls: type[M], reason: str = ""
) -> M:
    listeners = controller_listeners(controller.config, status)
    leader_id = None if status is None else status.leader_id
    return not_controller(response_cls, controller.config.node_id, listeners, leader_id, reason)
