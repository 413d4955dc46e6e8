"""The error answers the controller gives on behalf of any request, whatever its response type:
every controller response carries a `ResponseHeader` (or is one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from google.protobuf.message import Message

from pykraft.proto import common_pb2
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.raft import RaftStatus
from pykraft.server_common.errors import ApiError, fill_error

M = TypeVar("M", bound=Message)


def controller_listeners(config: ControllerConfig, raft: RaftStatus | None) -> dict[int, str]:
    """The gRPC listener of every current voter: what the Raft log carried with each voter
    (added ones included, removed ones gone), else what the config names."""
    if raft is None or not raft.voters:
        return dict(config.controller_listeners)
    return {
        voter.node_id: voter.listener or config.controller_listeners.get(voter.node_id, "")
        for voter in raft.voters
    }


def not_controller(
    response_cls: type[M],
    node_id: int,
    listeners: Mapping[int, str],
    leader_id: int | None,
    reason: str = "",
) -> M:
    """NOT_CONTROLLER from node `node_id`, naming the Raft leader and its listener (when one is
    known) so the client can go there."""
    leader = leader_id if leader_id is not None else -1
    address = listeners.get(leader, "") if leader >= 0 else ""
    message = f"node {node_id} is not the active controller"
    if leader >= 0:
        message += f"; the Raft leader is node {leader} at {address}"
    if reason:
        message += f" ({reason})"
    response = response_cls()
    header = header_of(response)
    fill_error(header, ApiError(common_pb2.NOT_CONTROLLER, message))
    header.controller_id = leader
    header.controller_address = address
    return response


def error_response(response_cls: type[M], code: int, message: str) -> M:
    """A `response_cls` failing whole with `code`; no controller is named."""
    response = response_cls()
    header = header_of(response)
    fill_error(header, ApiError(code, message))
    header.controller_id = -1
    return response


def header_of(response: Message) -> common_pb2.ResponseHeader:
    if isinstance(response, common_pb2.ResponseHeader):
        return response
    header = response.header  # type: ignore[attr-defined]
    assert isinstance(header, common_pb2.ResponseHeader)
    return header


def entry_too_large(response_cls: type[M], frames_bytes: int, entry_bytes_max: int) -> M:
    """POLICY_VIOLATION for a write whose records would not fit one metadata log entry (Kafka's
    message for an operation over its record limit)."""
    return error_response(
        response_cls,
        common_pb2.POLICY_VIOLATION,
        f"Unable to perform excessively large batch operation: its records take {frames_bytes} "
        f"bytes, more than one metadata log entry holds ({entry_bytes_max} bytes).",
    )
