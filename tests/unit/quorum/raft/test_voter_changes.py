"""Voter changes on PySyncObjRaftLog with real sockets and files (KIP-853's add and remove, one
at a time, on pysyncobj's dynamic membership)."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

from pykraft.quorum.raft import AppendError, PySyncObjRaftLog
from pykraft.quorum.raft.voters import Voter, read_voters
from tests.ports import free_port
from tests.waiting import wait_until

from .harness import (
    DEADLINE_S,
    RETRIABLE,
    Outcome,
    VoterThread,
    append_through_leader,
    free_voters,
    leader_of,
    raft_config,
    start_voters,
    stop_voters,
    wait_applied,
)

REMOVE_ATTEMPTS_MAX = 5


def _change(leader: VoterThread, change: str, argument: object) -> AppendError | None:
    outcome: Future[Outcome] = Future()

    def run(log: PySyncObjRaftLog) -> None:
        getattr(log, change)(argument, lambda result, error: outcome.set_result((result, error)))

    leader.run(run)
    return outcome.result(timeout=DEADLINE_S)[1]


def _remove_voter(nodes: dict[int, VoterThread], old_id: int) -> None:
    """Removes voter `old_id` through the leader. A leader cannot remove itself (DENIED): it
    hands its leadership on first. Leadership may move at any time (back to `old_id` too, under
    load), so each attempt asks whoever leads then, until a removal succeeds."""
    for _ in range(REMOVE_ATTEMPTS_MAX):
        leader = leader_of(list(nodes.values()))
        error = _change(leader, "remove_voter", old_id)
        if error is None:
            return
        if leader.config.node_id == old_id:
            assert error is AppendError.DENIED
            assert leader.run(lambda log: log.transfer_leadership())
            wait_until(lambda: not leader.status().is_leader, "leadership moved")  # noqa: B023
        else:
            assert error in RETRIABLE, error
    raise AssertionError(f"voter {old_id} still not removed after {REMOVE_ATTEMPTS_MAX} tries")


def _voter_ids(node: VoterThread) -> set[int]:
    return {voter.node_id for voter in node.status().voters}


def test_each_voter_replaced_in_turn_keeps_every_entry_and_survives_restarts(
    tmp_path: Path,
) -> None:
    voters = free_voters(3)
    nodes = {n.config.node_id: n for n in start_voters(voters, tmp_path)}
    acknowledged = append_through_leader(list(nodes.values()), [b"before"])
    listeners: dict[int, str] = {}  # the listeners of the added voters (the first three have none)
    try:
        for old_id, new_id in ((1, 4), (2, 5), (3, 6)):
            voter = Voter(new_id, f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}")
            listeners[new_id] = voter.listener
            leader = leader_of(list(nodes.values()))
            assert _change(leader, "add_voter", voter) is None
            joined = {v.node_id: v.address for v in leader.status().voters}
            assert joined[new_id] == voter.address
            config = raft_config(new_id, joined, tmp_path, listeners=listeners)
            nodes[new_id] = VoterThread(config).start()
            acknowledged += append_through_leader(list(nodes.values()), [f"+{new_id}".encode()])
            _remove_voter(nodes, old_id)
            nodes.pop(old_id).stop()
            wait_until(
                lambda: all(_voter_ids(n) == set(nodes) for n in nodes.values()),
                f"every voter sees voters {sorted(nodes)}",
            )
            acknowledged += append_through_leader(list(nodes.values()), [f"-{old_id}".encode()])
        wait_applied(nodes.values(), acknowledged)
        for node in nodes.values():
            assert {v.node_id: v.listener for v in node.status().voters} == listeners
        assert set(listeners) == {4, 5, 6}
    finally:
        stop_voters(nodes.values())

    restarted = [VoterThread(n.config).start() for n in nodes.values()]  # configs name old sets
    try:
        assert all(_voter_ids(n) == {4, 5, 6} for n in restarted)
        more = append_through_leader(restarted, [b"after-the-restart"])
        wait_applied(restarted, acknowledged + more)
    finally:
        stop_voters(restarted)
    persisted = read_voters(tmp_path / "voter-6")
    assert persisted is not None and set(persisted) == {4, 5, 6}
    assert persisted[4].listener == restarted[0].config.listeners[4]
