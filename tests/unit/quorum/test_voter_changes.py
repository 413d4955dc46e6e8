"""What the active controller refuses before a voter change reaches the Raft log."""

from __future__ import annotations

import pytest

from pykraft.proto import admin_pb2
from pykraft.quorum.raft import RaftStatus, VoterProgress
from pykraft.quorum.voter_changes import _add_refusal, _remove_refusal

STATUS = RaftStatus(
    node_id=1,
    leader_id=1,
    term=3,
    is_leader=True,
    commit_index=9,
    last_applied=9,
    log_end_index=9,
    voters=(
        VoterProgress(1, "h1:1901", 9, True, "h1:9091"),
        VoterProgress(2, "h2:1901", 9, True, "h2:9091"),
    ),
)


@pytest.mark.parametrize(
    ("voter_id", "raft_address", "listener", "refusal"),
    [
        (3, "h3:1901", "h3:9091", ""),
        (2, "h3:1901", "h3:9091", "node 2 is already a voter"),
        (3, "h1:1901", "h3:9091", "voter 1 already uses"),
        (3, "h3:1901", "h1:9091", "voter 1 already uses"),
        (3, "h3", "h3:9091", "raft_address 'h3' is not host:port"),
        (3, "h3:1901", "h3:70000", "listener 'h3:70000' is not host:port"),
        (-1, "h3:1901", "h3:9091", "negative"),
    ],
)
def test_an_added_voter_needs_a_new_id_and_new_addresses(
    voter_id: int, raft_address: str, listener: str, refusal: str
) -> None:
    request = admin_pb2.AddRaftVoterRequest(
        voter_id=voter_id, raft_address=raft_address, listener=listener
    )
    found = _add_refusal(STATUS, request)
    assert (refusal in found) if refusal else found == ""


@pytest.mark.parametrize(
    ("voter_id", "raft_address", "refusal"),
    [
        (2, "h2:1901", ""),
        (1, "h1:1901", ""),  # the leader itself: it hands over first
        (3, "h3:1901", "node 3 is not a voter"),
        (2, "h1:1901", "voter 2 listens on h2:1901"),
    ],
)
def test_a_removed_voter_must_be_named_by_id_and_raft_address(
    voter_id: int, raft_address: str, refusal: str
) -> None:
    request = admin_pb2.RemoveRaftVoterRequest(voter_id=voter_id, raft_address=raft_address)
    found = _remove_refusal(STATUS, request)
    assert (refusal in found) if refusal else found == ""


def test_the_only_voter_cannot_be_removed() -> None:
    alone = RaftStatus(**{**STATUS.__dict__, "voters": STATUS.voters[:1]})
    request = admin_pb2.RemoveRaftVoterRequest(voter_id=1, raft_address="h1:1901")
    assert "the only voter" in _remove_refusal(alone, request)
