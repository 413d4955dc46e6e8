"""KIP-853's AddRaftVoter and RemoveRaftVoter: the active controller checks the change against
the current voters, then has the Raft log commit it (one change at a time).

Differences from Kafka, which pysyncobj's membership imposes: a voter is identified by its node
id and Raft address (no directory id), and is added before it starts (a node that is not yet
a voter would campaign and disturb the quorum; it catches up as a voter, counted in the
majority meanwhile). The leader cannot remove itself, so it first hands the leadership to the
most caught-up follower and answers NOT_CONTROLLER; the client asks the new leader.
"""

from __future__ import annotations

from collections.abc import Callable
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
    voter = Voter(request.voter_id, request.raft_address, request.listener)

    def add(raft: PySyncObjRaftLog, done: AppendCallback) -> bool:
        raft.add_voter(voter, done)
        return True

    return _change_voters(
        controller,
        admin_pb2.AddRaftVoterResponse,
        lambda status: _add_refusal(status, request),
        add,
        timeout_ms,
        f"add voter {voter.node_id}",
    )


def remove_raft_voter(
    controller: QuorumController, request: admin_pb2.RemoveRaftVoterRequest, timeout_ms: int
) -> admin_pb2.RemoveRaftVoterResponse:
    node_id = request.voter_id

    def remove(raft: PySyncObjRaftLog, done: AppendCallback) -> bool:
        if node_id != raft.status().node_id:
            raft.remove_voter(node_id, done)
            return True
        # The leader cannot remove itself: it hands over first, once a follower matches its log.
        if not raft.transfer_leadership():
            return False
        done(None, AppendError.LEADER_CHANGED)
        return True

    return _change_voters(
        controller,
        admin_pb2.RemoveRaftVoterResponse,
        lambda status: _remove_refusal(status, request),
        remove,
        timeout_ms,
        f"remove voter {node_id}",
    )


def _change_voters(
    controller: QuorumController,
    response_cls: type[M],
    refusal: Callable[[RaftStatus], str],
    change: VoterChange,
    timeout_ms: int,
    what: str,
) -> M:
    """On the leader, refuses with INVALID_REQUEST what `refusal` finds wrong, else has the
    controller thread run `change` and answers its outcome."""
    status = controller.raft_status()
    if status is None or not status.is_leader:
        return _not_leader(controller, status, response_cls)
    message = refusal(status)
    if message:
        return error_response(response_cls, common_pb2.INVALID_REQUEST, message)
    return _answer(controller, response_cls, _change(controller, change, timeout_ms), what)


def _remove_refusal(status: RaftStatus, request: admin_pb2.RemoveRaftVoterRequest) -> str:
    """Why the voter cannot be removed, or "" when it can."""
    addresses = {voter.node_id: voter.address for voter in status.voters}
    address = addresses.get(request.voter_id)
    if address is None:
        return f"node {request.voter_id} is not a voter (voters: {sorted(addresses)})"
    if request.raft_address != address:
        return f"voter {request.voter_id} listens on {address}, not {request.raft_address!r}"
    if len(addresses) == 1:
        return f"node {request.voter_id} is the only voter"
    return ""


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


_RETRY_LATER = {
    AppendError.DENIED: "another voter change is not committed yet, or no follower is caught up"
    " to take the leadership over; retry",
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
